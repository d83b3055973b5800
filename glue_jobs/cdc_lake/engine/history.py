"""SCD type 2 history: every version of every row, in a companion Iceberg table ``<table>_history``.

Each applied change row becomes a version with ``op``, ``valid_from``, ``valid_to`` (NULL while open),
``is_current``, a per-key ``version`` number in DMS order, and the ``source_file``/``source_row`` that
produced it. A delete closes the open version and leaves a tombstone (``op = 'D'``, open-ended, not
current); a delete of a key with no live version adds nothing, as it changes nothing in the table.

``valid_from`` is the DMS timestamp column when configured (else the run's time), raised to the running
maximum per key, so ties and out-of-order timestamps (cached changes, full-load transfer times) still give
versions in DMS order with intervals that never overlap. The history table records the files it applied
in its own snapshot summaries, so it is maintained exactly once even if a run stops between its commit
and the main table's.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_lake.core.config import LakeSettings, TableSpec
from cdc_lake.core.plan import RunPlan
from cdc_lake.core.shapes import DMS_TS, FILE, OP, ROW
from cdc_lake.core.sql import quote
from cdc_lake.engine.changes import dms_order
from cdc_lake.engine.commit import Properties, Transaction, Update, commit_transaction, without_group_filter
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.record import run_properties
from cdc_lake.engine.spark_types import lake_type, temp_view
from cdc_lake.engine.tables import (
    Lake,
    TableDefinition,
    column_docs,
    create_iceberg_table,
    history_name,
    table_exists,
)

VERSION_COLUMNS: list[tuple[str, T.DataType]] = [
    ("op", T.StringType()),
    ("valid_from", T.TimestampNTZType()),
    ("valid_to", T.TimestampNTZType()),
    ("is_current", T.BooleanType()),
    ("version", T.LongType()),
    ("source_file", T.StringType()),
    ("source_row", T.LongType()),
]
_ACTION = "_action"


def ensure_history_table(lake: Lake, table: TableSpec, settings: LakeSettings) -> None:
    if table_exists(lake, history_name(table)):
        return
    columns = [(c.name, lake_type(c.type), c.name in table.primary_key) for c in table.columns]
    columns += [(name, data_type, name in ("valid_from", "version")) for name, data_type in VERSION_COLUMNS]
    definition = TableDefinition(
        history_name(table),
        columns,
        table.partition_by,
        {"cdc-lake.history-of": table.name, "cdc-lake.primary-key": ",".join(table.primary_key)},
        identifier_fields=None,
        sort_by=[*table.primary_key, "version"],
        docs=column_docs(table),
    )
    create_iceberg_table(lake, definition, settings)


def new_versions(
    changes: DataFrame, latest: DataFrame, table: TableSpec, use_change_sequence: bool, run_time: dt.datetime
) -> DataFrame:
    """The versions a batch of change rows adds, continuing each key's latest version (DataFrame → DataFrame).

    ``latest`` holds each key's open version (``valid_to IS NULL``) as ``_prev_op``, ``_prev_from``,
    ``_prev_version``; keys new to history are absent.
    """
    keys = [F.col(quote(k)) for k in table.primary_key]
    by_file = Window.partitionBy(FILE)
    by_key = Window.partitionBy(*keys).orderBy(dms_order(use_change_sequence))
    stamped = changes.select(
        *[F.col(quote(c)) for c in table.column_names],
        F.col(OP),
        F.col(FILE),
        F.col(ROW),
        F.col("_phase"),
        F.col("_file_seq"),
        F.col("_change_seq"),
        (F.col(ROW) - F.min(ROW).over(by_file) + 1).alias("source_row"),
        F.coalesce(F.col(DMS_TS).cast(T.TimestampNTZType()), F.lit(run_time).cast(T.TimestampNTZType())).alias(
            "_stamp"
        ),
    ).join(latest, on=table.primary_key, how="left")
    previous_op = F.coalesce(F.lag(OP).over(by_key), F.col("_prev_op"))
    # A delete counts only when the key was live just before it, as it does in the table.
    kept = stamped.withColumn("_previous_op", previous_op).filter(
        (F.col(OP) != "D") | F.col("_previous_op").isin("I", "U")
    )
    running = (
        Window.partitionBy(*keys)
        .orderBy(dms_order(use_change_sequence))
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    valid_from = F.greatest(F.max("_stamp").over(running), F.coalesce(F.col("_prev_from"), F.col("_stamp")))
    versions = kept.withColumn("valid_from", valid_from).withColumn(
        "version", F.coalesce(F.col("_prev_version"), F.lit(0)) + F.row_number().over(by_key)
    )
    versions = versions.withColumn("valid_to", F.lead("valid_from").over(by_key))
    return versions.select(
        *[F.col(quote(c)) for c in table.column_names],
        F.col(OP).alias("op"),
        F.col("valid_from"),
        F.col("valid_to"),
        (F.col("valid_to").isNull() & (F.col(OP) != "D")).alias("is_current"),
        F.col("version").cast(T.LongType()).alias("version"),
        F.col(FILE).alias("source_file"),
        F.col("source_row").cast(T.LongType()).alias("source_row"),
        F.col("_prev_version"),
    )


def open_versions(lake: Lake, table: TableSpec, keys_of: DataFrame) -> DataFrame:
    """Each batch key's open version in history, as ``_prev_op``, ``_prev_from``, ``_prev_version``."""
    history = lake.spark.table(lake.location.dotted(history_name(table))).filter(F.col("valid_to").isNull())
    return history.join(F.broadcast(keys_of), on=table.primary_key, how="left_semi").select(
        *[F.col(quote(k)) for k in table.primary_key],
        F.col("op").alias("_prev_op"),
        F.col("valid_from").alias("_prev_from"),
        F.col("version").alias("_prev_version"),
    )


def commit_history(
    context: ReplayContext, plan: RunPlan, table: TableSpec, changes: DataFrame, *, whole: bool = False
) -> int:
    """Close each touched key's open version and add the batch's versions, in one MERGE committed from the history
    plan's base snapshot with its record of applied files; returns the snapshot. ``table``: the run's columns;
    ``whole``: the history table is small enough to be rewritten whole (``commit.rewritten_whole``)."""
    run_time = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    use_sequence = context.config.dms.change_sequence_column is not None
    keys_of = changes.select(*[F.col(quote(k)) for k in table.primary_key]).distinct()
    latest = open_versions(context, table, keys_of)
    # Materialized: the source then no longer reads the table it merges into, and is deterministic.
    versions = new_versions(changes, latest, table, use_sequence, run_time).localCheckpoint(eager=True)
    record = Properties(run_properties(plan, None))
    transaction = Transaction(
        history_name(table),
        plan.base_snapshot_id,
        [versions_update(context.spark, table, versions, whole=whole)],
        lambda: record,
    )
    committed = commit_transaction(context, transaction)
    assert committed is not None  # the merge has no check that could give the commit up
    return committed.snapshot_id


def versions_update(spark: SparkSession, table: TableSpec, versions: DataFrame, *, whole: bool = False) -> Update:
    """Add ``versions`` (materialized, with each key's previous ``_prev_version`` or NULL) and close the open
    version each key's first new version follows, in one MERGE on the history table: a commit's update."""
    first = versions.filter(F.col("version") == F.coalesce(F.col("_prev_version"), F.lit(0)) + 1)
    closes = first.filter(F.col("_prev_version").isNotNull()).select(
        *[F.col(quote(k)) for k in table.primary_key],
        F.col("valid_from").alias("_close_at"),
        F.lit("close").alias(_ACTION),
    )
    inserts = versions.drop("_prev_version").withColumn(_ACTION, F.lit("insert"))
    source = inserts.unionByName(closes, allowMissingColumns=True)
    all_columns = [*table.column_names, *(name for name, _ in VERSION_COLUMNS)]
    on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in table.primary_key)
    names, values = ", ".join(quote(c) for c in all_columns), ", ".join("s." + quote(c) for c in all_columns)

    def merge(target: str) -> None:
        with temp_view(source, "history") as view, without_group_filter(spark, off=whole):
            spark.sql(
                f"MERGE INTO {target} t USING {view} s "
                f"ON {on} AND t.valid_to IS NULL AND s.{_ACTION} = 'close' "
                "WHEN MATCHED THEN UPDATE SET t.valid_to = s._close_at, t.is_current = false "
                f"WHEN NOT MATCHED AND s.{_ACTION} = 'insert' THEN INSERT ({names}) VALUES ({values})"
            )

    return Update("history merged", merge)


def row_history(lake: Lake, table: TableSpec, key: Mapping[str, str]) -> list[dict[str, object]]:
    """Every version of one row, oldest first; ``key`` values are given as text and cast to the key types."""
    frame = lake.spark.table(lake.location.dotted(history_name(table)))
    condition: Column = F.lit(True)
    for column in table.columns:
        if column.name in table.primary_key:
            condition = condition & (F.col(quote(column.name)) == F.lit(key[column.name]).cast(lake_type(column.type)))
    return [row.asDict() for row in frame.filter(condition).orderBy("version").collect()]
