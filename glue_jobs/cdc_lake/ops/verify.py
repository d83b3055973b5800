"""``cdc-lake verify``: compare a lake table with the live source database, reading from the source only what
differs.

The key space (the first key column's values) is cut into ranges. For each range both sides give their row
count and the sum of their rows' fingerprints (``ops.fingerprint``), the source computing them inside the
database. Equal ranges are done; a differing range is cut again, at boundaries taken from whichever side holds
more of its rows (the lake's quantiles, or the source's ``NTILE``), until it holds few rows. Then both sides
list the range's keys with their fingerprints, and each key found on one side only, or with two different
fingerprints, is fetched whole from both and compared value by value: only a real difference is reported.

So the rows read from the source follow the drift, not the table. Ranges compare keys byte-wise on both
sides (PostgreSQL ``COLLATE "C"``, MySQL ``BINARY``), as Spark does, so a key falls in the same range on both.
Every value reaches the SQL as a bound parameter.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import struct
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from decimal import Decimal
from typing import Any, Literal

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_lake.core.config import ColumnSpec, TableSpec
from cdc_lake.core.exceptions import CdcLakeError
from cdc_lake.engine.context import LakeContext
from cdc_lake.engine.tables import LakeLocation, table_exists
from cdc_lake.ops.export import read_table
from cdc_lake.ops.fingerprint import Dialect, comparable, quote, source_fingerprint, spark_fingerprint
from cdc_lake.ops.mysql_catalog import is_mysql_url
from cdc_lake.ops.source_check import dialect as source_dialect

Kind = Literal["missing", "extra", "changed"]
FINGERPRINT = "_cdc_lake_fp"
FETCH_CHUNK = 500  # keys per query when whole rows are fetched


@dataclasses.dataclass(frozen=True)
class Drift:
    table: str
    key: dict[str, Any]
    kind: Kind
    columns: list[str]  # the differing columns of a changed row

    def as_json(self) -> dict[str, Any]:
        key = {k: _json_value(v) for k, v in self.key.items()}
        return {"table": self.table, "key": key, "kind": self.kind, "columns": self.columns}


@dataclasses.dataclass
class VerifyStats:
    """What a table's verify cost: queries sent to the source, rows fetched from it (key listings and whole
    rows; the sums read none), rows listed from the lake, ranges compared, seconds."""

    source_queries: int = 0
    source_rows: int = 0
    lake_rows: int = 0
    ranges: int = 0
    seconds: float = 0.0


@dataclasses.dataclass(frozen=True)
class TableVerify:
    table: str
    drift: list[Drift]
    stats: VerifyStats
    not_compared: list[str]  # configured columns whose values DMS writes as text: not comparable with the source


@dataclasses.dataclass(frozen=True)
class Cuts:
    """How ranges narrow: a differing range is cut into ``buckets``; one with at most ``leaf_rows`` rows on
    either side is listed key by key."""

    buckets: int = 16
    leaf_rows: int = 2_000


@dataclasses.dataclass(frozen=True)
class _Range:
    low: Any  # None: unbounded
    high: Any  # exclusive; None: unbounded


class SourceTable:
    """One table at the source: range sums, key listings and whole rows, through one connection."""

    def __init__(self, connection: Any, dialect: Dialect, table: TableSpec, columns: Sequence[ColumnSpec]) -> None:
        self.connection = connection
        self.dialect = dialect
        self.table = table
        self.columns = list(columns)
        self.stats = VerifyStats()
        self.relation = ".".join(quote(part, dialect) for part in table.name.split("."))
        self.keys = [quote(k, dialect) for k in table.primary_key]
        first = next(c for c in table.columns if c.name == table.primary_key[0])
        self.first = self._ordered(self.keys[0], first)
        # Every query binds parameters, so both drivers read % as the start of a placeholder: double it.
        self.fingerprint = source_fingerprint(self.columns, dialect).replace("%", "%%")

    def _ordered(self, name: str, column: ColumnSpec) -> str:
        """The first key as both sides order it: strings byte-wise (UTF-8 order is code point order)."""
        if column.type != "string" and not column.type.startswith("varchar"):
            return name
        return f'{name} COLLATE "C"' if self.dialect == "postgres" else f"BINARY {name}"

    def _where(self, part: _Range) -> tuple[str, list[Any]]:
        clauses, values = [], []
        if part.low is not None:
            clauses.append(f"{self.first} >= %s")
            values.append(part.low)
        if part.high is not None:
            clauses.append(f"{self.first} < %s")
            values.append(part.high)
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", values

    def _query(self, sql: str, values: Sequence[Any]) -> list[tuple[Any, ...]]:
        self.stats.source_queries += 1
        cursor = self.connection.cursor()
        try:
            cursor.execute(sql, list(values))
            return [tuple(row) for row in cursor.fetchall()]
        finally:
            cursor.close()

    def sums(self, part: _Range, boundaries: Sequence[Any]) -> dict[int, tuple[int, int]]:
        """(count, fingerprint sum) per bucket of ``part`` cut at ``boundaries``; computed in the database."""
        where, values = self._where(part)
        bucket = "0"
        if boundaries:
            cases = " ".join(f"WHEN {self.first} < %s THEN {i}" for i in range(len(boundaries)))
            bucket = f"CASE {cases} ELSE {len(boundaries)} END"
        sql = f"SELECT {bucket} AS b, COUNT(*), SUM({self.fingerprint}) FROM {self.relation}{where} GROUP BY 1"
        rows = self._query(sql, [*boundaries, *values])
        return {int(b): (int(n), int(s or 0)) for b, n, s in rows}

    def boundaries(self, part: _Range, buckets: int) -> list[Any]:
        """Cut points of ``part`` in about equal numbers of source rows (only keys are read, in the database)."""
        where, values = self._where(part)
        sql = (
            f"SELECT MIN(k) FROM (SELECT {self.first} AS k, NTILE({int(buckets)}) OVER (ORDER BY {self.first}) AS t "
            f"FROM {self.relation}{where}) x GROUP BY t ORDER BY 1"
        )
        return [row[0] for row in self._query(sql, values)][1:]

    def listing(self, part: _Range) -> dict[tuple[Any, ...], int]:
        where, values = self._where(part)
        rows = self._query(f"SELECT {', '.join(self.keys)}, {self.fingerprint} FROM {self.relation}{where}", values)
        self.stats.source_rows += len(rows)
        return {row[:-1]: int(row[-1]) for row in rows}

    def rows(self, keys: Sequence[tuple[Any, ...]]) -> dict[tuple[Any, ...], dict[str, Any]]:
        names = [c.name for c in self.columns]
        selected = ", ".join(quote(n, self.dialect) for n in names)
        found: dict[tuple[Any, ...], dict[str, Any]] = {}
        width = len(self.keys)
        for start in range(0, len(keys), FETCH_CHUNK):
            chunk = keys[start : start + FETCH_CHUNK]
            tuple_sql = "(" + ", ".join(["%s"] * width) + ")"
            sql = (
                f"SELECT {selected} FROM {self.relation} WHERE ({', '.join(self.keys)}) IN "
                f"({', '.join([tuple_sql] * len(chunk))})"
            )
            rows = self._query(sql, [v for key in chunk for v in key])
            self.stats.source_rows += len(rows)
            for row in rows:
                record = dict(zip(names, row, strict=True))
                found[tuple(record[k] for k in self.table.primary_key)] = record
        return found


class LakeTable:
    """The lake table's keys and fingerprints, computed once, and its whole rows on demand."""

    def __init__(self, spark: SparkSession, location: LakeLocation, table: TableSpec, columns: list[ColumnSpec]):
        self.table = table
        self.columns = columns
        self.first = table.primary_key[0]
        self.frame = read_table(spark, location, table)
        fingerprinted = self.frame.select(*table.primary_key, F.expr(spark_fingerprint(columns)).alias(FINGERPRINT))
        self.fingerprints = fingerprinted.cache()
        self.rows_listed = 0

    def _in(self, frame: DataFrame, part: _Range) -> DataFrame:
        if part.low is not None:
            frame = frame.where(F.col(self.first) >= F.lit(part.low))
        if part.high is not None:
            frame = frame.where(F.col(self.first) < F.lit(part.high))
        return frame

    def sums(self, part: _Range, boundaries: Sequence[Any]) -> dict[int, tuple[int, int]]:
        bucket = F.lit(len(boundaries))
        for index in reversed(range(len(boundaries))):
            bucket = F.when(F.col(self.first) < F.lit(boundaries[index]), F.lit(index)).otherwise(bucket)
        grouped = (
            self._in(self.fingerprints, part)
            .groupBy(bucket.alias("b"))
            .agg(F.count(F.lit(1)).alias("n"), F.sum(F.col(FINGERPRINT).cast("decimal(38,0)")).alias("s"))
        )
        return {int(r["b"]): (int(r["n"]), int(r["s"] or 0)) for r in grouped.collect()}

    def boundaries(self, part: _Range, buckets: int) -> list[Any]:
        frame = self._in(self.fingerprints, part)
        ranked = frame.select(F.col(self.first).alias("k"), F.ntile(buckets).over(_window(self.first)).alias("t"))
        found = ranked.groupBy("t").agg(F.min("k").alias("k")).orderBy("k").collect()
        return [row["k"] for row in found][1:]

    def listing(self, part: _Range) -> dict[tuple[Any, ...], int]:
        rows = self._in(self.fingerprints, part).collect()
        self.rows_listed += len(rows)
        return {tuple(r[k] for k in self.table.primary_key): int(r[FINGERPRINT]) for r in rows}

    def rows(self, keys: Sequence[tuple[Any, ...]]) -> dict[tuple[Any, ...], dict[str, Any]]:
        wanted = self.frame.sparkSession.createDataFrame(
            [list(k) for k in keys], schema=self.frame.select(*self.table.primary_key).schema
        )
        found = self.frame.join(F.broadcast(wanted), on=self.table.primary_key, how="inner").collect()
        return {tuple(r[k] for k in self.table.primary_key): r.asDict() for r in found}


def _window(column: str) -> Any:
    from pyspark.sql import Window

    return Window.orderBy(column)


def verify(
    lake: LakeContext, source_url: str, tables: Sequence[str] | None = None, cuts: Cuts = Cuts()
) -> list[TableVerify]:
    """Compare each chosen table (default: every configured one) with the source; raises CdcLakeError for a
    source that cannot be reached or a table or column missing at the source, before anything is compared."""
    from cdc_lake.ops.source_check import check_source

    config, spark, location = lake.config, lake.spark, lake.location
    chosen = [config.table(name) for name in tables] if tables else list(config.tables)
    catalog, differences = check_source(config, source_url)
    at_source = {t.name: t for t in catalog}
    problems = [
        str(d)
        for d in differences
        if d.table in {t.name for t in chosen} and d.kind in ("table-missing", "column-dropped", "key-changed")
    ]
    if problems:
        raise CdcLakeError(
            "the source does not have what the configuration names; fix the configuration (cdc-lake "
            "config-check-source) before verifying:\n  " + "\n  ".join(problems)
        )
    kind: Dialect = "mysql" if is_mysql_url(source_url) else "postgres"
    results = []
    with _connection(source_url) as connection:
        for table in chosen:
            faithful = {c.name for c in at_source[table.name].columns if c.note is None or c.config_type != "string"}
            columns = [c for c in table.columns if not c.dropped and comparable(c) and c.name in faithful]
            skipped = [c.name for c in table.columns if not c.dropped and c not in columns]
            if not table_exists(spark, location, table):
                raise CdcLakeError(f"{table.name}: no lake table {location.table(table)} yet; nothing to verify")
            verified = verify_table(lake, table, SourceTable(connection, kind, table, columns), cuts)
            results.append(dataclasses.replace(verified, not_compared=skipped))
    return results


@contextmanager
def _connection(url: str) -> Iterator[Any]:
    connection = source_dialect(url).connect(url)
    try:
        yield connection
    finally:
        connection.close()


def verify_table(context: LakeContext, table: TableSpec, source: SourceTable, cuts: Cuts = Cuts()) -> TableVerify:
    """One table's comparison with the source, every configured column of ``source.columns`` compared."""
    started = time.monotonic()
    lake = LakeTable(context.spark, context.location, table, source.columns)
    try:
        candidates = _differing_keys(lake, source, cuts)
        drift = _compare_rows(table, lake, source, candidates)
    finally:
        lake.fingerprints.unpersist()
    stats = source.stats
    stats.lake_rows = lake.rows_listed
    stats.seconds = time.monotonic() - started
    return TableVerify(table.name, drift, stats, [])


def _differing_keys(lake: LakeTable, source: SourceTable, cuts: Cuts) -> set[tuple[Any, ...]]:
    """Keys whose fingerprint differs or that one side lacks, found by cutting differing ranges down."""
    whole = _Range(None, None)
    mine, theirs = lake.sums(whole, []).get(0, (0, 0)), source.sums(whole, []).get(0, (0, 0))
    source.stats.ranges += 1
    found: set[tuple[Any, ...]] = set()
    pending = [] if mine == theirs else [(whole, mine[0], theirs[0])]
    while pending:
        part, in_lake, in_source = pending.pop()
        big = max(in_lake, in_source) > cuts.leaf_rows
        boundaries = _cut(lake, source, part, in_lake >= in_source, cuts.buckets) if big else []
        if not boundaries:
            found |= _listing_differences(lake, source, part)
            continue
        by_lake, by_source = lake.sums(part, boundaries), source.sums(part, boundaries)
        edges = [part.low, *boundaries, part.high]
        for index in range(len(boundaries) + 1):
            source.stats.ranges += 1
            mine, theirs = by_lake.get(index, (0, 0)), by_source.get(index, (0, 0))
            if mine != theirs:
                pending.append((_Range(edges[index], edges[index + 1]), mine[0], theirs[0]))
    return found


def _cut(lake: LakeTable, source: SourceTable, part: _Range, by_lake: bool, buckets: int) -> list[Any]:
    """Cut points for a differing range, from the side holding more of its rows; none when it cannot be cut."""
    cuts = lake.boundaries(part, buckets) if by_lake else source.boundaries(part, buckets)
    return sorted({c for c in cuts if c is not None and (part.low is None or c > part.low)})


def _listing_differences(lake: LakeTable, source: SourceTable, part: _Range) -> set[tuple[Any, ...]]:
    mine, theirs = lake.listing(part), source.listing(part)
    return {k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k)}


def _compare_rows(table: TableSpec, lake: LakeTable, source: SourceTable, keys: set[tuple[Any, ...]]) -> list[Drift]:
    if not keys:
        return []
    ordered = sorted(keys, key=_sort_key)
    in_lake, at_source = lake.rows(ordered), source.rows(ordered)
    drift = []
    for key in ordered:
        named = dict(zip(table.primary_key, key, strict=True))
        if key in at_source and key not in in_lake:
            drift.append(Drift(table.name, named, "missing", []))
        elif key in in_lake and key not in at_source:
            drift.append(Drift(table.name, named, "extra", []))
        elif key in in_lake:
            differing = [
                c.name for c in source.columns if not same(c, at_source[key].get(c.name), in_lake[key].get(c.name))
            ]
            if differing:
                drift.append(Drift(table.name, named, "changed", differing))
    return drift


def same(column: ColumnSpec, at_source: Any, in_lake: Any) -> bool:
    """Whether a source value and a lake value are the same value of the column's lake type."""
    if at_source is None or in_lake is None:
        return at_source is None and in_lake is None
    if column.type == "float":
        return _float32(float(at_source)) == _float32(float(in_lake))
    if column.type == "double":
        return float(at_source) == float(in_lake) or (math.isnan(float(at_source)) and math.isnan(float(in_lake)))
    if column.type.startswith("decimal"):
        return Decimal(at_source) == Decimal(in_lake)
    if column.type == "boolean":
        return bool(at_source) == bool(in_lake)
    if isinstance(at_source, (bytes, bytearray, memoryview)):
        return bytes(at_source) == bytes(in_lake)
    return bool(at_source == in_lake)


def _float32(value: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def _sort_key(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((v is None, str(type(v)), v) for v in key)


def _json_value(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat(sep=" ") if isinstance(value, dt.datetime) else value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    return value
