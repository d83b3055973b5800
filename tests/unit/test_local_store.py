"""The local folder store removes as S3's DeleteObjects does: what it is given, whether or not it is still there;
and the maintenance's expiry marks, outside DMS's folder, round-trip and are no table's files nor a schema folder."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from cdc_lake.core.config import parse_config
from cdc_lake.core.dms_files import unconfigured_folders
from cdc_lake.core.expiry_marks import ExpiryMark, mark_key, read_mark, write_mark
from cdc_lake.core.storage import LocalFolderStore
from tests.support.configs import items_config, items_config_data

KEYS = [f"dms/shop/items/2025030{day}-120000000.csv" for day in range(1, 5)]


def landed(root: Path) -> LocalFolderStore:
    for key in KEYS:
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_text("I,1,one\n")
    return LocalFolderStore(root)


def test_delete_many_removes_what_it_is_given_and_skips_what_is_gone(tmp_path: Path) -> None:
    store = landed(tmp_path)
    store.delete_many([KEYS[0], KEYS[2], "dms/shop/items/gone.csv"])
    assert [o.key for o in store.list("dms/shop/items/")] == [KEYS[1], KEYS[3]]


def test_an_expiry_mark_adds_up_and_is_no_table_file_nor_schema(tmp_path: Path) -> None:
    store = landed(tmp_path)
    config = items_config()
    table = config.table("shop.items")
    assert read_mark(store, config, table) is None
    day = dt.datetime(2025, 3, 1, tzinfo=dt.UTC)
    first = ExpiryMark(2, KEYS[1], day)
    write_mark(store, config, table, first)
    assert read_mark(store, config, table) == first
    later = first.adding(ExpiryMark(1, KEYS[2], day + dt.timedelta(days=1)))
    assert later == ExpiryMark(3, KEYS[2], day + dt.timedelta(days=1))
    assert ExpiryMark(0).adding(first) == first == first.adding(ExpiryMark(0))
    write_mark(store, config, table, ExpiryMark(0))
    assert read_mark(store, config, table) == ExpiryMark(0)
    write_mark(store, config, table, later)
    assert read_mark(store, config, table) == later
    assert mark_key(config, table) not in {o.key for o in store.list(config.table_prefix(table))}
    data = items_config_data()
    data["dms"]["bucket_folder"] = ""  # DMS writing at the bucket's root: the marks' folder sits beside the schemas
    rooted = parse_config(data)
    write_mark(store, rooted, rooted.table("shop.items"), first)
    assert unconfigured_folders(store, rooted) == ["dms/shop/"]  # not the marks' folder
