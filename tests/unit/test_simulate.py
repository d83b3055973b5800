"""The cost simulation (bench/simulate.py): its Glue stand-in, both designs' run scripts, and that the real
Lambda handler is what starts every run; the warm design's shards, lanes and bill, the batch time its goals need,
and the scheduled jobs on Flex."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import Any

import pytest
from botocore.exceptions import ClientError

import bench.simulate as simulate_module
from bench.simulate import (
    DAY_S,
    DRIFT_WORKERS,
    FRESHNESS_INTERVALS_S,
    MAINTENANCE_WORKERS,
    NEW_MAX_CONCURRENT_RUNS,
    OLD_MAX_CONCURRENT_RUNS,
    OLD_WORKERS,
    SOURCE_CHECK_WORKERS,
    VERSION_COLUMNS,
    WARM_BATCH_REQUESTS,
    WARM_COLUMNS,
    GlueCosts,
    SimParams,
    Simulation,
    Sizing,
    WarmGoal,
    WarmParams,
    WarmReport,
    WarmShard,
    allowed_shards,
    freshness_rows,
    landing_schedule,
    main,
    override_costs,
    per_version,
    price_flex,
    published_costs,
    render_markdown,
    scheduled_jobs,
    shard_usd_per_month,
    simulate,
    simulate_all,
    simulate_versions,
    simulate_warm,
    solve_warm,
    warm_report,
    write_results,
)
from cdc_lake.core.config import RunSettings, WarmSettings
from cdc_lake.core.names import GLUE_VERSION_ENV
from cdc_lake.core.shards import shard_of

# Short windows keep the suite fast; retained_days=0 makes listings one page, so times are easy to check.
QUICK = SimParams(hours=2.0, retained_days=0.0)


def run_simulation(tables: int, interval_s: float, design: str, params: SimParams) -> Simulation:
    simulation = Simulation(tables, interval_s, design, params)
    simulation.result = simulation.run()  # type: ignore[attr-defined]
    return simulation


def test_old_design_one_table_every_minute_is_one_run_per_file() -> None:
    params = SimParams(retained_days=0.0)
    result = simulate(1, 60, "old", params)
    assert 1438 <= result["runs_per_day"] <= 1441
    assert result["runs_per_day"] == result["files_landed"]
    # Every file: start-up, the script's fixed part, one listing page, one batch; nothing queues.
    expected = params.costs.startup_s + params.noop_s + params.list_page_s + params.batch_s(1)
    assert result["lag_p50_s"] == pytest.approx(expected, abs=0.1)
    assert result["lag_p95_s"] == pytest.approx(expected, abs=0.1)
    # Each run is billed the one-minute minimum on 2 workers.
    assert result["dpu_hours_per_day"] == pytest.approx(result["runs_per_day"] * 2 / 60, rel=0.01)
    assert result["get_job_runs_calls"] == 0


@pytest.mark.parametrize("design", ["old", "new"])
def test_every_landed_file_is_committed_once_after_it_landed(design: str) -> None:
    simulation = run_simulation(10, 60, design, replace(QUICK, drain=True))
    landed = sum(simulation.landed)
    assert landed == sum(len(times) for times in simulation.schedule) > 1000
    assert simulation.commit_count == landed
    for times, commits in zip(simulation.schedule, simulation.commits, strict=True):
        for landed_at, committed_at in zip(times, commits, strict=True):
            assert committed_at is not None
            assert committed_at >= landed_at
    assert simulation.result["backlog_files"] == 0  # type: ignore[attr-defined]


def test_new_design_leaves_no_backlog_when_capacity_suffices() -> None:
    result = simulate(10, 60, "new", QUICK)
    # Only the files of the last round or so can still be under way at the end of the window.
    assert result["backlog_files"] <= 10
    assert result["lag_p95_s"] < 60


def test_both_designs_bill_their_listings_batches_metric_puts_and_lambda() -> None:
    """A per-file run lists its table and puts twice at its end; a coalesced round lists every table and puts once
    if it committed: 10 tables a file a minute each."""
    files = {}
    for design in ("old", "new"):
        result = simulate(10, 60, design, QUICK)
        bill = result["bill"]
        month = 30 * DAY_S / (QUICK.hours * 3600)
        files[design] = result["files_landed"] * month
        assert bill["requests_per_month"]["Lambda"] == pytest.approx(files[design])
        assert result["whole_usd_per_month"] == pytest.approx(sum(bill["usd_per_month"].values()), abs=0.05)
        puts = bill["requests_per_month"]["CloudWatch PutMetricData"]
        lists = bill["requests_per_month"]["S3 PUT/COPY/POST/LIST"]
        if design == "old":
            assert puts == pytest.approx(2 * result["runs_per_day"] * 30, rel=0.01)
        else:
            rounds = puts - result["runs_per_day"] * 30  # a round that committed, and each run's end
            assert puts < files[design]  # a round's batches in one request
            assert lists >= 10 * rounds  # every table listed every round


def test_new_design_starts_far_fewer_runs_than_old_for_ten_tables() -> None:
    old = simulate(10, 60, "old", QUICK)
    new = simulate(10, 60, "new", QUICK)
    assert old["files_landed"] == new["files_landed"]  # the same landings for both designs
    assert new["runs_per_day"] * 20 < old["runs_per_day"]
    assert new["dpu_hours_per_day"] < old["dpu_hours_per_day"]


def test_coalesced_runs_end_after_their_budget_and_never_start_a_round_after_it() -> None:
    params = replace(QUICK, time_budget_s=300)
    simulation = run_simulation(10, 60, "new", params)
    finished = [run for run in simulation.glue.runs["cdc_replay"] if run.ended_at is not None]
    assert len(finished) >= 10
    longest_round = params.list_page_s + params.batch_s(1) * 10  # ten tables, one lane each at worst
    for run in finished:
        worked_for = run.ended_at - run.drain_started
        assert worked_for >= params.time_budget_s  # under steady load a run only ends on its budget
        assert worked_for < params.time_budget_s + longest_round


def test_only_handle_starts_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []
    real_handle = simulate_module.handle

    def counting_handle(event: dict[str, Any], **kwargs: Any) -> list[str]:
        calls.append(event)
        return real_handle(event, **kwargs)

    monkeypatch.setattr(simulate_module, "handle", counting_handle)
    new = simulate(10, 60, "new", QUICK)
    assert len(calls) == new["handle_calls"] == new["files_landed"]
    # Coalesced: handle() asks Glue for the job's runs once per event before deciding; per file it never does.
    assert new["get_job_runs_calls"] == new["handle_calls"]
    calls.clear()
    old = simulate(10, 60, "old", QUICK)
    assert len(calls) == old["files_landed"]
    assert old["get_job_runs_calls"] == 0


def test_without_handle_no_run_starts_and_every_file_stays_unapplied(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(simulate_module, "handle", lambda event, **kwargs: [])
    result = simulate(10, 60, "new", QUICK)
    assert result["runs_per_day"] == 0
    assert result["backlog_files"] == result["files_landed"] > 0


def test_simulated_glue_queues_beyond_max_concurrent_runs_and_reports_newest_first() -> None:
    simulation = Simulation(1, 60, "new", QUICK)
    glue = simulation.glue
    simulation.now = 100.0
    first = glue.start_job_run(JobName="cdc_replay", Arguments={"--key": "a"}, JobRunQueuingEnabled=True)
    simulation.now = 101.0
    second = glue.start_job_run(JobName="cdc_replay", Arguments={"--key": "b"}, JobRunQueuingEnabled=True)
    runs = glue.get_job_runs(JobName="cdc_replay", MaxResults=50)["JobRuns"]
    assert [(r["Id"], r["JobRunState"]) for r in runs] == [
        (second["JobRunId"], "WAITING"),
        (first["JobRunId"], "STARTING"),
    ]
    assert runs[0]["Arguments"] == {"--key": "b"}
    assert runs[0]["StartedOn"] > runs[1]["StartedOn"]
    with pytest.raises(ClientError, match="ConcurrentRunsExceededException"):
        glue.start_job_run(JobName="cdc_replay", Arguments={}, JobRunQueuingEnabled=False)
    # The first run ends: the waiting one starts.
    glue.finish(glue.runs["cdc_replay"][0])
    states = [r["JobRunState"] for r in glue.get_job_runs(JobName="cdc_replay", MaxResults=50)["JobRuns"]]
    assert states == ["STARTING", "SUCCEEDED"]


def test_lanes_need_workers() -> None:
    params = replace(QUICK, new_sizing=(Sizing(1000, 2, 8),))
    with pytest.raises(ValueError, match="cannot drive 8 tables"):
        Simulation(10, 60, "new", params)


def test_large_cases_use_a_short_window_scaled_to_a_day() -> None:
    params = SimParams(short_window_above_files=1000, short_window_hours=1.0, retained_days=0.0)
    result = simulate(1, 60, "old", params)
    assert result["window_hours"] == 1.0
    assert result["scaled_to_day"]
    assert 1400 <= result["runs_per_day"] <= 1480  # about 60 runs, times 24


def test_concurrency_and_workers_match_the_stack() -> None:
    glue = pytest.importorskip("infra.glue")
    assert glue.CDC_REPLAY_SIZING.workers == OLD_WORKERS
    assert glue.CDC_REPLAY_SIZING.max_concurrent_runs == OLD_MAX_CONCURRENT_RUNS
    coalesced = glue.job_sizes(RunSettings(mode="coalesced", workers=6))["cdc_replay"]
    assert coalesced.max_concurrent_runs == NEW_MAX_CONCURRENT_RUNS
    assert coalesced.workers == 6


def test_simulate_all_pairs_designs_with_a_cost_ratio() -> None:
    params = replace(QUICK, hours=1.0, tables=(1, 10), intervals_s=(900.0,))
    results = simulate_all(params)
    assert [(r["tables"], r["design"]) for r in results] == [(1, "old"), (1, "new"), (10, "old"), (10, "new")]
    for old, new in zip(results[::2], results[1::2], strict=True):
        assert old["old_over_new_cost"] == new["old_over_new_cost"]
        assert old["old_over_new_cost"] == pytest.approx(old["usd_per_day"] / new["usd_per_day"], rel=0.01)
    table = render_markdown(results)
    assert table.count("\n") == 2 + len(results)


def test_each_glue_version_has_its_published_price_and_start_up() -> None:
    assert published_costs() == {"5.1": GlueCosts(0.44, 10.0), "6.0": GlueCosts(0.44, 10.0)}
    assert SimParams().costs == GlueCosts(0.44, 10.0)  # the default version, 5.1
    assert SimParams(glue_version="6.0").costs == GlueCosts(0.44, 10.0)


def test_the_price_follows_the_glue_version_and_the_work_does_not() -> None:
    params = replace(QUICK, glue_costs={"5.1": GlueCosts(0.44, 10.0), "6.0": GlueCosts(0.30, 10.0)})
    on_5 = simulate(10, 900, "new", params)
    on_6 = simulate(10, 900, "new", replace(params, glue_version="6.0"))
    assert (on_5["glue_version"], on_6["glue_version"]) == ("5.1", "6.0")
    assert on_6["dpu_hours_per_day"] == on_5["dpu_hours_per_day"] > 0
    assert on_5["usd_per_day"] == pytest.approx(on_5["dpu_hours_per_day"] * 0.44, abs=0.01)
    assert on_6["usd_per_day"] == pytest.approx(on_6["dpu_hours_per_day"] * 0.30, abs=0.01)


def test_the_start_up_follows_the_glue_version() -> None:
    costs = {"5.1": GlueCosts(0.44, 10.0), "6.0": GlueCosts(0.44, 40.0)}
    params = replace(QUICK, retained_days=0.0, glue_costs=costs)
    on_5 = simulate(1, 900, "old", params)
    on_6 = simulate(1, 900, "old", replace(params, glue_version="6.0"))
    assert on_6["startup_s"] == 40.0
    assert on_6["lag_p50_s"] - on_5["lag_p50_s"] == pytest.approx(30.0, abs=0.2)  # each file waits for a start-up


def test_simulate_versions_runs_the_new_design_on_each_version_and_reuses_what_was_run() -> None:
    params = replace(QUICK, hours=1.0, version_tables=(1, 10), intervals_s=(900.0,))
    main_rows = [simulate(10, 900, "new", params) | {"marker": True}]
    rows = simulate_versions(params, main_rows)
    assert [(r["glue_version"], r["tables"], r["design"]) for r in rows] == [
        ("5.1", 1, "new"),
        ("5.1", 10, "new"),
        ("6.0", 1, "new"),
        ("6.0", 10, "new"),
    ]
    assert rows[1] is main_rows[0]  # the same inputs: not run again
    assert "marker" not in rows[3]  # the other version's run is its own
    assert [r["usd_per_dpu_hour"] for r in rows] == [0.44, 0.44, 0.44, 0.44]
    table = render_markdown(rows, VERSION_COLUMNS)
    assert table.splitlines()[0].startswith("| Glue | tables |")
    assert "| 6.0 | 10 | 900 |" in table


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], {}),
        (["6.0=0.3"], {"6.0": 0.3}),
        (["12"], {"5.1": 12.0, "6.0": 12.0}),
        (["12", "6.0=20"], {"5.1": 12.0, "6.0": 20.0}),
    ],
)
def test_per_version_settings(values: list[str], expected: dict[str, float]) -> None:
    assert per_version(values, "--startup-seconds") == expected


@pytest.mark.parametrize(
    ("value", "message"), [("7.0=1", "Glue version '7.0'"), ("6.0=fast", "'fast' is not a number")]
)
def test_per_version_settings_refuse_what_they_cannot_read(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        per_version([value], "--startup-seconds")


def test_overridden_costs_keep_the_published_ones_not_given() -> None:
    assert override_costs({"6.0": 0.25}, {"5.1": 20.0}) == {"5.1": GlueCosts(0.44, 20.0), "6.0": GlueCosts(0.25, 10.0)}


def test_the_command_line_takes_the_glue_version_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    seen: list[SimParams] = []

    def fake_simulate_all(params: SimParams) -> list[dict[str, Any]]:
        seen.append(params)
        return []

    monkeypatch.setattr(simulate_module, "simulate_all", fake_simulate_all)
    monkeypatch.setattr(simulate_module, "simulate_versions", lambda params, reuse: [])
    monkeypatch.setattr(simulate_module, "warm_report", lambda params, results: WarmReport([], [], []))
    monkeypatch.setenv(GLUE_VERSION_ENV, "6.0")
    assert main(["--out", str(tmp_path), "--usd-per-dpu-hour", "6.0=0.3"]) == 0
    monkeypatch.delenv(GLUE_VERSION_ENV)
    assert main(["--out", str(tmp_path)]) == 0
    assert [(p.glue_version, p.costs.usd_per_dpu_hour) for p in seen] == [("6.0", 0.3), ("5.1", 0.44)]
    assert "Glue 5.1" in (tmp_path / "simulation.md").read_text()


# The warm design (runs.mode: warm): shards of long-lived G.025X runs, played without the Lambda.

WARM_QUICK = SimParams(hours=2.0)
# A warm run that lists every table each round, paced (a stack before the event queues).
PACED = replace(WARM_QUICK, warm=replace(WARM_QUICK.warm, fed=False))
# What a warm run does before its first round: Glue's start-up, the script's fixed time, one listing page.
WARM_FIRST_ROUND = WARM_QUICK.costs.startup_s + WARM_QUICK.noop_s + WARM_QUICK.list_page_s
# What each batch adds to its lane time: the replay's upkeep, 3 s every 16 batches.
UPKEEP = WARM_QUICK.upkeep_share_s


def play_shard(landings: list[list[float]], params: SimParams = WARM_QUICK, end: float = 3600.0) -> Any:
    return WarmShard(landings, end, params, drain=True).run()


def test_warm_defaults_are_the_configuration_and_the_measured_batch() -> None:
    warm, settings = WarmParams(), WarmSettings()
    assert (warm.tables_per_job, warm.workers, warm.quiet_s) == (100, 2, 600)
    assert (warm.tables_per_job, warm.workers, warm.quiet_s) == (
        settings.tables_per_job,
        settings.workers,
        settings.quiet_seconds,
    )
    # A warm run's batches mostly wait on round trips: twice the lanes of a coalesced run.
    assert warm.parallel_tables == settings.parallel_tables == 2 * RunSettings().parallel_tables == 8
    # docs/performance.md, "AWS's round trips": 0.94 s locally, 3.15 s with AWS's in-Region round trips.
    assert (warm.batch_s, warm.cpu_s) == (3.15, 0.94)
    assert warm.dpu == 0.5  # two G.025X workers of a quarter DPU
    with pytest.raises(ValueError, match="CPU time"):
        WarmParams(batch_s=0.5, cpu_s=0.94)
    with pytest.raises(ValueError, match="tables_per_job"):
        WarmParams(tables_per_job=0)


def test_warm_bill_is_shards_times_half_a_dpu_for_every_busy_hour() -> None:
    params = replace(WARM_QUICK, warm=replace(WARM_QUICK.warm, tables_per_job=50))
    result = simulate_warm(200, 60, params)
    assert result["shards"] == 4
    assert result["runs_started"] == 4  # busy all the time: each shard's run never goes quiet
    # Billed from each shard's first landing (within a second or two of midnight) to the end of the window.
    assert result["dpu_hours_per_day"] == pytest.approx(4 * 0.5 * 24, rel=0.001)
    assert result["usd_per_month"] == pytest.approx(4 * 0.5 * 24 * 0.44 * 30, rel=0.001)
    assert shard_usd_per_month(params) == pytest.approx(0.5 * 24 * 0.44 * 30)


def test_warm_tables_go_to_the_shard_the_stack_gives_them() -> None:
    params = replace(SimParams(hours=0.5), warm=replace(WARM_QUICK.warm, tables_per_job=100))
    result = simulate_warm(250, 60, params)
    assert result["shards"] == 3 == WarmSettings().shards(250)
    owners = [shard_of(f"public.t{index + 1:04d}", 3) for index in range(250)]
    assert result["largest_shard"] == max(owners.count(shard) for shard in range(3))
    assert result["files_landed"] == sum(len(t) for t in landing_schedule(250, 60, 1800, params))


def test_a_warm_batch_waits_beside_the_others_but_shares_the_cpu() -> None:
    narrow, wide = replace(WarmParams(), parallel_tables=4), replace(WarmParams(), parallel_tables=8)
    assert narrow.lane_s(1) == narrow.lane_s(4) == 3.15  # 4 x 0.94 s of CPU fits 2 vCPUs within 3.15 s
    assert wide.lane_s(8) == pytest.approx(8 * 0.94 / 2)  # the CPU is the bottleneck: 3.76 s a batch
    # Eight tables land one file each at once: four lanes take two turns; eight lanes one slower turn.
    first, second = WARM_FIRST_ROUND + 3.15 + UPKEEP, WARM_FIRST_ROUND + 2 * (3.15 + UPKEEP)
    four_lanes = play_shard([[0.0]] * 8, replace(WARM_QUICK, warm=narrow))
    assert sorted(four_lanes.lags) == pytest.approx([first] * 4 + [second] * 4)
    outcome = play_shard([[0.0]] * 8, replace(WARM_QUICK, warm=wide))
    assert outcome.lags == pytest.approx([WARM_FIRST_ROUND + 3.76 + UPKEEP] * 8)


def test_a_warm_batch_takes_every_file_landed_before_it_starts() -> None:
    # Three files of one table land while the run starts: one batch applies them, 0.2 s a further file.
    outcome = play_shard([[0.0, 1.0, 2.0]])
    committed = WARM_FIRST_ROUND + 3.15 + UPKEEP + 2 * WARM_QUICK.extra_file_s
    assert outcome.lags == pytest.approx([committed, committed - 1.0, committed - 2.0])
    assert outcome.backlog == 0


def test_a_quiet_warm_run_stops_and_the_next_file_starts_another() -> None:
    outcome = play_shard([[0.0, 100.0, 2000.0]])
    assert outcome.runs == 2
    # The first run stops 600 s after its last landed file (checked every 5 s); the second 600 s after its only one.
    assert outcome.billed_s == pytest.approx(700.0 + 600.0, abs=WARM_QUICK.poll_s + 1.0)
    assert outcome.lags[2] == pytest.approx(WARM_FIRST_ROUND + 3.15 + UPKEEP)  # the second run's start-up, again


def test_warm_runs_apply_every_landed_file_once() -> None:
    params = replace(WARM_QUICK, drain=True)
    schedule = landing_schedule(30, 60, 7200, params)
    outcome = WarmShard(schedule, 7200, params, drain=True).run()
    assert len(outcome.lags) == sum(len(times) for times in schedule) > 3000
    assert outcome.backlog == 0
    assert min(outcome.lags) >= 3.15


def test_a_warm_shard_starts_a_round_at_most_every_round_s() -> None:
    landings = [[float(second) for second in range(120)]]  # one table, a file a second

    def commit_times(round_s: float) -> list[float]:
        params = replace(PACED, warm=replace(PACED.warm, round_s=round_s))
        shard = WarmShard(landings, 120.0, params)
        shard.run()
        return [committed for _, committed in shard.commits[0]]

    assert WarmParams().round_s == WarmSettings().round_seconds == 20
    lane = 3.15 + UPKEEP
    paced, unpaced = commit_times(20.0), commit_times(0.0)
    # Paced: each round starts 20 s after the last began; from the second on, each batch takes the 20 files landed
    # since and ends a lane and 19 further files later.
    assert paced[1] - paced[0] == pytest.approx(20.0 + 19 * 0.2 - 3.0)  # the first took 1 file, landed at 0
    assert [b - a for a, b in itertools.pairwise(paced[1:])] == pytest.approx([20.0] * (len(paced) - 2))
    # Unpaced: the next round lists as soon as the batch commits, over four times as often.
    assert len(unpaced) > 4 * len(paced)
    assert min(b - a for a, b in itertools.pairwise(unpaced)) >= lane


def test_a_busy_warm_run_lists_each_table_once_a_round() -> None:
    paced = simulate_warm(100, 60, PACED)
    # Rounds every 20 s, each listing the 100 tables: 3 a minute each, at $0.005 per 1,000.
    assert paced["s3_listing_usd_per_month"] == pytest.approx(100 * 3 * 60 * 24 * 30 / 1000 * 0.005, rel=0.02)
    unpaced = simulate_warm(100, 60, replace(PACED, warm=replace(PACED.warm, round_s=0.0)))
    assert unpaced["s3_listing_usd_per_month"] > 1.4 * paced["s3_listing_usd_per_month"]
    assert unpaced["lag_p95_s"] < paced["lag_p95_s"]


def test_a_run_told_of_landings_lists_the_tables_told_and_sweeps_puts_a_minutes_metrics_and_waits_for_no_round() -> (
    None
):
    """Event queues (engine.runs.events): a round lists the tables told (about one a batch) and every table every
    sweep_s; rounds are not paced, so a file waits for its batch only; metrics are put once a minute."""
    fed, paced = simulate_warm(100, 60, WARM_QUICK), simulate_warm(100, 60, PACED)
    assert WarmParams().fed and WarmParams().sweep_s == WarmSettings().sweep_seconds == 300
    month = 60 * 24 * 30
    batches = fed["batches_per_month"]
    rounds_listed = fed["s3_listing_usd_per_month"] / 0.005 * 1000
    assert batches == pytest.approx(100 * month, rel=0.02)
    assert rounds_listed == pytest.approx(batches + 100 * month / 5, rel=0.05)  # told, and a sweep each 5 minutes
    assert rounds_listed < paced["s3_listing_usd_per_month"] / 0.005 * 1000 / 2
    assert fed["lag_p95_s"] < paced["lag_p95_s"] - 5
    assert fed["bill"]["requests_per_month"]["CloudWatch PutMetricData"] <= 1.02 * month
    assert fed["whole_usd_per_month"] < paced["whole_usd_per_month"]


def test_a_resting_table_is_batched_an_interval_apart_unlisted_and_loses_no_file() -> None:
    """runs.warm.commit_interval_seconds: one table landing a file a second; its batches start 60 s apart (the rest
    runs from its batch's round), each takes the files landed since, and its listings are one a batch."""
    landings = [[float(second) for second in range(600)]]

    def played(interval: float) -> WarmShard:
        params = replace(PACED, warm=replace(PACED.warm, commit_interval_s=interval))
        shard = WarmShard(landings, 600.0, params, drain=True)
        outcome = shard.run()
        assert outcome.backlog == 0 and len(outcome.lags) == 600
        return shard

    assert WarmParams().commit_interval_s == WarmSettings().commit_interval_seconds == 0
    resting, paced = played(60.0), played(0.0)
    began = [committed - 3.15 - UPKEEP - 0.2 * (last - first - 1) for (first, _), (last, committed) in
             itertools.pairwise([(0, 0.0), *resting.commits[0]])]  # fmt: skip
    assert min(b - a for a, b in itertools.pairwise(began)) >= 60.0 - 1e-9
    assert len(resting.commits[0]) < len(paced.commits[0]) / 2.5  # a batch a minute, not one every 20 s
    assert resting.listings < paced.listings / 2.5


def test_freshness_rows_price_each_commit_interval_with_the_quiet_time_the_configuration_needs() -> None:
    params = replace(QUICK, hours=1.0, drain=True, warm=replace(WarmParams(), tables=(10,), goals=(), fed=False))
    rows = freshness_rows(params)
    assert [(r["tables"], r["commit_interval_s"]) for r in rows] == [(10, i) for i in FRESHNESS_INTERVALS_S]
    assert FRESHNESS_INTERVALS_S == (0.0, 60.0, 120.0, 300.0, 900.0)
    p95 = [r["lag_p95_s"] for r in rows]
    assert p95 == sorted(p95) and p95[-1] > 600  # a 15-minute rest, within a 15-minute quiet time
    batches, requests = ([r[name] for r in rows] for name in ("batches_per_month", "requests_usd_per_month"))
    assert batches[1:] == sorted(batches[1:], reverse=True) and batches[-1] * 10 < batches[0]  # 1 in 15 at 900 s
    assert requests[1:] == sorted(requests[1:], reverse=True) and requests[-1] < requests[0] / 4
    assert all(r["backlog_files"] == 0 for r in rows)  # each rest ends, and its files are applied


def test_the_warm_whole_bill_prices_each_batchs_requests_the_rounds_the_lambda_and_one_metrics_put_a_round() -> None:
    """A busy minute of 100 tables: 100 batches (one file each), each asking WARM_BATCH_REQUESTS; 3 rounds listing
    every table; the Lambda's invocation and its two HEADs of the shard's run's marker and hold per file; one
    PutMetricData per round that committed."""
    result = simulate_warm(100, 60, PACED)
    bill = result["bill"]
    month = 60 * 24 * 30
    batches = bill["requests_per_month"]["Glue Data Catalog"] / sum(
        n for kind, n in WARM_BATCH_REQUESTS.items() if kind.startswith("glue:")
    )
    assert batches == pytest.approx(100 * month, rel=0.02)  # a batch per landed file at this pace
    assert bill["requests_per_month"]["Lambda"] == pytest.approx(100 * month, rel=0.02)
    rounds = bill["requests_per_month"]["CloudWatch PutMetricData"]
    assert 2.5 * month <= rounds <= 3.1 * month  # a round every 20 s, each one request however many batches
    listed = 100 * 3 * month + WARM_BATCH_REQUESTS.get("s3:LIST", 0.0) * batches
    writes = listed + WARM_BATCH_REQUESTS["s3:PUT"] * batches
    assert bill["requests_per_month"]["S3 PUT/COPY/POST/LIST"] == pytest.approx(writes, rel=0.03)
    reads = 2 * 100 * month + (WARM_BATCH_REQUESTS["s3:GET"] + WARM_BATCH_REQUESTS["s3:HEAD"]) * batches
    assert bill["requests_per_month"]["S3 GET/HEAD"] == pytest.approx(reads, rel=0.03)
    assert result["whole_usd_per_month"] == pytest.approx(sum(bill["usd_per_month"].values()), abs=0.05)
    assert result["whole_usd_per_month"] - result["requests_usd_per_month"] == pytest.approx(
        result["usd_per_month"], abs=0.02
    )


def test_warm_lag_grows_with_the_batch_time_and_falls_with_the_lanes() -> None:
    def p95(batch_s: float, lanes: int, round_s: float = 0.0) -> float:
        warm = replace(PACED.warm.with_batch(batch_s), parallel_tables=lanes, round_s=round_s)
        return float(simulate_warm(100, 60, replace(PACED, warm=warm))["lag_p95_s"])

    four = [p95(batch_s, 4) for batch_s in (1.5, 2.5, 3.15, 4.0)]
    assert four == sorted(four)
    assert four[0] < 30
    assert four[2] > 60  # the 3.15 s batch misses 60 s on one shard of 100 tables, four at once
    # Eight at once: 8 x 0.94 s of CPU on 2 vCPUs makes each lane 3.76 s, yet the round is 47 s, not 83 s.
    eight = p95(3.15, 8)
    assert eight < 30
    # Rounds paced at 20 s add a wait for the next round: still well under a minute.
    assert eight + 5 < p95(3.15, 8, round_s=20) < 45


def test_a_shard_behind_its_landings_lags_boundedly_while_a_batch_takes_all_of_a_tables_files() -> None:
    # 100 tables x 3.34 s / 4 lanes = 83 s of batches a round, more than the 60 s interval: every table's
    # batch takes a file more now and then, 0.2 s each, and the lag settles.
    four_lanes = replace(WARM_QUICK, warm=replace(WARM_QUICK.warm, parallel_tables=4))
    short, long = (simulate_warm(100, 60, replace(four_lanes, hours=hours)) for hours in (2.0, 4.0))
    assert 60 < short["lag_p95_s"] < 2 * 83
    assert long["lag_max_s"] == pytest.approx(short["lag_max_s"], rel=0.25)
    # When each further file costs more than the interval allows (3 s x 25 tables a lane > 60 s), it never settles.
    slow = replace(four_lanes, extra_file_s=3.0)
    short, long = (simulate_warm(100, 60, replace(slow, hours=hours)) for hours in (2.0, 4.0))
    assert long["lag_max_s"] > 1.6 * short["lag_max_s"] > 1000


def test_solve_warm_finds_the_slowest_batch_and_the_fewest_shards_that_meet_a_goal() -> None:
    warm = replace(WarmParams(), solve_hours=1.0, tables_per_job=20, parallel_tables=4, round_s=0.0)
    params = replace(SimParams(hours=1.0), warm=warm)
    goal = WarmGoal(60, 12.0, max_shards=1)
    solution = solve_warm(goal, params)
    assert (solution["shards_allowed"], solution["tables_per_job_allowed"]) == (1, 60)

    def p95(batch_s: float, tables_per_job: int) -> float:
        warm = replace(params.warm.with_batch(batch_s), tables_per_job=tables_per_job)
        return float(simulate_warm(60, 60, replace(params, warm=warm))["lag_p95_s"])

    needed = solution["batch_s_needed"]
    assert 0 < needed < 3.15  # today's batch misses 12 s for 60 tables on one run
    assert p95(needed, 60) < 12.0 <= p95(needed + 0.2, 60)  # found to 0.05 s, rounded down
    shards = solution["shards_at_today_batch"]
    assert shards > 1
    assert p95(3.15, solution["tables_per_job_at_today_batch"]) < 12.0 <= p95(3.15, math.ceil(60 / (shards - 1)))
    assert solution["usd_per_month_at_today_batch"] == pytest.approx(shards * shard_usd_per_month(params), abs=0.01)


def test_a_goal_allows_as_many_busy_warm_runs_as_its_budget_pays_for() -> None:
    params = SimParams()
    assert allowed_shards(WarmGoal(1000, 120.0, max_usd_per_month=1600.0), params) == 10  # $158.40 each: $1,584
    assert allowed_shards(WarmGoal(1000, 120.0, max_usd_per_month=100.0), params) == 1
    assert allowed_shards(WarmGoal(100, 60.0, max_shards=1, max_usd_per_month=1600.0), params) == 1
    assert allowed_shards(WarmGoal(5, 60.0, max_usd_per_month=1600.0), params) == 5  # a run per table at most


def test_warm_report_puts_each_warm_case_beside_the_coalesced_one(tmp_path: Any) -> None:
    params = replace(
        QUICK, hours=1.0, tables=(10,), intervals_s=(60.0,), warm=replace(WarmParams(), tables=(10,), goals=())
    )
    results = simulate_all(params)
    report = warm_report(params, results)
    assert [(r["tables"], r["design"]) for r in report.rows] == [(10, "coalesced"), (10, "warm")]
    assert report.rows[0]["capacity"] == "1 × 2 G.1X"
    assert report.rows[1]["capacity"] == "1 × 2 G.025X"
    table = render_markdown(report.rows, WARM_COLUMNS)
    assert table.splitlines()[0].startswith("| tables | design | runs × workers |")
    write_results(results, params, tmp_path, 1.0, warm=report)
    text = (tmp_path / "simulation.md").read_text()
    assert "Warm runs (runs.mode: warm)" in text
    assert "Flex" in text


def test_flex_lowers_the_scheduled_jobs_by_its_rate() -> None:
    params = SimParams()
    rows = {row["job"]: row for row in price_flex(100, params)}
    assert set(rows) == {"maintenance", "drift", "source_check"}
    for row in rows.values():
        assert row["flex_usd_per_month"] == pytest.approx(row["usd_per_month"] * 0.29 / 0.44, abs=0.01)
    maintenance = rows["maintenance"]
    run_s = params.costs.startup_s + params.noop_s + 100 * params.maintain_table_s  # daily, 2 G.1X workers
    assert maintenance["dpu_hours_per_month"] == pytest.approx(2 * run_s / 3600 * 30, abs=0.01)
    assert maintenance["flex_saving_usd_per_month"] == pytest.approx(2 * run_s / 3600 * 30 * 0.15, abs=0.01)
    assert rows["source_check"]["dpu_hours_per_month"] == pytest.approx(2 * 60 / 3600 * 30)  # the minute minimum


def test_the_scheduled_jobs_are_the_stacks_flex_jobs_sized_and_timed_as_it_makes_them() -> None:
    glue = pytest.importorskip("infra.glue")
    source_check = pytest.importorskip("infra.source_check")
    settings = pytest.importorskip("infra.settings")
    assert {job.job for job in scheduled_jobs(100, SimParams())} == glue.FLEX_JOBS
    assert glue.MAINTENANCE_SIZING.workers == MAINTENANCE_WORKERS
    assert source_check.SOURCE_CHECK_SIZING.workers == SOURCE_CHECK_WORKERS
    assert source_check.DRIFT_SIZING.workers == DRIFT_WORKERS
    # scheduled_jobs prices maintenance and the source check daily, the drift verify weekly.
    assert settings.DEFAULT_MAINTENANCE_SCHEDULE == "cron(30 3 * * ? *)"
    assert settings.DEFAULT_SOURCE_CHECK_SCHEDULE == "cron(0 3 * * ? *)"
    assert settings.DEFAULT_DRIFT_CHECK_SCHEDULE == "cron(0 4 ? * SUN *)"


def test_the_command_line_takes_the_warm_inputs(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    seen: list[SimParams] = []

    def fake_report(params: SimParams, results: Any) -> WarmReport:
        seen.append(params)
        return WarmReport([], [], [])

    monkeypatch.setattr(simulate_module, "simulate_all", lambda params: [])
    monkeypatch.setattr(simulate_module, "simulate_versions", lambda params, reuse: [])
    monkeypatch.setattr(simulate_module, "warm_report", fake_report)
    argv = ["--out", str(tmp_path), "--warm-batch-seconds", "2", "--tables-per-job", "50"]
    assert main([*argv, "--flex-usd-per-dpu-hour", "0.3", "--check-seconds", "0.19"]) == 0
    assert (seen[0].warm.batch_s, seen[0].warm.tables_per_job, seen[0].flex_usd_per_dpu_hour) == (2.0, 50, 0.3)
    assert seen[0].check_s == 0.19
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path), "--warm-batch-seconds", "0.5"])  # less than its 0.94 s of CPU
