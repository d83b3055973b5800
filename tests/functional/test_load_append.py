"""A table's full load appended (``cdc_lake.engine.load_append``): read in parallel parts, checked, laid out by key.

Each test reads the files through real Spark and Iceberg and checks the lake table against what the files
say, so a fast path that drops, repeats or misplaces a row fails here.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from cdc_lake.core.exceptions import DmsInputError
from cdc_lake.engine import load_append
from cdc_lake.engine.iceberg_java import has_write_order
from cdc_lake.ops.operations import list_changes
from tests.functional.test_replay_semantics import T, snapshot_count
from tests.support.configs import items_config
from tests.support.lake import Lake, on_both_paths, write_file

pytestmark = pytest.mark.spark

ROWS = 3000


@pytest.fixture
def small_splits(spark):
    """Read files in parts of 4 KiB, so one LOAD file is read by many tasks, as a large one is on Glue."""
    spark.conf.set("spark.sql.files.maxPartitionBytes", "4096")
    spark.conf.set("spark.sql.files.openCostInBytes", "0")
    yield
    spark.conf.unset("spark.sql.files.maxPartitionBytes")
    spark.conf.unset("spark.sql.files.openCostInBytes")


def load_text(first: int, last: int) -> str:
    return "".join(f'{i},"item {i}, in stock"\n' for i in range(first, last + 1))


def data_files(lake: Lake) -> list[tuple[int, int, int]]:
    """(lowest key, highest key, rows) of each data file of the table's current snapshot."""
    found = lake.spark.sql(
        f"SELECT lower_bounds[1] AS lo, upper_bounds[1] AS hi, record_count FROM {lake.table('shop_items')}.data_files"
    ).collect()
    return sorted(
        (int.from_bytes(r["lo"], "little"), int.from_bytes(r["hi"], "little"), r["record_count"]) for r in found
    )


@on_both_paths
def test_a_large_load_file_is_read_in_parts_and_each_data_file_holds_a_key_range(
    spark, lake: Lake, landing: Path, small_splits
) -> None:
    load = write_file(landing, T + "LOAD00000001.csv", load_text(1, ROWS))
    result = lake.apply(items_config(), load)
    assert result.applied_files == [load]
    assert result.counts is not None and result.counts.inserts == ROWS
    assert lake.rows() == [(i, f"item {i}, in stock") for i in range(1, ROWS + 1)]
    files = data_files(lake)
    assert len(files) > 1  # read in parts: one task, one file each
    assert sum(count for *_, count in files) == ROWS
    for (_, high, _), (low, _, _) in itertools.pairwise(files):
        assert high < low  # key ranges do not overlap: a MERGE of recent keys touches one file
    assert has_write_order(spark, lake.table("shop_items"))


def test_a_load_file_in_no_key_order_is_still_sorted_within_each_data_file(
    spark, lake: Lake, landing: Path, small_splits
) -> None:
    keys = [(i * 7919) % ROWS + 1 for i in range(ROWS)]  # every key once, scattered
    load = write_file(landing, T + "LOAD00000001.csv", "".join(f"{k},v{k}\n" for k in keys))
    lake.apply(items_config(), load)
    assert lake.rows() == [(k, f"v{k}") for k in range(1, ROWS + 1)]
    for path in spark.sql(f"SELECT file_path FROM {lake.table('shop_items')}.data_files").collect():
        ids = [r["id"] for r in spark.read.parquet(path["file_path"]).collect()]
        assert ids == sorted(ids)


def test_load_and_cdc_files_in_one_batch_are_one_replay_commit(spark, lake: Lake, landing: Path) -> None:
    write_file(landing, T + "LOAD00000001.csv", "1,a\n2,b\n")
    write_file(landing, T + "LOAD00000002.csv", "3,c\n")
    last = write_file(landing, T + "20250301-120000000.csv", "U,1,a1\nD,2,\nI,4,d\n")
    result = lake.apply(items_config(), last)
    assert lake.rows() == [(1, "a1"), (3, "c"), (4, "d")]
    assert snapshot_count(lake, items_config()) == 1
    assert result.counts is not None and (result.counts.inserts, result.counts.updates) == (4, 1)
    kinds = [c.kind for c in list_changes(lake, items_config().tables[0])]
    assert kinds == ["created", "replay"]  # the append's own snapshot is never main's: main moved past it


def test_later_load_files_are_appended_to_the_earlier_ones(spark, lake: Lake, landing: Path) -> None:
    first = write_file(landing, T + "LOAD00000001.csv", load_text(1, 10))
    lake.apply(items_config(), first)
    second = write_file(landing, T + "LOAD00000002.csv", load_text(11, 20))
    lake.apply(items_config(), second)
    assert lake.rows() == [(i, f"item {i}, in stock") for i in range(1, 21)]


def test_a_key_repeated_across_load_files_is_merged_in_dms_order(spark, lake: Lake, landing: Path) -> None:
    first = write_file(landing, T + "LOAD00000001.csv", "1,old\n2,two\n")
    lake.apply(items_config(), first)
    second = write_file(landing, T + "LOAD00000002.csv", "1,new\n3,three\n")
    lake.apply(items_config(), second)
    assert lake.rows() == [(1, "new"), (2, "two"), (3, "three")]


def test_a_value_spanning_lines_sends_the_file_to_the_ordered_reader(
    spark, lake: Lake, landing: Path, small_splits
) -> None:
    # With a split read, the record holding the line break would be cut in two: both halves malformed.
    text = load_text(1, 1500) + '1501,"first line\nsecond, line"\n' + load_text(1502, ROWS)
    load = write_file(landing, T + "LOAD00000001.csv", text)
    lake.apply(items_config(), load)
    got = dict(lake.rows())
    assert len(got) == ROWS
    assert got[1501] == "first line\nsecond, line"


@on_both_paths
def test_a_bad_row_read_in_parts_is_named_by_its_place_in_the_file(
    spark, lake: Lake, landing: Path, small_splits
) -> None:
    text = load_text(1, 2000) + "oops,bad key\n" + load_text(2002, ROWS)
    load = write_file(landing, T + "LOAD00000001.csv", text)
    with pytest.raises(DmsInputError) as refused:
        lake.apply(items_config(), load)
    assert f"{load}: row 2001, column id: cannot parse as bigint (value 'oops')" in str(refused.value)
    assert lake.rows() == []  # nothing landed
    assert snapshot_count(lake, items_config()) == 0


def test_a_key_repeated_inside_one_load_file_keeps_its_last_row(spark, lake: Lake, landing: Path) -> None:
    load = write_file(landing, T + "LOAD00000001.csv", "2,two\n1,first\n3,three\n1,last\n")
    lake.apply(items_config(), load)
    assert lake.rows() == [(1, "last"), (2, "two"), (3, "three")]


def test_keys_are_shown_unique_by_order_whatever_order_the_data_files_are_read_in(
    spark, lake: Lake, landing: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two LOAD files, the higher keys first: two data files, listed by the commit in that order. Read back, small
    # files share a read task, so the key column comes as a fall at the files' boundary, not a repeat. The order
    # must still decide (one columnar scan), not the aggregate over every key (a shuffle of the table's keys).
    high = write_file(landing, T + "LOAD00000001.csv", load_text(1001, 2000))
    low = write_file(landing, T + "LOAD00000002.csv", load_text(1, 1000))
    aggregated: list[str] = []
    repeats_a_key = load_append._repeats_a_key

    def recorded(spark_, target: str, table) -> bool:
        aggregated.append(target)
        return repeats_a_key(spark_, target, table)

    monkeypatch.setattr(load_append, "_repeats_a_key", recorded)
    result = lake.apply(items_config(), low)
    assert result.applied_files == [high, low] and len(data_files(lake)) == 2
    assert aggregated == []
    assert lake.rows() == [(i, f"item {i}, in stock") for i in range(1, 2001)]
