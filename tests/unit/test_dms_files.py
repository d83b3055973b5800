"""Reading DMS object keys: table, kind, and DMS order."""

from __future__ import annotations

import gzip
from typing import get_args

import pytest

from cdc_lake.core.config import parse_config
from cdc_lake.core.dms_files import FileKind, order_key_for, parse_key, table_files
from cdc_lake.core.exceptions import NotADmsFileError, UnknownTableError
from cdc_lake.core.formats import FORMATS, FormatName

CONFIG = parse_config(
    {
        "dms": {"bucket_folder": "raw/dms"},
        "tables": [
            {"name": "shop.orders", "primary_key": ["id"], "columns": [{"name": "id", "type": "bigint"}]},
            {"name": "shop.order_items", "primary_key": ["id"], "columns": [{"name": "id", "type": "bigint"}]},
        ],
    }
)


@pytest.mark.parametrize(
    ("key", "kind", "fmt", "gzip"),
    [
        ("raw/dms/shop/orders/LOAD00000001.csv", FileKind.FULL_LOAD, "csv", False),
        ("raw/dms/shop/orders/LOAD0000000A.csv.gz", FileKind.FULL_LOAD, "csv", True),
        ("raw/dms/shop/orders/LOAD00000001.parquet", FileKind.FULL_LOAD, "parquet", False),
        ("raw/dms/shop/orders/LOAD_1_00000001.csv", FileKind.FULL_LOAD, "csv", False),
        ("raw/dms/shop/orders/LOAD_12_0000000A.csv.gz", FileKind.FULL_LOAD, "csv", True),
        ("raw/dms/shop/orders/LOAD_2_00000001.parquet", FileKind.FULL_LOAD, "parquet", False),
        ("raw/dms/shop/orders/20141029-1134010000.csv", FileKind.CDC, "csv", False),
        ("raw/dms/shop/orders/2025/03/01/20250301-120500123.parquet", FileKind.CDC, "parquet", False),
        ("raw/dms/shop/orders/2025-03-01/20250301-120500123.csv.gz", FileKind.CDC, "csv", True),
        ("raw/dms/shop/orders/2025030112/20250301-120500123.csv", FileKind.CDC, "csv", False),
    ],
)
def test_data_files(key, kind, fmt, gzip):
    dms_file = parse_key(key, CONFIG)
    assert (dms_file.table, dms_file.kind, dms_file.format, dms_file.gzip) == ("shop.orders", kind, fmt, gzip)
    # The name ends as the format says DMS names its files.
    assert key.endswith(dms_file.file_format.file_suffix(gzip))


def test_every_format_the_configuration_accepts_has_its_facts():
    assert sorted(FORMATS) == sorted(get_args(FormatName))
    assert all(FORMATS[name].name == name for name in FORMATS)
    # Parquet compresses inside the file; a compressed CSV file is named .csv.gz.
    assert [FORMATS["parquet"].file_suffix(True), FORMATS["csv"].file_suffix(True)] == [".parquet", ".csv.gz"]
    # Headerless CSV names no columns; Parquet's footer always does.
    assert [FORMATS["csv"].names_columns(False), FORMATS["parquet"].names_columns(False)] == [False, True]


@pytest.mark.parametrize(
    ("key", "error", "reason"),
    [
        ("other/shop/orders/LOAD00000001.csv", NotADmsFileError, "outside the DMS folder"),
        ("raw/dms/shop/orders/", NotADmsFileError, "not <schema>/<table>/<file>"),
        ("raw/dms/shop/orders/_SUCCESS", NotADmsFileError, "neither a LOAD file"),
        ("raw/dms/shop/orders/LOAD1.csv", NotADmsFileError, "neither a LOAD file"),
        ("raw/dms/shop/orders/LOAD_1_1.csv", NotADmsFileError, "neither a LOAD file"),
        ("raw/dms/shop/orders/LOAD__00000001.csv", NotADmsFileError, "neither a LOAD file"),
        ("raw/dms/shop/orders/LOAD_1_00000001.json", NotADmsFileError, "neither a LOAD file"),
        ("raw/dms/shop/orders/2025/03/01/LOAD_1_00000001.csv", NotADmsFileError, "unexpected sub-folder"),
        ("raw/dms/shop/orders/notes/LOAD00000001.csv", NotADmsFileError, "unexpected sub-folder"),
        ("raw/dms/shop/orders/abc/20250301-120500123.csv", NotADmsFileError, "unexpected sub-folder"),
        ("raw/dms/shop/payments/LOAD00000001.csv", UnknownTableError, "'shop.payments' is not in the configuration"),
    ],
)
def test_other_objects_are_refused_with_the_reason(key, error, reason):
    with pytest.raises(error, match=reason):
        parse_key(key, CONFIG)


def test_dms_order_hex_counter_then_cdc_by_time():
    names = ["20250301-120000.csv", "LOAD00000010.csv", "LOAD0000000A.csv", "20250228-235959999999.csv",
             "LOAD00000009.csv", "20250301-1200000001.csv"]  # fmt: skip
    ordered = sorted(names, key=lambda n: order_key_for(n) or ())
    assert ordered == ["LOAD00000009.csv", "LOAD0000000A.csv", "LOAD00000010.csv", "20250228-235959999999.csv",
                       "20250301-120000.csv", "20250301-1200000001.csv"]  # fmt: skip


def test_table_files_keeps_one_table_in_order():
    keys = [
        "raw/dms/shop/orders/2025/03/02/20250302-000000000.csv",
        "raw/dms/shop/order_items/LOAD00000001.csv",
        "raw/dms/shop/orders/LOAD00000002.csv",
        "raw/dms/shop/orders/2025/03/01/20250301-000000000.csv",
        "raw/dms/shop/orders/LOAD00000001.csv",
        "raw/dms/shop/orders/_SUCCESS",
    ]
    files = table_files(keys, CONFIG.table("shop.orders"), CONFIG)
    assert [f.key.rsplit("/", 1)[1] for f in files] == [
        "LOAD00000001.csv", "LOAD00000002.csv", "20250301-000000000.csv", "20250302-000000000.csv"
    ]  # fmt: skip


def test_parallel_load_segments_sort_before_cdc_by_segment_then_hex_counter():
    """LOAD_<segment>_<counter> (Qlik Replicate's parallel-load names): every LOAD file first, deterministically."""
    names = ["20250301-120000000.csv", "LOAD_2_00000001.csv", "LOAD_10_00000001.csv", "LOAD_1_00000010.csv",
             "LOAD_1_0000000A.csv", "LOAD00000002.csv", "LOAD_1_00000009.csv", "LOAD_9_000000FF.csv"]  # fmt: skip
    ordered = sorted(names, key=lambda n: order_key_for(n) or ())
    assert ordered == ["LOAD00000002.csv", "LOAD_1_00000009.csv", "LOAD_1_0000000A.csv", "LOAD_1_00000010.csv",
                       "LOAD_2_00000001.csv", "LOAD_9_000000FF.csv", "LOAD_10_00000001.csv",
                       "20250301-120000000.csv"]  # fmt: skip
    keys = [f"raw/dms/shop/orders/{name}" for name in reversed(names)]
    files = table_files(keys, CONFIG.table("shop.orders"), CONFIG)
    assert [f.name for f in files] == ordered
    assert [f.is_full_load for f in files] == [True] * 7 + [False]


def test_listing_sets_empty_objects_and_foreign_names_aside(tmp_path):
    from cdc_lake.core.dms_files import is_blank, list_landed
    from cdc_lake.core.storage import LocalFolderStore

    table = CONFIG.table("shop.orders")
    folder = tmp_path / "raw/dms/shop/orders"
    folder.mkdir(parents=True)
    contents = {
        "LOAD00000001.csv": b"1\n",
        "20250301-120000000.csv": b"",
        "20250301-120100000.csv": b" \n\n",
        "20250301-120200000.csv.gz": gzip.compress(b"\n"),
        "20250301-120300000.csv": b"I,2\n",
        "notes.txt": b"hello",
    }
    for name, data in contents.items():
        (folder / name).write_bytes(data)
    landed = list_landed(LocalFolderStore(tmp_path), CONFIG, table)
    prefix = "raw/dms/shop/orders/"
    assert [f.name for f in landed.files] == ["LOAD00000001.csv", "20250301-120300000.csv"]
    assert landed.empty == tuple(prefix + n for n in sorted(list(contents)[1:4]))
    assert landed.foreign == (prefix + "notes.txt",)
    assert not is_blank(b"not gzip", gzipped=True)  # refused by the read, naming the file
    assert not is_blank(b"I,1\n", gzipped=False)


def test_folders_of_tables_the_configuration_lacks_are_found_without_listing_files(tmp_path):
    from cdc_lake.core.dms_files import unconfigured_folders
    from cdc_lake.core.storage import LocalFolderStore

    for folder in ("raw/dms/shop/orders", "raw/dms/shop/refunds", "raw/dms/crm/people", "raw/other/x/y"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "LOAD00000001.csv").write_bytes(b"1\n")
    assert unconfigured_folders(LocalFolderStore(tmp_path), CONFIG) == ["raw/dms/crm/people/", "raw/dms/shop/refunds/"]
