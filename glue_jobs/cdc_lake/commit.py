"""The commit protocol: one run's changes land in one Iceberg commit, only on the snapshot it planned from."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from typing import TypeVar

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_lake.config import TableSpec
from cdc_lake.exceptions import CommitConflictError
from cdc_lake.iceberg_java import commit_properties, empty_commit
from cdc_lake.reader import OP
from cdc_lake.record import RUN_ID
from cdc_lake.spark_types import lake_type
from cdc_lake.sql import quote, sql_string
from cdc_lake.tables import LakeLocation

log = logging.getLogger(__name__)

# What Iceberg says when another commit won the race: the run plans again from the newer snapshot.
_CONFLICTS = (
    "org.apache.iceberg.exceptions.ValidationException",
    "org.apache.iceberg.exceptions.CommitFailedException",
    "Found conflicting files",
    "Found new conflicting",
    "Cannot commit, found",
    "Missing required files to delete",
    "Cannot fast-forward",
)


def is_commit_conflict(error: BaseException) -> bool:
    text = str(error)
    return any(marker in text for marker in _CONFLICTS)


Result = TypeVar("Result")


def with_commit_retries(table_name: str, retries: int, attempt: Callable[[], Result]) -> tuple[Result, int]:
    """Run ``attempt`` (plan, read, commit) until its commit is not beaten by a concurrent one; returns its
    result and the number of attempts. The loser of a race plans again from the winner's snapshot."""
    attempts = retries + 1
    for number in range(1, attempts + 1):
        try:
            return attempt(), number
        except (Py4JJavaError, PySparkException) as error:
            if not is_commit_conflict(error):
                raise
            if number == attempts:
                raise CommitConflictError(
                    f"{table_name}: still conflicting with concurrent commits after {attempts} attempts"
                ) from error
            log.warning("%s: concurrent commit, planning again (attempt %d/%d)", table_name, number, attempts)
            time.sleep(min(0.2 * 2**number, 5.0))
    raise AssertionError("unreachable: the last attempt returns or raises")


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
            head = empty_commit(spark, location.dotted(table_name), {**properties, RUN_ID: run_id}, branch)
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
    except (Py4JJavaError, PySparkException) as error:  # must not mask the run's own outcome
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
        return empty_commit(spark, location.dotted(table_name), {}, None)
    except (Py4JJavaError, PySparkException):
        head = branch_head(spark, location, table_name)  # a concurrent run created it first
        if head is None:
            raise
        return head
