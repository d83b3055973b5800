"""A small batch committed through Iceberg's own ``RowDelta``: no Spark SQL planning and one catalog read.

Spark's ``MERGE INTO`` plans, analyses and loads its target (four ``GetTable`` on Glue) and runs three jobs however few
its rows; the branch protocol around it (``commit.commit_transaction``) makes three metadata commits. A batch of a
few hundred keys needs none of that: the keys' rows are found in the table's key index (``key_index``), or in a
table too large to index by one Spark read of the files their range can touch, their positions written as one
position delete file, the keys' new rows as one data file, and both committed with the batch's record in one
metadata commit, only while main is still at the snapshot the batch planned from. The table that results is the
MERGE's (``tests/functional/test_row_delta.py`` runs both on the same changes); what it cannot write
(partitioned, format 3, keys of other types, a table with history or rejects) keeps the MERGE.

A table ``auto`` writes copy-on-write (a small one) takes the row delta too: its delete files hold a batch's few
rows, cheap to apply in a scan of a table that small, and upkeep folds them in at ``compact_at_delete_files``;
the MERGE would rewrite the files the batch touches through three jobs and three metadata commits. A table whose
write mode is set to ``copy-on-write`` keeps the MERGE at every batch, for readers that must never apply a delete
file.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from cdc_lake.core.config import TableSpec
from cdc_lake.core.exceptions import TableMovedError
from cdc_lake.core.shapes import OP
from cdc_lake.core.sql import quote
from cdc_lake.engine.commit import ChangedKeys, Committed, R, Transaction, kept_record, key_range, lake_columns
from cdc_lake.engine.context import LakeContext
from cdc_lake.engine.iceberg_errors import is_file_gone, root_cause
from cdc_lake.engine.iceberg_java import forget_commit
from cdc_lake.engine.iceberg_row_delta import (
    RowDelta,
    RowDeltaTarget,
    commit_row_delta,
    key_positions,
    row_delta_target,
    snapshot_records,
    wire_type,
)
from cdc_lake.engine.key_index import KEY_INDEXES, IndexedTable, RowDeltaKeys, scanned_positions
from cdc_lake.engine.record import RUN_ID
from cdc_lake.engine.spark_types import select_sql


def row_delta_target_of(context: LakeContext, table: TableSpec, keys: ChangedKeys) -> RowDeltaTarget | None:
    """The lake table when its batch of ``keys`` may be a row delta (``lake.row_delta_keys``, and what
    ``iceberg_java.row_delta_target`` asks of the table); None: the MERGE."""
    if not 0 < keys.count <= context.config.lake.row_delta_keys:
        return None
    auto = context.config.write_mode(table) == "auto"
    return row_delta_target(
        context.spark, context.location.dotted(table.lake_table), table.primary_key, copy_on_write=auto
    )


class BatchChanges(Protocol):
    """A batch's changes to its lake table as the row delta takes them: the keys' ``ChangedKeys``, each changed
    key's last change collected (``collected``), and the keys as a DataFrame for a table too large to index."""

    @property
    def table(self) -> TableSpec: ...

    @property
    def changed(self) -> ChangedKeys: ...

    def collected(self, target: RowDeltaTarget) -> pa.Table:
        """Each key (``_key0`` …), whether it keeps a row (``_kept``), and that row in the lake's order, each
        column of its ``wire_type``."""
        ...

    def keys_frame(self, spark: SparkSession) -> DataFrame:
        """The changed keys as the lake's key columns."""
        ...


@dataclass(frozen=True)
class SparkChanges:
    """``BatchChanges`` reduced by Spark: ``last_changes``, a local relation, is read without a job."""

    table: TableSpec
    last_changes: DataFrame
    changed: ChangedKeys

    def collected(self, target: RowDeltaTarget) -> pa.Table:
        # One collect of the local relation: each key, whether it keeps a row, and that row as it is written.
        table = self.table
        wanted = [
            *(f"{quote(k)} AS _key{i}" for i, k in enumerate(table.primary_key)),
            f"{OP} <> 'D' AS _kept",
            *_in_lake_order(table, target),
        ]
        return _collected(select_sql(self.last_changes, wanted), target, self.changed.count)

    def keys_frame(self, spark: SparkSession) -> DataFrame:
        return select_sql(self.last_changes, lake_columns(self.table, self.table.primary_key))


def commit_changes(
    context: LakeContext, target: RowDeltaTarget, changes: BatchChanges, transaction: Transaction[R]
) -> Committed[R]:
    """Commit each key's last change as ``transaction`` would (its base, record and requirements; its updates are
    the MERGE's, not used here)."""
    table = changes.table
    spark, base = context.spark, transaction.base_snapshot_id
    width = len(table.primary_key)
    collected = changes.collected(target)
    keys = _keys(collected, width)
    kept = collected.filter(collected.column(width))
    indexed = _indexed(context, table)
    dotted = indexed.dotted_name
    try:
        positions = _indexed_positions(indexed, target, base, keys, changes)
        if positions is None:
            positions = key_positions(spark, target, base, table.primary_key, keys)
    except Py4JJavaError as error:
        # Planned from this process's own last commit (``kept_commit``): another tool's compaction and expiry since
        # removed files that metadata names. The table moved on: the batch plans again from it as it is.
        if target.reading is target.table or not is_file_gone(error):
            raise
        forget_commit(spark, dotted)
        gone = root_cause(error)
        raise TableMovedError(f"{dotted}: files of the metadata this run last committed are gone: {gone}") from error
    rows = kept.select(list(range(width + 1, kept.num_columns)))
    row_keys = _keys(kept, width)  # the keys of the data file's rows, position by position
    for requirement in transaction.requirements:
        requirement()
    made = transaction.record()
    summary = {**made.properties, RUN_ID: uuid.uuid4().hex}

    def committed(snapshot_id: int, data_file: str | None) -> None:
        KEY_INDEXES.advance(indexed, base, snapshot_id, RowDeltaKeys(keys, data_file, row_keys))

    record = kept_record(context, table.lake_table, summary)
    delta = RowDelta(base, rows, positions, summary, record, committed)
    return Committed(commit_row_delta(spark, dotted, target, delta), made)


# A batch of more keys is collected as Arrow: one small Spark job, and no Python object per value, where Python's
# rows took 0.2 s for 10,000 keys; a batch of fewer, as Python's rows, without a job.
ARROW_COLLECT_KEYS = 1000


def _collected(frame: DataFrame, target: RowDeltaTarget, keys: int) -> pa.Table:
    """``frame`` (the keys, whether each keeps a row, and the lake columns) on the driver as Arrow, each lake column
    of its ``wire_type``."""
    if keys > ARROW_COLLECT_KEYS:
        return pa.Table.from_batches(frame._collect_as_arrow())
    rows = frame.collect()
    width = len(frame.columns) - len(target.columns)
    types = [None] * width + [wire_type(f.dataType) for f in target.columns]
    return pa.table([pa.array([row[i] for row in rows], type=t) for i, t in enumerate(types)], names=frame.columns)


def _keys(collected: pa.Table, width: int) -> list[tuple[Any, ...]]:
    return list(zip(*(collected.column(i).to_pylist() for i in range(width)), strict=True))


def _indexed_positions(
    indexed: IndexedTable, target: RowDeltaTarget, base: int, keys: list[tuple[Any, ...]], changes: BatchChanges
) -> list[tuple[str, int]] | None:
    """The keys' rows at ``base``: from the table's key index (``key_index``), or where the table is too large to
    index, by one Spark read (``BatchChanges.scanned_positions``); None where its snapshot could not be read in
    bulk (the generic reader then says why, or finds them)."""
    try:
        found = KEY_INDEXES.positions(indexed, base, snapshot_records(target, base), keys)
        if found is not None:
            return found
        keys_frame = changes.keys_frame(indexed.spark)
        return scanned_positions(indexed, base, keys_frame, key_range(changes.table, changes.changed))
    except (Py4JJavaError, AnalysisException):
        KEY_INDEXES.forget(indexed)
        return None


def _indexed(context: LakeContext, table: TableSpec) -> IndexedTable:
    name = table.lake_table
    return IndexedTable(
        context.spark, context.location.dotted(name), context.location.named(name), tuple(table.primary_key)
    )


def _in_lake_order(table: TableSpec, target: RowDeltaTarget) -> list[str]:
    """The new rows' columns in the lake table's order, as it types them, each as ``RowDelta.rows`` takes it: a
    column the lake keeps and the run does not (dropped at the source) is NULL."""
    named = {c.name.lower(): c.name for c in table.columns}
    columns = []
    for field in target.columns:
        kind = field.dataType.simpleString()
        source = named.get(field.name.lower())
        value = f"CAST({quote(source) if source is not None else 'NULL'} AS {kind})"
        # An instant as its microseconds: Python's datetime would pass through the driver's local time zone.
        value = f"unix_micros({value})" if isinstance(field.dataType, T.TimestampType) else value
        columns.append(f"{value} AS {quote(field.name)}")
    return columns
