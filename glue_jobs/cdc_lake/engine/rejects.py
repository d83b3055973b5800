"""Quarantine (``on_bad_rows: quarantine``): bad rows go to ``<target>_rejects`` instead of refusing their batch.

Exact, not lossy: a key with a quarantined change is frozen at its state before that change. Every later change
of the key, in the same batch or a later one, is held in the rejects table too (``status = 'held'``), until
``cdc-lake rejects replay`` applies the fixed rows and the held ones in DMS order (``rejects_replay``), or
``cdc-lake rejects accept`` drops the bad rows and applies the held ones. Until then each commit of the table
marks it as diverged in its snapshot summary (``DIVERGED``).

Only a row whose key and place in DMS order are known can be held exactly: a row with a missing or unparseable
key, a malformed CSV record, a bad change sequence or before-image, and a key update that touches a quarantined
key, still refuse the batch.

Iceberg commits one table at a time. The rejects are committed first, then the table's commit names their
snapshot; a rejects row counts only once its file is applied to the table (``outstanding``), so a run stopped
between the two commits leaves rows that the next run rewrites (one row per file and row), never a change
applied twice.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_lake.core.config import DmsSettings, LakeSettings, PipelineConfig, TableSpec
from cdc_lake.core.dms_files import DmsFile, parse_key
from cdc_lake.core.exceptions import DmsInputError
from cdc_lake.core.plan import ReplayState, applied
from cdc_lake.core.shapes import FILE, OP, PROBLEM, RAW, ROW, before_roles
from cdc_lake.core.sql import quote, sql_string
from cdc_lake.engine.changes import describe_problems, dms_order
from cdc_lake.engine.commit import branch_head
from cdc_lake.engine.context import LakeContext
from cdc_lake.engine.reader import format_reader
from cdc_lake.engine.record import table_record
from cdc_lake.engine.spark_types import temp_view
from cdc_lake.engine.tables import (
    REJECTS_OF,
    Lake,
    TableDefinition,
    create_iceberg_table,
    rejects_name,
    table_exists,
    write_mode_properties,
)

log = logging.getLogger(__name__)

REJECTED, HELD = "rejected", "held"
REJECTS_COLUMNS: list[tuple[str, T.DataType, bool]] = [
    ("file", T.StringType(), True),
    ("row", T.LongType(), True),  # 1-based, among the file's records
    ("op", T.StringType(), False),
    ("key", T.StringType(), False),  # the typed key as JSON
    ("column", T.StringType(), False),
    ("reason", T.StringType(), False),
    ("status", T.StringType(), True),  # rejected: the row is bad; held: behind a rejected change of its key
    ("raw", T.StringType(), False),  # the record as read (CSV) or its fields as JSON (Parquet)
    ("fields", T.MapType(T.StringType(), T.StringType()), False),  # each field as text; a replay parses these
    ("quarantined_at", T.TimestampType(), False),
    ("resolution", T.StringType(), False),  # NULL while outstanding; replayed, accepted or reloaded
    ("resolved_at", T.TimestampType(), False),
]
_KEY = "_cdc_lake_key"
_FIRST_BAD = "_cdc_lake_first_bad"


def ensure_rejects_table(lake: Lake, table: TableSpec, settings: LakeSettings) -> None:
    if table_exists(lake, rejects_name(table)):
        return
    definition = TableDefinition(
        rejects_name(table),
        REJECTS_COLUMNS,
        [],
        # Merged on read whatever lake.write_mode says: its MERGE's source reads the table itself, which Spark 4.1
        # cannot plan against a copy-on-write target ("No plan for TableReference").
        {REJECTS_OF: table.name, **write_mode_properties("merge-on-read", pinned=True)},
        identifier_fields=None,
        sort_by=["file", "row"],
    )
    create_iceberg_table(lake, definition, settings)


@dataclass(frozen=True)
class Quarantined:
    """A batch's change rows split: ``good`` to apply, ``rejects`` (None: none) to keep in the rejects table."""

    good: DataFrame
    rejects: DataFrame | None
    rejected: int = 0
    held: int = 0
    frozen: DataFrame | None = None  # the table's outstanding rejects rows the batch was checked against


def outstanding(context: LakeContext, table: TableSpec, state: ReplayState) -> DataFrame | None:
    """The rejects rows not yet resolved whose file ``state`` has applied; None when there are none."""
    if not table_exists(context, rejects_name(table)):
        return None
    rows = context.spark.table(context.location.named(rejects_name(table))).where(F.col("resolution").isNull())
    files = [r["file"] for r in rows.select("file").distinct().collect()]
    held = [key for key in files if applied(parse_key(key, context.config), state, context.config)]
    return rows.where(F.col("file").isin(held)) if held else None


def quarantine(
    config: PipelineConfig,
    table: TableSpec,
    changes: DataFrame,
    frozen_keys: DataFrame | None,
) -> Quarantined:
    """Split checked change rows (read with ``keep_raw``) into the rows to apply and the rows to quarantine: each
    bad row, and each later change of a key that has a bad row here or is frozen already (``frozen_keys``: the
    keys of the table's outstanding rejects, as JSON). Refuses the batch for bad rows that cannot be held."""
    dms = config.dms
    bad = F.col(PROBLEM).isNotNull()
    total_bad = changes.where(bad).count()
    if not total_bad and frozen_keys is None:
        return Quarantined(changes.drop(RAW), None, frozen=frozen_keys)
    unplaceable = bad & ~_placeable(table, dms)
    changes = changes.withColumn(_KEY, _key_json(table))
    if total_bad:
        _refuse(table, changes.withColumn(PROBLEM, F.when(unplaceable, F.col(PROBLEM))), quarantinable=False)
    order = dms_order(dms.change_sequence_column is not None)
    first_bad = changes.where(bad).groupBy(_KEY).agg(F.min(order).alias(_FIRST_BAD))
    marked = changes.join(first_bad, on=_KEY, how="left")
    behind = F.col(_FIRST_BAD).isNotNull() & (order > F.col(_FIRST_BAD))
    if frozen_keys is not None:
        frozen = frozen_keys.select(F.col("key").alias(_KEY)).distinct().withColumn("_frozen", F.lit(True))
        marked = marked.join(F.broadcast(frozen), on=_KEY, how="left")
        behind = behind | F.col("_frozen").isNotNull()
    quarantined_keys = first_bad.select(_KEY)
    if frozen_keys is not None:
        quarantined_keys = quarantined_keys.union(frozen_keys.select(F.col("key").alias(_KEY)))
    _refuse_key_moves(table, dms, marked, quarantined_keys)
    status = F.when(bad, F.lit(REJECTED)).when(behind, F.lit(HELD))
    marked = marked.withColumn("_status", status).localCheckpoint(eager=True)
    counts = {r["_status"]: r["n"] for r in marked.groupBy("_status").agg(F.count(F.lit(1)).alias("n")).collect()}
    good = marked.where(F.col("_status").isNull()).drop(RAW, _KEY, _FIRST_BAD, "_frozen", "_status")
    if not counts.get(REJECTED) and not counts.get(HELD):
        return Quarantined(good, None, frozen=frozen_keys)
    rows = _rejects_rows(marked, changes, table, dms)
    return Quarantined(good, rows, counts.get(REJECTED, 0), counts.get(HELD, 0), frozen_keys)


def _placeable(table: TableSpec, dms: DmsSettings) -> Column:
    """Whether a bad row's key and place in DMS order are known, so its key can be frozen exactly."""
    unplaceable_faults = ["(row)", "_change_seq", *dms.before_image_columns(table)]
    known_key = F.lit(True)
    for key in table.primary_key:
        known_key = known_key & F.col(quote(key)).isNotNull()
    return known_key & ~F.col(PROBLEM).getField("column").isin(*unplaceable_faults)


def _key_json(table: TableSpec) -> Column:
    return F.to_json(F.struct(*[F.col(quote(k)).alias(k) for k in table.primary_key]))


def _refuse(table: TableSpec, changes: DataFrame, quarantinable: bool) -> None:
    problems, total = describe_problems(changes)
    if problems:
        raise DmsInputError(table.name, problems, total, quarantinable=quarantinable)


def _refuse_key_moves(table: TableSpec, dms: DmsSettings, marked: DataFrame, keys: DataFrame) -> None:
    """A key update from or to a quarantined key cannot be held exactly: its two halves belong to two keys."""
    befores = before_roles(dms, table)
    if not befores:
        return
    pairs = zip(befores, table.primary_key, strict=True)
    old_key = F.to_json(F.struct(*[F.coalesce(F.col(b), F.col(quote(k))).alias(k) for b, k in pairs]))
    moves = marked.where((F.col(OP) == "U") & (old_key != F.col(_KEY))).withColumn("_old_key", old_key)
    frozen = keys.distinct().withColumn("_q", F.lit(True))
    frozen_old = frozen.withColumnRenamed(_KEY, "_old_key").withColumnRenamed("_q", "_q_old")
    touching = moves.join(frozen_old, "_old_key", "left")
    touching = touching.join(frozen, _KEY, "left").where(F.col("_q").isNotNull() | F.col("_q_old").isNotNull())
    fault = F.struct(
        F.lit(table.primary_key[0]).alias("column"),
        F.lit("a key update from or to a quarantined key cannot be held (its two halves belong to two keys)").alias(
            "fault"
        ),
        F.col(_KEY).alias("value"),
    )
    flagged = marked.join(touching.select(FILE, ROW).withColumn("_touch", F.lit(True)), [FILE, ROW], "left")
    _refuse(table, flagged.withColumn(PROBLEM, F.when(F.col("_touch").isNotNull(), fault)), quarantinable=False)


def _rejects_rows(marked: DataFrame, changes: DataFrame, table: TableSpec, dms: DmsSettings) -> DataFrame:
    first_row = changes.groupBy(FILE).agg(F.min(ROW).alias("_first"))
    raw = format_reader(dms.file_format).as_written(F.col(RAW), table, dms)
    held_reason = F.lit("held: an earlier change of this key is quarantined")
    return (
        marked.where(F.col("_status").isNotNull())
        .join(first_row, on=FILE)
        .select(
            F.col(FILE).alias("file"),
            (F.col(ROW) - F.col("_first") + 1).alias("row"),
            F.col(OP).alias("op"),
            F.col(_KEY).alias("key"),
            F.col(PROBLEM).getField("column").alias("column"),
            F.coalesce(F.col(PROBLEM).getField("fault"), held_reason).alias("reason"),
            F.col("_status").alias("status"),
            raw.alias("raw"),
            F.col(RAW).alias("fields"),
            F.current_timestamp().alias("quarantined_at"),
            F.lit(None).cast("string").alias("resolution"),
            F.lit(None).cast("timestamp").alias("resolved_at"),
        )
    )


def write_rejects(lake: Lake, table: TableSpec, rows: DataFrame | None, files: Sequence[DmsFile]) -> int | None:
    """Commit ``rows`` as the batch's rejects: one row per file and row, outstanding rows of the batch's ``files``
    that this read no longer rejects removed, resolved rows never touched. Returns the rejects table's snapshot."""
    name = lake.location.named(rejects_name(table))
    columns = [n for n, _, _ in REJECTS_COLUMNS]
    if rows is None:
        rows = lake.spark.createDataFrame([], T.StructType([T.StructField(n, t) for n, t, _ in REJECTS_COLUMNS]))
    earlier = lake.spark.table(name).where(F.col("resolution").isNull() & F.col("file").isin([f.key for f in files]))
    gone = earlier.join(rows.select("file", "row"), ["file", "row"], "left_anti").select(*columns)
    source = rows.withColumn("_gone", F.lit(False)).unionByName(gone.withColumn("_gone", F.lit(True)))
    assignments = ", ".join(f"t.{quote(c)} = s.{quote(c)}" for c in columns)
    names, values = ", ".join(quote(c) for c in columns), ", ".join(f"s.{quote(c)}" for c in columns)
    with temp_view(source, "rejects") as view:
        lake.spark.sql(
            f"MERGE INTO {name} t USING {view} s ON t.file = s.file AND t.row = s.row "
            "WHEN MATCHED AND s._gone THEN DELETE "
            f"WHEN MATCHED AND t.resolution IS NULL THEN UPDATE SET {assignments} "
            f"WHEN NOT MATCHED AND NOT s._gone THEN INSERT ({names}) VALUES ({values})"
        )
    return branch_head(lake, rejects_name(table))


def divergence(outstanding_rows: DataFrame | None, table: TableSpec) -> dict[str, object] | None:
    """What the table's ``DIVERGED`` mark says: its outstanding rejected and held rows, and where they are."""
    if outstanding_rows is None:
        return None
    grouped = outstanding_rows.groupBy("status").agg(F.count(F.lit(1)).alias("n"))
    counts = {r["status"]: r["n"] for r in grouped.collect()}
    if not counts:
        return None
    return {"rejected": counts.get(REJECTED, 0), "held": counts.get(HELD, 0), "rejects_table": rejects_name(table)}


def diverged(lake: Lake, table: TableSpec) -> Mapping[str, object] | None:
    """The mark of the table's newest cdc-lake commit: None when it is not diverged."""
    return table_record(lake, table.lake_table).diverged


def resolve_rejects(lake: Lake, table: TableSpec, rows: DataFrame | None, resolutions: tuple[str, str]) -> None:
    """Mark outstanding rejects rows resolved, rejected ones with ``resolutions[0]``, held ones with ``[1]``: those of
    ``rows`` (file, row), or every outstanding one when None (a reload rebuilt the table from the source)."""
    if not table_exists(lake, rejects_name(table)):
        return
    name = lake.location.named(rejects_name(table))
    if rows is None:
        rows = lake.spark.table(name).where(F.col("resolution").isNull())
    with temp_view(rows.select("file", "row"), "resolved") as view:
        lake.spark.sql(
            f"MERGE INTO {name} t USING {view} s ON t.file = s.file AND t.row = s.row AND t.resolution IS NULL "
            f"WHEN MATCHED THEN UPDATE SET resolution = CASE WHEN t.status = {sql_string(REJECTED)} "
            f"THEN {sql_string(resolutions[0])} ELSE {sql_string(resolutions[1])} END, "
            "resolved_at = current_timestamp()"
        )


def reopen_rejects(lake: Lake, table: TableSpec, since: dt.datetime) -> None:
    """Make the rows resolved from ``since`` on outstanding again: a rollback undid the replay or reload that
    resolved them, so their keys are frozen at their state before them again."""
    if not table_exists(lake, rejects_name(table)):
        return
    # Written out, not bound: Iceberg 1.11's SQL extensions leave bound parameters unbound on Spark 4.1
    # (apache/iceberg#16625). The time is the rollback's own, never a row's value; sessions run in UTC.
    moment = sql_string(since.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f"))
    lake.spark.sql(
        f"UPDATE {lake.location.named(rejects_name(table))} SET resolution = NULL, resolved_at = NULL "
        f"WHERE resolved_at >= TIMESTAMP {moment}"
    )
