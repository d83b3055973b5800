"""A batch merged as a delete of its keys and an append of their new rows (``split_merge_from_rows``): the same
semantics as the one MERGE, chosen by the table's size (concurrent runs: test_replay_semantics)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Lake, items_config, on_both_paths, run_parts, write_file

pytestmark = pytest.mark.spark

T = "dms/shop/items/"
SPLIT = {"split_merge_from_rows": 0}


def rows(lake: Lake) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in lake.spark.table(lake.table("shop_items")).collect())


def parts(lake: Lake, config: Any) -> list[str]:
    return run_parts(lake, config.tables[0].lake_table)


@on_both_paths
def test_split_batch_applies_every_op_in_dms_order(spark, lake, landing):
    config = items_config(lake=SPLIT)
    write_file(landing, T + "LOAD00000001.csv", "1,one\n2,two\n3,three\n")
    key = write_file(
        landing,
        T + "20250301-120000000.csv",
        "I,4,a\nD,4,a\nI,4,b\nD,1,one\nI,1,uno\nU,1,eins\nU,7,ghost\nD,8,never\nD,3,three\nU,2,zwei\n",
    )
    result = lake.apply(config, key)
    assert result.applied_files == [T + "LOAD00000001.csv", key]
    assert rows(lake) == [(1, "eins"), (2, "zwei"), (4, "b"), (7, "ghost")]
    assert parts(lake, config) == ["load appended", "deleted"]  # the append of new rows carries the run's record


def test_split_batch_of_deletes_only_appends_nothing(spark, lake, landing):
    config = items_config(lake=SPLIT)
    write_file(landing, T + "LOAD00000001.csv", "1,a\n2,b\n")
    first = write_file(landing, T + "20250301-120000000.csv", "D,2,b\nD,9,ghost\n")
    lake.apply(config, first)
    assert rows(lake) == [(1, "a")]
    assert lake.apply(config, first).already_applied
    second = write_file(landing, T + "20250301-120100000.csv", "D,9,ghost\n")  # matches nothing
    lake.apply(config, second)
    assert rows(lake) == [(1, "a")]


def test_the_table_size_chooses_the_split(spark, lake, landing):
    """Below ``split_merge_from_rows`` rows a batch is one MERGE; from it on, a delete and an append."""
    config = items_config(lake={"split_merge_from_rows": 3})
    write_file(landing, T + "LOAD00000001.csv", "1,a\n2,b\n")
    small = write_file(landing, T + "20250301-120000000.csv", "U,1,a1\nI,3,c\n")
    lake.apply(config, T + "LOAD00000001.csv")
    loaded = parts(lake, config)
    lake.apply(config, small)
    assert parts(lake, config) == loaded  # one MERGE: one snapshot, the record's
    large = write_file(landing, T + "20250301-120100000.csv", "U,2,b1\nI,4,d\n")
    lake.apply(config, large)
    assert parts(lake, config) == [*loaded, "deleted"]
    assert rows(lake) == [(1, "a1"), (2, "b1"), (3, "c"), (4, "d")]
