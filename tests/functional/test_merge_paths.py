"""A batch merged as a delete of its keys and an append of their new rows (``split_merge_from_rows``): the same
semantics as the one MERGE, chosen by the table's size (concurrent runs: test_replay_semantics)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.configs import items_config
from tests.support.lake import Lake, on_both_paths, write_file

pytestmark = pytest.mark.spark

T = "dms/shop/items/"
SPLIT = {"split_merge_from_rows": 0}


def parts(lake: Lake, config: Any) -> list[str]:
    return lake.run_parts(config.tables[0].lake_table)


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
    assert lake.rows() == [(1, "eins"), (2, "zwei"), (4, "b"), (7, "ghost")]
    assert parts(lake, config) == ["load appended", "deleted"]  # the append of new rows carries the run's record


def test_split_batch_of_deletes_only_appends_nothing(spark, lake, landing):
    config = items_config(lake=SPLIT)
    write_file(landing, T + "LOAD00000001.csv", "1,a\n2,b\n")
    first = write_file(landing, T + "20250301-120000000.csv", "D,2,b\nD,9,ghost\n")
    lake.apply(config, first)
    assert lake.rows() == [(1, "a")]
    assert lake.apply(config, first).already_applied
    second = write_file(landing, T + "20250301-120100000.csv", "D,9,ghost\n")  # matches nothing
    lake.apply(config, second)
    assert lake.rows() == [(1, "a")]


def test_the_table_size_chooses_the_split(spark, lake, landing):
    """Below ``split_merge_from_rows`` rows a batch is one MERGE; from it on, a delete and an append (the MERGE's
    paths: a batch this small would otherwise be a row delta)."""
    config = items_config(lake={"split_merge_from_rows": 3, "row_delta_keys": 0})
    write_file(landing, T + "LOAD00000001.csv", "1,a\n2,b\n")
    small = write_file(landing, T + "20250301-120000000.csv", "U,1,a1\nI,3,c\n")
    lake.apply(config, T + "LOAD00000001.csv")
    loaded = parts(lake, config)
    lake.apply(config, small)
    assert parts(lake, config) == loaded  # one MERGE: one snapshot, the record's
    large = write_file(landing, T + "20250301-120100000.csv", "U,2,b1\nI,4,d\n")
    lake.apply(config, large)
    assert parts(lake, config) == [*loaded, "deleted"]
    assert lake.rows() == [(1, "a1"), (2, "b1"), (3, "c"), (4, "d")]


@pytest.mark.parametrize("whole_range", [True, False])
def test_a_small_table_rewrites_its_key_range_whole(spark, lake, landing, monkeypatch, whole_range):
    """Into a copy-on-write table of at most ``WHOLE_RANGE_BYTES``, a MERGE rewrites every file of the batch's key
    range instead of first finding the files holding a changed key (Spark's runtime group filter, three jobs);
    above it, only those files. Both leave the same rows, and the session's setting as it was."""
    from cdc_lake.engine import commit

    if not whole_range:
        monkeypatch.setattr(commit, "WHOLE_RANGE_BYTES", -1)
    config = items_config(lake={"write_mode": "copy-on-write"})
    write_file(landing, T + "LOAD00000001.csv", "1,a\n2,b\n")
    # Keys further apart than the grid a MERGE widens its range onto (commit.gridded): no batch rewrites another's file.
    for second, text in enumerate(["I,4001,d\nI,4002,e\n", "I,8001,g\nI,8002,h\n"]):
        lake.apply(config, write_file(landing, f"{T}20250301-12000{second}000.csv", text))
    name = lake.table("shop_items")
    assert spark.table(f"{name}.files").count() == 3  # each batch's new keys in a file of their own
    key = write_file(landing, T + "20250301-120100000.csv", "U,1,a1\nD,8002,h\nI,9,i\n")  # the first and last file

    lake.apply(config, key)

    assert lake.rows() == [(1, "a1"), (2, "b"), (9, "i"), (4001, "d"), (4002, "e"), (8001, "g")]
    latest = spark.sql(f"SELECT summary FROM {name}.snapshots ORDER BY committed_at DESC LIMIT 1").first()
    assert latest is not None
    assert latest["summary"]["deleted-data-files"] == ("3" if whole_range else "2")
    assert spark.conf.get(commit.GROUP_FILTER, None) is None
