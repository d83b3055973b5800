"""Ordering change rows in DMS order and reducing each key to its last change (DataFrame → DataFrame)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdc_lake.core.config import DmsSettings, TableSpec
from cdc_lake.core.shapes import CHANGE_SEQ, DMS_TS, FILE, FILE_SEQ, OP, PHASE, PROBLEM, ROW, before_roles
from cdc_lake.core.sql import quote, sql_string
from cdc_lake.engine.spark_types import sql_over


def dms_order(use_change_sequence: bool) -> Column:
    """A sortable struct giving each change row its place in DMS order (``dms_order_sql``)."""
    return F.expr(dms_order_sql(use_change_sequence))


def dms_order_sql(use_change_sequence: bool) -> str:
    """``dms_order`` as Spark SQL.

    File order (LOAD files, then CDC files by name) then row order; AR_H_CHANGE_SEQ, when configured,
    orders CDC rows first. The DMS timestamp column is never used: full-load rows carry the transfer
    time, later than cached changes, and many changes share one timestamp.
    """
    if not use_change_sequence:
        return f"named_struct('file', {FILE_SEQ}, 'row', {ROW})"
    # Full-load rows carry no sequence; their phase puts them before every CDC row.
    sequence = f"CASE WHEN {PHASE} = 1 THEN lpad({CHANGE_SEQ}, 40, '0') END"
    return f"named_struct('phase', {PHASE}, 'sequence', {sequence}, 'file', {FILE_SEQ}, 'row', {ROW})"


def split_key_updates(changes: DataFrame, table: TableSpec, dms: DmsSettings) -> DataFrame:
    """Each UPDATE that changed the key becomes a delete of the old key and the update of the new one.

    DMS writes such an UPDATE as ``U`` with the new key; its before-image columns (when configured) hold the
    old one. The delete takes the update's place in DMS order; it never ties with another change of the old
    key, so chains (a→b, b→c in one batch) and keys that come back later replay in order.
    """
    befores = before_roles(dms, table)
    if not befores:
        return changes
    moved = (F.col(OP) == "U") & F.coalesce(
        *[
            F.when(F.col(b).isNotNull() & ~F.col(b).eqNullSafe(F.col(f"`{k}`")), F.lit(True))
            for b, k in zip(befores, table.primary_key, strict=True)
        ],
        F.lit(False),
    )
    before_of = dict(zip(table.primary_key, befores, strict=True))

    def old_row(column: str) -> Column:
        if column == OP:
            return F.lit("D")
        if column in before_of:
            return F.coalesce(F.col(before_of[column]), F.col(f"`{column}`"))
        if column in table.column_names:
            return F.lit(None).cast(changes.schema[column].dataType)
        return F.col(f"`{column}`")

    old_keys = changes.filter(moved & F.col(PROBLEM).isNull()).select(*[old_row(c).alias(c) for c in changes.columns])
    return changes.unionByName(old_keys).drop(*befores)


def last_change_per_key(changes: DataFrame, table: TableSpec, use_change_sequence: bool) -> DataFrame:
    """One row per primary key: the key's last change in DMS order, with its ``_op``.

    ``max_by`` over a unique order is deterministic and aggregates partially before the shuffle,
    cheaper than a window sort over all rows.
    """
    payload = F.struct(*[F.col(f"`{c}`") for c in table.value_columns], F.col(OP).alias(OP))
    reduced = changes.groupBy(*[F.col(f"`{k}`") for k in table.primary_key]).agg(
        F.max_by(payload, dms_order(use_change_sequence)).alias("_last")
    )
    return reduced.select(
        *[F.col(f"`{k}`") for k in table.primary_key],
        *[F.col("_last").getField(c).alias(c) for c in table.value_columns],
        F.col("_last").getField(OP).alias(OP),
    )


TOTALS = "_totals"


def last_change_per_key_in_one_task(
    changes: DataFrame, table: TableSpec, use_change_sequence: bool, ranged: Sequence[str]
) -> DataFrame:
    """``last_change_per_key``'s rows, each carrying the batch's totals in ``_totals``: the change rows of each kind,
    the bad ones, the newest DMS timestamp, the keys, those left with a row (last change not a delete), and the
    lowest and highest value of each ``ranged`` key column.

    For a small batch: every row goes to one task (``coalesce(1)``), where Spark needs no shuffle to group or to
    total them, so reading, checking, counting and reducing are one stage of one job. The query is one SQL text:
    a small batch's cost is round trips to the JVM, and built of functions it took about 250.
    """
    keys = ", ".join(quote(k) for k in table.primary_key)
    payload = ", ".join(f"{sql_string(c)}, {quote(c)}" for c in [*table.value_columns, OP])
    per_op = [f"count(CASE WHEN {OP} = {sql_string(op)} THEN 1 END) AS _{op}" for op in ("I", "U", "D")]
    totals = [
        *[f"'{op}', sum(_{op}) OVER ()" for op in ("I", "U", "D")],
        "'bad', sum(_bad) OVER ()",
        "'newest', max(_newest) OVER ()",  # the one task holds every key: no exchange
        "'keys', count(1) OVER ()",
        f"'upserts', count(CASE WHEN _last.{OP} <> 'D' THEN 1 END) OVER ()",
        *[f"'lo{i}', min({quote(k)}) OVER ()" for i, k in enumerate(ranged)],
        *[f"'hi{i}', max({quote(k)}) OVER ()" for i, k in enumerate(ranged)],
    ]
    values = [f"_last.{quote(c)} AS {quote(c)}" for c in [*table.value_columns, OP]]

    def query(view: str) -> str:
        return (
            f"SELECT {keys}, {', '.join(values)}, named_struct({', '.join(totals)}) AS {TOTALS} FROM ("
            f"SELECT {keys}, max_by(named_struct({payload}), {dms_order_sql(use_change_sequence)}) AS _last, "
            f"{', '.join(per_op)}, count({PROBLEM}) AS _bad, max({DMS_TS}) AS _newest FROM {view} GROUP BY {keys})"
        )

    return sql_over(changes.coalesce(1), query, "one_task")


@dataclass(frozen=True)
class ChangeCounts:
    """How many change rows of each kind a batch held."""

    inserts: int
    updates: int
    deletes: int
    newest_change: str | None = None  # the newest DMS timestamp-column value, when the column is configured

    @property
    def rows(self) -> int:
        return self.inserts + self.updates + self.deletes

    def __add__(self, other: ChangeCounts) -> ChangeCounts:
        newest = max(filter(None, (self.newest_change, other.newest_change)), default=None)
        return ChangeCounts(
            self.inserts + other.inserts, self.updates + other.updates, self.deletes + other.deletes, newest
        )

    def as_dict(self) -> dict[str, int]:
        return {"I": self.inserts, "U": self.updates, "D": self.deletes}


def count_changes(changes: DataFrame) -> ChangeCounts:
    row = changes.agg(
        F.count(F.when(F.col(OP) == "I", 1)).alias("I"),
        F.count(F.when(F.col(OP) == "U", 1)).alias("U"),
        F.count(F.when(F.col(OP) == "D", 1)).alias("D"),
        F.max(DMS_TS).alias("newest"),
    ).first()
    assert row is not None
    return ChangeCounts(inserts=row["I"], updates=row["U"], deletes=row["D"], newest_change=row["newest"])


def describe_problems(changes: DataFrame, limit: int = 10, *, numbered: bool = False) -> tuple[list[str], int]:
    """Messages for the first bad rows (file, 1-based row, column, fault, value) and the total count.

    Row numbers are positions among the file's data rows (records, so a quoted multi-line value counts
    once). CSV positions come from the in-order read of the whole file; Parquet ones are exact indices.
    ``numbered``: ``_row`` is that position already (rows kept apart from their files, as quarantined ones).
    """
    bad = changes.filter(F.col(PROBLEM).isNotNull())
    total = bad.count()
    if total == 0:
        return [], 0
    line = F.col(ROW)
    if not numbered:
        bad = bad.join(changes.groupBy(FILE).agg(F.min(ROW).alias("_first")), on=FILE)
        line = F.col(ROW) - F.col("_first") + 1
    located = bad.select(FILE, line.alias("_line"), PROBLEM).orderBy(F.col(FILE), F.col("_line")).limit(limit)
    messages = []
    for row in located.collect():
        problem = row[PROBLEM]
        value = "NULL" if problem["value"] is None else repr(problem["value"])
        messages.append(
            f"{row[FILE]}: row {row['_line']}, column {problem['column']}: {problem['fault']} (value {value})"
        )
    return messages, total
