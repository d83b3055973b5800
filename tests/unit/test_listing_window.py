"""The listing window, without Spark: a run lists a table from where its record says new files can be, plans
exactly what a full listing would give, and still refuses a file that lands behind applied ones."""

from __future__ import annotations

import datetime as dt
import random

import pytest

from cdc_lake.core.config import PipelineConfig, parse_config
from cdc_lake.core.dms_files import parse_key, table_files
from cdc_lake.core.exceptions import ReplayOrderError
from cdc_lake.core.plan import ReplayState, listing_lookback, listing_start, plan_run
from cdc_lake.core.storage import StoredObject

START = dt.datetime(2025, 3, 1, 22, 0, tzinfo=dt.UTC)


def config_for(**dms: object) -> PipelineConfig:
    return parse_config(
        {
            "dms": {"bucket_folder": "dms", **dms},
            "tables": [{"name": "shop.items", "primary_key": ["id"], "columns": [{"name": "id", "type": "bigint"}]}],
        }
    )


def cdc_key(config: PipelineConfig, moment: dt.datetime) -> str:
    name = f"{moment:%Y%m%d-%H%M%S}{moment.microsecond // 1000:03d}.csv"
    if not config.dms.date_partition_enabled:
        return f"dms/shop/items/{name}"
    folder = {"YYYYMMDD": f"{moment:%Y/%m/%d}", "YYYYMMDDHH": f"{moment:%Y/%m/%d/%H}", "DDMMYYYY": f"{moment:%d/%m/%Y}"}
    return f"dms/shop/items/{folder[config.dms.date_partition_sequence]}/{name}"


def listed_from(objects: list[StoredObject], start: str | None) -> list[StoredObject]:
    """What S3 returns for Prefix + StartAfter."""
    return sorted((o for o in objects if start is None or o.key > start), key=lambda o: o.key)


def stream(config: PipelineConfig, batches: int, seed: int) -> None:
    """Files land in batches over many hours (crossing midnight); each batch is planned from the windowed
    listing and from the full listing: the pending files, and the next state, must agree."""
    rng = random.Random(seed)
    table = config.tables[0]
    objects = [StoredObject("dms/shop/items/LOAD00000001.csv", 10, "l", START)]
    state = ReplayState()
    moment = START
    for _ in range(batches):
        for _ in range(rng.randint(1, 6)):
            moment += dt.timedelta(seconds=rng.randint(30, 1500))
            objects.append(StoredObject(cdc_key(config, moment), 10, "e", moment))
        start = listing_start(config, table, state)
        windowed = listed_from(objects, start)
        trigger = table_files([o.key for o in windowed], table, config)[-1]
        plan = plan_run(config, trigger, windowed, state, 1)
        full = plan_run(config, trigger, objects, state, 1)
        assert [f.key for f in plan.pending] == [f.key for f in full.pending]
        assert plan.next_state == full.next_state
        state = plan.next_state
    assert state.cdc_count == len(objects) - 1
    assert state.cdc_from is not None and state.cdc_before > 0
    if not config.dms.date_partition_enabled:  # date folders start a day early: this stream is two days long
        assert len(listed_from(objects, listing_start(config, table, state))) < len(objects) // 4


@pytest.mark.parametrize(
    "dms",
    [{}, {"date_partition_enabled": True}, {"date_partition_enabled": True, "date_partition_sequence": "YYYYMMDDHH"}],
)
def test_a_windowed_listing_plans_what_a_full_listing_plans(dms):
    for seed in range(20):
        stream(config_for(**dms), batches=40, seed=seed)


def test_the_window_starts_a_lookback_before_the_newest_applied_file_and_counts_what_it_leaves_behind():
    config = config_for()
    table = config.tables[0]
    times = [START + dt.timedelta(minutes=m) for m in (0, 30, 61, 90, 150)]
    objects = [StoredObject(cdc_key(config, t), 10, "e", t) for t in times]
    plan = plan_run(config, parse_key(objects[-1].key, config), objects, ReplayState(), 1)
    assert listing_lookback(config) == dt.timedelta(hours=1)
    # 150 min - 60 min = 90 min: the files at 0, 30 and 61 min are behind the window.
    assert plan.next_state.cdc_from is not None and plan.next_state.cdc_from.startswith("20250301233000")
    assert plan.next_state.cdc_before == 3
    assert listing_start(config, table, plan.next_state) == "dms/shop/items/20250301-23"
    again = ReplayState.from_json(plan.next_state.to_json(), 5)
    assert (again.cdc_from, again.cdc_before) == (plan.next_state.cdc_from, 3)


def test_listing_starts_a_day_early_in_date_folders_and_not_at_all_where_folders_do_not_sort():
    state = ReplayState(cdc_last="x", cdc_count=1, cdc_from="20250302" + "003000".ljust(16, "0"), cdc_before=0)
    by_day = config_for(date_partition_enabled=True)
    assert listing_start(by_day, by_day.tables[0], state) == "dms/shop/items/2025/03/01"
    dashed = config_for(date_partition_enabled=True, date_partition_delimiter="DASH")
    assert listing_start(dashed, dashed.tables[0], state) == "dms/shop/items/2025-03-01"
    unsorted = config_for(date_partition_enabled=True, date_partition_sequence="DDMMYYYY")
    assert listing_start(unsorted, unsorted.tables[0], state) is None
    assert listing_start(by_day, by_day.tables[0], ReplayState(cdc_last="x", cdc_count=1)) is None


def test_a_file_landing_behind_applied_ones_inside_the_window_is_still_refused():
    config = config_for()
    table = config.tables[0]
    times = [START + dt.timedelta(minutes=m) for m in range(0, 200, 10)]
    objects = [StoredObject(cdc_key(config, t), 10, "e", t) for t in times]
    plan = plan_run(config, parse_key(objects[-1].key, config), objects, ReplayState(), 1)
    late = START + dt.timedelta(minutes=185)  # inside the window, before the newest applied file
    objects.append(StoredObject(cdc_key(config, late), 10, "late", late))
    newer = START + dt.timedelta(minutes=200)
    objects.append(StoredObject(cdc_key(config, newer), 10, "e", newer))
    windowed = listed_from(objects, listing_start(config, table, plan.next_state))
    with pytest.raises(ReplayOrderError, match="landed after later changes were applied"):
        plan_run(config, parse_key(objects[-1].key, config), windowed, plan.next_state, 1)


def test_every_load_file_is_listed_from_any_start():
    config = config_for(date_partition_enabled=True)
    state = ReplayState(cdc_last="x", cdc_count=1, cdc_from="20991231" + "0".ljust(16, "0"))
    start = listing_start(config, config.tables[0], state)
    assert start is not None and start < "dms/shop/items/LOAD00000001.csv"
    assert start < "dms/shop/items/LOAD_0001_00000001.csv"


def test_a_cdc_file_written_after_the_last_batch_is_named_late_or_rewritten():
    config = config_for()
    load = StoredObject("dms/shop/items/LOAD00000001.csv", 10, "l", START)
    first, second = (StoredObject(cdc_key(config, START + dt.timedelta(minutes=m)), 10, "e", START) for m in (1, 2))
    applied = plan_run(config, parse_key(second.key, config), [load, first, second], ReplayState(), 1).next_state
    assert applied.cdc_written == START.isoformat()
    later = START + dt.timedelta(minutes=5)
    rewritten = StoredObject(first.key, 12, "other", later)
    newer = StoredObject(cdc_key(config, START + dt.timedelta(minutes=6)), 10, "n", later)
    with pytest.raises(ReplayOrderError, match=f"CDC file\\(s\\) {first.key} sort before .* rewritten"):
        plan_run(config, parse_key(newer.key, config), [load, rewritten, second, newer], applied, 2)
    # The same file as applied, and a later file: planned as ever.
    plan = plan_run(config, parse_key(newer.key, config), [load, first, second, newer], applied, 2)
    assert [f.key for f in plan.pending] == [newer.key]
    assert plan.next_state.cdc_written == later.isoformat()
    assert ReplayState.from_json(plan.next_state.to_json(), 3).cdc_written == later.isoformat()
