"""``cdc-lake config-from-files``: the configuration proposed from landed DMS files replicates them; CSV headers
give names, their values types (more in test_config_from_csv_values.py); keys are given by name."""

from __future__ import annotations

import datetime as dt
import io
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cdc_lake.core.config import load_config
from tests.support.aws import aws_client
from tests.support.cli import cli
from tests.support.lake import write_file

pytestmark = pytest.mark.spark

NOON = dt.datetime(2025, 3, 1, 12)


def _parquet(landing: Path, key: str, rows: list[dict], schema: pa.Schema) -> None:
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), sink)
    path = landing / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(sink.getvalue())


def test_parquet_files_propose_a_configuration_that_replicates_them(spark, warehouse, database, tmp_path, capsys):
    landing = tmp_path / "landing"
    load = pa.schema([("dms_timestamp", pa.string()), ("order_id", pa.int64()), ("amount", pa.decimal128(12, 2)),
                      ("at", pa.timestamp("us"))])  # fmt: skip
    _parquet(landing, "dms/shop/orders/LOAD00000001.parquet",
             [{"dms_timestamp": "2025-03-01 12:00:00.000000", "order_id": i, "amount": Decimal(f"{i}.50"), "at": NOON}
              for i in (1, 2)], load)  # fmt: skip
    cdc = pa.schema([("dms_timestamp", pa.string()), ("Op", pa.string()), *[(f.name, f.type) for f in load][1:],
                     ("note", pa.string())])  # fmt: skip
    _parquet(landing, "dms/shop/orders/20250301-120100000.parquet",
             [{"dms_timestamp": "2025-03-01 12:01:00.000000", "Op": "U", "order_id": 2, "amount": Decimal("9.99"),
               "at": NOON, "note": "rush"}], cdc)  # fmt: skip
    _parquet(landing, "dms/shop/audit/LOAD00000001.parquet", [{"msg": "x"}], pa.schema([("msg", pa.string())]))
    write_file(landing, "dms/shop/orders/notes.txt", "not a DMS file")
    out = tmp_path / "tables.yaml"
    given = ["--landing", landing, "--timestamp-column", "dms_timestamp", "--key", "shop.orders=order_id"]
    code, printed = cli(capsys, "config-from-files", *given, "--database", database, "-o", out)
    assert code == 0, printed
    assert f"{out}: 1 table(s); 1 without a key given listed in a comment" in printed
    config = load_config(out)
    [orders] = config.tables
    assert [(c.name, c.type) for c in orders.columns] == [
        ("order_id", "bigint"),
        ("amount", "decimal(12,2)"),
        ("at", "timestamp"),
        ("note", "string"),
    ]
    assert (config.dms.format, config.dms.timestamp_column, config.dms.bucket_folder) == (
        "parquet",
        "dms_timestamp",
        "dms",
    )
    assert "#   shop.audit: files name no key: give it, e.g. --key shop.audit=msg" in out.read_text()

    code, printed = cli(capsys, "run", "-c", out, "-l", landing, "-w", warehouse)
    assert code == 0, printed
    lake = spark.table(f"lake.{database}.shop_orders").orderBy("order_id").collect()
    assert [tuple(r) for r in lake] == [(1, Decimal("1.50"), NOON, None), (2, Decimal("9.99"), NOON, "rush")]


def test_csv_headers_name_columns_without_types_and_bad_requests_are_named(spark, aws_endpoint, tmp_path, capsys):
    landing = tmp_path / "landing"
    write_file(landing, "dms/shop/items/LOAD00000001.csv", "id,label\n1,a\n")
    write_file(landing, "dms/shop/items/20250301-120000000.csv", "Op,id,label,qty\nU,1,b,3\n")
    code, printed = cli(capsys, "config-from-files", "-l", landing, "--format", "csv", "--header",
                        "--key", "shop.items=id")  # fmt: skip
    assert code == 0, printed
    columns = [line for line in printed.splitlines() if '{"name": ' in line]
    assert [(c.split('"')[3], c.split('"')[7]) for c in columns] == [("id", "bigint"), ("label", "string"),
                                                                      ("qty", "bigint")]  # fmt: skip
    assert all("proposed from 1 value(s) of 20250301-120000000.csv: confirm it" in c for c in columns)

    # The same from the raw bucket.
    s3 = aws_client(aws_endpoint, "s3")
    s3.create_bucket(Bucket="raw-config-from-files")
    for path in landing.rglob("*.csv"):
        s3.put_object(Bucket="raw-config-from-files", Key=path.relative_to(landing).as_posix(), Body=path.read_bytes())
    code, from_bucket = cli(capsys, "config-from-files", "--bucket", "raw-config-from-files", "--aws-endpoint",
                            aws_endpoint, "--format", "csv", "--header", "--key", "shop.items=id")  # fmt: skip
    assert code == 0, from_bucket
    assert [line for line in from_bucket.splitlines() if '{"name": ' in line] == columns

    code, printed = cli(capsys, "config-from-files", "-l", landing, "--format", "csv")
    assert code == 2 and "CSV files without a header name no columns" in printed
    code, printed = cli(capsys, "config-from-files", "-l", landing, "--format", "csv", "--header",
                        "--key", "shop.nope=id")  # fmt: skip
    assert code == 2 and "--key names table(s) with no DMS files" in printed
    code, printed = cli(capsys, "config-from-files", "-l", landing, "--format", "csv", "--header",
                        "--key", "shop.items=nope")  # fmt: skip
    assert code == 2 and "['nope'] not among its fields ['id', 'label', 'qty']" in printed
    code, printed = cli(capsys, "config-from-files", "-l", tmp_path / "none")
    assert code == 2 and "needs --landing (an existing folder) or --bucket" in printed


def test_parquet_fields_of_dms_s_unsigned_and_other_types_propose_their_spark_reading(spark, tmp_path, capsys):
    """DMS writes a SQL Server TINYINT as UINT1, and unsigned MySQL integers as UINT2-8: Spark reads each as the
    next wider signed type, UINT8 as decimal(20,0). A DATETIMEOFFSET is a STRING field, proposed from its values."""
    landing = tmp_path / "landing"
    fields = [("id", pa.int32(), 1), ("u8", pa.uint8(), 255), ("u16", pa.uint16(), 65535),
              ("u32", pa.uint32(), 4294967295), ("u64", pa.uint64(), 18446744073709551615),
              ("blob", pa.binary(), b"\x00\xff"), ("amount", pa.decimal128(38, 10), Decimal("1.0000000001")),
              ("label", pa.string(), "x"), ("at", pa.timestamp("us"), NOON),
              ("promised", pa.string(), "2024-01-15 10:30:00.1234567 +02:00")]  # fmt: skip
    schema = pa.schema([("dms_timestamp", pa.string()), *[(name, kind) for name, kind, _ in fields]])
    row = {"dms_timestamp": "2025-03-01 12:00:00.000000", **{name: value for name, _, value in fields}}
    _parquet(landing, "sqlserver/dbo/things/LOAD00000001.parquet", [row], schema)
    out = tmp_path / "tables.yaml"
    code, printed = cli(capsys, "config-from-files", "-l", landing, "--bucket-folder", "sqlserver",
                        "--timestamp-column", "dms_timestamp", "--key", "dbo.things=id", "-o", out)  # fmt: skip
    assert code == 0, printed
    [things] = load_config(out).tables
    assert [(c.name, c.type) for c in things.columns] == [
        ("id", "int"),
        ("u8", "smallint"),
        ("u16", "int"),
        ("u32", "bigint"),
        ("u64", "decimal(20,0)"),
        ("blob", "binary"),
        ("amount", "decimal(38,10)"),
        ("label", "string"),
        ("at", "timestamp"),
        ("promised", "timestamp_offset"),  # DMS's text of a DATETIMEOFFSET
    ]
    # The file's own types, but for the text whose values made it a timestamp_offset: that one to confirm.
    proposed = [line for line in out.read_text().splitlines() if "proposed from" in line and not line.startswith("#")]
    assert proposed == [
        '      - {"name": "promised", "type": "timestamp_offset"}  # Parquet STRING: timestamp_offset proposed from 1 '
        "value(s) of LOAD00000001.parquet: confirm it; kept as DMS wrote it, zone and all"
    ]
