"""A table's metadata is bounded by the table, not by its largest batch or its load's file count: a catch-up of
many small CDC files in one commit, and a full load of many LOAD files, leave ``metadata.json`` (rewritten by
every later commit, with up to keep_snapshots summaries) and the ``cdc-lake.record`` property about the size an
ordinary batch leaves them. Before they were bounded, each applied file added about 110 bytes to both, so the
bound is asserted per file too: 2,000 files in ``make test`` show it as 100,000 would, and ``make soak`` runs
100,000 and 10,000 (``CDC_LAKE_CATCH_UP_FILES``, ``CDC_LAKE_LOAD_FILES``), the sizes a month-long outage leaves.

Both lake paths keep the table's metadata where they do (the Hadoop catalog's folder; the Glue catalog with
S3FileIO on the local endpoint); the DMS files are read from the landing folder on both, since 100,000 objects
put to and read from the local S3 one by one would cost minutes without telling anything about the metadata.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

import pytest

from cdc_lake.core.config import parse_config
from cdc_lake.core.dms_files import parse_key
from cdc_lake.core.storage import LocalFolderStore
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.iceberg_java import table_properties
from cdc_lake.engine.record import RECORD
from cdc_lake.engine.replay import replay
from cdc_lake.ops.operations import list_changes
from tests.support.configs import ITEMS_COLUMNS
from tests.support.lake import Lake, on_both_paths, write_file

# At make soak's sizes each takes about two minutes on this workplace's machine (the reads of the files).
pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

CATCH_UP_FILES = int(os.environ.get("CDC_LAKE_CATCH_UP_FILES", "2000"))
LOAD_FILES = int(os.environ.get("CDC_LAKE_LOAD_FILES", "1000"))
LATE = LOAD_FILES // 2  # a LOAD file that lands after the others
# What one applied file may add to metadata.json or the record, at most: an unbounded record adds about 110 bytes.
BYTES_PER_FILE = 2
START = dt.datetime(2025, 3, 1)


def two_tables() -> Any:
    table = {"primary_key": ["id"], "columns": ITEMS_COLUMNS}
    return parse_config(
        {"dms": {"bucket_folder": "dms"}, "tables": [{"name": "shop.items", **table}, {"name": "shop.big", **table}]}
    )


def context(lake: Lake, config: Any) -> ReplayContext:
    """The lake path's catalog, the DMS files read from the landing folder."""
    return ReplayContext(spark=lake.spark, location=lake.location, config=config, store=LocalFolderStore(lake.landing))


def cdc_file(lake: Lake, table: str, second: int, text: str) -> str:
    moment = START + dt.timedelta(seconds=second)
    return write_file(lake.landing, f"dms/shop/{table}/{moment:%Y%m%d-%H%M%S}000.csv", text)


def metadata_json_size(lake: Lake, name: str) -> int:
    """The size of the table's current metadata.json, read where the catalog keeps it."""
    newest = lake.spark.sql(
        f"SELECT file FROM {lake.table(name)}.metadata_log_entries ORDER BY timestamp DESC LIMIT 1"
    ).first()["file"]
    jvm = lake.spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(newest)
    return int(path.getFileSystem(lake.spark.sparkContext._jsc.hadoopConfiguration()).getFileStatus(path).getLen())


def record_size(lake: Lake, name: str) -> int:
    return len(table_properties(lake.spark, lake.location.dotted(name))[RECORD])


@on_both_paths
def test_a_catch_up_of_many_files_leaves_the_metadata_the_size_it_was(lake: Lake) -> None:
    config = two_tables()
    run = context(lake, config)
    write_file(lake.landing, "dms/shop/items/LOAD00000001.csv", "0,zero\n")
    for second in range(3):  # a few ordinary batches: the table has a history before the catch-up
        replay(run, parse_key(cdc_file(lake, "items", second, f"U,0,v{second}\n"), config))
    before, record_before = metadata_json_size(lake, "shop_items"), record_size(lake, "shop_items")

    keys = [cdc_file(lake, "items", 10 + i, f"I,{i + 1},r{i}\n") for i in range(CATCH_UP_FILES)]
    result = replay(run, config.table("shop.items"))

    assert result.applied_files == keys  # one commit
    after, record_after = metadata_json_size(lake, "shop_items"), record_size(lake, "shop_items")
    assert after <= 2 * before, (before, after)
    assert record_after <= 2 * record_before
    assert after - before <= BYTES_PER_FILE * CATCH_UP_FILES, (before, after)
    assert record_after - record_before <= BYTES_PER_FILE * CATCH_UP_FILES, (record_before, record_after)
    last = list_changes(run, config.table("shop.items"))[-1]
    assert (last.file_count, last.files) == (CATCH_UP_FILES, [keys[0], keys[-1]])
    rows = lake.spark.sql(f"SELECT id, label FROM {lake.table('shop_items')}").collect()
    assert sorted(tuple(r) for r in rows) == [(0, "v2"), *((i + 1, f"r{i}") for i in range(CATCH_UP_FILES))]


@on_both_paths
def test_a_full_load_of_many_files_leaves_the_metadata_the_size_one_files_load_does(lake: Lake) -> None:
    config = two_tables()
    run = context(lake, config)
    one = write_file(lake.landing, "dms/shop/items/LOAD00000001.csv", "1,one\n")
    replay(run, parse_key(one, config))
    numbers = [n for n in range(1, LOAD_FILES + 1) if n != LATE]
    loads = [write_file(lake.landing, f"dms/shop/big/LOAD{n:08X}.csv", f"{n},l{n}\n") for n in numbers]

    result = replay(run, parse_key(loads[-1], config))

    assert result.applied_files == loads
    big, one_file = metadata_json_size(lake, "shop_big"), metadata_json_size(lake, "shop_items")
    record_big, record_one = record_size(lake, "shop_big"), record_size(lake, "shop_items")
    assert big <= 2 * one_file, (one_file, big)
    assert record_big <= 2 * record_one, (record_one, record_big)
    assert big - one_file <= BYTES_PER_FILE * LOAD_FILES, (one_file, big)
    assert record_big - record_one <= BYTES_PER_FILE * LOAD_FILES, (record_one, record_big)
    assert lake.spark.table(lake.table("shop_big")).count() == LOAD_FILES - 1
    # A LOAD file of the load that lands late, between applied ones, is applied, and only it.
    late = write_file(lake.landing, f"dms/shop/big/LOAD{LATE:08X}.csv", f"{LATE},late\n")
    assert replay(run, parse_key(late, config)).applied_files == [late]
    assert lake.spark.table(lake.table("shop_big")).count() == LOAD_FILES
