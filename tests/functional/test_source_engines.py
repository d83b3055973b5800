"""Oracle's and SQL Server's column types, as DMS writes them to CSV and Parquet, replayed on both lake paths and
compared with the generator's oracle; and a bad timestamp-with-zone refused by file, row and column."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cdc_lake.core.config import PipelineConfig, parse_config
from cdc_lake.core.exceptions import DmsInputError
from cdc_lake.core.source_types import source_type
from cdc_lake.local.generator import GeneratorSpec, generate, land_order
from cdc_lake.local.runtime import failed_runs
from tests.support.lake import Lake, assert_lake_equals_oracle, on_both_paths, write_file

pytestmark = pytest.mark.spark

# (source column, source type), as the source's catalog shows them; the key first.
ENGINES: dict[str, list[tuple[str, str]]] = {
    "oracle": [
        ("EMPLOYEE_ID", "NUMBER(10)"),
        ("SALARY", "NUMBER(12,2)"),
        ("BONUS_RATE", "NUMBER"),
        ("GRADE", "NUMBER(2)"),
        ("LEVEL_NO", "NUMBER(4)"),
        ("SCORE", "BINARY_DOUBLE"),
        ("HIRED", "DATE"),
        ("UPDATED_AT", "TIMESTAMP(6)"),
        ("SIGNED_AT", "TIMESTAMP(6) WITH TIME ZONE"),
        ("FULL_NAME", "VARCHAR2(60)"),
        ("BADGE", "RAW(16)"),
        ("DOC_REF", "BFILE"),
    ],
    "sqlserver": [
        ("OrderId", "BIGINT"),
        ("Quantity", "TINYINT"),
        ("Discount", "SMALLMONEY"),
        ("Total", "MONEY"),
        ("Paid", "BIT"),
        ("PlacedAt", "DATETIME2(6)"),
        ("PromisedAt", "DATETIMEOFFSET(7)"),
        ("CustomerNote", "NVARCHAR(200)"),
        ("Checksum", "VARBINARY(32)"),
    ],
}
TABLES = {"oracle": "HR.EMPLOYEES", "sqlserver": "dbo.Orders"}
DATE_TEXT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}")
OFFSET7_TEXT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{7} [+-][0-9]{2}:[0-9]{2}")


def engine_config(engine: str, file_format: str) -> PipelineConfig:
    """A table of ``engine``'s types, each column typed as DMS's mapping says for ``file_format``."""
    columns = []
    for name, kind in ENGINES[engine]:
        mapped = source_type(engine, kind)
        assert mapped is not None, kind
        columns.append({"name": name, "type": mapped.lake(file_format), "source_type": kind})
    table = {"name": TABLES[engine], "primary_key": [ENGINES[engine][0][0]], "columns": columns}
    dms = {"format": file_format, "source_engine": engine, "timestamp_column": "dms_timestamp"}
    return parse_config({"dms": dms, "tables": [table]})


@on_both_paths
@pytest.mark.parametrize("file_format", ["csv", "parquet"])
@pytest.mark.parametrize("engine", ["oracle", "sqlserver"])
def test_an_engines_types_replay_exactly(lake: Lake, tmp_path: Path, engine: str, file_format: str) -> None:
    config = engine_config(engine, file_format)
    spec = GeneratorSpec(seed=3, initial_rows=60, cdc_files=2, changes_per_file=40, cached_changes=5)
    generated = generate(config, tmp_path / "source", spec)
    keys = land_order(generated)
    lake.land_from(generated.landing, keys)
    pipeline = lake.pipeline(config)
    runs = pipeline.deliver(keys)
    assert not failed_runs(runs), [r.error for r in failed_runs(runs)]
    assert_lake_equals_oracle(pipeline, generated.expected, tmp_path / "export")
    table = config.tables[0]
    lake_types = {f.name: f.dataType.simpleString() for f in lake.spark.table(lake.table(table.lake_table)).schema}
    if file_format == "csv":  # as DMS writes an Oracle DATE (whole seconds) and a DATETIMEOFFSET(7) to CSV
        column, shape = {"oracle": ("HIRED", DATE_TEXT), "sqlserver": ("PromisedAt", OFFSET7_TEXT)}[engine]
        place = 1 + [name for name, _ in ENGINES[engine]].index(column)  # after the DMS timestamp
        load = next(k for k in keys if "/LOAD" in k)
        texts = [row[place] for row in csv.reader(io.StringIO((generated.landing / load).read_text()))]
        assert texts and all(shape.fullmatch(text) for text in texts if text), texts[:3]
    if engine == "sqlserver" and file_format == "parquet":  # as DMS writes UINT1 and BYTES to Parquet
        written = pq.read_schema(generated.landing / keys[-1])
        assert written.field("Quantity").type == pa.uint8() and written.field("Checksum").type == pa.binary()
    if engine == "sqlserver":
        # TINYINT is DMS's UINT1: 0..255, held by the lake's int (Iceberg has no 8- or 16-bit integers).
        assert lake_types["quantity"] == "int" and lake_types["promisedat"] == "string"
        assert lake_types["checksum"] == ("binary" if file_format == "parquet" else "string")
    else:
        assert lake_types["bonus_rate"] == "decimal(38,10)" and lake_types["signed_at"] == "string"
        assert lake_types["badge"] == ("binary" if file_format == "parquet" else "string")


@on_both_paths
def test_a_timestamp_without_its_zone_is_refused_by_file_row_and_column(lake: Lake) -> None:
    config = parse_config(
        {
            "dms": {"source_engine": "sqlserver"},
            "tables": [
                {
                    "name": "dbo.Orders",
                    "primary_key": ["OrderId"],
                    "columns": [
                        {"name": "OrderId", "type": "bigint", "source_type": "BIGINT"},
                        {"name": "PromisedAt", "type": "timestamp_offset", "source_type": "DATETIMEOFFSET"},
                    ],
                }
            ],
        }
    )
    good = "1,2024-01-15 10:30:00.1234567 +02:00\n2,2024-02-29 23:59:59.0000000 -05:30\n"
    load = write_file(lake.landing, "dbo/Orders/LOAD00000001.csv", good)
    lake.apply(config, load)
    bad = write_file(lake.landing, "dbo/Orders/20250301-120100000.csv", "U,1,2024-01-15 11:00:00\n")
    with pytest.raises(DmsInputError) as refused:
        lake.apply(config, bad)
    message = str(refused.value)
    assert bad in message and "row 1" in message and "PromisedAt" in message and "timestamp_offset" in message
    assert lake.rows("dbo_orders") == [
        (1, "2024-01-15 10:30:00.1234567 +02:00"),
        (2, "2024-02-29 23:59:59.0000000 -05:30"),
    ]
