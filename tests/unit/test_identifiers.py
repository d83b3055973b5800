"""Source names to lake names: each shape real schemas have, what it becomes, and the collisions refused with the
override to use, by the configuration (check-config), by a file's header and by config-from-source."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from cdc_lake.core.config import parse_config
from cdc_lake.core.dms_files import parse_key
from cdc_lake.core.exceptions import ConfigError, SchemaChangeError
from cdc_lake.core.identifiers import LAKE_NAME, lake_name, lake_name_problem
from cdc_lake.core.shapes import named_layout
from cdc_lake.ops.source_catalog import CatalogColumn, CatalogTable, Origin, config_text

# (source name, lake name): Oracle, SQL Server / quoted PostgreSQL, and what real schemas hold besides.
SHAPES = [
    ("EMPLOYEE_ID", "employee_id"),  # Oracle: UPPER case
    ("OrderDate", "orderdate"),  # SQL Server, quoted PostgreSQL: MixedCase
    ("AMOUNT$", "amount_"),  # Oracle allows $ and #
    ("ORDER#", "order_"),
    ("First Name", "first_name"),  # a quoted identifier with a space
    ("2FA Enabled", "_2fa_enabled"),  # a leading digit
    ("order", "order"),  # a reserved word stays: every engine reads it quoted
    ("naïve", "na_ve"),  # outside a-z: Glue and Athena take none
    ("already_lake_1", "already_lake_1"),
]


@pytest.mark.parametrize(("source", "lake"), SHAPES)
def test_each_name_shape_maps_to_a_lake_name(source: str, lake: str) -> None:
    assert lake_name(source) == lake
    assert lake_name_problem(lake) is None


@given(st.text(min_size=1, max_size=40).filter(lambda s: s.strip()))
def test_the_mapping_gives_lake_names_and_keeps_them(source: str) -> None:
    mapped = lake_name(source)
    assert LAKE_NAME.match(mapped)
    assert lake_name(mapped) == mapped


def config(columns: list[dict[str, Any]], **table: Any) -> dict[str, Any]:
    key = table.pop("primary_key", [columns[0]["name"]])
    return {"tables": [{"name": "HR.EMPLOYEES", "primary_key": key, "columns": columns, **table}]}


def test_a_table_keeps_its_source_names_and_gets_lake_names() -> None:
    columns = [{"name": source, "type": "string"} for source, _ in SHAPES]
    loaded = parse_config(config(columns, partition_by=["bucket(4, EMPLOYEE_ID)"]))
    table = loaded.tables[0]
    assert table.lake_table == "hr_employees"
    assert table.column_names == [lake for _, lake in SHAPES]
    assert table.source_column_names == [source for source, _ in SHAPES]
    assert table.primary_key == ["employee_id"]
    assert table.source_primary_key == ["EMPLOYEE_ID"]
    assert table.partition_by == ["bucket(4, employee_id)"]
    # The validated configuration, dumped as the stack ships it, loads to the same.
    assert parse_config(loaded.model_dump(mode="json")) == loaded


def test_overrides_set_lake_names_and_must_be_lake_names() -> None:
    columns = [{"name": "ID", "type": "int"}, {"name": "Name", "lake_name": "full_name", "type": "string"}]
    table = parse_config(config(columns, target="employees")).tables[0]
    assert (table.lake_table, table.column_names) == ("employees", ["id", "full_name"])
    with pytest.raises(ConfigError, match=r"target 'Employees' is not a lake name.*for example 'employees'"):
        parse_config(config(columns, target="Employees"))
    bad = [{"name": "ID", "type": "int"}, {"name": "Name", "lake_name": "full name", "type": "string"}]
    with pytest.raises(ConfigError, match=r"lake_name of 'Name': 'full name' is not a lake name"):
        parse_config(config(bad))
    with pytest.raises(ConfigError, match=r"database 'HR' is not a lake name"):
        parse_config(config(columns) | {"lake": {"database": "HR"}})


@pytest.mark.parametrize(("first", "second"), [("Name", "NAME"), ("ORDER#", "ORDER$"), ("first name", "First_Name")])
def test_two_columns_of_one_lake_name_are_refused_naming_both_and_the_override(first: str, second: str) -> None:
    columns = [{"name": "ID", "type": "int"}, {"name": first, "type": "string"}, {"name": second, "type": "string"}]
    with pytest.raises(ConfigError) as refused:
        parse_config(config(columns))
    message = str(refused.value)
    assert f"columns {first!r} and {second!r} both map to the lake column {lake_name(first)!r}" in message
    assert "set `lake_name` on one of them" in message
    columns[2]["lake_name"] = f"{lake_name(second)}_2"
    assert parse_config(config(columns)).tables[0].column_names[2] == f"{lake_name(second)}_2"


def test_two_tables_of_one_lake_name_are_refused_naming_both_and_the_override() -> None:
    tables = [
        {"name": name, "primary_key": ["ID"], "columns": [{"name": "ID", "type": "int"}]}
        for name in ("HR.Employees", "hr.EMPLOYEES")
    ]
    with pytest.raises(ConfigError, match=r"tables 'HR.Employees' and 'hr.EMPLOYEES' both map to the lake table "
                       r"'hr_employees'.*set `target` on one of them"):  # fmt: skip
        parse_config({"tables": tables})


def test_a_header_reads_by_source_name_and_refuses_two_fields_of_one_lake_name() -> None:
    loaded = parse_config(config([{"name": "EMPLOYEE_ID", "type": "int"}, {"name": "ORDER#", "type": "int"}]))
    table, key = loaded.tables[0], parse_key("HR/EMPLOYEES/20250101-000000000.csv", loaded)
    layout = named_layout(["Op", "EMPLOYEE_ID", "ORDER#", "New Col"], [None] * 4, key, table, loaded.dms)
    assert layout.names[1:] == ("employee_id", "order_", "new_col")
    assert [layout.field(n) for n in layout.names[1:]] == ["EMPLOYEE_ID", "ORDER#", "New Col"]
    with pytest.raises(SchemaChangeError) as refused:
        named_layout(["Op", "EMPLOYEE_ID", "ORDER#", "ORDER$"], [None] * 4, key, table, loaded.dms)
    assert "fields 'ORDER#' and 'ORDER$' both map to the lake column 'order_'" in str(refused.value)
    assert "lake_name" in str(refused.value)


def test_before_images_are_named_as_dms_names_them_from_the_source_key() -> None:
    data = config([{"name": "ORDER#", "type": "int"}]) | {"dms": {"before_image": {"column_prefix": "before_"}}}
    loaded = parse_config(data)
    assert loaded.dms.before_image_columns(loaded.tables[0]) == ["before_ORDER#"]


def catalog_table(name: str, *columns: str) -> CatalogTable:
    return CatalogTable(
        name, [columns[0]], [CatalogColumn(c, "integer", "integer", "int", True, None) for c in columns]
    )


def test_config_from_source_writes_the_mapping_it_chose() -> None:
    origin = Origin("postgresql://db", "mapping.", {"format": "csv"})
    written = yaml.safe_load(config_text([catalog_table("HR.EMPLOYEES", "EMPLOYEE_ID", "id2")], origin))
    entry = written["tables"][0]
    assert entry["target"] == "hr_employees"
    assert entry["columns"] == [
        {"name": "EMPLOYEE_ID", "lake_name": "employee_id", "type": "int"},
        {"name": "id2", "type": "int"},
    ]


def test_config_from_source_refuses_a_collision_naming_both() -> None:
    origin = Origin("postgresql://db", "mapping.", {"format": "csv"})
    with pytest.raises(ConfigError, match=r"columns 'Name' and 'NAME' both map to the lake column 'name'"):
        config_text([catalog_table("app.people", "id", "Name", "NAME")], origin)
