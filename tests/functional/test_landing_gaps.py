"""Where the lake table and the raw landing disagree about history, a run never applies past the hole: each
scenario ends refused, with what to do and the table as it was, or exact against the expected rows. On both lake
paths; applied files are removed as the scheduled maintenance removes them (``engine.landed_expiry``, its mark
left), others as the raw bucket's catch-all rule or a person does."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import threading
import time
from typing import Any

import pytest

from cdc_lake.core.config import parse_config
from cdc_lake.core.dms_files import parse_key
from cdc_lake.core.exceptions import DmsInputError, HistoryGapError, RecordLostError, RollbackRefusedError
from cdc_lake.engine.iceberg_java import table_properties
from cdc_lake.engine.landed_expiry import expire_table
from cdc_lake.engine.record import RECORD, REFUSED
from cdc_lake.engine.reload import reload_table
from cdc_lake.engine.replay import replay
from cdc_lake.ops import operations
from cdc_lake.ops.operations import list_changes, rollback
from tests.support.configs import items_config, items_config_data
from tests.support.lake import Lake, on_both_paths, write_file

pytestmark = pytest.mark.spark

T = "dms/shop/items/"
START = dt.datetime(2025, 3, 1, 12, 0)


def land(lake: Lake, name: str, text: str, minute: int) -> str:
    """Land a file written ``minute`` minutes after START (the landing order the lifecycle expires by)."""
    return write_file(lake.landing, T + name, text, START + dt.timedelta(minutes=minute))


def landed_history(lake: Lake) -> list[str]:
    """A LOAD file and three CDC files, landed; rows after all of them: (1, uno), (3, three), (4, four)."""
    return [
        land(lake, "LOAD00000001.csv", "1,one\n2,two\n", 0),
        land(lake, "20250301-120100000.csv", "U,1,uno\n", 1),
        land(lake, "20250301-120200000.csv", "D,2,two\nI,3,three\n", 2),
        land(lake, "20250301-120300000.csv", "I,4,four\n", 3),
    ]


EXPECTED = [(1, "uno"), (3, "three"), (4, "four")]


def drop(lake: Lake, name: str = "shop_items") -> None:
    lake.spark.sql(f"DROP TABLE {lake.table(name)}")


def maintain(lake: Lake, config: Any) -> int:
    """The scheduled maintenance's removal, of every file the table applied (all landed before now)."""
    return expire_table(lake.context(config), config.table("shop.items"), dt.datetime.now(dt.UTC)).removed


@on_both_paths
def test_a_table_dropped_after_its_load_files_expired_is_refused_not_rebuilt_from_what_is_left(lake: Lake) -> None:
    config = items_config()
    _load, first, second, third = landed_history(lake)
    lake.apply(config, second)
    assert maintain(lake, config) == 3  # the three it applied, rawRetentionDays after they landed
    drop(lake)
    with pytest.raises(HistoryGapError) as refused:
        lake.apply(config, third)
    message = str(refused.value)
    assert f"the scheduled maintenance removed 3 of its landed files a lake table had applied, the newest {second}" in (
        message
    )
    assert "no LOAD file is left" in message and "cdc-lake reload -t shop.items" in message
    assert lake.rows() == []  # made again empty, nothing applied
    assert (lake.landing / third).exists()
    kept = json.loads(table_properties(lake.spark, lake.location.dotted("shop_items"))[REFUSED])
    assert kept["waiting"]["key"] == third and "no LOAD file is left" in kept["message"]
    # What the refusal says to do: DMS reloads the table (its LOAD files written again), then `cdc-lake reload`.
    land(lake, "LOAD00000001.csv", "1,uno\n3,three\n", 10)
    # The CDC files from the first one on apply after the LOAD rows (S3 dates the LOAD file now, not in 2025).
    reload_table(lake.context(config), config.table("shop.items"), since=first)
    assert lake.rows() == EXPECTED
    assert lake.apply(config, third).already_applied


@on_both_paths
def test_a_dropped_table_whose_load_file_outlived_the_removed_files_after_it_is_refused_not_rebuilt_with_a_hole(
    lake: Lake,
) -> None:
    """Files after the LOAD file were removed and it was not (by hand, or an older removal that left it): the LOAD
    file landed before the newest removed one, so it is the load they followed, not a reload since."""
    config = items_config()
    load, first, second, third = landed_history(lake)
    lake.apply(config, third)
    lake.remove_applied(config, first, second)
    drop(lake)
    fourth = land(lake, "20250301-120400000.csv", "I,5,five\n", 4)
    with pytest.raises(HistoryGapError) as refused:
        lake.apply(config, fourth)
    message = str(refused.value)
    assert f"removed 2 of its landed files a lake table had applied, the newest {second}" in message
    assert f"its LOAD file {load} landed before that" in message and "cdc-lake reload -t" in message
    assert lake.rows() == []
    assert all((lake.landing / key).exists() for key in (load, third, fourth))


@on_both_paths
@pytest.mark.parametrize("maintained", [False, True])
def test_a_table_dropped_while_its_landing_is_whole_is_rebuilt_exactly(lake: Lake, maintained: bool) -> None:
    """Nothing of it removed: the landing holds the whole history. Once a scheduled run saw the table apply files,
    its mark says none was removed, and the rebuild is announced; before (no mark), it is a first batch as a
    fresh table's."""
    config = items_config()
    keys = landed_history(lake)
    lake.apply(config, keys[2])
    if maintained:  # none old enough to remove
        expire_table(lake.context(config), config.table("shop.items"), dt.datetime(2000, 1, 1, tzinfo=dt.UTC))
    drop(lake)
    result = lake.apply(config, keys[3])
    assert result.applied_files == keys
    assert lake.rows() == EXPECTED
    rebuilt = [n for n in result.notices if n.kind == "history-rebuilt"]
    assert len(rebuilt) == maintained
    if maintained:
        assert "none of them removed since" in rebuilt[0].detail and keys[0] in rebuilt[0].detail


@on_both_paths
def test_a_table_dropped_after_removals_and_reloaded_by_dms_is_rebuilt_and_says_so(lake: Lake) -> None:
    config = items_config()
    _load, _first, second, third = landed_history(lake)
    lake.apply(config, second)
    maintain(lake, config)
    drop(lake)
    if lake.path == "glue":
        time.sleep(1.1)  # the endpoint's S3 dates objects to the second: the reload lands after the removed files
    reloaded = land(lake, "LOAD00000001.csv", "1,uno\n3,three\n", 10)  # DMS reloaded the table
    result = lake.apply(config, third)
    assert result.applied_files == [reloaded, third]
    assert lake.rows() == EXPECTED
    [notice] = [n for n in result.notices if n.kind == "history-rebuilt"]
    assert "removed 3 of its landed files" in notice.detail and f"from {reloaded}" in notice.detail


@on_both_paths
def test_a_changed_target_with_its_load_files_expired_is_refused(lake: Lake) -> None:
    config = items_config()
    _load, _, second, third = landed_history(lake)
    lake.apply(config, second)
    maintain(lake, config)
    data = items_config_data()
    data["tables"][0]["target"] = "items_v2"
    moved = parse_config(data)
    with pytest.raises(HistoryGapError, match=r"point `target` back at it"):
        lake.apply(moved, third)
    assert lake.rows("items_v2") == []
    assert lake.rows() == [(1, "uno"), (3, "three")]  # the earlier lake table, untouched


@on_both_paths
def test_a_rollback_past_what_the_landing_holds_is_refused_and_moves_nothing(lake: Lake) -> None:
    config = items_config()
    keys = landed_history(lake)
    for key in keys:
        lake.apply(config, key)
    table = config.table("shop.items")
    changes = [c for c in list_changes(lake, table) if c.kind == "replay"]
    assert [c.files for c in changes] == [[k] for k in keys]
    lake.expire(keys[0], keys[1])  # the LOAD file and the first CDC file expired
    context = lake.context(config)
    head, record = lake.head(), table_properties(lake.spark, lake.location.dotted("shop_items"))[RECORD]
    with pytest.raises(RollbackRefusedError) as refused:
        rollback(context, table, changes[0].snapshot_id)
    message = str(refused.value)
    assert "1 of the 3 CDC files" in message and f"Roll back to change {changes[1].snapshot_id} or later" in message
    assert lake.head() == head and lake.rows() == EXPECTED
    assert table_properties(lake.spark, lake.location.dotted("shop_items"))[RECORD] == record
    done = rollback(context, table, changes[1].snapshot_id)  # the oldest the landing covers
    assert done.files_to_reapply == 2 and lake.rows() == [(1, "uno"), (2, "two")]
    assert lake.apply(config, keys[3]).applied_files == keys[2:]
    assert lake.rows() == EXPECTED


@on_both_paths
def test_a_stop_inside_rollback_leaves_each_table_whole_and_the_next_run_exact(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = items_config(history=True)
    keys = landed_history(lake)
    for key in keys:
        lake.apply(config, key)
    table = config.table("shop.items")
    target = [c for c in list_changes(lake, table) if c.kind == "replay"][1]
    moves: list[str] = []
    real_move = operations.move_main

    def stopped(spark: Any, dotted: str, *args: Any) -> None:
        moves.append(dotted)
        if not dotted.endswith("_history"):
            raise KeyboardInterrupt("the job stopped")  # between history's commit and the table's
        real_move(spark, dotted, *args)

    monkeypatch.setattr(operations, "move_main", stopped)
    head = lake.head()
    with pytest.raises(KeyboardInterrupt):
        rollback(lake.context(config), table, target.snapshot_id)
    assert [m.rsplit(".", 1)[1] for m in moves] == ["shop_items_history", "shop_items"]
    assert lake.head() == head and lake.rows() == EXPECTED
    record = json.loads(table_properties(lake.spark, lake.location.dotted("shop_items"))[RECORD])
    assert record["snapshot"] == head  # main and its record moved together, or not at all
    monkeypatch.undo()
    result = lake.apply(config, keys[3])  # history, set back alone, applies again what the table holds
    assert result.applied_files == [] and result.history_files == keys[2:]
    current = lake.spark.sql(f"SELECT id, label FROM {lake.table('shop_items_history')} WHERE is_current")
    assert sorted(tuple(r) for r in current.collect()) == EXPECTED
    assert lake.rows() == EXPECTED


@on_both_paths
def test_icebergs_own_rollback_then_a_foreign_compaction_and_expiry_is_refused(lake: Lake) -> None:
    config = items_config()
    keys = landed_history(lake)
    for key in keys[:3]:
        lake.apply(config, key)
    table = config.table("shop.items")
    first = next(c for c in list_changes(lake, table) if c.kind == "replay")
    target = f"{lake.database}.shop_items"
    call = f"CALL {lake.catalog}.system"
    lake.spark.sql(f"{call}.rollback_to_snapshot(table => '{target}', snapshot_id => {first.snapshot_id})").collect()
    lake.spark.sql(f"{call}.rewrite_data_files(table => '{target}', options => map('rewrite-all', 'true'))").collect()
    later = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=5)).strftime("%Y-%m-%d %H:%M:%S")
    lake.spark.sql(
        f"{call}.expire_snapshots(table => '{target}', older_than => TIMESTAMP '{later}', retain_last => 1)"
    ).collect()
    before = lake.rows()
    assert before == [(1, "one"), (2, "two")]  # the rollback undid two CDC files
    with pytest.raises(RecordLostError, match="cannot be shown to be an ancestor of main"):
        lake.apply(config, keys[3])
    assert lake.rows() == before


@on_both_paths
def test_a_refused_file_expired_by_the_catch_all_stops_the_files_after_it(lake: Lake) -> None:
    config = items_config()
    load = land(lake, "LOAD00000001.csv", "1,one\n", 0)
    lake.apply(config, load)
    bad = land(lake, "20250301-120100000.csv", "X,2,two\n", 1)  # an unknown op: refused
    with pytest.raises(DmsInputError, match="unknown Op"):
        lake.apply(config, bad)
    good = land(lake, "20250301-120200000.csv", "I,3,three\n", 2)
    with pytest.raises(DmsInputError, match="unknown Op"):
        lake.apply(config, good)
    lake.expire(bad)  # never fixed: the catch-all rule removed it a year later
    with pytest.raises(HistoryGapError) as refused:
        lake.apply(config, good)
    message = str(refused.value)
    assert f"{bad}, which had waited unapplied since" in message and "catch-all" in message
    assert "unknown" in message  # the refusal it followed
    assert lake.rows() == [(1, "one")]
    assert (lake.landing / good).exists()
    reload_table(lake.context(config), config.table("shop.items"), since=good)  # what it says to do; clears the refusal
    assert lake.rows() == [(1, "one"), (3, "three")]
    assert REFUSED not in table_properties(lake.spark, lake.location.dotted("shop_items"))


@on_both_paths
@pytest.mark.parametrize("removed", ["none", "after-a"])
def test_a_first_batch_beaten_by_a_concurrent_one_plans_again_not_refused_as_a_gap(lake: Lake, removed: str) -> None:
    """Two runs of a new table at once: B reads it empty and lists, then A commits its first batch, and the
    scheduled maintenance may remove A's files (and mark them) before B reads the mark. The mark is not an earlier
    lake table's: B plans again from A's commit, neither refused nor announcing a rebuild."""
    config = items_config()
    load, first, second, third = landed_history(lake)
    beaten: list[Any] = []

    def a_commits_first(batch: Any) -> None:
        if beaten:
            return
        beaten.append(batch.trigger.key)
        run = threading.Thread(target=lambda: beaten.append(lake.apply(config, second)))
        run.start()
        run.join()
        if removed == "after-a":
            assert maintain(lake, config) == 3

    context = dataclasses.replace(lake.context(config), admit=a_commits_first)
    result = replay(context, parse_key(third, config))
    assert beaten[0] == third and beaten[1].applied_files == [load, first, second]
    assert result.applied_files == [third] and result.attempts == 2
    assert not [n for n in result.notices if n.kind == "history-rebuilt"]
    assert lake.rows() == EXPECTED
