"""The Iceberg side: creating lake tables, reading what was applied, and the one commit per run.

Which DMS files a table holds is recorded in the snapshot summary of the very commit that applied them
(``cdc-lake.*`` properties), so the record and the data can never disagree, and rolling the table back
rolls the record back with it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.utils import AnalysisException

from cdc_lake.config import LakeSettings, TableSpec
from cdc_lake.reader import OP
from cdc_lake.spark_types import lake_type
from cdc_lake.storage import StoredObject

log = logging.getLogger(__name__)

STATE = "cdc-lake.state"
APPLIED = "cdc-lake.applied-files"
CHANGES = "cdc-lake.changes"
TRIGGER = "cdc-lake.trigger"
RUN_ID = "cdc-lake.run-id"
STATE_VERSION = 1


def quote(identifier: str) -> str:
    return "`" + identifier.replace("`", "``") + "`"


def sql_string(text: str) -> str:
    """A SQL string literal for configuration text (never for data values, which go through DataFrames)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass(frozen=True)
class LakeLocation:
    """Where a configuration's tables live: a Spark catalog and a database (namespace) in it."""

    catalog: str
    database: str

    def table(self, table: TableSpec) -> str:
        return f"{quote(self.catalog)}.{quote(self.database)}.{quote(table.lake_table)}"

    def metadata_table(self, table: TableSpec, name: str) -> str:
        return f"{self.table(table)}.{quote(name)}"


@dataclass(frozen=True)
class ReplayState:
    """Which of a table's DMS files its current snapshot holds.

    LOAD files are kept by name until CDC starts; from then on only their count and digest (the table's
    metadata must not grow with every commit), which still reveals a reload. CDC files are applied
    strictly in order, so the last one names them all.
    """

    load_files: Mapping[str, tuple[str | None, int]] = field(default_factory=dict)
    load_count: int = 0
    load_digest: str = ""
    cdc_last: str | None = None
    cdc_count: int = 0
    snapshot_id: int | None = None

    @property
    def cdc_started(self) -> bool:
        return self.cdc_last is not None

    def to_json(self) -> str:
        load: dict[str, Any] = {"count": self.load_count, "digest": self.load_digest}
        if not self.cdc_started:
            load["files"] = {k: [etag, size] for k, (etag, size) in sorted(self.load_files.items())}
        return json.dumps(
            {"v": STATE_VERSION, "load": load, "cdc": {"last": self.cdc_last, "count": self.cdc_count}},
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str, snapshot_id: int | None) -> ReplayState:
        data = json.loads(text)
        if data.get("v") != STATE_VERSION:
            raise ValueError(f"unsupported {STATE} version {data.get('v')!r}")
        load = data["load"]
        files = {k: (v[0], int(v[1])) for k, v in (load.get("files") or {}).items()}
        return cls(
            load_files=files,
            load_count=int(load["count"]),
            load_digest=load["digest"],
            cdc_last=data["cdc"]["last"],
            cdc_count=int(data["cdc"]["count"]),
            snapshot_id=snapshot_id,
        )


def load_digest(objects: Iterable[StoredObject]) -> str:
    digest = hashlib.sha256()
    for item in sorted(objects, key=lambda o: o.key):
        digest.update(f"{item.key}\0{item.etag}\0{item.size}\n".encode())
    return digest.hexdigest()


def ensure_table(spark: SparkSession, location: LakeLocation, table: TableSpec, settings: LakeSettings) -> None:
    """Create the namespace and the Iceberg table if missing (format v2, primary key as identifier fields)."""
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {quote(location.catalog)}.{quote(location.database)}")
    if table_exists(spark, location, table):
        return
    columns = ", ".join(
        f"{quote(c.name)} {lake_type(c.type).simpleString()}" + (" NOT NULL" if c.name in table.primary_key else "")
        for c in table.columns
    )
    partitioning = f" PARTITIONED BY ({', '.join(table.partition_by)})" if table.partition_by else ""
    mode = settings.write_mode
    properties = {
        "format-version": "2",
        "write.merge.mode": mode,
        "write.update.mode": mode,
        "write.delete.mode": mode,
        "write.metadata.delete-after-commit.enabled": "true",
        "write.metadata.previous-versions-max": "100",
        "cdc-lake.source-table": table.name,
        "cdc-lake.primary-key": ",".join(table.primary_key),
    }
    rendered = ", ".join(f"{sql_string(k)}={sql_string(v)}" for k, v in properties.items())
    try:
        spark.sql(
            f"CREATE TABLE {location.table(table)} ({columns}) USING iceberg{partitioning} TBLPROPERTIES ({rendered})"
        )
    except AnalysisException as error:
        if "already exists" not in str(error).lower():
            raise
        return  # a concurrent run created it first
    identifier_fields = ", ".join(quote(k) for k in table.primary_key)
    spark.sql(f"ALTER TABLE {location.table(table)} SET IDENTIFIER FIELDS {identifier_fields}")


def table_exists(spark: SparkSession, location: LakeLocation, table: TableSpec) -> bool:
    return bool(spark.catalog.tableExists(f"{location.catalog}.{location.database}.{table.lake_table}"))


def read_state(spark: SparkSession, location: LakeLocation, table: TableSpec) -> ReplayState:
    """The replay state recorded by the newest cdc-lake commit among the current snapshot's ancestors."""
    history = location.metadata_table(table, "history")
    snapshots = location.metadata_table(table, "snapshots")
    rows = spark.sql(
        f"SELECT h.snapshot_id, s.summary[{sql_string(STATE)}] AS state FROM {history} h "
        f"JOIN {snapshots} s ON h.snapshot_id = s.snapshot_id "
        f"WHERE h.is_current_ancestor AND s.summary[{sql_string(STATE)}] IS NOT NULL "
        "ORDER BY h.made_current_at DESC LIMIT 1"
    ).collect()
    if not rows:
        return ReplayState()
    return ReplayState.from_json(rows[0]["state"], rows[0]["snapshot_id"])


def commit_changes(
    spark: SparkSession,
    location: LakeLocation,
    table: TableSpec,
    last_changes: DataFrame,
    properties: Mapping[str, str],
) -> int:
    """Apply one row per key (``_op`` = I/U/D) with a single MERGE INTO; returns the new snapshot id.

    The ``cdc-lake.*`` properties ride in the same commit through Iceberg's CommitMetadata.
    """
    run_id = uuid.uuid4().hex
    view = f"cdc_lake_changes_{run_id}"
    source = last_changes.select(
        *[F.col(quote(c.name)).cast(lake_type(c.type)).alias(c.name) for c in table.columns], F.col(OP)
    )
    source.createOrReplaceTempView(view)
    target = location.table(table)
    on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in table.primary_key)
    clauses = [f"WHEN MATCHED AND s.{OP} = 'D' THEN DELETE"]
    if table.value_columns:
        assignments = ", ".join(f"t.{quote(c)} = s.{quote(c)}" for c in table.value_columns)
        clauses.append(f"WHEN MATCHED THEN UPDATE SET {assignments}")
    names = ", ".join(quote(c) for c in table.column_names)
    values = ", ".join(f"s.{quote(c)}" for c in table.column_names)
    clauses.append(f"WHEN NOT MATCHED AND s.{OP} <> 'D' THEN INSERT ({names}) VALUES ({values})")
    statement = f"MERGE INTO {target} t USING {view} s ON {on} " + " ".join(clauses)
    try:
        with commit_properties(spark, {**properties, RUN_ID: run_id}):
            spark.sql(statement)
    finally:
        spark.catalog.dropTempView(view)
    snapshot_id = _snapshot_with_run_id(spark, location, table, run_id)
    if snapshot_id is None:
        # Nothing changed (e.g. only deletes of missing keys): still record the files as applied.
        snapshot_id = _empty_commit(spark, location, table, {**properties, RUN_ID: run_id})
    return snapshot_id


class commit_properties:
    """Attach snapshot summary properties to Iceberg commits made by this thread's next SQL statements.

    Iceberg reads them from ``CommitMetadata``'s thread-local; PySpark pins each Python thread to its own
    JVM thread, so concurrent runs in one session keep their properties apart.
    """

    def __init__(self, spark: SparkSession, properties: Mapping[str, str]) -> None:
        self._spark = spark
        self._properties = properties
        self._thread_local: Any = None

    def __enter__(self) -> commit_properties:
        jvm = self._spark.sparkContext._jvm
        assert jvm is not None
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        holder = jvm.java.lang.Class.forName("org.apache.iceberg.spark.CommitMetadata", True, loader)
        field_ = holder.getDeclaredField("COMMIT_PROPERTIES")
        field_.setAccessible(True)
        self._thread_local = field_.get(None)
        java_map = jvm.java.util.HashMap()
        for key, value in self._properties.items():
            java_map.put(key, value)
        self._thread_local.set(java_map)
        return self

    def __exit__(self, *exc: object) -> None:
        self._thread_local.remove()


def _snapshot_with_run_id(spark: SparkSession, location: LakeLocation, table: TableSpec, run_id: str) -> int | None:
    rows = spark.sql(
        f"SELECT snapshot_id FROM {location.metadata_table(table, 'snapshots')} "
        f"WHERE summary[{sql_string(RUN_ID)}] = {sql_string(run_id)}"
    ).collect()
    return int(rows[0]["snapshot_id"]) if rows else None


def _empty_commit(spark: SparkSession, location: LakeLocation, table: TableSpec, properties: Mapping[str, str]) -> int:
    """A snapshot with no data change, carrying only the properties (Iceberg allows an empty append)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    name = f"{location.catalog}.{location.database}.{table.lake_table}"
    iceberg_table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, name)
    append = iceberg_table.newAppend()
    for key, value in properties.items():
        append = append.set(key, value)
    append.commit()
    iceberg_table.refresh()
    return int(iceberg_table.currentSnapshot().snapshotId())


def snapshot_summaries(spark: SparkSession, location: LakeLocation, table: TableSpec) -> list[dict[str, Any]]:
    """Snapshots of the table's current lineage, oldest first, with their cdc-lake properties."""
    rows = spark.sql(
        f"SELECT h.snapshot_id, h.made_current_at, s.operation, s.summary "
        f"FROM {location.metadata_table(table, 'history')} h "
        f"JOIN {location.metadata_table(table, 'snapshots')} s ON h.snapshot_id = s.snapshot_id "
        "WHERE h.is_current_ancestor ORDER BY h.made_current_at"
    ).collect()
    return [row.asDict(recursive=True) for row in rows]
