"""Reloading a table after DMS reloaded it: rebuild it from its current LOAD files and the CDC files after them.

plan (``plan.plan_reload``: which files, from which CDC file on) → read (``reader``) → reduce to each key's
last change (``changes``) → the rows that differ from the table as planned → one MERGE
(``commit.commit_transaction``, a compare-and-swap on the planned snapshot). Readers see the old table until
that commit; the snapshots before it stay reachable by time travel and rollback. The commit records every
listed file as applied, so ordinary runs go on from the newest CDC file. With ``history: true`` the
history table gets a version only for keys whose row changed, judged against history's own current rows,
so a reload stopped between the two commits and run again adds nothing twice.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from dataclasses import dataclass, replace
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_lake.core.config import TableSpec
from cdc_lake.core.exceptions import DmsInputError
from cdc_lake.core.plan import ReloadPlan, plan_reload, show_position
from cdc_lake.core.shapes import DMS_TS, FILE, OP, RAW, ROW
from cdc_lake.core.sql import quote
from cdc_lake.engine.changes import ChangeCounts, describe_problems, dms_order, last_change_per_key, split_key_updates
from cdc_lake.engine.commit import (
    Properties,
    Transaction,
    base_snapshot,
    batch_updates,
    commit_transaction,
    summary_of,
)
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.history import versions_update
from cdc_lake.engine.reader import file_layouts, read_changes
from cdc_lake.engine.record import HISTORY_SNAPSHOT, RELOAD, run_properties
from cdc_lake.engine.rejects import resolve_rejects
from cdc_lake.engine.replay import committed_with_retries, record_refusal
from cdc_lake.engine.schema import align_lake_table, lake_fields, plan_schema
from cdc_lake.engine.spark_types import lake_type
from cdc_lake.engine.tables import Lake, history_name, quarantines

log = logging.getLogger(__name__)

_SOURCE = "_source"
_ACTION = "_action"


@dataclass(frozen=True)
class ReloadResult:
    """What a reload committed; ``counts`` are the differences it made (I new keys, U changed rows, D removed)."""

    table: str
    load_files: list[str]
    cdc_files: list[str]
    skipped_cdc_files: list[str]
    stale_load_files: list[str]
    boundary: str
    boundary_source: str
    rows: int
    counts: ChangeCounts
    snapshot_id: int
    previous_snapshot_id: int
    history_snapshot_id: int | None = None
    attempts: int = 1
    seconds: float = 0.0
    history_counts: ChangeCounts | None = None


def reload_table(context: ReplayContext, table: TableSpec, *, since: str | None = None) -> ReloadResult:
    """Replace the table's contents with its rebuild from the current LOAD files, in one Iceberg commit.

    ``since`` (a CDC file name or a time) overrides the automatic choice of the first CDC file applied.
    Bad rows refuse the reload, naming file, row and column, and change nothing.
    """
    started = time.monotonic()
    result, attempts = committed_with_retries(context, table, lambda: _attempt(context, table, since))
    record_refusal(context, table, None)  # the rebuild is the repair every refusal of a hole names
    return replace(result, attempts=attempts, seconds=time.monotonic() - started)


def _attempt(context: ReplayContext, table: TableSpec, since: str | None) -> ReloadResult:
    config = context.config
    listed = context.store.list(config.table_prefix(table))
    # The bases are read before anything else: if a table moves on after this, its commit is refused.
    base = base_snapshot(context, table.lake_table)
    history_base = base_snapshot(context, history_name(table)) if table.history else None
    plan = plan_reload(config, table, listed, base, since)
    log.info(
        "%s: reloading from %d LOAD file(s) and %d CDC file(s) from %s (%s); %d earlier CDC file(s) skipped",
        table.name,
        len(plan.load_files),
        len(plan.cdc_files),
        show_position(plan.boundary),
        plan.boundary_source,
        len(plan.skipped_cdc_files),
    )
    use_sequence = config.dms.change_sequence_column is not None
    layouts = file_layouts(context, plan.files, table)
    table = plan_schema(config, table, layouts, lake_fields(context, table.lake_table)).table
    # Materialized once: row positions are then fixed, and the MERGE gets a deterministic source.
    read = read_changes(context, plan.files, table, layouts).drop(RAW).localCheckpoint(eager=True)
    problems, total = describe_problems(read)
    if problems:
        raise DmsInputError(table.name, problems, total)
    changes = split_key_updates(read, table, config.dms)
    last = rebuilt_rows(changes, table, use_sequence).localCheckpoint(eager=True)
    align_lake_table(context, table.lake_table, table.columns)
    if history_base is not None:
        align_lake_table(context, history_name(table), table.columns)
    live = last.filter(F.col(OP) != "D")
    rows = live.count()
    current = _rows_at(context, table.lake_table, base, table)
    diff = differences(current, live, table).localCheckpoint(eager=True)
    counts = _counts(diff)
    record = run_plan_properties(plan)
    properties = {**record, **run_properties(plan.run_plan(), {**counts.as_dict(), "keys": diff.count()})}
    history_snapshot: int | None = None
    history_counts: ChangeCounts | None = None
    if history_base is not None:
        history_properties = {**record, **run_properties(plan.run_plan(), None)}
        history_snapshot, history_counts = _commit_history(context, table, last, history_base, history_properties)
        properties[HISTORY_SNAPSHOT] = str(history_snapshot)
    merge = batch_updates(context, table, diff, summary_of(context, table, base))
    snapshot_id = _commit(context, Transaction(table.lake_table, base, merge, lambda: Properties(properties)))
    if quarantines(table):  # rebuilt from the source: its quarantined rows are superseded
        resolve_rejects(context, table, None, ("reloaded", "reloaded"))
    lists = (plan.load_files, plan.cdc_files, plan.skipped_cdc_files, plan.stale_load_files)
    loads, cdc, skipped, stale = ([f.key for f in files] for files in lists)
    boundary = show_position(plan.boundary)
    return ReloadResult(
        table.name, loads, cdc, skipped, stale, boundary, plan.boundary_source, rows, counts, snapshot_id, base,
        history_snapshot, history_counts=history_counts
    )  # fmt: skip


def run_plan_properties(plan: ReloadPlan) -> dict[str, str]:
    """The reload's own record in its snapshot summary: the boundary and what was left out."""
    detail = {
        "since": show_position(plan.boundary),
        "chosen": plan.boundary_source,
        "skipped_cdc_files": len(plan.skipped_cdc_files),
        "stale_load_files": [f.key for f in plan.stale_load_files],
    }
    return {RELOAD: json.dumps(detail, separators=(",", ":"))}


def rebuilt_rows(changes: DataFrame, table: TableSpec, use_change_sequence: bool) -> DataFrame:
    """Each key's last change (``_op``, lake-typed values) and ``_source``: the file, 1-based row and DMS time of it."""
    keys = [F.col(quote(k)) for k in table.primary_key]
    last = last_change_per_key(changes, table, use_change_sequence)
    first_row = changes.groupBy(FILE).agg(F.min(ROW).alias("_first"))
    origin = F.struct(
        F.col(FILE).alias("file"),
        (F.col(ROW) - F.col("_first") + 1).cast(T.LongType()).alias("row"),
        F.col(DMS_TS).alias("ts"),
    )
    source = (
        changes.join(F.broadcast(first_row), on=FILE)
        .groupBy(*keys)
        .agg(F.max_by(origin, dms_order(use_change_sequence)).alias(_SOURCE))
    )
    return last.join(source, on=list(table.primary_key)).select(
        *[F.col(quote(c.name)).cast(lake_type(c.type)).alias(c.name) for c in table.columns],
        F.col(OP),
        F.col(_SOURCE),
    )


def differences(current: DataFrame, rebuilt: DataFrame, table: TableSpec) -> DataFrame:
    """The rows that turn ``current`` into ``rebuilt`` (both one row per key): ``_op`` I new, U changed, D gone.

    Deleted keys carry their old values. A DataFrame → DataFrame function over the key and value columns.
    """
    values = table.value_columns
    old = [f"_old_{i}" for i in range(len(values))]
    before = current.select(
        *[F.col(quote(k)) for k in table.primary_key],
        *[F.col(quote(c)).alias(o) for c, o in zip(values, old, strict=True)],
        F.lit(True).alias("_in_old"),
    )
    after = rebuilt.select(
        *[F.col(quote(c)) for c in table.column_names],
        F.lit(True).alias("_in_new"),
    )
    joined = before.join(after, on=list(table.primary_key), how="full_outer")
    same: Column = reduce(
        lambda acc, pair: acc & F.col(quote(pair[0])).eqNullSafe(F.col(pair[1])),
        zip(values, old, strict=True),
        F.lit(True),
    )
    op = (
        F.when(F.col("_in_old").isNull(), F.lit("I"))
        .when(F.col("_in_new").isNull(), F.lit("D"))
        .when(~same, F.lit("U"))
    )
    changed = joined.withColumn(OP, op).filter(F.col(OP).isNotNull())
    return changed.select(
        *[F.col(quote(k)) for k in table.primary_key],
        *[
            F.when(F.col(OP) == "D", F.col(o)).otherwise(F.col(quote(c))).alias(c)
            for c, o in zip(values, old, strict=True)
        ],
        F.col(OP),
    )


def _rows_at(lake: Lake, name: str, snapshot: int, table: TableSpec) -> DataFrame:
    """The table's rows at ``snapshot``, in its snapshot's schema; columns added since then are NULL."""
    return _columns(lake.spark.sql(f"SELECT * FROM {lake.location.named(name)} VERSION AS OF {int(snapshot)}"), table)


def _columns(frame: DataFrame, table: TableSpec) -> DataFrame:
    present = set(frame.columns)
    return frame.select(
        *[
            F.col(quote(c.name)) if c.name in present else F.lit(None).cast(lake_type(c.type)).alias(c.name)
            for c in table.columns
        ]
    )


def _counts(diff: DataFrame) -> ChangeCounts:
    row = diff.agg(*[F.count(F.when(F.col(OP) == op, 1)).alias(op) for op in ("I", "U", "D")]).first()
    assert row is not None
    return ChangeCounts(inserts=row["I"], updates=row["U"], deletes=row["D"])


def _commit(context: ReplayContext, transaction: Transaction[Properties]) -> int:
    committed = commit_transaction(context, transaction)
    assert committed is not None  # a merge has no check that could give the commit up
    return committed.snapshot_id


def _commit_history(
    context: ReplayContext, table: TableSpec, last: DataFrame, base: int, properties: dict[str, str]
) -> tuple[int, ChangeCounts]:
    """Close and add versions for the keys whose row differs from history's current one; one MERGE."""
    spark, run_time = context.spark, dt.datetime.now(dt.UTC).replace(tzinfo=None)
    name = history_name(table)
    keys = list(table.primary_key)
    at_base = spark.sql(f"SELECT * FROM {context.location.named(name)} VERSION AS OF {int(base)}")
    live = _columns(at_base.filter(F.col("is_current")), table)
    diff = differences(live, last.filter(F.col(OP) != "D"), table)
    latest = at_base.filter(F.col("valid_to").isNull()).select(
        *[F.col(quote(k)) for k in keys],
        F.col("valid_from").alias("_prev_from"),
        F.col("version").alias("_prev_version"),
    )
    stamp = F.coalesce(F.col(f"{_SOURCE}.ts").cast(T.TimestampNTZType()), F.lit(run_time).cast(T.TimestampNTZType()))
    versions = (
        diff.join(last.select(*[F.col(quote(k)) for k in keys], F.col(_SOURCE)), on=keys, how="left")
        .join(latest, on=keys, how="left")
        .select(
            *[F.col(quote(c)) for c in table.column_names],
            F.col(OP).alias("op"),
            F.greatest(stamp, F.coalesce(F.col("_prev_from"), stamp)).alias("valid_from"),
            F.lit(None).cast(T.TimestampNTZType()).alias("valid_to"),
            (F.col(OP) != "D").alias("is_current"),
            (F.coalesce(F.col("_prev_version"), F.lit(0)) + 1).cast(T.LongType()).alias("version"),
            F.col(f"{_SOURCE}.file").alias("source_file"),
            F.col(f"{_SOURCE}.row").alias("source_row"),
            F.col("_prev_version"),
        )
        .localCheckpoint(eager=True)
    )
    counts = _counts(versions.withColumnRenamed("op", OP))
    update = versions_update(spark, table, versions)
    return _commit(context, Transaction(name, base, [update], lambda: Properties(properties))), counts
