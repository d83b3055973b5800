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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType
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
HISTORY_SNAPSHOT = "cdc-lake.history-snapshot"
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
        return self.named(table.lake_table)

    def named(self, name: str) -> str:
        """A lake table of this database by name (quoted for SQL)."""
        return f"{quote(self.catalog)}.{quote(self.database)}.{quote(name)}"

    def metadata_table(self, table: TableSpec, name: str) -> str:
        return self.metadata(table.lake_table, name)

    def metadata(self, table_name: str, name: str) -> str:
        """An Iceberg metadata table (``snapshots``, ``history``…) of the named lake table."""
        return f"{self.named(table_name)}.{quote(name)}"

    def dotted(self, name: str) -> str:
        """``catalog.database.name`` unquoted, as Spark's catalog API and Iceberg's Java API take it."""
        return f"{self.catalog}.{self.database}.{name}"


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
    create_iceberg_table(
        spark,
        location,
        table.lake_table,
        [(c.name, lake_type(c.type), c.name in table.primary_key) for c in table.columns],
        table.partition_by,
        settings,
        {"cdc-lake.source-table": table.name, "cdc-lake.primary-key": ",".join(table.primary_key)},
        identifier_fields=table.primary_key,
    )


def create_iceberg_table(
    spark: SparkSession,
    location: LakeLocation,
    name: str,
    columns: Sequence[tuple[str, DataType, bool]],
    partition_by: Sequence[str],
    settings: LakeSettings,
    extra_properties: Mapping[str, str],
    identifier_fields: Sequence[str] | None,
) -> None:
    """CREATE TABLE from configuration (names, types and transforms were validated; no data is pasted)."""
    rendered_columns = ", ".join(
        f"{quote(column)} {data_type.simpleString()}" + (" NOT NULL" if not_null else "")
        for column, data_type, not_null in columns
    )
    partitioning = f" PARTITIONED BY ({', '.join(partition_by)})" if partition_by else ""
    mode = settings.write_mode
    properties = {
        "format-version": "2",
        "write.merge.mode": mode,
        "write.update.mode": mode,
        "write.delete.mode": mode,
        "write.metadata.delete-after-commit.enabled": "true",
        "write.metadata.previous-versions-max": "100",
        # Each run makes a few metadata commits (branch, merge, fast-forward); concurrent runs contend.
        "commit.retry.num-retries": "10",
        **extra_properties,
    }
    rendered = ", ".join(f"{sql_string(k)}={sql_string(v)}" for k, v in properties.items())
    try:
        spark.sql(
            f"CREATE TABLE {location.named(name)} ({rendered_columns}) USING iceberg{partitioning} "
            f"TBLPROPERTIES ({rendered})"
        )
    except AnalysisException as error:
        if "already exists" not in str(error).lower():
            raise
        return  # a concurrent run created it first
    if identifier_fields:
        fields = ", ".join(quote(k) for k in identifier_fields)
        spark.sql(f"ALTER TABLE {location.named(name)} SET IDENTIFIER FIELDS {fields}")


def table_exists(spark: SparkSession, location: LakeLocation, table: TableSpec | str) -> bool:
    name = table if isinstance(table, str) else table.lake_table
    return bool(spark.catalog.tableExists(location.dotted(name)))


def read_state(spark: SparkSession, location: LakeLocation, table_name: str) -> ReplayState:
    """The replay state recorded by the newest cdc-lake commit among the current snapshot's ancestors."""
    history = location.metadata(table_name, "history")
    snapshots = location.metadata(table_name, "snapshots")
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
    base_snapshot_id: int,
) -> int:
    """Apply one row per key (``_op`` = I/U/D) with a single MERGE INTO; returns the new snapshot id.

    The commit lands only if the table is still at ``base_snapshot_id``, the snapshot the run planned from.
    """
    view = f"cdc_lake_changes_{uuid.uuid4().hex}"
    source = last_changes.select(
        *[F.col(quote(c.name)).cast(lake_type(c.type)).alias(c.name) for c in table.columns], F.col(OP)
    )
    source.createOrReplaceTempView(view)
    on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in table.primary_key)
    clauses = [f"WHEN MATCHED AND s.{OP} = 'D' THEN DELETE"]
    if table.value_columns:
        assignments = ", ".join(f"t.{quote(c)} = s.{quote(c)}" for c in table.value_columns)
        clauses.append(f"WHEN MATCHED THEN UPDATE SET {assignments}")
    names = ", ".join(quote(c) for c in table.column_names)
    values = ", ".join(f"s.{quote(c)}" for c in table.column_names)
    clauses.append(f"WHEN NOT MATCHED AND s.{OP} <> 'D' THEN INSERT ({names}) VALUES ({values})")
    try:
        return commit_on_branch(
            spark,
            location,
            table.lake_table,
            base_snapshot_id,
            lambda target: f"MERGE INTO {target} t USING {view} s ON {on} " + " ".join(clauses),
            properties,
        )
    finally:
        spark.catalog.dropTempView(view)


def commit_on_branch(
    spark: SparkSession,
    location: LakeLocation,
    table_name: str,
    base_snapshot_id: int,
    statement: Callable[[str], str],
    properties: Mapping[str, str],
) -> int:
    """Run one write statement as a compare-and-swap on the table's main branch; returns its snapshot.

    Iceberg validates a MERGE against the snapshot the MERGE itself read, which may be newer than the one
    this run planned from; a commit made in between would then be silently overwritten by a stale plan.
    So the statement writes to a private branch created at ``base_snapshot_id``, and ``fast_forward``
    moves main to it only if main is still there (otherwise it fails and the run plans again).
    """
    run_id = uuid.uuid4().hex
    branch = f"cdc_lake_run_{run_id}"
    table = location.named(table_name)
    spark.sql(f"ALTER TABLE {table} CREATE BRANCH {quote(branch)} AS OF VERSION {int(base_snapshot_id)}")
    try:
        with commit_properties(spark, {**properties, RUN_ID: run_id}):
            spark.sql(statement(f"{table}.{quote('branch_' + branch)}"))
        head = branch_head(spark, location, table_name, branch)
        if head == base_snapshot_id or head is None:
            # Nothing changed (e.g. only deletes of missing keys): still record the files as applied.
            head = _empty_commit(spark, location, table_name, {**properties, RUN_ID: run_id}, branch)
        spark.sql(
            f"CALL {quote(location.catalog)}.system.fast_forward("
            f"{sql_string(location.database + '.' + table_name)}, 'main', {sql_string(branch)})"
        ).collect()
        return head
    finally:
        _drop_branch(spark, table, branch)


def _drop_branch(spark: SparkSession, table: str, branch: str) -> None:
    # Whether the commit landed or not is already decided; a leftover branch only costs a ref.
    try:
        spark.sql(f"ALTER TABLE {table} DROP BRANCH IF EXISTS {quote(branch)}")
    except Exception as error:  # must not mask the run's own outcome
        log.warning("could not drop branch %s of %s (remove it by hand): %s", branch, table, str(error)[:300])


def branch_head(spark: SparkSession, location: LakeLocation, table_name: str, branch: str = "main") -> int | None:
    rows = spark.sql(
        f"SELECT snapshot_id FROM {location.metadata(table_name, 'refs')} WHERE name = {sql_string(branch)}"
    ).collect()
    return int(rows[0]["snapshot_id"]) if rows else None


def base_snapshot(spark: SparkSession, location: LakeLocation, table_name: str) -> int:
    """The table's current snapshot, which a run plans from; a new table first gets an empty one."""
    head = branch_head(spark, location, table_name)
    if head is not None:
        return head
    try:
        return _empty_commit(spark, location, table_name, {}, None)
    except Exception:
        head = branch_head(spark, location, table_name)  # a concurrent run created it first
        if head is None:
            raise
        return head


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


def _empty_commit(
    spark: SparkSession, location: LakeLocation, table_name: str, properties: Mapping[str, str], branch: str | None
) -> int:
    """A snapshot with no data change, carrying only the properties (Iceberg allows an empty append)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    iceberg_table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession, location.dotted(table_name)
    )
    append = iceberg_table.newAppend()
    if branch is not None:
        append = append.toBranch(branch)
    for key, value in properties.items():
        append = append.set(key, value)
    append.commit()
    iceberg_table.refresh()
    snapshot = iceberg_table.snapshot(branch) if branch is not None else iceberg_table.currentSnapshot()
    return int(snapshot.snapshotId())


def snapshot_summaries(spark: SparkSession, location: LakeLocation, table: TableSpec | str) -> list[dict[str, Any]]:
    """Snapshots of the table's current lineage, oldest first, with their cdc-lake properties."""
    name = table if isinstance(table, str) else table.lake_table
    # A rollback makes an older snapshot current again: keep each ancestor once, at its first time.
    rows = spark.sql(
        "SELECT h.snapshot_id, h.made_current_at, s.operation, s.summary FROM ("
        f"SELECT snapshot_id, min(made_current_at) AS made_current_at FROM {location.metadata(name, 'history')} "
        "WHERE is_current_ancestor GROUP BY snapshot_id) h "
        f"JOIN {location.metadata(name, 'snapshots')} s ON h.snapshot_id = s.snapshot_id "
        "ORDER BY h.made_current_at"
    ).collect()
    return [row.asDict(recursive=True) for row in rows]
