"""A discrete-event simulation of one day of CDC on AWS: one run per file (old design) vs coalesced runs (new).

Busy tables land one DMS CDC file every ``interval_s`` seconds. Every landed file becomes an S3 event
(``cdc_lake.local.events.s3_object_created_event``) handed to the real Lambda code, ``dms_trigger.handler.handle``,
with a ``GlueJobStarter`` around ``SimulatedGlue``: handle() alone decides which runs start. ``SimulatedGlue``
answers ``start_job_run`` and ``get_job_runs`` on a virtual clock (WAITING over MaxConcurrentRuns, STARTING
for the start-up time, RUNNING, SUCCEEDED), and the simulation plays each run's script on the same clock:

- old design (``runs.mode: per_file``): a RUNNING run applies its table's files not yet applied, up to its
  trigger file, in one commit (nothing left: a no-op run, still billed);
- new design (``runs.mode: coalesced``): a RUNNING run works in rounds; the first checks every table, a later
  one lists each table from its listing window, and the tables with unapplied files are applied,
  ``parallel_tables`` at a time, one commit per table;
  it starts another round while files are pending and its time budget is not spent, waits up to
  ``idle_seconds`` (checking every ``poll_seconds``) when none are, then ends.

Out: runs, DPU-hours and dollars per day and month, freshness lag (commit minus landing) per (tables,
interval, design), on one Glue version (``--glue-version``, default ``GLUE_VERSION`` or ``lake.glue_version``'s
default); and the new design's 100 and 1,000 busy tables on every Glue version, each with its own price per
DPU-hour and start-up time (``--usd-per-dpu-hour 6.0=0.30``, ``--startup-seconds 6.0=10``). Assumptions and
defaults: docs/cost-simulation.md.

Usage: python -m bench.simulate [--per-table-seconds 2.0] [--scale 1.0] [--glue-version 5.1] [--out bench/results]
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import math
import random
import sys
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from cdc_lake.core.config import PipelineConfig, UpkeepSettings, glue_version, parse_config
from cdc_lake.core.names import GLUE_VERSION, GLUE_VERSIONS, GlueVersion
from cdc_lake.engine.drain import LISTING_THREADS
from cdc_lake.local.events import s3_object_created_event
from dms_trigger.handler import GlueJobStarter, handle

HERE = Path(__file__).parent
DAY_S = 86_400.0
DESIGN_MODES = {"old": "per_file", "new": "coalesced"}
JOB_NAMES = {"full_load": "full_load", "cdc_replay": "cdc_replay"}
BUCKET = "cdc-lake-raw-123456789012"
CDC_FILE_SIZE = 48_000  # bytes; only "not empty" matters to the Lambda
EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
# One G.1X worker (4 vCPU) drives this many tables' batches at once in the lane model.
LANES_PER_WORKER = 2
# As infra/glue.py sets the CDC-replay job (tests/unit/test_simulate.py checks they agree): per_file keeps
# CDC_REPLAY_SIZING (2 workers, 10 concurrent runs); coalesced has 1 concurrent run and runs.workers workers.
OLD_WORKERS = 2
OLD_MAX_CONCURRENT_RUNS = 10
NEW_MAX_CONCURRENT_RUNS = 1

# Event kinds on the virtual clock, in the order they are handled when they fall on the same instant.
_RUNNING, _RUN_END, _ROUND_START, _ROUND_END, _LAND = range(5)


@dataclass(frozen=True)
class Sizing:
    """The new design's replay job for deployments of up to ``max_tables`` busy tables."""

    max_tables: int
    workers: int
    parallel_tables: int


@dataclass(frozen=True)
class GlueCosts:
    """What a run pays on one Glue version: the price of a DPU-hour, and the start-up (STARTING -> RUNNING, billed)."""

    usd_per_dpu_hour: float
    startup_s: float


def published_costs() -> dict[GlueVersion, GlueCosts]:
    """Each Glue version's costs as ``cdc_lake.core.names.GLUE_VERSIONS`` records them (sources: the doc)."""
    return {version: GlueCosts(f.usd_per_dpu_hour, f.startup_seconds) for version, f in GLUE_VERSIONS.items()}


@dataclass(frozen=True)
class SimParams:
    """Every input of the simulation; the defaults are discussed in docs/cost-simulation.md."""

    seed: int = 20_240_601
    hours: float = 24.0
    # Cases landing more files a day than this are simulated over short_window_hours and scaled to a day.
    short_window_above_files: int = 200_000
    short_window_hours: float = 6.0
    jitter_fraction: float = 0.02  # each landing moves by up to ±2% of the interval
    # The Glue version every case runs on, and each version's price and start-up (simulate_versions runs each).
    glue_version: GlueVersion = GLUE_VERSION
    glue_costs: Mapping[GlueVersion, GlueCosts] = field(default_factory=published_costs)
    per_table_s: float = 2.0  # one table's batch of one file (measured locally by the drain benchmark)
    scale: float = 1.0  # Glue's speed relative to the local measurement (multiplies per_table_s)
    extra_file_s: float = 0.2  # each further file in the same batch
    # The replay's upkeep (lake.upkeep): a compaction of upkeep_s every upkeep_every batches of a table (a batch
    # writes about one delete file, compaction comes at compact_at_delete_files), spread over the batches.
    upkeep_s: float = 3.0
    upkeep_every: int = UpkeepSettings().compact_at_delete_files
    noop_s: float = 5.0  # script time of a run with nothing to apply (session, configuration); every run pays it
    # Listings; each ListObjectsV2 page of up to 1,000 keys takes list_page_s. The old design's batch lists
    # its table's whole folder: retained_days of files (the stack's raw_retention_days, default 30). The new
    # design lists each table from its listing window (plan.listing_start: an hour of files, one page): a
    # later round looks at every table that way, LISTING_THREADS at a time, and each batch lists once more.
    list_page_s: float = 0.1
    retained_days: float = 30.0
    # A run's first round checks every configured table (its recorded state, a listing) even when it has
    # nothing pending: check_s each, parallel_tables at a time.
    check_s: float = 0.3
    min_billed_s: float = 60.0
    days_per_month: int = 30
    time_budget_s: int = 900
    idle_s: int = 30
    poll_s: float = 5.0
    new_sizing: tuple[Sizing, ...] = (Sizing(10, 2, 4), Sizing(100, 2, 4), Sizing(1000, 16, 32))
    tables: tuple[int, ...] = (1, 10, 100, 1000)
    version_tables: tuple[int, ...] = (100, 1000)  # the new design's busy tables on every Glue version
    intervals_s: tuple[float, ...] = (60.0, 900.0)
    # After the window, land nothing more and let the runs finish (tests); off, files still unapplied at the
    # end of the window are the backlog.
    drain: bool = False

    @property
    def costs(self) -> GlueCosts:
        """The price and start-up of ``glue_version``."""
        return self.glue_costs[self.glue_version]

    def sizing(self, tables: int) -> Sizing:
        """The new design's sizing for this many tables: the first entry that holds them, else the largest."""
        ordered = sorted(self.new_sizing, key=lambda s: s.max_tables)
        return next((s for s in ordered if tables <= s.max_tables), ordered[-1])

    def batch_s(self, files: int) -> float:
        """Time of one table's batch of ``files`` files, committed at its end (its listing not included)."""
        upkeep = self.upkeep_s * self.scale / self.upkeep_every if self.upkeep_every else 0.0
        return self.per_table_s * self.scale + self.extra_file_s * (files - 1) + upkeep

    def listing_s(self, keys: float) -> float:
        """Time to list ``keys`` keys: pages of 1,000, at least one."""
        return self.list_page_s * max(1, math.ceil(keys / 1000))


@dataclass(slots=True)
class GlueRun:
    """One job run of SimulatedGlue, with its times on the virtual clock."""

    id: str
    job: str
    arguments: dict[str, str]
    submitted: float
    state: str = "WAITING"
    starting_at: float | None = None
    running_at: float | None = None
    ended_at: float | None = None
    drain_started: float = 0.0
    last_work: float = 0.0
    rounds: int = 0


class SimulatedGlue:
    """The two Glue job-run calls the Lambda makes, answered on the simulation's clock.

    A run is STARTING at once when fewer than MaxConcurrentRuns of its job are STARTING or RUNNING, else
    WAITING (JobRunQueuingEnabled=True; without it Glue refuses it); STARTING lasts ``startup_s``; the
    simulation then plays the run's script and ends it (SUCCEEDED), which starts the oldest WAITING run.
    """

    def __init__(self, simulation: Simulation, max_concurrent_runs: dict[str, int], startup_s: float) -> None:
        self.simulation = simulation
        self.max_concurrent_runs = max_concurrent_runs
        self.startup_s = startup_s
        self.runs: dict[str, list[GlueRun]] = {job: [] for job in max_concurrent_runs}
        self.active = dict.fromkeys(max_concurrent_runs, 0)
        self.waiting: dict[str, deque[GlueRun]] = {job: deque() for job in max_concurrent_runs}
        self.get_job_runs_calls = 0
        self.start_job_run_calls = 0
        self._version = 0
        self._rendered: dict[tuple[str, int], tuple[int, dict[str, Any]]] = {}

    def start_job_run(
        self, JobName: str, Arguments: dict[str, str], JobRunQueuingEnabled: bool = False
    ) -> dict[str, str]:
        self._check_job(JobName, "StartJobRun")
        self.start_job_run_calls += 1
        runs = self.runs[JobName]
        run = GlueRun(f"jr_{JobName}_{len(runs) + 1:07d}", JobName, dict(Arguments), self.simulation.now)
        if self.active[JobName] < self.max_concurrent_runs[JobName]:
            self._start(run)
        elif JobRunQueuingEnabled:
            self.waiting[JobName].append(run)
        else:
            raise ClientError(
                {"Error": {"Code": "ConcurrentRunsExceededException", "Message": f"{JobName} is at its limit"}},
                "StartJobRun",
            )
        runs.append(run)
        self._version += 1
        return {"JobRunId": run.id}

    def get_job_runs(self, JobName: str, MaxResults: int = 100) -> dict[str, Any]:
        """The newest ``MaxResults`` runs first, in their state at the current virtual time."""
        self._check_job(JobName, "GetJobRuns")
        self.get_job_runs_calls += 1
        cached = self._rendered.get((JobName, MaxResults))
        if cached is not None and cached[0] == self._version:
            return cached[1]
        newest = self.runs[JobName][-MaxResults:][::-1]
        response = {
            "JobRuns": [
                {
                    "Id": run.id,
                    "JobName": run.job,
                    "JobRunState": run.state,
                    "Arguments": dict(run.arguments),
                    "StartedOn": EPOCH + timedelta(seconds=run.submitted),
                }
                for run in newest
            ]
        }
        self._rendered[(JobName, MaxResults)] = (self._version, response)
        return response

    def running(self, run: GlueRun) -> None:
        run.state = "RUNNING"
        run.running_at = self.simulation.now
        self._version += 1

    def finish(self, run: GlueRun) -> None:
        run.state = "SUCCEEDED"
        run.ended_at = self.simulation.now
        self.active[run.job] -= 1
        self._version += 1
        if self.waiting[run.job]:
            self._start(self.waiting[run.job].popleft())

    def _start(self, run: GlueRun) -> None:
        run.state = "STARTING"
        run.starting_at = self.simulation.now
        self.active[run.job] += 1
        self._version += 1
        self.simulation.at(self.simulation.now + self.startup_s, _RUNNING, run)

    def _check_job(self, job: str, operation: str) -> None:
        if job not in self.runs:
            raise ClientError(
                {"Error": {"Code": "EntityNotFoundException", "Message": f"job {job} not found"}}, operation
            )


def build_config(tables: int, design: str, params: SimParams) -> PipelineConfig:
    """The pipeline configuration handle() gets: ``tables`` tables public.t0001… and runs.mode for ``design``."""
    sizing = params.sizing(tables)
    specs = [
        {
            "name": table_name(i),
            "primary_key": ["id"],
            "columns": [{"name": "id", "type": "bigint"}, {"name": "v", "type": "string"}],
        }
        for i in range(tables)
    ]
    runs = {
        "mode": DESIGN_MODES[design],
        "parallel_tables": sizing.parallel_tables,
        "workers": sizing.workers,
        "time_budget_seconds": params.time_budget_s,
        "idle_seconds": params.idle_s,
        "poll_seconds": params.poll_s,
    }
    lake = {"glue_version": params.glue_version}
    return parse_config({"lake": lake, "tables": specs, "runs": runs}, source=f"simulation of {tables} tables")


def table_name(index: int) -> str:
    return f"public.t{index + 1:04d}"


def cdc_key(index: int, landed_at: float) -> str:
    """The key DMS gives a CDC file landed at ``landed_at`` (dms.bucket_folder empty)."""
    moment = EPOCH + timedelta(seconds=landed_at)
    return f"public/t{index + 1:04d}/{moment:%Y%m%d-%H%M%S}{moment.microsecond // 1000:03d}.csv"


def landing_schedule(tables: int, interval_s: float, window_s: float, params: SimParams) -> list[list[float]]:
    """Per table, the landing times in [0, window_s): a random phase, then one file per interval, each moved by
    a little jitter. Seeded by (seed, tables, interval) only, so both designs see the same landings."""
    rng = random.Random(f"{params.seed}:{tables}:{interval_s}")
    jitter = params.jitter_fraction * interval_s
    schedule = []
    for _ in range(tables):
        phase = rng.uniform(0, interval_s)
        count = math.ceil((window_s - phase) / interval_s) + 1
        times = (phase + k * interval_s + rng.uniform(-jitter, jitter) for k in range(count))
        schedule.append([t for t in times if 0 <= t < window_s])
    return schedule


class Simulation:
    """One (tables, interval, design) case on a virtual clock; ``run()`` returns its results."""

    def __init__(self, tables: int, interval_s: float, design: str, params: SimParams) -> None:
        if design not in DESIGN_MODES:
            raise ValueError(f"design must be one of {sorted(DESIGN_MODES)}, got {design!r}")
        self.tables = tables
        self.interval_s = interval_s
        self.design = design
        self.params = params
        self.config = build_config(tables, design, params)
        runs = self.config.runs
        if runs.coalesced and runs.workers * LANES_PER_WORKER < runs.parallel_tables:
            raise ValueError(
                f"{runs.workers} workers cannot drive {runs.parallel_tables} tables at once "
                f"(at most {LANES_PER_WORKER} per worker)"
            )
        self.workers = runs.workers if runs.coalesced else OLD_WORKERS
        files_per_day = tables * DAY_S / interval_s
        hours = params.hours
        if files_per_day > params.short_window_above_files:
            hours = min(hours, params.short_window_hours)
        self.window_s = hours * 3600.0
        limit = NEW_MAX_CONCURRENT_RUNS if runs.coalesced else OLD_MAX_CONCURRENT_RUNS
        self.glue = SimulatedGlue(self, {"full_load": limit, "cdc_replay": limit}, params.costs.startup_s)
        self.starter = GlueJobStarter(self.glue, JOB_NAMES, sleep=lambda seconds: None)

        self.schedule = landing_schedule(tables, interval_s, self.window_s, params)
        # Steady state: the raw bucket holds retained_days of every table's files (see SimParams).
        keys_per_table = params.retained_days * DAY_S / interval_s
        self.table_listing_s = params.listing_s(keys_per_table)
        self.discovery_s = params.list_page_s * math.ceil(tables / LISTING_THREADS)
        self.landed = [0] * tables  # files of each table landed so far (a prefix of its schedule)
        self.claimed = [0] * tables  # files of each table a run has taken (applied, or in a batch under way)
        self.commits: list[list[float | None]] = [[None] * len(times) for times in self.schedule]
        self.key_index: dict[str, tuple[int, int]] = {}
        self.pending = 0  # landed files no run has taken yet
        self.handle_calls = 0
        self.commit_count = 0
        self.now = 0.0
        self._events: list[tuple[float, int, int, Any]] = []
        self._sequence = itertools.count()

    def at(self, moment: float, kind: int, payload: Any) -> None:
        heapq.heappush(self._events, (moment, kind, next(self._sequence), payload))

    def run(self) -> dict[str, Any]:
        started = time.perf_counter()
        for index, times in enumerate(self.schedule):
            if times:
                self.at(times[0], _LAND, index)
        handlers = {
            _LAND: self._land,
            _RUNNING: self._running,
            _RUN_END: self._run_end,
            _ROUND_START: self._round_start,
            _ROUND_END: self._round_end,
        }
        events = self._events
        while events and (self.params.drain or events[0][0] < self.window_s):
            moment, kind, _, payload = heapq.heappop(events)
            self.now = moment
            handlers[kind](payload)
        return self._results(time.perf_counter() - started)

    # Landings: the Lambda decides.

    def _land(self, index: int) -> None:
        number = self.landed[index]
        landed_at = self.schedule[index][number]
        key = cdc_key(index, landed_at)
        self.key_index[key] = (index, number)
        self.landed[index] = number + 1
        self.pending += 1
        event = s3_object_created_event(BUCKET, [(key, CDC_FILE_SIZE, f'"{index:04x}{number:08x}"')])
        self.handle_calls += 1
        handle(event, config=self.config, starter=self.starter)
        if number + 1 < len(self.schedule[index]):
            self.at(self.schedule[index][number + 1], _LAND, index)

    # The replay script of both designs.

    def _running(self, run: GlueRun) -> None:
        self.glue.running(run)
        if self.config.runs.coalesced:
            run.drain_started = run.last_work = self.now + self.params.noop_s
            self.at(run.drain_started, _ROUND_START, run)
            return
        # per_file: replay.replay of the trigger file: list the table's folder, apply what is pending up to it.
        index, number = self.key_index[run.arguments["--key"]]
        first, last = self.claimed[index], number + 1
        files = max(0, last - first)
        script_s = self.params.noop_s + self.table_listing_s
        if files:
            self.claimed[index] = last
            self.pending -= files
            script_s += self.params.batch_s(files)
        self.at(self.now + script_s, _RUN_END, (run, index, first, max(first, last)))

    def _run_end(self, payload: tuple[GlueRun, int, int, int]) -> None:
        run, index, first, last = payload
        self._commit(index, first, last, self.now)
        self.glue.finish(run)

    def _round_start(self, run: GlueRun) -> None:
        """One round of cdc_lake.engine.drain: the first checks every table (the trigger's first); a later one lists
        each table from its window, then batches those with files not yet taken, ``parallel_tables`` at a time."""
        work = [i for i in range(self.tables) if self.claimed[i] < self.landed[i]] if self.pending else []
        if run.rounds == 0:
            # Every configured table is checked; the trigger's first.
            trigger = int(run.arguments["--table"].removeprefix("public.t")) - 1
            checked = sorted(range(self.tables), key=lambda i: i != trigger)
            listed_at = self.now
        else:
            checked = work
            listed_at = self.now + self.discovery_s
        lanes = [listed_at] * self.config.runs.parallel_tables
        round_end = listed_at
        pending = set(work)
        for index in checked:
            free_at = heapq.heappop(lanes)
            if index not in pending:
                done_at = free_at + self.params.check_s
                heapq.heappush(lanes, done_at)
                round_end = max(round_end, done_at)
                continue
            first, last = self.claimed[index], self.landed[index]
            committed_at = free_at + self.params.list_page_s + self.params.batch_s(last - first)
            self._commit(index, first, last, committed_at)
            heapq.heappush(lanes, committed_at)
            round_end = max(round_end, committed_at)
            self.claimed[index] = last
            self.pending -= last - first
        self.at(round_end, _ROUND_END, (run, bool(work)))

    def _round_end(self, payload: tuple[GlueRun, bool]) -> None:
        """After a round, as cdc_lake.engine.drain: stop once the budget is spent; go on at once after a round with
        work; else stop after idle_seconds without work, or list again after poll_seconds."""
        run, worked = payload
        run.rounds += 1
        runs = self.config.runs
        if worked:
            run.last_work = self.now
        if self.now - run.drain_started >= runs.time_budget_seconds:
            self.glue.finish(run)
        elif worked:
            self._round_start(run)
        elif self.now - run.last_work >= runs.idle_seconds:
            self.glue.finish(run)
        else:
            self.at(self.now + runs.poll_seconds, _ROUND_START, run)

    def _commit(self, index: int, first: int, last: int, committed_at: float) -> None:
        commits = self.commits[index]
        for number in range(first, last):
            if commits[number] is not None:
                raise RuntimeError(f"{table_name(index)} file {number} applied twice")
            commits[number] = committed_at
        self.commit_count += last - first

    # Results.

    def _results(self, wall_s: float) -> dict[str, Any]:
        end = self.window_s
        to_day = DAY_S / end
        lags: list[float] = []
        backlog = 0
        for index in range(self.tables):
            for landed_at, committed_at in zip(
                self.schedule[index][: self.landed[index]], self.commits[index], strict=False
            ):
                if committed_at is None or (committed_at > end and not self.params.drain):
                    backlog += 1
                    lags.append(end - landed_at)
                else:
                    lags.append(committed_at - landed_at)
        lags.sort()
        all_runs = self.glue.runs["cdc_replay"]
        billed = [run for run in all_runs if run.starting_at is not None]
        dpu_hours = 0.0
        for run in billed:
            assert run.starting_at is not None
            stop = run.ended_at if run.ended_at is not None else end
            if not self.params.drain:
                stop = min(stop, end)
            dpu_hours += self.workers * max(self.params.min_billed_s, stop - run.starting_at) / 3600.0
        dpu_hours_per_day = dpu_hours * to_day
        usd_per_day = dpu_hours_per_day * self.params.costs.usd_per_dpu_hour
        runs = self.config.runs
        return {
            "glue_version": self.params.glue_version,
            "usd_per_dpu_hour": self.params.costs.usd_per_dpu_hour,
            "startup_s": self.params.costs.startup_s,
            "tables": self.tables,
            "interval_s": self.interval_s,
            "design": self.design,
            "mode": runs.mode,
            "workers": self.workers,
            "parallel_tables": runs.parallel_tables if runs.coalesced else 1,
            "max_concurrent_runs": self.glue.max_concurrent_runs["cdc_replay"],
            "window_hours": round(end / 3600.0, 3),
            "scaled_to_day": to_day != 1.0,
            "files_landed": len(lags),
            "handle_calls": self.handle_calls,
            "get_job_runs_calls": self.glue.get_job_runs_calls,
            "runs_per_day": round(len(all_runs) * to_day, 1),
            "runs_billed_per_day": round(len(billed) * to_day, 1),
            "runs_waiting_at_end": sum(1 for run in all_runs if run.state == "WAITING"),
            "dpu_hours_per_day": round(dpu_hours_per_day, 2),
            "usd_per_day": round(usd_per_day, 2),
            "usd_per_month": round(usd_per_day * self.params.days_per_month, 2),
            "lag_p50_s": round(percentile(lags, 0.50), 1),
            "lag_p95_s": round(percentile(lags, 0.95), 1),
            "lag_max_s": round(lags[-1], 1) if lags else 0.0,
            "backlog_files": backlog,
            "wall_s": round(wall_s, 2),
        }


def percentile(ordered: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an already sorted list (0 for an empty one)."""
    if not ordered:
        return 0.0
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def simulate(tables: int, interval_s: float, design: str, params: SimParams | None = None) -> dict[str, Any]:
    """Simulate one case: ``tables`` busy tables landing a CDC file every ``interval_s`` s, ``design`` old or new."""
    return Simulation(tables, interval_s, design, params or SimParams()).run()


def simulate_all(params: SimParams | None = None) -> list[dict[str, Any]]:
    """Every (tables, interval, design) of ``params``, old before new; each row gets the old/new cost ratio."""
    params = params or SimParams()
    results = []
    for tables in params.tables:
        for interval_s in params.intervals_s:
            pair = {design: simulate(tables, interval_s, design, params) for design in ("old", "new")}
            new_cost = pair["new"]["usd_per_day"]
            ratio = round(pair["old"]["usd_per_day"] / new_cost, 2) if new_cost else None
            for row in pair.values():
                row["old_over_new_cost"] = ratio
                results.append(row)
    return results


def simulate_versions(params: SimParams | None = None, reuse: Iterable[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """The new design for ``version_tables`` busy tables at each interval, on every Glue version of ``glue_costs``
    (its price and start-up). A case already among ``reuse`` (simulate_all's rows, same inputs) is not run again."""
    params = params or SimParams()
    done = {(r["glue_version"], r["tables"], r["interval_s"]): r for r in reuse if r["design"] == "new"}
    rows = []
    for version in sorted(params.glue_costs):
        on_version = replace(params, glue_version=version)
        for tables in params.version_tables:
            for interval_s in params.intervals_s:
                row = done.get((version, tables, interval_s)) if version == params.glue_version else None
                rows.append(row or simulate(tables, interval_s, "new", on_version))
    return rows


Columns = tuple[tuple[str, str], ...]
COLUMNS: Columns = (
    ("tables", "tables"),
    ("interval_s", "B (s)"),
    ("design", "design"),
    ("workers", "workers"),
    ("parallel_tables", "parallel"),
    ("runs_per_day", "runs/day"),
    ("dpu_hours_per_day", "DPU-h/day"),
    ("usd_per_month", "$/month"),
    ("lag_p50_s", "lag p50 (s)"),
    ("lag_p95_s", "lag p95 (s)"),
    ("backlog_files", "backlog"),
    ("runs_waiting_at_end", "waiting runs"),
    ("old_over_new_cost", "old/new $"),
    ("window_hours", "window (h)"),
)
VERSION_COLUMNS: Columns = (
    ("glue_version", "Glue"),
    ("tables", "tables"),
    ("interval_s", "B (s)"),
    ("workers", "workers"),
    ("parallel_tables", "parallel"),
    ("startup_s", "start-up (s)"),
    ("dpu_hours_per_day", "DPU-h/day"),
    ("usd_per_dpu_hour", "$/DPU-h"),
    ("usd_per_month", "$/month"),
    ("lag_p50_s", "lag p50 (s)"),
    ("lag_p95_s", "lag p95 (s)"),
    ("window_hours", "window (h)"),
)
MAIN_TITLE = "One day of CDC on AWS: one run per file (old) vs coalesced runs (new)"
VERSIONS_TITLE = "The coalesced design on each Glue version: its price per DPU-hour and its start-up"
_TEXT_COLUMNS = {"design", "glue_version"}


def _cell(row: dict[str, Any], name: str) -> str:
    value = row.get(name)
    if value is None:
        return "-"
    if name == "interval_s":
        return f"{value:g}"
    if isinstance(value, float):
        if name in {"usd_per_month", "dpu_hours_per_day", "old_over_new_cost"}:
            return f"{value:,.2f}"
        return f"{value:,.0f}" if name == "runs_per_day" else f"{value:g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def render_markdown(results: Iterable[dict[str, Any]], columns: Columns = COLUMNS) -> str:
    lines = [
        "| " + " | ".join(title for _, title in columns) + " |",
        "|" + "|".join("---" if name in _TEXT_COLUMNS else "---:" for name, _ in columns) + "|",
    ]
    lines += ["| " + " | ".join(_cell(row, name) for name, _ in columns) + " |" for row in results]
    return "\n".join(lines) + "\n"


def write_results(
    results: list[dict[str, Any]],
    params: SimParams,
    out: Path,
    wall_s: float,
    versions: list[dict[str, Any]] | None = None,
) -> None:
    """bench/results/simulation.json (inputs, wall time, rows) and simulation.md (the tables and their inputs)."""
    out.mkdir(parents=True, exist_ok=True)
    document = {"params": asdict(params), "wall_s": round(wall_s, 1), "results": results, "versions": versions or []}
    (out / "simulation.json").write_text(json.dumps(document, indent=2) + "\n")
    scaled = sorted({(r["tables"], r["interval_s"], r["window_hours"]) for r in results if r["scaled_to_day"]})
    costs = params.costs
    notes = [
        f"Inputs: Glue {params.glue_version}, per-table batch {params.per_table_s:g} s × scale {params.scale:g} "
        f"+ {params.extra_file_s:g} s per further file + upkeep {params.upkeep_s:g} s every {params.upkeep_every} "
        f"batches, start-up {costs.startup_s:g} s (billed), "
        f"no-op script {params.noop_s:g} s, listing {params.list_page_s:g} s per 1,000 keys (old design: the "
        f"table's {params.retained_days:g} days of files per batch; new: one page from the listing window), "
        f"first-round check {params.check_s:g} s per idle table, ${costs.usd_per_dpu_hour:g}/DPU-hour, "
        f"{params.min_billed_s:g} s minimum per run, {params.days_per_month} days a month, seed {params.seed}; "
        f"new design: budget {params.time_budget_s} s, idle {params.idle_s} s, poll {params.poll_s:g} s.",
    ]
    notes += [
        f"{tables} tables at {interval:g} s: simulated over {hours:g} h, runs and DPU-hours scaled to a day."
        for tables, interval, hours in scaled
    ]
    notes.append(f"Wall time of the whole simulation: {wall_s:.1f} s.")
    text = render_markdown(results) + "\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    if versions:
        text += f"\n{VERSIONS_TITLE}:\n\n" + render_markdown(versions, VERSION_COLUMNS)
    (out / "simulation.md").write_text(text)


def print_table(results: list[dict[str, Any]], columns: Columns = COLUMNS, title: str = MAIN_TITLE) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for name, heading in columns:
        table.add_column(heading, justify="left" if name in _TEXT_COLUMNS else "right")
    for row in results:
        table.add_row(*(_cell(row, name) for name, _ in columns))
    Console(width=None if sys.stdout.isatty() else 200).print(table)


def version_in_force() -> GlueVersion:
    """The Glue version a run of the simulation takes by default: GLUE_VERSION (``make bench GLUE_VERSION=6.0``), else
    the default of lake.glue_version."""
    return glue_version(build_config(1, "new", SimParams()))


def override_costs(
    usd_per_dpu_hour: Mapping[str, float], startup_s: Mapping[str, float]
) -> dict[GlueVersion, GlueCosts]:
    """The published costs, with the given versions' price or start-up replaced."""
    return {
        version: GlueCosts(
            usd_per_dpu_hour.get(version, costs.usd_per_dpu_hour), startup_s.get(version, costs.startup_s)
        )
        for version, costs in published_costs().items()
    }


def per_version(values: list[str], option: str) -> dict[str, float]:
    """``VERSION=VALUE`` items as {version: value}; a bare VALUE sets every version. Raises ValueError naming
    ``option`` for an unknown version or a value that is no number."""
    settings: dict[str, float] = {}
    for item in values:
        version, equals, value = item.rpartition("=")
        versions = [version] if equals else list(GLUE_VERSIONS)
        if equals and version not in GLUE_VERSIONS:
            raise ValueError(f"{option} {item!r}: Glue version {version!r} is not one of {', '.join(GLUE_VERSIONS)}")
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"{option} {item!r}: {value!r} is not a number") from None
        settings |= dict.fromkeys(versions, number)
    return settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = SimParams()
    parser.add_argument("--per-table-seconds", type=float, default=defaults.per_table_s)
    parser.add_argument("--scale", type=float, default=defaults.scale)
    parser.add_argument("--glue-version", choices=sorted(GLUE_VERSIONS), default=version_in_force())
    parser.add_argument(
        "--startup-seconds", action="append", default=[], metavar="[VERSION=]SECONDS", help="repeat per version"
    )
    parser.add_argument(
        "--usd-per-dpu-hour", action="append", default=[], metavar="[VERSION=]USD", help="repeat per version"
    )
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument(
        "--retained-days", type=float, default=defaults.retained_days, help="days of files listed; 0: new keys only"
    )
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    try:
        costs = override_costs(
            per_version(args.usd_per_dpu_hour, "--usd-per-dpu-hour"),
            per_version(args.startup_seconds, "--startup-seconds"),
        )
    except ValueError as error:
        parser.error(str(error))
    params = SimParams(
        per_table_s=args.per_table_seconds,
        scale=args.scale,
        glue_version=args.glue_version,
        glue_costs=costs,
        seed=args.seed,
        retained_days=args.retained_days,
    )
    started = time.perf_counter()
    results = simulate_all(params)
    versions = simulate_versions(params, results)
    wall_s = time.perf_counter() - started
    print_table(results)
    print_table(versions, VERSION_COLUMNS, VERSIONS_TITLE)
    write_results(results, params, args.out, wall_s, versions)
    print(f"simulated {len(results)} cases in {wall_s:.1f} s; wrote {args.out / 'simulation.json'} and .md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
