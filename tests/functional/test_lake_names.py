"""Source names as Oracle and SQL Server write them, replayed on both lake paths: the lake tables and columns get
lower-case, Athena-safe names, each column keeps its source name as its doc, a column added at the source with a
mixed-case name arrives under its lake name, and the lake equals the generator's tables. A local lake made
before names were mapped is refused with the command that moves it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cdc_lake.core.config import PipelineConfig, parse_config
from cdc_lake.engine.iceberg_java import table_properties
from cdc_lake.engine.reload import reload_table
from cdc_lake.engine.tables import LakeLocation
from cdc_lake.local.generator import GeneratorSpec, SchemaChange, generate, land_order
from cdc_lake.local.runtime import LocalPipeline, failed_runs
from tests.support.lake import Lake, assert_lake_equals_oracle, on_both_paths

pytestmark = [pytest.mark.spark, pytest.mark.slow]

# Oracle: UPPER case, $ and #; SQL Server: MixedCase, a space, a leading digit, a reserved word.
NAMES_CONFIG: dict[str, Any] = {
    "dms": {"add_column_name": True, "timestamp_column": "DMS_TIMESTAMP"},
    "tables": [
        {
            "name": "HR.EMPLOYEES",
            "primary_key": ["EMPLOYEE_ID"],
            "columns": [
                {"name": "EMPLOYEE_ID", "type": "int", "nullable": False},
                {"name": "LAST_NAME", "type": "varchar(25)"},
                {"name": "SALARY$", "type": "decimal(8,2)"},
                {"name": "DEPT#", "type": "bigint"},
                {"name": "HireDate", "type": "date"},  # added at the source after the first CDC file
            ],
        },
        {
            "name": "dbo.OrderLines",
            "primary_key": ["OrderID", "Line No"],
            "columns": [
                {"name": "OrderID", "type": "bigint", "nullable": False},
                {"name": "Line No", "type": "int", "nullable": False},
                {"name": "2ndReviewer", "type": "string"},
                {"name": "order", "type": "string"},
                {"name": "UnitPrice", "type": "double"},
                {"name": "Quantity", "type": "bigint"},  # int until after the second CDC file
            ],
        },
    ],
}
LAKE_COLUMNS = {
    "HR.EMPLOYEES": ("hr_employees", ["employee_id", "last_name", "salary_", "dept_", "hiredate"]),
    "dbo.OrderLines": ("dbo_orderlines", ["orderid", "line_no", "_2ndreviewer", "order", "unitprice", "quantity"]),
}


def names_config(database: str) -> PipelineConfig:
    return parse_config(NAMES_CONFIG | {"lake": {"database": database}})


def replay_generated(lake: Lake, config: PipelineConfig, tmp_path: Path) -> tuple[LocalPipeline, Path, list[Any]]:
    """The generated source landed and delivered through the local pipeline; its runs' failures."""
    spec = GeneratorSpec(
        seed=11, initial_rows=60, cdc_files=3, changes_per_file=25, cached_changes=3,
        schema_changes=(
            SchemaChange("HR.EMPLOYEES", 0, "add", "hiredate"),
            SchemaChange("dbo.OrderLines", 1, "widen", "quantity", "int"),
        ),
    )  # fmt: skip
    generated = generate(config, tmp_path / "source", spec)
    lake.land_from(generated.landing, land_order(generated))
    pipeline = lake.pipeline(config)
    return pipeline, generated.expected, failed_runs(pipeline.deliver(land_order(generated)))


@on_both_paths
def test_oracle_and_sql_server_names_replay_into_lake_names(lake: Lake, tmp_path: Path) -> None:
    config = names_config(lake.database)
    pipeline, expected, failed = replay_generated(lake, config, tmp_path)
    assert not failed, [r.error for r in failed]
    # The files carry the source's names, as DMS writes them.
    header = next((lake.landing / "HR" / "EMPLOYEES").glob("LOAD*")).read_text().splitlines()[0]
    assert header == "DMS_TIMESTAMP,EMPLOYEE_ID,LAST_NAME,SALARY$,DEPT#"

    assert_lake_equals_oracle(pipeline, expected, tmp_path / "export")
    for name, (lake_table, columns) in LAKE_COLUMNS.items():
        table = config.table(name)
        assert table.lake_table == lake_table
        schema = lake.spark.table(lake.table(lake_table)).schema
        assert [f.name for f in schema.fields] == columns
        docs = {f.name: f.metadata.get("comment") for f in schema.fields}
        assert docs == {c.name: f"source column {c.source}" for c in table.columns}, name
        assert table_properties(lake.spark, lake.location.dotted(lake_table))["cdc-lake.source-table"] == name
    widened = lake.spark.table(lake.table("dbo_orderlines")).schema["quantity"].dataType.simpleString()
    assert widened == "bigint"


def test_a_local_lake_with_a_table_named_before_the_mapping_is_refused_and_moved_by_the_command_it_names(
    lake: Lake, tmp_path: Path
) -> None:
    config = names_config(lake.database)
    location = LakeLocation(lake.catalog, lake.database)
    lake.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {lake.catalog}.{lake.database}")
    lake.spark.sql(f"CREATE TABLE {location.named('HR_EMPLOYEES')} (EMPLOYEE_ID int) USING iceberg")
    pipeline, expected, failed = replay_generated(lake, config, tmp_path)
    message = "\n".join(str(r.error) for r in failed)
    assert f"{location.dotted('HR_EMPLOYEES')}: this lake table was made before lake names were lower case" in message
    assert "`cdc-lake reload -t HR.EMPLOYEES --since 19700101-000000`" in message
    assert not lake.spark.catalog.tableExists(location.dotted("hr_employees"))
    assert lake.spark.catalog.tableExists(location.dotted("dbo_orderlines")), "the other table is not held back"
    # The command the refusal names builds the table under its lake name; replay then goes on from there.
    reload_table(pipeline.context, config.table("HR.EMPLOYEES"), since="19700101-000000")
    assert not failed_runs(pipeline.run_all())
    assert_lake_equals_oracle(pipeline, expected, tmp_path / "export")
