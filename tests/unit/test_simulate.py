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
    VERSION_COLUMNS,
    GlueCosts,
    SimParams,
    Simulation,
    Sizing,
    main,
    override_costs,
    per_version,
    published_costs,
    render_markdown,
    simulate,
    simulate_all,
    simulate_versions,
)
from cdc_lake.core.config import RunSettings
from cdc_lake.core.names import GLUE_VERSION_ENV

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
    monkeypatch.setenv(GLUE_VERSION_ENV, "6.0")
    assert main(["--out", str(tmp_path), "--usd-per-dpu-hour", "6.0=0.3"]) == 0
    monkeypatch.delenv(GLUE_VERSION_ENV)
    assert main(["--out", str(tmp_path)]) == 0
    assert [(p.glue_version, p.costs.usd_per_dpu_hour) for p in seen] == [("6.0", 0.3), ("5.1", 0.44)]
    assert "Glue 5.1" in (tmp_path / "simulation.md").read_text()
