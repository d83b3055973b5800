"""The check: every lake table equals ``SELECT *`` on the source, value by value and type by type, and
pyiceberg reading the table's current metadata file returns exactly the rows Spark returns."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from pyiceberg.catalog.glue import GlueCatalog
from pyiceberg.table import StaticTable
from pyspark.sql import SparkSession

from cdc_lake.core.config import ColumnSpec, PipelineConfig, TableSpec
from cdc_lake.engine.tables import LakeLocation
from cdc_lake.local.pg_capture import SESSION_SETTINGS
from cdc_lake.ops.fingerprint import comparable, quote, source_fingerprint, spark_fingerprint

Row = dict[str, Any]
SourceRows = Callable[[TableSpec], list[Row]]  # a table's rows at the source, as ``SELECT *`` returns them
IcebergReader = Callable[[LakeLocation, TableSpec], list[Row]]
SUMMARIES: list[str] = []  # one line per run, printed in pytest's terminal summary


def _float32(value: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def normalized(rows: list[Row], table: TableSpec) -> list[tuple[Any, ...]]:
    """Rows as tuples of the configured columns, REAL values as float32, sorted by primary key."""
    floats = {c.name for c in table.columns if c.type == "float"}
    out = [
        tuple(
            _float32(row[c]) if c in floats and row.get(c) is not None else row.get(c, None) for c in table.column_names
        )
        for row in rows
    ]
    key = [table.column_names.index(k) for k in table.primary_key]
    return sorted(out, key=lambda r: tuple(r[i] for i in key))


def source_rows(conninfo: str, table: TableSpec) -> list[Row]:
    with psycopg.connect(conninfo) as connection:
        for name, value in SESSION_SETTINGS.items():
            connection.execute("SELECT set_config(%s, %s, false)", (name, value))
        cursor = connection.execute(f"SELECT * FROM {table.name}")
        names = [d.name for d in cursor.description or []]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def spark_rows(spark: SparkSession, location: LakeLocation, table: TableSpec) -> list[Row]:
    return [r.asDict() for r in spark.table(location.table(table)).collect()]


def hadoop_reader(warehouse: Path) -> IcebergReader:
    """pyiceberg reading a table from its current metadata file in the Hadoop catalog's folder."""

    def read(location: LakeLocation, table: TableSpec) -> list[Row]:
        metadata = warehouse / location.database / table.lake_table / "metadata"
        version = (metadata / "version-hint.text").read_text().strip()
        static = StaticTable.from_metadata(str(metadata / f"v{version}.metadata.json"))
        return static.scan().to_arrow().to_pylist()

    return read


def glue_catalog(endpoint: str) -> GlueCatalog:
    """pyiceberg's own Glue catalog on the AWS endpoint: the tables as Athena would find them."""
    from cdc_lake.local.aws_endpoint import DUMMY_CREDENTIAL

    region = "us-east-1"
    return GlueCatalog(
        "second-reader",
        **{
            "glue.endpoint": endpoint,
            "glue.region": region,
            "glue.access-key-id": DUMMY_CREDENTIAL,
            "glue.secret-access-key": DUMMY_CREDENTIAL,
            "s3.endpoint": endpoint,
            "s3.region": region,
            "s3.access-key-id": DUMMY_CREDENTIAL,
            "s3.secret-access-key": DUMMY_CREDENTIAL,
        },
    )


def glue_reader(endpoint: str) -> IcebergReader:
    """Each table's rows through :func:`glue_catalog`."""
    catalog = glue_catalog(endpoint)

    def read(location: LakeLocation, table: TableSpec) -> list[Row]:
        return catalog.load_table((location.database, table.lake_table)).scan().to_arrow().to_pylist()

    return read


def differences(expected: list[tuple[Any, ...]], actual: list[tuple[Any, ...]], table: TableSpec) -> list[str]:
    """Readable differences, by key: missing, unexpected and differing rows (value or Python type)."""
    key = [table.column_names.index(k) for k in table.primary_key]

    def by_key(rows: list[tuple[Any, ...]]) -> dict[tuple[Any, ...], tuple[Any, ...]]:
        return {tuple(r[i] for i in key): r for r in rows}

    want, got = by_key(expected), by_key(actual)
    problems = [f"missing key {k}: {want[k]}" for k in want.keys() - got.keys()]
    problems += [f"unexpected key {k}: {got[k]}" for k in got.keys() - want.keys()]
    for k in want.keys() & got.keys():
        for name, a, b in zip(table.column_names, want[k], got[k], strict=True):
            if a != b or (a is not None and b is not None and type(a) is not type(b)):
                problems.append(
                    f"key {k} column {name}: source {a!r} ({type(a).__name__}), lake {b!r} ({type(b).__name__})"
                )
    if len(actual) != len(got):
        problems.append(f"{len(actual) - len(got)} duplicate key(s) in the lake")
    if not problems:
        return []
    differing = sum(1 for k in want.keys() & got.keys() if want[k] != got[k])
    summary = (
        f"{len(want.keys() - got.keys())} missing, {len(got.keys() - want.keys())} unexpected and {differing} "
        f"differing of {len(want)} rows; the first differences:"
    )
    return [summary, *sorted(problems)[:20]]


def check_tables(
    spark: SparkSession,
    read_iceberg: IcebergReader,
    source: str | SourceRows,
    config: PipelineConfig,
    location: LakeLocation,
    label: str,
) -> dict[str, int]:
    """Assert lake == source and pyiceberg == Spark for every table; returns the row count per table.
    ``source`` is a PostgreSQL conninfo, or what reads another source's rows."""
    counts = {}
    for table in config.tables:
        rows = source(table) if callable(source) else source_rows(source, table)
        expected = normalized(rows, table)
        by_spark = normalized(spark_rows(spark, location, table), table)
        problems = differences(expected, by_spark, table)
        assert not problems, f"{label}: {table.name}: the lake differs from the source:\n  " + "\n  ".join(problems)
        by_iceberg = normalized(read_iceberg(location, table), table)
        problems = differences(by_spark, by_iceberg, table)
        assert not problems, f"{label}: {table.name}: pyiceberg differs from Spark:\n  " + "\n  ".join(problems)
        counts[table.name] = len(expected)
    return counts


def delete_files(spark: SparkSession, location: LakeLocation, table: TableSpec) -> dict[str, int]:
    """Position and equality delete files in the table's current snapshot, by kind."""
    files = spark.sql(f"SELECT content, count(*) AS n FROM {location.metadata_table(table, 'files')} GROUP BY content")
    kinds = {0: "data", 1: "position deletes", 2: "equality deletes"}
    return {kinds[r["content"]]: r["n"] for r in files.collect()}


SourceFingerprints = Callable[[TableSpec, list[ColumnSpec]], dict[tuple[Any, ...], int]]


def postgres_fingerprints(conninfo: str) -> SourceFingerprints:
    """Each row's fingerprint as PostgreSQL computes it, by key."""

    def read(table: TableSpec, columns: list[ColumnSpec]) -> dict[tuple[Any, ...], int]:
        keys = ", ".join(quote(k, "postgres") for k in table.primary_key)
        relation = ".".join(quote(part, "postgres") for part in table.name.split("."))
        with psycopg.connect(conninfo) as connection:
            rows = connection.execute(
                f"SELECT {keys}, {source_fingerprint(columns, 'postgres')} FROM {relation}"
            ).fetchall()
        return {tuple(row[:-1]): row[-1] for row in rows}

    return read


def check_fingerprints(
    spark: SparkSession, location: LakeLocation, config: PipelineConfig, source: SourceFingerprints
) -> int:
    """Assert every row's fingerprint computed in Spark on the lake equals the source's own (what verify sums);
    returns the number of rows compared."""
    compared = 0
    for table in config.tables:
        columns = [c for c in table.columns if not c.dropped and comparable(c)]
        assert columns == [c for c in table.columns if not c.dropped], "every replicated type is comparable"
        keys = ", ".join(f"`{k}`" for k in table.primary_key)
        lake = {
            tuple(row[:-1]): row[-1]
            for row in spark.sql(f"SELECT {keys}, {spark_fingerprint(columns)} FROM {location.table(table)}").collect()
        }
        at_source = source(table, columns)
        differing = {
            k: (at_source.get(k), lake.get(k))
            for k in at_source.keys() | lake.keys()
            if at_source.get(k) != lake.get(k)
        }
        assert not differing, f"{table.name}: fingerprints differ (source, lake) for {len(differing)} key(s): " + str(
            dict(sorted(differing.items())[:5])
        )
        compared += len(lake)
    return compared


def newest_per_table(keys: list[str], config: PipelineConfig, skip: str | None = None) -> list[str]:
    """The newest key of each table (CDC files sort after LOAD files): a run applies every pending file of its
    table up to the one that triggered it, so one event per table and batch replays the whole batch."""
    chosen = []
    for table in config.tables:
        mine = [k for k in keys if k.startswith(config.table_prefix(table))]
        if table.name != skip and mine:
            chosen.append(max(mine, key=lambda k: (not k.rsplit("/", 1)[-1].startswith("LOAD"), k)))
    return chosen
