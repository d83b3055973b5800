"""Oracle's and SQL Server's types through DMS's documented mapping: the lake type chosen for each, the
configuration refused where it cannot keep a value, and ``check-config`` announcing what DMS does not carry
exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from cdc_lake.core.config import parse_config
from cdc_lake.core.exceptions import ConfigError
from cdc_lake.core.source_types import source_type
from cdc_lake.local.cli import main

# (engine, source type, DMS type, lake type with CSV, with Parquet, fate): the rows of docs/source-types.md.
MAPPED = [
    ("oracle", "NUMBER(2)", "INT1", "tinyint", "tinyint", "exact"),
    ("oracle", "NUMBER(4)", "INT2", "smallint", "smallint", "exact"),
    ("oracle", "NUMBER(9)", "INT4", "int", "int", "exact"),
    ("oracle", "NUMBER(18)", "NUMERIC(18,0)", "decimal(18,0)", "decimal(18,0)", "exact"),
    ("oracle", "NUMBER(12,2)", "NUMERIC(12,2)", "decimal(12,2)", "decimal(12,2)", "exact"),
    ("oracle", "NUMBER", "NUMERIC(38,10)", "decimal(38,10)", "decimal(38,10)", "inexact"),
    ("oracle", "NUMBER(5,-2)", "REAL8", "double", "double", "inexact"),
    ("oracle", "FLOAT(20)", "REAL4", "float", "float", "exact"),
    ("oracle", "FLOAT", "REAL8", "double", "double", "exact"),
    ("oracle", "BINARY_FLOAT", "REAL4", "float", "float", "exact"),
    ("oracle", "DATE", "DATETIME", "timestamp", "timestamp", "exact"),
    ("oracle", "TIMESTAMP(9)", "DATETIME", "timestamp", "timestamp", "inexact"),
    ("oracle", "TIMESTAMP(3) WITH TIME ZONE", "STRING", "timestamp_offset", "timestamp_offset", "text"),
    ("oracle", "timestamp with local time zone", "STRING", "string", "string", "text"),
    ("oracle", "INTERVAL DAY(2) TO SECOND(6)", "STRING", "string", "string", "text"),
    ("oracle", "NVARCHAR2(40)", "WSTRING", "string", "string", "exact"),
    ("oracle", "RAW(16)", "BYTES", "string", "binary", "text"),
    ("oracle", "BLOB", "BLOB", "string", "binary", "inexact"),
    ("oracle", "CLOB", "CLOB", "string", "string", "inexact"),
    ("oracle", "BFILE", "NULL", "string", "string", "null"),
    ("oracle", "UROWID", "NULL", "string", "string", "null"),
    ("sqlserver", "TINYINT", "UINT1", "smallint", "smallint", "exact"),
    ("sqlserver", "BIT", "BOOLEAN", "boolean", "boolean", "exact"),
    ("sqlserver", "MONEY", "NUMERIC(19,4)", "decimal(19,4)", "decimal(19,4)", "exact"),
    ("sqlserver", "SMALLMONEY", "NUMERIC(10,4)", "decimal(10,4)", "decimal(10,4)", "exact"),
    ("sqlserver", "DATETIME2", "DATETIME", "timestamp", "timestamp", "inexact"),
    ("sqlserver", "DATETIME2(3)", "DATETIME", "timestamp", "timestamp", "exact"),
    ("sqlserver", "DATETIMEOFFSET(7)", "WSTRING", "timestamp_offset", "timestamp_offset", "text"),
    ("sqlserver", "UNIQUEIDENTIFIER", "STRING", "string", "string", "exact"),
    ("sqlserver", "VARBINARY(16)", "BYTES", "string", "binary", "text"),
    ("sqlserver", "TIMESTAMP", "BYTES", "string", "binary", "text"),
    ("sqlserver", "NVARCHAR(MAX)", "NCLOB", "string", "string", "inexact"),
    ("sqlserver", "XML", "NCLOB", "string", "string", "inexact"),
    ("sqlserver", "HIERARCHYID", "WSTRING", "string", "string", "text"),
    ("sqlserver", "SQL_VARIANT", "-", "string", "string", "unsupported"),
]


@pytest.mark.parametrize(("engine", "kind", "dms", "csv", "parquet", "fate"), MAPPED)
def test_each_source_type_maps_as_dms_documents_it(
    engine: str, kind: str, dms: str, csv: str, parquet: str, fate: str
) -> None:
    mapped = source_type(engine, kind)
    assert mapped is not None
    assert (mapped.dms, mapped.lake("csv"), mapped.lake("parquet"), mapped.fate) == (dms, csv, parquet, fate)
    assert (mapped.note is None) == (fate == "exact")


def _config(engine: str, column: dict[str, Any], file_format: str = "csv") -> dict[str, Any]:
    columns = [{"name": "K", "type": "int"}, column]
    return {
        "dms": {"source_engine": engine, "format": file_format},
        "tables": [{"name": "s.t", "primary_key": ["K"], "columns": columns}],
    }


@pytest.mark.parametrize(
    ("engine", "column", "says"),
    [
        ("sqlserver", {"source_type": "SQL_VARIANT", "type": "string"}, "DMS does not replicate this type"),
        ("sqlserver", {"source_type": "DATETIMEOFFSET", "type": "timestamp"}, "configure type: timestamp_offset"),
        ("oracle", {"source_type": "TIMESTAMP WITH TIME ZONE", "type": "date"}, "DMS writes it as STRING"),
        ("oracle", {"source_type": "NUMBER(12,2)", "type": "int"}, "configure type: decimal(12,2)"),
        ("oracle", {"source_type": "SDO_GEOMETRY", "type": "string"}, "not a oracle type DMS's mapping names"),
        ("oracle", {"source_type": "BFILE", "type": "string", "nullable": False}, "cannot be nullable: false"),
    ],
)
def test_a_source_type_the_configuration_cannot_keep_is_refused_by_name(
    engine: str, column: dict[str, Any], says: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config(_config(engine, {"name": "V", **column}))
    assert says in str(refused.value) and column["source_type"] in str(refused.value)


def test_parquets_bytes_are_not_kept_as_a_string_but_csvs_text_is() -> None:
    raw = {"name": "V", "source_type": "RAW(16)", "type": "string"}
    assert parse_config(_config("oracle", raw, "csv")).tables[0].columns[1].type == "string"
    with pytest.raises(ConfigError, match="configure type: binary"):
        parse_config(_config("oracle", raw, "parquet"))


def test_a_wider_integer_keeps_an_unsigned_one_and_other_engines_are_not_checked() -> None:
    assert parse_config(_config("sqlserver", {"name": "Q", "source_type": "TINYINT", "type": "bigint"}))
    with pytest.raises(ConfigError, match="configure type: smallint"):
        parse_config(_config("sqlserver", {"name": "Q", "source_type": "TINYINT", "type": "tinyint"}))
    assert parse_config(_config("postgres", {"name": "Q", "source_type": "whatever", "type": "int"}))


def test_check_config_announces_what_dms_does_not_carry_exactly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    columns = [
        {"name": "EMPLOYEE_ID", "type": "int", "source_type": "NUMBER(9)"},
        {"name": "DOC", "type": "string", "source_type": "BFILE"},
        {"name": "RATE", "type": "decimal(38,10)", "source_type": "NUMBER"},
        {"name": "SIGNED", "type": "timestamp_offset", "source_type": "TIMESTAMP WITH TIME ZONE"},
        {"name": "NAME", "type": "string", "source_type": "VARCHAR2(20)"},
    ]
    table = {"name": "HR.EMPLOYEES", "primary_key": ["EMPLOYEE_ID"], "columns": columns}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"dms": {"source_engine": "oracle"}, "tables": [table]}))
    assert main(["check-config", "--config", str(path)]) == 0
    announced = [line.strip() for line in capsys.readouterr().out.splitlines() if "announced:" in line]
    assert [line.split(" (")[0] for line in announced] == ["announced: DOC", "announced: RATE", "announced: SIGNED"]
    assert "replicates this type as NULL" in announced[0] and "10 decimal places" in announced[1]
    assert "offset both kept" in announced[2]


def test_the_configuration_and_the_stack_know_the_same_engines() -> None:
    from typing import get_args

    from cdc_lake.core.config import SourceEngine
    from infra.source_engines import SOURCE_ENGINES

    assert set(get_args(SourceEngine)) == set(SOURCE_ENGINES)
