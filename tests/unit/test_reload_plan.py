"""Planning a reload without Spark: which LOAD and CDC files rebuild the table, and what it records."""

from __future__ import annotations

import datetime as dt

import pytest

from cdc_lake.core.config import parse_config
from cdc_lake.core.dms_files import parse_key
from cdc_lake.core.exceptions import JobArgumentError, ReplayOrderError
from cdc_lake.core.plan import (
    ReplayState,
    cdc_position,
    parse_since,
    plan_reload,
    plan_run,
    reload_hint,
    reload_margin,
    show_position,
)
from cdc_lake.core.storage import StoredObject

CONFIG = parse_config(
    {
        "dms": {"bucket_folder": "dms"},
        "tables": [{"name": "shop.items", "primary_key": ["id"], "columns": [{"name": "id", "type": "bigint"}]}],
    }
)
TABLE = CONFIG.tables[0]
P = "dms/shop/items/"
RELOADED_AT = dt.datetime(2025, 3, 1, 11, 0, tzinfo=dt.UTC)
COMMAND = "run `cdc-lake reload -t shop.items` locally, or start the cdc-lake maintenance Glue job with --action reload"


def obj(name: str, etag: str = "e", at: dt.datetime | None = RELOADED_AT, size: int = 10) -> StoredObject:
    return StoredObject(P + name, size, etag, at)


def test_automatic_boundary_is_an_hour_before_the_first_load_file_and_includes_cached_changes():
    listed = [
        obj("LOAD00000001.csv", "new1"),
        obj("LOAD00000002.csv", "new2", RELOADED_AT + dt.timedelta(seconds=30)),
        obj("20250301-095959999.csv"),  # more than the margin before: superseded by the LOAD rows
        obj("20250301-100000000.csv"),  # exactly at the boundary: applied (too early is only extra work)
        obj("20250301-105930000.csv"),
        obj("20250301-110100000.csv"),  # changes cached during the reload
    ]
    plan = plan_reload(CONFIG, TABLE, listed, base_snapshot_id=7)
    assert [f.name for f in plan.load_files] == ["LOAD00000001.csv", "LOAD00000002.csv"]
    assert [f.name for f in plan.skipped_cdc_files] == ["20250301-095959999.csv"]
    assert [f.name for f in plan.cdc_files] == [
        "20250301-100000000.csv",
        "20250301-105930000.csv",
        "20250301-110100000.csv",
    ]
    assert show_position(plan.boundary) == "20250301-100000000"
    assert plan.boundary_source.startswith("automatic: earliest current LOAD file written 2025-03-01 11:00:00 UTC")
    assert plan.run_plan().trigger.name == "20250301-110100000.csv"
    state = plan.next_state
    assert (state.cdc_last, state.cdc_count, state.load_count) == (P + "20250301-110100000.csv", 4, 2)


def test_the_next_ordinary_run_applies_only_the_next_cdc_file_and_refuses_nothing():
    listed = [obj("LOAD00000001.csv", "new1"), obj("20250301-090000000.csv"), obj("20250301-110100000.csv")]
    state = plan_reload(CONFIG, TABLE, listed, base_snapshot_id=7).next_state
    recorded = ReplayState.from_json(state.to_json(), snapshot_id=8)
    later = [*listed, obj("20250301-111000000.csv")]
    trigger = parse_key(P + "20250301-111000000.csv", CONFIG)
    plan = plan_run(CONFIG, trigger, later, recorded, base_snapshot_id=8)
    assert [f.name for f in plan.pending] == ["20250301-111000000.csv"]
    # A repeated event for a file before the reload finds nothing to do.
    again = plan_run(CONFIG, parse_key(P + "20250301-090000000.csv", CONFIG), later, recorded, 8)
    assert again.pending == []


def test_folder_emptied_first_and_no_cdc_file_yet_records_the_load_by_name():
    listed = [obj("LOAD00000001.csv", "new1")]
    plan = plan_reload(CONFIG, TABLE, listed, base_snapshot_id=3)
    assert plan.cdc_files == [] and plan.skipped_cdc_files == []
    state = ReplayState.from_json(plan.next_state.to_json(), snapshot_id=4)
    assert not state.cdc_started and state.load_runs == ((P + "LOAD00000001.csv", P + "LOAD00000001.csv"),)
    assert state.load_count == 1 and state.holds_load(P + "LOAD00000001.csv")
    later = [*listed, obj("20250301-110100000.csv")]
    trigger = parse_key(P + "20250301-110100000.csv", CONFIG)
    assert [f.name for f in plan_run(CONFIG, trigger, later, state, 4).pending] == ["20250301-110100000.csv"]


def test_load_files_left_by_an_earlier_longer_load_are_not_read_but_recorded():
    earlier = RELOADED_AT - dt.timedelta(days=2)
    listed = [
        obj("LOAD00000001.csv", "new1"),
        obj("LOAD00000002.csv", "old2", earlier),
        obj("LOAD00000003.csv", "old3", earlier),
        obj("20250301-110100000.csv"),
    ]
    plan = plan_reload(CONFIG, TABLE, listed, base_snapshot_id=7)
    assert [f.name for f in plan.load_files] == ["LOAD00000001.csv"]
    assert [f.name for f in plan.stale_load_files] == ["LOAD00000002.csv", "LOAD00000003.csv"]
    state = ReplayState.from_json(plan.next_state.to_json(), snapshot_id=8)
    later = [*listed, obj("20250301-111000000.csv")]
    trigger = parse_key(P + "20250301-111000000.csv", CONFIG)
    assert [f.name for f in plan_run(CONFIG, trigger, later, state, 8).pending] == ["20250301-111000000.csv"]


def test_parallel_segments_written_about_together_are_all_current():
    listed = [
        obj("LOAD_1_00000001.csv", "a", RELOADED_AT + dt.timedelta(seconds=5)),
        obj("LOAD_2_00000001.csv", "b", RELOADED_AT),
    ]
    plan = plan_reload(CONFIG, TABLE, listed, base_snapshot_id=1)
    assert len(plan.load_files) == 2 and plan.stale_load_files == []
    assert show_position(plan.boundary) == "20250301-100000000"


@pytest.mark.parametrize(
    "since",
    [
        "20250301-093000000.csv",
        P + "20250301-093000000.csv",
        "20250301-093000",
        "20250301-093000000",
        "2025-03-01T09:30:00",
        "2025-03-01T09:30:00Z",
        "2025-03-01 11:30:00+02:00",
    ],
)
def test_since_overrides_the_boundary_in_every_accepted_form(since):
    listed = [obj("LOAD00000001.csv"), obj("20250301-092959000.csv"), obj("20250301-093000000.csv")]
    plan = plan_reload(CONFIG, TABLE, listed, base_snapshot_id=1, since=since)
    assert [f.name for f in plan.cdc_files] == ["20250301-093000000.csv"]
    assert plan.boundary_source == f"--since {since}"
    assert parse_since(since) == cdc_position(dt.datetime(2025, 3, 1, 9, 30, tzinfo=dt.UTC))


def test_bad_since_names_the_argument():
    with pytest.raises(JobArgumentError, match=r"--since 'yesterday': expected a CDC file name"):
        parse_since("yesterday")


def test_no_load_files_is_refused():
    with pytest.raises(ReplayOrderError, match=r"shop.items: no LOAD files under dms/shop/items/"):
        plan_reload(CONFIG, TABLE, [obj("20250301-110100000.csv")], base_snapshot_id=1)


def test_without_write_times_the_boundary_must_be_given():
    listed = [obj("LOAD00000001.csv", at=None), obj("20250301-110100000.csv", at=None)]
    with pytest.raises(ReplayOrderError, match=r"pass --since"):
        plan_reload(CONFIG, TABLE, listed, base_snapshot_id=1)
    plan = plan_reload(CONFIG, TABLE, listed, base_snapshot_id=1, since="20250301-110000000")
    assert [f.name for f in plan.cdc_files] == ["20250301-110100000.csv"]


def test_margin_grows_with_the_cdc_batch_interval():
    assert reload_margin(CONFIG) == dt.timedelta(hours=1)
    slow = parse_config({**CONFIG.model_dump(), "dms": {"bucket_folder": "dms", "cdc_max_batch_interval": 900}})
    assert reload_margin(slow) == dt.timedelta(seconds=9000)


def test_reload_refusal_before_cdc_names_the_command():
    trigger = parse_key(P + "LOAD00000001.csv", CONFIG)
    state = plan_run(CONFIG, trigger, [obj("LOAD00000001.csv", "old")], ReplayState(), 1).next_state
    listed = [obj("LOAD00000001.csv", "new")]
    with pytest.raises(ReplayOrderError) as refused:
        plan_run(CONFIG, trigger, listed, state, 1)
    message = str(refused.value)
    assert "its LOAD files changed since they were applied (1 applied, 1 now listed): DMS reloaded the table" in message
    assert COMMAND in message and "--table shop.items (docs/deploy.md#reload)" in message


def test_reload_refusal_after_cdc_names_the_command():
    old = [obj("LOAD00000001.csv", "old"), obj("20250301-100000000.csv")]
    plan = plan_reload(CONFIG, TABLE, old, base_snapshot_id=1)
    listed = [obj("LOAD00000001.csv", "new"), *old[1:], obj("20250301-110100000.csv")]
    trigger = parse_key(P + "20250301-110100000.csv", CONFIG)
    with pytest.raises(ReplayOrderError) as refused:
        plan_run(CONFIG, trigger, listed, plan.next_state, 1)
    assert "its LOAD files changed after CDC files were applied" in str(refused.value)
    assert COMMAND in str(refused.value)
    assert reload_hint("shop.items") in str(refused.value)


def test_fewer_load_files_written_after_the_applied_ones_are_a_reload_expired_ones_are_not():
    earlier = RELOADED_AT - dt.timedelta(days=1)
    old = [obj("LOAD00000001.csv", "a", earlier), obj("LOAD00000002.csv", "b", earlier), obj("20250301-100000000.csv")]
    state = ReplayState.from_json(plan_reload(CONFIG, TABLE, old, base_snapshot_id=1).next_state.to_json(), 2)
    assert state.load_written == earlier.isoformat()
    trigger = parse_key(P + "20250301-110100000.csv", CONFIG)
    # Lifecycle expiry: fewer LOAD files, none written since. Replay goes on.
    expired = [old[0], old[2], obj("20250301-110100000.csv")]
    assert [f.name for f in plan_run(CONFIG, trigger, expired, state, 2).pending] == ["20250301-110100000.csv"]
    # The folder emptied and one LOAD file written again: a reload, though the count fell.
    emptied = [obj("LOAD00000001.csv", "c"), obj("20250301-110100000.csv")]
    with pytest.raises(ReplayOrderError, match=r"its LOAD files changed after CDC files were applied \(2 applied, 1"):
        plan_run(CONFIG, trigger, emptied, state, 2)


def test_ordinary_runs_record_when_the_load_files_were_written():
    earlier = RELOADED_AT - dt.timedelta(days=1)
    loads = [obj("LOAD00000001.csv", "a", earlier), obj("LOAD00000002.csv", "b", earlier)]
    listed = [*loads, obj("20250301-100000000.csv")]
    run = plan_run(CONFIG, parse_key(P + "20250301-100000000.csv", CONFIG), listed, ReplayState(), 1)
    state = ReplayState.from_json(run.next_state.to_json(), 2)
    assert (state.load_count, state.load_written) == (2, earlier.isoformat())
    emptied = [obj("LOAD00000001.csv", "c"), obj("20250301-110100000.csv")]
    with pytest.raises(ReplayOrderError, match=r"cdc-lake reload -t shop\.items"):
        plan_run(CONFIG, parse_key(P + "20250301-110100000.csv", CONFIG), emptied, state, 2)
