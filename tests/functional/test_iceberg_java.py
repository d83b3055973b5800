"""The Java-internals access of ``cdc_lake.iceberg_java`` still works on the Iceberg the runtime loads.

If an Iceberg upgrade renames or removes what it reaches, these fail by name before any replay test
fails obscurely.
"""

from __future__ import annotations

import pytest

from cdc_lake.iceberg_java import COMMIT_METADATA_CLASS, COMMIT_PROPERTIES_FIELD, commit_properties, empty_commit
from cdc_lake.sql import quote

pytestmark = pytest.mark.spark


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
