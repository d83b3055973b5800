"""The Java-internals access of ``cdc_lake.engine.iceberg_java`` still works on the Iceberg the runtime loads.

If an Iceberg upgrade renames or removes what it reaches, these fail by name before any replay test
fails obscurely.
"""

from __future__ import annotations

import threading

import pytest

from cdc_lake.core.exceptions import TableMovedError
from cdc_lake.core.sql import quote
from cdc_lake.engine.iceberg_errors import is_already_exists, is_commit_conflict
from cdc_lake.engine.iceberg_java import (
    COMMIT_METADATA_CLASS,
    COMMIT_PROPERTIES_FIELD,
    branch_lineage,
    commit_properties,
    create_branch,
    empty_commit,
    fast_forward,
    has_table,
    remove_branch,
)

pytestmark = [pytest.mark.spark, pytest.mark.each_runtime]


@pytest.fixture
def table(spark, database: str) -> str:
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.{quote(database)}")
    name = f"lake.{quote(database)}.probe"
    spark.sql(f"CREATE TABLE {name} (id bigint, note string) USING iceberg TBLPROPERTIES ('format-version'='2')")
    return name


def summaries(spark, table: str) -> list[dict[str, str]]:
    return [
        row["summary"] for row in spark.sql(f"SELECT summary FROM {table}.snapshots ORDER BY committed_at").collect()
    ]


def test_commit_metadata_field_is_where_iceberg_reads_commit_properties(spark) -> None:
    jvm = spark.sparkContext._jvm
    holder = jvm.java.lang.Class.forName(
        COMMIT_METADATA_CLASS, True, jvm.java.lang.Thread.currentThread().getContextClassLoader()
    )
    field_ = holder.getDeclaredField(COMMIT_PROPERTIES_FIELD)
    assert field_.getType().getName() == "java.lang.ThreadLocal"


def test_commit_properties_reach_the_snapshot_summary_of_a_sql_write(spark, table: str) -> None:
    with commit_properties(spark, {"cdc-lake.probe": "sql"}):
        spark.sql(f"INSERT INTO {table} VALUES (1, 'a')")
    spark.sql(f"INSERT INTO {table} VALUES (2, 'b')")
    first, second = summaries(spark, table)
    assert first["cdc-lake.probe"] == "sql"
    assert "cdc-lake.probe" not in second  # the properties end with the block


def test_empty_commit_makes_a_snapshot_with_only_properties(spark, database: str, table: str) -> None:
    spark.sql(f"INSERT INTO {table} VALUES (1, 'a')")
    snapshot = empty_commit(spark, f"lake.{database}.probe", {"cdc-lake.probe": "empty"}, None)
    latest = spark.sql(f"SELECT snapshot_id, summary FROM {table}.snapshots ORDER BY committed_at DESC LIMIT 1").first()
    assert latest["snapshot_id"] == snapshot
    assert latest["summary"]["cdc-lake.probe"] == "empty"
    assert latest["summary"].get("added-records", "0") == "0"
    assert sorted(tuple(r) for r in spark.table(table).collect()) == [(1, "a")]


def test_branch_lineage_walks_from_the_head_through_ancestors(spark, database: str, table: str) -> None:
    dotted = f"lake.{database}.probe"
    assert list(branch_lineage(spark, dotted)) == []
    for value in ("a", "b"):
        with commit_properties(spark, {"cdc-lake.probe": value}):
            spark.sql(f"INSERT INTO {table} VALUES (1, '{value}')")
    lineage = list(branch_lineage(spark, dotted))
    ids = [row["snapshot_id"] for row in spark.sql(f"SELECT snapshot_id FROM {table}.history").collect()]
    assert [snapshot_id for snapshot_id, _ in lineage] == list(reversed(ids))
    assert [summary.get("cdc-lake.probe") for _, summary in lineage] == ["b", "a"]


def test_fast_forward_moves_main_only_from_the_expected_snapshot(spark, database: str, table: str) -> None:
    dotted = f"lake.{database}.probe"
    base = empty_commit(spark, dotted, {}, None)
    spark.sql(f"ALTER TABLE {table} CREATE BRANCH run AS OF VERSION {base}")
    spark.sql(f"INSERT INTO {table}.branch_run VALUES (1, 'run')")
    spark.sql(f"INSERT INTO {table} VALUES (2, 'concurrent')")  # main moves on
    with pytest.raises(TableMovedError):
        fast_forward(spark, dotted, "run", base)
    moved = next(branch_lineage(spark, dotted))[0]
    assert sorted(tuple(r) for r in spark.table(table).collect()) == [(2, "concurrent")]
    spark.sql(f"ALTER TABLE {table} CREATE BRANCH run2 AS OF VERSION {moved}")
    spark.sql(f"INSERT INTO {table}.branch_run2 VALUES (3, 'run2')")
    fast_forward(spark, dotted, "run2", moved)
    assert sorted(tuple(r) for r in spark.table(table).collect()) == [(2, "concurrent"), (3, "run2")]
    refs = {row["name"] for row in spark.sql(f"SELECT name FROM {table}.refs").collect()}
    assert refs == {"main", "run"}  # the landed branch is removed with the same commit


def test_branches_made_while_main_moves_never_move_main_back(spark, database: str, table: str) -> None:
    """Runs create and remove their branches while other runs move main: main must only move forward."""
    dotted = f"lake.{database}.probe"
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('commit.retry.num-retries'='10')")
    base = empty_commit(spark, dotted, {}, None)
    errors: list[BaseException] = []

    def branches(worker: int) -> None:
        try:
            for number in range(6):
                create_branch(spark, dotted, f"w{worker}_{number}", base)
                remove_branch(spark, dotted, f"w{worker}_{number}")
        except BaseException as error:  # surfaced below
            errors.append(error)

    workers = [threading.Thread(target=branches, args=(w,)) for w in range(4)]
    for worker in workers:
        worker.start()
    for value in range(12):
        empty_commit(spark, dotted, {"cdc-lake.probe": str(value)}, None)
    for worker in workers:
        worker.join()
    assert not errors, errors
    head_summary = next(branch_lineage(spark, dotted))[1]
    assert head_summary.get("cdc-lake.probe") == "11"
    assert {row["name"] for row in spark.sql(f"SELECT name FROM {table}.refs").collect()} == {"main"}


@pytest.mark.parametrize(
    ("statement", "exists"),
    [
        ("CREATE TABLE {table} (id bigint) USING iceberg", True),
        ("ALTER TABLE {table} ADD COLUMN NOTE string", True),  # a column another run added first
        ("ALTER TABLE {table} ADD COLUMN id string", True),
        ("CREATE TABLE {table}_other (id bigint, id bigint) USING iceberg", False),
        ("ALTER TABLE {table} ALTER COLUMN note TYPE bigint", False),
    ],
)
def test_what_another_run_created_first_is_told_by_its_class_or_condition(spark, table: str, statement, exists) -> None:
    with pytest.raises(Exception) as failed:
        spark.sql(statement.format(table=table))
    assert is_already_exists(failed.value) is exists
    assert not is_commit_conflict(failed.value)


def test_has_table_tells_a_kept_table_dropped_or_made_anew(spark, database: str, table: str) -> None:
    other = f"lake.{quote(database)}.never_made"
    assert has_table(spark, table) and has_table(spark, table)  # the second: the kept table, refreshed
    assert not has_table(spark, other)
    assert not has_table(spark, f"lake.{quote(database + '_missing')}.probe")  # nor its namespace
    spark.sql(f"DROP TABLE {table}")
    assert not has_table(spark, table)
    spark.sql(f"CREATE TABLE {table} (id bigint) USING iceberg")
    assert has_table(spark, table)
