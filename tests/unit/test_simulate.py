"""The cost simulation (bench/simulate.py): its Glue stand-in, both designs' run scripts, and that the real
Lambda handler is what starts every run."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from botocore.exceptions import ClientError

import bench.simulate as simulate_module
from bench.simulate import (
    NEW_MAX_CONCURRENT_RUNS,
    OLD_MAX_CONCURRENT_RUNS,
    OLD_WORKERS,
    SimParams,
    Simulation,
    Sizing,
    render_markdown,
    simulate,
    simulate_all,
)
from cdc_lake.core.config import RunSettings

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
    expected = params.startup_s + params.noop_s + params.list_page_s + params.per_table_s
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
    longest_round = params.list_page_s + params.per_table_s * 10  # ten tables, one lane each at worst
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
    assert glue.CDC_REPLAY.workers == OLD_WORKERS
    assert glue.CDC_REPLAY.max_concurrent_runs == OLD_MAX_CONCURRENT_RUNS
    _, coalesced = glue.job_sizes(RunSettings(mode="coalesced", workers=6))
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
