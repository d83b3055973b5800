"""The commit protocol: one run's changes land in one Iceberg commit, only on the snapshot it planned from."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_lake.core.config import TableSpec
from cdc_lake.core.sql import quote
from cdc_lake.engine.iceberg_java import (
    branch_lineage,
    commit_properties,
    create_branch,
    empty_commit,
    fast_forward,
    remove_branch,
)
from cdc_lake.engine.reader import OP
from cdc_lake.engine.record import RUN_ID
from cdc_lake.engine.spark_types import lake_type
from cdc_lake.engine.tables import LakeLocation

log = logging.getLogger(__name__)

_RANGED_TYPES = (T.IntegerType, T.LongType, T.DecimalType, T.StringType, T.DateType)


@dataclass(frozen=True)
class Step:
    """One commit of a run on its branch: ``write`` given the branch's table name (None: a commit of properties
    only) and the snapshot properties, asked for once the steps before have run. ``holds``, when given, is
    checked on the branch right after the write: False gives the whole commit up, main untouched."""

    write: Callable[[str], object] | None
    properties: Callable[[], Mapping[str, str]]
    holds: Callable[[str], bool] | None = None


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
    keys = changed_keys(last_changes, table)
    with merge_step(spark, table, last_changes, keys, lambda: properties) as step:
        snapshot_id = commit_on_branch(spark, location, table.lake_table, base_snapshot_id, [step])
    assert snapshot_id is not None  # a merge step has no check that could give the commit up
    return snapshot_id


@dataclass(frozen=True)
class ChangedKeys:
    """How many keys a batch changes, and each key column's lowest and highest value among them."""

    count: int
    bounds: Mapping[str, tuple[Any, Any]]


def changed_keys(last_changes: DataFrame, table: TableSpec) -> ChangedKeys:
    """One aggregation over the batch's keys: their number, and the range of each key column whose values
    bind as parameters without a conversion (numbers, text, dates; not timestamps, which a zone could shift)."""
    types = {c.name: lake_type(c.type) for c in table.columns}
    ranged = [k for k in table.primary_key if isinstance(types[k], _RANGED_TYPES)]
    aggregates = [F.count(F.lit(1)).alias("keys")]
    for index, key in enumerate(ranged):
        aggregates += [F.min(quote(key)).alias(f"lo{index}"), F.max(quote(key)).alias(f"hi{index}")]
    row = last_changes.agg(*aggregates).first()
    assert row is not None
    bounds = {key: (row[f"lo{i}"], row[f"hi{i}"]) for i, key in enumerate(ranged)}
    return ChangedKeys(int(row["keys"]), bounds if row["keys"] else {})


@contextmanager
def merge_step(
    spark: SparkSession,
    table: TableSpec,
    last_changes: DataFrame,
    keys: ChangedKeys,
    properties: Callable[[], Mapping[str, str]],
) -> Iterator[Step]:
    """The MERGE INTO of one row per key (``_op`` = I/U/D) as a commit step, valid inside the block.

    The batch's key range joins the match condition (as bound parameters, never pasted into the text): a
    target row outside it cannot match, and Iceberg then skips every data file whose key statistics lie
    outside it, so changes to recent keys read the newest files only (tables are written in key order).
    """
    view = f"cdc_lake_changes_{uuid.uuid4().hex}"
    source = last_changes.select(*lake_columns(table), F.col(OP))
    source.createOrReplaceTempView(view)
    conditions = [f"t.{quote(k)} = s.{quote(k)}" for k in table.primary_key]
    arguments: dict[str, Any] = {}
    for index, (key, (low, high)) in enumerate(keys.bounds.items()):
        conditions.append(f"t.{quote(key)} BETWEEN :low{index} AND :high{index}")
        arguments |= {f"low{index}": low, f"high{index}": high}
    on = " AND ".join(conditions)
    clauses = [f"WHEN MATCHED AND s.{OP} = 'D' THEN DELETE"]
    if table.value_columns:
        assignments = ", ".join(f"t.{quote(c)} = s.{quote(c)}" for c in table.value_columns)
        clauses.append(f"WHEN MATCHED THEN UPDATE SET {assignments}")
    names = ", ".join(quote(c) for c in table.column_names)
    values = ", ".join(f"s.{quote(c)}" for c in table.column_names)
    clauses.append(f"WHEN NOT MATCHED AND s.{OP} <> 'D' THEN INSERT ({names}) VALUES ({values})")
    statement = f"MERGE INTO {{target}} t USING {view} s ON {on} " + " ".join(clauses)
    try:
        yield Step(lambda target: spark.sql(statement.format(target=target), arguments), properties)
    finally:
        spark.catalog.dropTempView(view)


def lake_columns(table: TableSpec) -> list[Column]:
    """The table's columns, as the lake table types them."""
    return [F.col(quote(c.name)).cast(lake_type(c.type)).alias(c.name) for c in table.columns]


def commit_on_branch(
    spark: SparkSession,
    location: LakeLocation,
    table_name: str,
    base_snapshot_id: int,
    steps: Sequence[Step],
    check: Callable[[], None] | None = None,
) -> int | None:
    """Run a run's steps (writes given the branch's table name) as one compare-and-swap on the table's main
    branch; returns the snapshot main moved to, or None when a step's ``holds`` was False (main untouched).
    ``check``, when given, runs once every step has, before main moves: raising there leaves main where it was.

    Iceberg validates a MERGE against the snapshot the MERGE itself read, which may be newer than the one
    this run planned from; a commit made in between would then be silently overwritten by a stale plan.
    So the writes go to a private branch created at ``base_snapshot_id``, and main is fast-forwarded to it
    only if main is still there (otherwise it fails and the run plans again): several steps land at once.
    When the last step's write changed nothing (e.g. only deletes of missing keys), its properties are still
    committed; earlier steps that wrote nothing leave no snapshot.
    """
    run_id = uuid.uuid4().hex
    branch = f"cdc_lake_run_{run_id}"
    table = location.named(table_name)
    dotted = location.dotted(table_name)
    create_branch(spark, dotted, branch, base_snapshot_id)
    head: int | None = base_snapshot_id
    landed = False
    try:
        for number, step in enumerate(steps, start=1):
            recorded = {**step.properties(), RUN_ID: run_id}
            before = head
            if step.write is not None:
                target = f"{table}.{quote('branch_' + branch)}"
                with commit_properties(spark, recorded):
                    step.write(target)
                if step.holds is not None and not step.holds(target):
                    return None
                head = branch_head(spark, location, table_name, branch)
            if number == len(steps) and (step.write is None or head is None or head == before):
                head = empty_commit(spark, dotted, recorded, branch)  # the record lands even when no row changed
        assert head is not None
        if check is not None:
            check()
        fast_forward(spark, dotted, branch, base_snapshot_id)
        landed = True
        return head
    finally:
        if not landed:
            _drop_branch(spark, dotted, branch)


def _drop_branch(spark: SparkSession, dotted: str, branch: str) -> None:
    # Whether the commit landed or not is already decided; a leftover branch only costs a ref.
    try:
        remove_branch(spark, dotted, branch)
    except (Py4JJavaError, PySparkException) as error:  # must not mask the run's own outcome
        log.warning("could not drop branch %s of %s (remove it by hand): %s", branch, dotted, str(error)[:300])


def branch_head(spark: SparkSession, location: LakeLocation, table_name: str, branch: str = "main") -> int | None:
    return next((snapshot_id for snapshot_id, _ in branch_lineage(spark, location.dotted(table_name), branch)), None)


def base_snapshot(spark: SparkSession, location: LakeLocation, table_name: str) -> int:
    """The table's current snapshot, which a run plans from; a new table first gets an empty one."""
    head = branch_head(spark, location, table_name)
    if head is not None:
        return head
    try:
        return empty_commit(spark, location.dotted(table_name), {}, None)
    except (Py4JJavaError, PySparkException):
        head = branch_head(spark, location, table_name)  # a concurrent run created it first
        if head is None:
            raise
        return head
