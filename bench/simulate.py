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
  ``idle_seconds`` (checking every ``poll_seconds``) when none are, then ends;
- warm design (``runs.mode: warm``), played without the Lambda (in a busy day it starts each shard's run once):
  each shard of ``tables_per_job`` tables (``core.shards``) is one long-lived run of G.025X workers that starts on
  its first landed file and stops after ``quiet_seconds`` without one, and applies in rounds every owned table with
  landed files, ``parallel_tables`` at a time (``WarmShard``). ``solve_warm`` finds the shards, and the batch time,
  each lag goal needs.

Out: runs, DPU-hours and dollars per day and month, freshness lag (commit minus landing) per (tables,
interval, design), on one Glue version (``--glue-version``, default ``GLUE_VERSION`` or ``lake.glue_version``'s
default); and the new design's 100 and 1,000 busy tables on every Glue version, each with its own price per
DPU-hour and start-up time (``--usd-per-dpu-hour 6.0=0.30``, ``--startup-seconds 6.0=10``); the warm design
for 100 and 1,000 busy tables beside the coalesced one, and the scheduled jobs priced on Glue Flex. Assumptions
and defaults: docs/cost-simulation.md.

Usage: python -m bench.simulate [--per-table-seconds 2.0] [--scale 1.0] [--glue-version 5.1] [--out bench/results]
[--warm-batch-seconds 3.15] [--warm-cpu-seconds 0.94] [--tables-per-job 100] [--flex-usd-per-dpu-hour 0.29]
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
from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from bench.bill import LAMBDA_GB, S3_WRITE_USD_PER_1000, Bill, custom_metrics, monthly_bill
from cdc_lake.core.config import (
    PipelineConfig,
    RunSettings,
    UpkeepSettings,
    WarmSettings,
    glue_version,
    parse_config,
)
from cdc_lake.core.names import GLUE_VERSION, GLUE_VERSIONS, GlueVersion
from cdc_lake.core.shards import shard_of
from cdc_lake.engine.metrics import PUT_EVERY_SECONDS
from cdc_lake.engine.runs.coalesced import LISTING_THREADS
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

S3_LIST_USD_PER_1000 = S3_WRITE_USD_PER_1000  # a LIST is priced as a PUT
# What one small batch of one file asks of AWS beside the runs' table listings, their metrics and the Lambda, by kind:
# make bench-warm with the in-Region delay (100 small tables under auto, their batches row deltas read in the driver,
# the warm run told of landings by its shard's queue, 1,000 batches, 2026-12-04, with the lake's FileIO;
# docs/cost-simulation.md "The whole bill"): 3.69 GetTable and 1 UpdateTable (one metadata commit); reads of data
# files after a compaction (0.3, the key index built again) and of the CDC file (1 GET, on its listed ETag), none of
# metadata.json or manifest lists (the lake's FileIO serves what the run wrote; 1.18, 2.2 GETs and 2.1 HEADs the
# day before); writes of manifests and the list (3), metadata.json (1), a data file and a delete file (2); the
# file's applied tag (a PUT) went the same day with expiry by the record (``EXPIRY_REQUESTS_PER_FILE``); the
# Lambda's send of the file to its shard's queue, and the run's receives (0.71) and deletes (0.51). No listing: the
# round's listing that found the file is the batch's (the simulated rounds count it; "1 of its own" before
# 2026-12-03 counted it twice). Before (2026-12-02, the CSV read by Spark): 3 listings, 6.71 GETs, 5.1 HEADs;
# before that (MERGE batches): 13.2 GetTable, 3 UpdateTable, 3 listings, 14.9 GETs, 5 HEADs, 8 PUTs. The Lambda's
# time per event from the same run.
WARM_BATCH_REQUESTS: Mapping[str, float] = {
    "glue:GetTable": 3.69,
    "glue:UpdateTable": 1.0,
    "s3:GET": 1.3,
    "s3:HEAD": 0.0,
    "s3:PUT": 6.0,
    "sqs:SendMessageBatch": 1.0,
    "sqs:ReceiveMessage": 0.71,
    "sqs:DeleteMessageBatch": 0.51,
}
LAMBDA_S_PER_EVENT = 0.08
# The scheduled maintenance's removal of applied landed files (engine.landed_expiry), a day's run over a file's
# rawRetentionDays (30) in the bucket: it is listed once a day (a LIST a thousand kept files, so 30 per thousand
# files), removed by one DeleteObjects a thousand (a POST), and the table's mark read and written once a day (at a
# file a minute, 1/1440 of a request each).
EXPIRY_REQUESTS_PER_FILE: Mapping[str, float] = {
    "s3:LIST": 30 / 1000,
    "s3:PUT": 1 / 1000 + 1 / 1440,
    "s3:GET": 1 / 1440,
}


def expiry_requests(files: float) -> dict[str, float]:
    """The maintenance's requests, by kind, to remove ``files`` applied landed files (``EXPIRY_REQUESTS_PER_FILE``)."""
    return {kind: n * files for kind, n in EXPIRY_REQUESTS_PER_FILE.items()}


# The warm Lambda's look at the shard's RUNNING run per landed file: its stop marker, then its hold, by key
# (``GlueJobStarter.warm_run``), where it listed the shard's state before.
LAMBDA_HEADS_PER_EVENT = 2

# The warm design (runs.mode warm) runs on G.025X workers: a quarter of a DPU and 2 vCPUs each (AWS Glue's worker
# types). Its batch: a warm small batch (10 changes into 10,000 rows) on the Glue catalog + S3 path, measured by
# bench.paths (docs/performance.md, "AWS's round trips"): 0.94 s against a local endpoint answering in about a
# millisecond, 3.15 s with AWS's in-Region round trips held on each request.
G025X_DPU = 0.25
G025X_VCPUS = 2
WARM_BATCH_LOCAL_S = 0.94
WARM_BATCH_AWS_S = 3.15
# The lake jobs the stack runs on Flex, as it sizes them (tests/unit/test_simulate.py checks they agree with infra/):
# G.1X workers of the maintenance, drift and source-check jobs.
MAINTENANCE_WORKERS = 2
DRIFT_WORKERS = 2
SOURCE_CHECK_WORKERS = 2
_WARM = WarmSettings()
_RUNS = RunSettings()

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
class WarmGoal:
    """Busy tables whose lag p95 must stay under ``p95_s``, on at most ``max_shards`` runs or ``max_usd_per_month``."""

    tables: int
    p95_s: float
    max_shards: int | None = None
    max_usd_per_month: float | None = None


WARM_GOALS = (WarmGoal(100, 60.0, max_shards=1), WarmGoal(1000, 120.0, max_usd_per_month=1600.0))


@dataclass(frozen=True)
class WarmParams:
    """The warm design (``runs.mode: warm``) as the simulation plays it, without the Lambda: each shard of
    ``tables_per_job`` tables is one long-lived run of ``workers`` G.025X workers, started by its first landed file
    and stopped after ``quiet_s`` without one. A run works in rounds: every owned table with files landed since its
    last batch gets one batch of all of them, ``parallel_tables`` at a time.

    A batch of one file takes ``batch_s``, of which ``cpu_s`` is the worker's CPU and the rest waiting on round
    trips. Waiting overlaps across parallel batches; CPU does not: ``concurrent`` batches share ``vcpus``, so each
    holds its lane for ``max(batch_s, concurrent × cpu_s / vcpus)`` (``lane_s``)."""

    batch_s: float = WARM_BATCH_AWS_S
    cpu_s: float = WARM_BATCH_LOCAL_S
    vcpus: int = G025X_VCPUS
    workers: int = _WARM.workers
    tables_per_job: int = _WARM.tables_per_job
    parallel_tables: int = _WARM.parallel_tables
    round_s: float = _WARM.round_seconds
    # Told of landings by the shard's event queue (as deployed): rounds unpaced, listing the tables told, and every
    # table every sweep_s; False: every round lists every table, at most every round_s (a stack before the queues).
    fed: bool = True
    sweep_s: float = _WARM.sweep_seconds
    quiet_s: float = _WARM.quiet_seconds
    commit_interval_s: float = _WARM.commit_interval_seconds  # a table's batches start at least this far apart
    lifetime_h: float = _WARM.lifetime_hours
    tables: tuple[int, ...] = (100, 1000)
    interval_s: float = 60.0
    # Goals the batch time and shard size are solved for (solve_warm): simulated over solve_hours, then checked
    # over the full window.
    goals: tuple[WarmGoal, ...] = WARM_GOALS
    solve_hours: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.cpu_s <= self.batch_s:
            raise ValueError(f"a warm batch's CPU time ({self.cpu_s} s) must be in (0, batch_s = {self.batch_s} s]")
        WarmSettings(tables_per_job=self.tables_per_job)  # the configuration's bounds

    def shards(self, tables: int) -> int:
        """Warm runs for ``tables`` tables, as the stack makes them."""
        return WarmSettings(tables_per_job=self.tables_per_job).shards(tables)

    def lane_s(self, concurrent: int) -> float:
        """Seconds a one-file batch holds its lane while ``concurrent`` batches run at once."""
        return max(self.batch_s, concurrent * self.cpu_s / self.vcpus)

    def with_batch(self, batch_s: float) -> WarmParams:
        """The same design with a ``batch_s`` batch: a faster batch waits less first (fewer round trips), so its CPU
        time stays ``cpu_s`` unless the batch itself is shorter."""
        return replace(self, batch_s=batch_s, cpu_s=min(self.cpu_s, batch_s))

    @property
    def dpu(self) -> float:
        """DPUs one warm run is billed for."""
        return self.workers * G025X_DPU


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
    warm: WarmParams = field(default_factory=WarmParams)
    # Glue Flex, the execution class on spare capacity (glueetl jobs on G.1X/G.2X, so neither the streaming warm
    # runs nor, in the stack, the replay jobs): price per DPU-hour, us-east-1 (docs/cost-simulation.md's source).
    flex_usd_per_dpu_hour: float = 0.29
    # The scheduled jobs the stack runs on Flex, per run: maintenance of one table (bench-aging's `cdc-lake
    # maintain`, 4.5 s locally, times the warm batch's AWS/local ratio for the round trips), verify of one table
    # (bench-drift's 10M-row table, 31.9 s), the source check's catalog comparison.
    maintain_table_s: float = 4.5 * WARM_BATCH_AWS_S / WARM_BATCH_LOCAL_S
    verify_table_s: float = 31.9
    source_check_s: float = 30.0

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
        return self.per_table_s * self.scale + self.extra_file_s * (files - 1) + self.upkeep_share_s

    @property
    def upkeep_share_s(self) -> float:
        """The replay's upkeep spread over its batches: ``upkeep_s`` every ``upkeep_every`` batches."""
        return self.upkeep_s * self.scale / self.upkeep_every if self.upkeep_every else 0.0

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


def window_hours(tables: int, interval_s: float, params: SimParams) -> float:
    """Hours a case is simulated over: ``hours``, or ``short_window_hours`` when it lands more files a day than
    ``short_window_above_files`` (its runs and DPU-hours are then scaled to a day)."""
    if tables * DAY_S / interval_s > params.short_window_above_files:
        return min(params.hours, params.short_window_hours)
    return params.hours


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
        if runs.run_mode.every_table and runs.workers * LANES_PER_WORKER < runs.parallel_tables:
            raise ValueError(
                f"{runs.workers} workers cannot drive {runs.parallel_tables} tables at once "
                f"(at most {LANES_PER_WORKER} per worker)"
            )
        self.workers = runs.workers if runs.run_mode.every_table else OLD_WORKERS
        self.window_s = window_hours(tables, interval_s, params) * 3600.0
        limit = NEW_MAX_CONCURRENT_RUNS if runs.run_mode.every_table else OLD_MAX_CONCURRENT_RUNS
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
        # What the runs ask of S3 and CloudWatch beside their batches (the whole bill): table listings, batches,
        # metric puts (one a round that committed, one a run's end).
        self.listings = 0
        self.batches = 0
        self.metric_puts = 0
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
        if self.config.runs.run_mode.every_table:
            run.drain_started = run.last_work = self.now + self.params.noop_s
            self.at(run.drain_started, _ROUND_START, run)
            return
        # per_file: replay.replay of the trigger file: list the table's folder, apply what is pending up to it.
        index, number = self.key_index[run.arguments["--key"]]
        first, last = self.claimed[index], number + 1
        files = max(0, last - first)
        script_s = self.params.noop_s + self.table_listing_s
        self.listings += 1
        self.metric_puts += 2  # the run's end: its batch's values, then how long files waited
        if files:
            self.batches += 1
            self.claimed[index] = last
            self.pending -= files
            script_s += self.params.batch_s(files)
        self.at(self.now + script_s, _RUN_END, (run, index, first, max(first, last)))

    def _run_end(self, payload: tuple[GlueRun, int, int, int]) -> None:
        run, index, first, last = payload
        self._commit(index, first, last, self.now)
        self.glue.finish(run)

    def _round_start(self, run: GlueRun) -> None:
        """One round of engine.runs.coalesced: the first checks every table (the trigger's first); a later one lists
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
        self.listings += self.tables  # the first round checks every table, a later one lists each from its window
        self.metric_puts += bool(work)
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
            self.batches += 1
            committed_at = free_at + self.params.list_page_s + self.params.batch_s(last - first)
            self._commit(index, first, last, committed_at)
            heapq.heappush(lanes, committed_at)
            round_end = max(round_end, committed_at)
            self.claimed[index] = last
            self.pending -= last - first
        self.at(round_end, _ROUND_END, (run, bool(work)))

    def _round_end(self, payload: tuple[GlueRun, bool]) -> None:
        """After a round, as engine.runs.coalesced: stop once the budget is spent; go on at once after a round with
        work; else stop after idle_seconds without work, or list again after poll_seconds."""
        run, worked = payload
        run.rounds += 1
        runs = self.config.runs
        if worked:
            run.last_work = self.now
        if self.now - run.drain_started >= runs.time_budget_seconds:
            self.metric_puts += 1  # the run's end
            self.glue.finish(run)
        elif worked:
            self._round_start(run)
        elif self.now - run.last_work >= runs.idle_seconds:
            self.metric_puts += 1
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
        to_month = to_day * self.params.days_per_month
        bill = whole_bill(
            glue_usd=usd_per_day * self.params.days_per_month,
            files=len(lags) * to_month,
            batches=self.batches * to_month,
            metric_puts=self.metric_puts * to_month,
            listings=self.listings * to_month,
        )
        return {
            "glue_version": self.params.glue_version,
            "usd_per_dpu_hour": self.params.costs.usd_per_dpu_hour,
            "startup_s": self.params.costs.startup_s,
            "tables": self.tables,
            "interval_s": self.interval_s,
            "design": self.design,
            "mode": runs.mode,
            "workers": self.workers,
            "parallel_tables": runs.parallel_tables if runs.run_mode.every_table else 1,
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
            "s3_listing_usd_per_month": round(self.listings * to_month / 1000 * S3_LIST_USD_PER_1000, 2),
            "requests_usd_per_month": round(bill.total_usd - bill.usd["Glue compute"], 2),
            "whole_usd_per_month": round(bill.total_usd, 2),
            "bill": bill.as_dict(),
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


# The warm design (runs.mode: warm), played without the Lambda: in a busy day it only starts each shard's run once.


@dataclass(slots=True)
class ShardOutcome:
    """What one shard's warm runs did in the window: each landed file's lag, the files left unapplied, the billed
    seconds of its runs, how many runs started and how many table listings its rounds made."""

    lags: list[float]
    backlog: int
    billed_s: float
    runs: int
    listings: int = 0
    batches: int = 0  # commits in the window
    rounds: int = 0  # rounds that committed something: each puts its batches' metrics in one request


class WarmShard:
    """One shard's warm runs on a virtual clock. ``landings``: each owned table's landing times, in order.

    A run starts at the first landing (Glue's start-up and the script's fixed time, both billed, before its first
    round). A round lists every owned table (``LISTING_THREADS`` at a time, one page each), then gives each table
    with a landed file one batch, in table order, ``parallel_tables`` at a time; a batch takes every file of its
    table landed by its start and commits at its end (``lane_s``, 0.2 s a further file, and the replay's upkeep share
    as in the coalesced design). A round starts ``round_s`` (at most ``quiet_s``) after the last at the soonest: after
    one that applied something the next starts then; after an empty one the run looks again every ``poll_s`` and
    stops once nothing has landed for ``quiet_s``, or at a round's end once it has lived ``lifetime_h``. The next
    landing starts the next run."""

    def __init__(self, landings: Sequence[Sequence[float]], end: float, params: SimParams, drain: bool = False) -> None:
        self.landings = landings
        self.end = end
        self.params = params
        self.warm = params.warm
        self.drain = drain
        self.startup_s = params.costs.startup_s + params.noop_s
        # A round's listings, at once: every table's, or (told of landings) the few tables told.
        pages = 1 if params.warm.fed else math.ceil(len(landings) / LISTING_THREADS)
        self.discovery_s = params.list_page_s * pages
        self.applied = [0] * len(landings)
        self.listings = 0  # one per owned table a round
        self.busy_rounds = 0
        # As engine.runs.warm.warm_budget paces a run's rounds; a run told of landings needs no pace.
        self.pace_s = 0.0 if self.warm.fed else min(self.warm.round_s, self.warm.quiet_s)
        self.rest_s = min(self.warm.commit_interval_s, self.warm.quiet_s)  # and rests a table after its batch
        self.rest_until = [0.0] * len(landings)  # per table: when its interval since its last batch's round ends
        self.rest_end = 0.0  # the latest of those: a run does not stop before it
        # Per table, each batch's (files applied through it, commit time).
        self.commits: list[list[tuple[int, float]]] = [[] for _ in landings]
        # Each table with an unapplied landing: when a round takes it (that landing, or the end of its rest).
        self.due = [(times[0], index) for index, times in enumerate(landings) if times]
        heapq.heapify(self.due)

    def run(self) -> ShardOutcome:
        billed_s, runs = 0.0, 0
        start = self.due[0][0] if self.due else None
        while start is not None and (self.drain or start < self.end):
            stop = self._play_run(start)
            runs += 1
            billed_s += max(self.params.min_billed_s, (stop if self.drain else min(stop, self.end)) - start)
            start = max(stop, self.due[0][0]) if self.due else None
        return self._outcome(billed_s, runs)

    def _play_run(self, start: float) -> float:
        """One run, from the landing that started it; returns when it stops."""
        now = start + self.startup_s
        newest_landing = start
        while self.drain or now < self.end:
            if now - start >= self.warm.lifetime_h * 3600.0:
                return now
            listed = now + self.discovery_s
            # A resting table is not listed (engine.runs.coalesced._candidates).
            awake = len(self.landings) - (sum(until > now for until in self.rest_until) if self.rest_s else 0)
            if not self.warm.fed or now == start + self.startup_s:
                self.listings += awake
            paced = now + self.pace_s  # the next round starts no sooner
            tables = []
            while self.due and self.due[0][0] <= listed:
                tables.append(heapq.heappop(self.due)[1])
            if self.warm.fed:
                self.listings += len(tables)  # those told
            if tables:
                self.busy_rounds += 1
                now, newest = self._round(now, listed, sorted(tables))
                now = max(now, paced)
                newest_landing = max(newest_landing, newest)
                continue
            quiet_from = max(newest_landing + self.warm.quiet_s, self.rest_end)
            upcoming = self.due[0][0] if self.due else math.inf
            if upcoming > quiet_from:
                return self._swept(start, max(listed, quiet_from))
            if self.warm.fed:  # the queue's long poll ends when the landing is told
                now = max(listed, upcoming)
                continue
            # Nothing landed: look again every poll_s until the next landing.
            now = max(paced, listed + self.params.poll_s * max(1, math.ceil((upcoming - listed) / self.params.poll_s)))
        return self._swept(start, now)

    def _swept(self, start: float, stop: float) -> float:
        """A run told of landings from ``start`` to ``stop`` also listed every table every ``sweep_s``."""
        if self.warm.fed:
            self.listings += len(self.landings) * int((stop - start) // self.warm.sweep_s)
        return stop

    def _round(self, began: float, listed: float, tables: list[int]) -> tuple[float, float]:
        """Batches of ``tables``, in order, ``parallel_tables`` at a time, in a round that ``began`` then; returns the
        round's end and the newest landing it applied."""
        lanes = [listed] * min(self.warm.parallel_tables, len(tables))
        lane_s = self.warm.lane_s(len(lanes)) + self.params.upkeep_share_s
        extra_file_s = self.params.extra_file_s
        landings, applied, commits, due = self.landings, self.applied, self.commits, self.due
        newest = -math.inf
        for index in tables:
            begins = heapq.heappop(lanes)
            times = landings[index]
            first, last = applied[index], bisect_right(times, begins)
            committed = begins + lane_s + extra_file_s * (last - first - 1)
            commits[index].append((last, committed))
            applied[index] = last
            newest = max(newest, times[last - 1])
            if self.rest_s:
                self.rest_until[index] = began + self.rest_s
                self.rest_end = max(self.rest_end, self.rest_until[index])
            if last < len(times):
                heapq.heappush(due, (max(times[last], self.rest_until[index]), index))
            heapq.heappush(lanes, committed)
        return max(lanes), newest

    def _outcome(self, billed_s: float, runs: int) -> ShardOutcome:
        """Each file's lag: commit minus landing; a file not committed by the end counts ``end - landing``."""
        lags: list[float] = []
        backlog = 0
        for times, commits in zip(self.landings, self.commits, strict=True):
            done = 0
            for last, committed in commits:
                if committed > self.end and not self.drain:
                    break
                lags.extend([committed - landed for landed in times[done:last]])
                done = last
            backlog += len(times) - done
            lags.extend([self.end - landed for landed in times[done:]])
        batches = sum(1 for commits in self.commits for _, at in commits if self.drain or at <= self.end)
        return ShardOutcome(lags, backlog, billed_s, runs, self.listings, batches, self.busy_rounds)


def simulate_warm(tables: int, interval_s: float, params: SimParams | None = None) -> dict[str, Any]:
    """The warm design for ``tables`` busy tables landing a file every ``interval_s`` s: the landings of the other
    designs, each table in the shard ``core.shards.shard_of`` gives it, each shard played by ``WarmShard``."""
    params = params or SimParams()
    started = time.perf_counter()
    warm = params.warm
    window_s = window_hours(tables, interval_s, params) * 3600.0
    schedule = landing_schedule(tables, interval_s, window_s, params)
    shards = warm.shards(tables)
    owned: list[list[list[float]]] = [[] for _ in range(shards)]
    for index, times in enumerate(schedule):
        owned[shard_of(table_name(index), shards)].append(times)
    outcomes = [WarmShard(landings, window_s, params, params.drain).run() for landings in owned]
    lags = sorted(lag for outcome in outcomes for lag in outcome.lags)
    to_day = DAY_S / window_s
    dpu_hours_per_day = sum(o.billed_s for o in outcomes) * warm.dpu / 3600.0 * to_day
    usd_per_day = dpu_hours_per_day * params.costs.usd_per_dpu_hour
    to_month = to_day * params.days_per_month
    listings_per_month = sum(o.listings for o in outcomes) * to_month
    files = len(lags) * to_month
    bill = whole_bill(
        glue_usd=usd_per_day * params.days_per_month,
        files=files,
        batches=sum(o.batches for o in outcomes) * to_month,
        # A round that committed, a run's end; a run told of landings ends a round a batch or two, and puts a minute's.
        metric_puts=sum(
            (min(o.rounds, o.billed_s / PUT_EVERY_SECONDS) if warm.fed else o.rounds) + o.runs for o in outcomes
        )
        * to_month,
        listings=listings_per_month,
        heads=files * LAMBDA_HEADS_PER_EVENT,
        queued=warm.fed,
    )
    return {
        "glue_version": params.glue_version,
        "usd_per_dpu_hour": params.costs.usd_per_dpu_hour,
        "startup_s": params.costs.startup_s,
        "tables": tables,
        "interval_s": interval_s,
        "design": "warm",
        "mode": "warm",
        "capacity": f"{shards} × {warm.workers} G.025X",
        "shards": shards,
        "tables_per_job": warm.tables_per_job,
        "largest_shard": max(len(landings) for landings in owned),
        "workers": warm.workers,
        "worker_type": "G.025X",
        "parallel_tables": warm.parallel_tables,
        "batch_s": warm.batch_s,
        "cpu_s": warm.cpu_s,
        "window_hours": round(window_s / 3600.0, 3),
        "scaled_to_day": to_day != 1.0,
        "files_landed": len(lags),
        "runs_started": sum(o.runs for o in outcomes),
        "dpu_hours_per_day": round(dpu_hours_per_day, 2),
        "usd_per_day": round(usd_per_day, 2),
        "usd_per_month": round(usd_per_day * params.days_per_month, 2),
        "lag_p50_s": round(percentile(lags, 0.50), 1),
        "lag_p95_s": round(percentile(lags, 0.95), 1),
        "lag_max_s": round(lags[-1], 1) if lags else 0.0,
        "backlog_files": sum(o.backlog for o in outcomes),
        "s3_listing_usd_per_month": round(listings_per_month / 1000 * S3_LIST_USD_PER_1000, 2),
        "requests_usd_per_month": round(bill.total_usd - bill.usd["Glue compute"], 2),
        "whole_usd_per_month": round(bill.total_usd, 2),
        "bill": bill.as_dict(),
        "round_s": warm.round_s,
        "commit_interval_s": warm.commit_interval_s,
        "batches_per_month": round(sum(o.batches for o in outcomes) * to_month),
        "wall_s": round(time.perf_counter() - started, 2),
    }


def whole_bill(
    *,
    glue_usd: float,
    files: float,
    batches: float,
    metric_puts: float,
    listings: float,
    heads: float = 0.0,
    queued: bool = False,
) -> Bill:
    """A month of a design, whole: Glue compute, each batch's requests as measured (``WARM_BATCH_REQUESTS``: a small
    batch is the same in every design), the runs' table listings, their metric puts, the Lambda's invocation per
    landed file, its HEADs of the warm runs' markers (``heads``), the maintenance's removal of the applied files
    (``EXPIRY_REQUESTS_PER_FILE``), and for warm runs told of landings (``queued``) their event queues' requests."""
    requests = {kind: n * batches for kind, n in WARM_BATCH_REQUESTS.items() if queued or not kind.startswith("sqs:")}
    requests["s3:LIST"] = requests.get("s3:LIST", 0.0) + listings
    requests["s3:HEAD"] = requests.get("s3:HEAD", 0.0) + heads
    requests["cloudwatch:PutMetricData"] = metric_puts
    for kind, n in expiry_requests(files).items():
        requests[kind] = requests.get(kind, 0.0) + n
    return monthly_bill(
        requests,
        glue_compute_usd=glue_usd,
        lambda_invocations=files,
        lambda_gb_seconds=files * LAMBDA_GB * LAMBDA_S_PER_EVENT,
        custom_metrics=custom_metrics(),
    )


def shard_usd_per_month(params: SimParams) -> float:
    """A warm run busy all month: ``workers × 0.25 DPU × 24 h × days × price``."""
    return params.warm.dpu * 24.0 * params.days_per_month * params.costs.usd_per_dpu_hour


def allowed_shards(goal: WarmGoal, params: SimParams) -> int:
    """The most warm runs ``goal`` allows: its ``max_shards``, or as many busy runs as its budget pays for."""
    limits = [goal.tables]
    if goal.max_shards is not None:
        limits.append(goal.max_shards)
    if goal.max_usd_per_month is not None:
        limits.append(int(goal.max_usd_per_month // shard_usd_per_month(params)))
    return max(1, min(limits))


def solve_warm(goal: WarmGoal, params: SimParams) -> dict[str, Any]:
    """What the warm design needs for ``goal``, each found by bisection over ``solve_hours`` windows (then
    simulated over the full window by ``shard_rows``):
    - ``shards_at_today_batch``: the fewest shards whose p95 stays under the goal with today's ``batch_s``;
    - ``batch_s_needed``: the slowest batch, to 0.01 s, that keeps it under the goal on the most shards the goal
      allows (searched up to twice today's batch). Which shard owns a table depends on the number of shards
      alone, so shards are searched, and ``tables_per_job`` is the smallest that makes that many."""
    warm = params.warm
    short = replace(params, hours=warm.solve_hours, short_window_hours=min(warm.solve_hours, params.short_window_hours))

    def meets(shards: int, batch_s: float) -> bool:
        tables_per_job = math.ceil(goal.tables / shards)
        trial = replace(short, warm=replace(warm.with_batch(batch_s), tables_per_job=tables_per_job))
        return float(simulate_warm(goal.tables, warm.interval_s, trial)["lag_p95_s"]) < goal.p95_s

    # The fewest shards: from the default count, doubled until the goal is met, then bisected.
    fewest, most = 1, min(goal.tables, warm.shards(goal.tables))
    while most < goal.tables and not meets(most, warm.batch_s):
        fewest, most = most + 1, min(goal.tables, 2 * most)
    while fewest < most:
        middle = (fewest + most) // 2
        fewest, most = (fewest, middle) if meets(middle, warm.batch_s) else (middle + 1, most)
    allowed = allowed_shards(goal, params)
    slow, fast = 2 * warm.batch_s, 0.0
    if meets(allowed, slow):
        fast = slow
    while slow - fast > 0.01:
        batch_s = (slow + fast) / 2
        slow, fast = (slow, batch_s) if meets(allowed, batch_s) else (batch_s, fast)
    return {
        "tables": goal.tables,
        "p95_goal_s": goal.p95_s,
        "max_usd_per_month": goal.max_usd_per_month,
        "today_batch_s": warm.batch_s,
        "shards_at_today_batch": fewest,
        "tables_per_job_at_today_batch": math.ceil(goal.tables / fewest),
        "usd_per_month_at_today_batch": round(fewest * shard_usd_per_month(params), 2),
        "shards_allowed": allowed,
        "tables_per_job_allowed": math.ceil(goal.tables / allowed),
        "batch_s_needed": round(math.floor(fast * 20) / 20, 2),
    }


def shard_rows(solution: dict[str, Any], params: SimParams) -> list[dict[str, Any]]:
    """A solution's two designs over the full window, where they differ from the default one: today's batch on the
    shards it needs, and the slowest batch that meets the goal on the shards the goal allows."""
    warm, tables = params.warm, solution["tables"]
    options = [
        replace(warm, tables_per_job=solution["tables_per_job_at_today_batch"]),
        replace(warm.with_batch(solution["batch_s_needed"]), tables_per_job=solution["tables_per_job_allowed"]),
    ]
    rows = []
    for option in options:
        if option.batch_s <= 0 or (option.shards(tables), option.batch_s) == (warm.shards(tables), warm.batch_s):
            continue
        row = simulate_warm(tables, warm.interval_s, replace(params, warm=option))
        rows.append(row | {"design": f"warm, for p95 < {solution['p95_goal_s']:g} s"})
    return rows


@dataclass(frozen=True)
class WarmReport:
    """The warm design beside the coalesced one (``rows``), what its goals need (``solutions``), and the scheduled
    jobs on Flex (``flex``)."""

    rows: list[dict[str, Any]]
    solutions: list[dict[str, Any]]
    flex: list[dict[str, Any]]
    freshness: list[dict[str, Any]] = field(default_factory=list)


def warm_report(params: SimParams, results: Iterable[dict[str, Any]] = ()) -> WarmReport:
    """The warm design for ``warm.tables`` busy tables, each beside the coalesced row of ``results`` (simulate_all's,
    same inputs) for the same case, then the rows solved for each goal; the scheduled jobs priced on Flex."""
    warm = params.warm
    coalesced = {(r["tables"], r["interval_s"]): r for r in results if r["design"] == "new"}
    solutions = [solve_warm(goal, params) for goal in warm.goals]
    rows = []
    for tables in warm.tables:
        row = coalesced.get((tables, warm.interval_s))
        if row is not None:
            worker_type = GLUE_VERSIONS[row["glue_version"]].worker_type
            batch_s = round(params.per_table_s * params.scale, 2)
            rows.append(
                row | {"design": "coalesced", "capacity": f"1 × {row['workers']} {worker_type}", "batch_s": batch_s}
            )
        rows.append(simulate_warm(tables, warm.interval_s, params))
        for solution in solutions:
            if solution["tables"] == tables:
                rows += shard_rows(solution, params)
    flex = [job for tables in warm.tables for job in price_flex(tables, params)]
    return WarmReport(rows, solutions, flex, freshness_rows(params))


# runs.warm.commit_interval_seconds the docs price: 0 (a batch each round a table has a file), 1, 2, 5 and 15 minutes.
FRESHNESS_INTERVALS_S = (0.0, 60.0, 120.0, 300.0, 900.0)


def freshness_rows(params: SimParams) -> list[dict[str, Any]]:
    """The warm design for ``warm.tables`` busy tables at each commit interval of ``FRESHNESS_INTERVALS_S``, its quiet
    time raised to the interval where it is shorter, as the configuration requires."""
    warm = params.warm
    rows = []
    for tables in warm.tables:
        for interval in FRESHNESS_INTERVALS_S:
            option = replace(warm, commit_interval_s=interval, quiet_s=max(warm.quiet_s, interval))
            rows.append(simulate_warm(tables, warm.interval_s, replace(params, warm=option)))
    return rows


# Glue Flex for the jobs nobody waits on.


@dataclass(frozen=True)
class ScheduledJob:
    """A lake job the stack runs on Flex (infra/glue.py's FLEX_JOBS): its G.1X workers, how often it runs, runs a
    month and seconds a run (start-up included)."""

    job: str
    workers: int
    schedule: str
    runs_per_month: float
    run_s: float


def scheduled_jobs(tables: int, params: SimParams) -> tuple[ScheduledJob, ...]:
    """The stack's scheduled jobs for ``tables`` tables on their default schedules (infra/settings.py): maintenance
    and the source check daily, the drift job's verify weekly."""
    fixed = params.costs.startup_s + params.noop_s
    days = params.days_per_month
    return (
        ScheduledJob("maintenance", MAINTENANCE_WORKERS, "daily", days, fixed + tables * params.maintain_table_s),
        ScheduledJob("drift", DRIFT_WORKERS, "weekly", days / 7, fixed + tables * params.verify_table_s),
        ScheduledJob("source_check", SOURCE_CHECK_WORKERS, "daily", days, fixed + params.source_check_s),
    )


def price_flex(tables: int, params: SimParams) -> list[dict[str, Any]]:
    """Each scheduled job's month on the standard execution class and on Flex (same DPU-hours, Flex's rate)."""
    rows = []
    for job in scheduled_jobs(tables, params):
        dpu_hours = job.workers * max(params.min_billed_s, job.run_s) / 3600.0 * job.runs_per_month
        standard = dpu_hours * params.costs.usd_per_dpu_hour
        flex = dpu_hours * params.flex_usd_per_dpu_hour
        rows.append(
            {
                "job": job.job,
                "schedule": job.schedule,
                "tables": tables,
                "workers": job.workers,
                "runs_per_month": round(job.runs_per_month, 2),
                "run_minutes": round(job.run_s / 60.0, 1),
                "dpu_hours_per_month": round(dpu_hours, 2),
                "usd_per_month": round(standard, 2),
                "flex_usd_per_month": round(flex, 2),
                "flex_saving_usd_per_month": round(standard - flex, 2),
            }
        )
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
WARM_COLUMNS: Columns = (
    ("tables", "tables"),
    ("design", "design"),
    ("capacity", "runs × workers"),
    ("parallel_tables", "parallel"),
    ("batch_s", "batch (s)"),
    ("dpu_hours_per_day", "DPU-h/day"),
    ("usd_per_month", "$/month"),
    ("lag_p50_s", "lag p50 (s)"),
    ("lag_p95_s", "lag p95 (s)"),
    ("lag_max_s", "lag max (s)"),
    ("backlog_files", "backlog"),
    ("s3_listing_usd_per_month", "S3 listings $/month"),
    ("requests_usd_per_month", "requests $/month"),
    ("whole_usd_per_month", "whole bill $/month"),
    ("window_hours", "window (h)"),
)
FRESHNESS_COLUMNS: Columns = (
    ("tables", "tables"),
    ("commit_interval_s", "commit interval (s)"),
    ("lag_p50_s", "lag p50 (s)"),
    ("lag_p95_s", "lag p95 (s)"),
    ("batches_per_month", "batches/month"),
    ("usd_per_month", "Glue $/month"),
    ("s3_listing_usd_per_month", "S3 listings $/month"),
    ("requests_usd_per_month", "requests $/month"),
    ("whole_usd_per_month", "whole bill $/month"),
)
FLEX_COLUMNS: Columns = (
    ("job", "job"),
    ("schedule", "schedule"),
    ("tables", "tables"),
    ("workers", "G.1X workers"),
    ("runs_per_month", "runs/month"),
    ("run_minutes", "minutes/run"),
    ("dpu_hours_per_month", "DPU-h/month"),
    ("usd_per_month", "$/month standard"),
    ("flex_usd_per_month", "$/month Flex"),
    ("flex_saving_usd_per_month", "saved by Flex"),
)
MAIN_TITLE = "One day of CDC on AWS: one run per file (old) vs coalesced runs (new)"
VERSIONS_TITLE = "The coalesced design on each Glue version: its price per DPU-hour and its start-up"
WARM_TITLE = "Warm runs (runs.mode: warm) beside the coalesced design, busy tables at 60 s"
FRESHNESS_TITLE = "Freshness you can buy: warm runs at each runs.warm.commit_interval_seconds, busy tables at 60 s"
FLEX_TITLE = "The scheduled jobs on the standard execution class and on Flex"
_TEXT_COLUMNS = {"design", "glue_version", "capacity", "job", "schedule"}
_MONEY_COLUMNS = {
    "usd_per_month",
    "s3_listing_usd_per_month",
    "requests_usd_per_month",
    "whole_usd_per_month",
    "dpu_hours_per_day",
    "old_over_new_cost",
    "dpu_hours_per_month",
    "flex_usd_per_month",
    "flex_saving_usd_per_month",
}


def _cell(row: dict[str, Any], name: str) -> str:
    value = row.get(name)
    if value is None:
        return "-"
    if name in ("interval_s", "commit_interval_s"):
        return f"{value:g}"
    if isinstance(value, float):
        if name in _MONEY_COLUMNS:
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
    warm: WarmReport | None = None,
) -> None:
    """bench/results/simulation.json (inputs, wall time, rows) and simulation.md (the tables and their inputs)."""
    out.mkdir(parents=True, exist_ok=True)
    document = {
        "params": asdict(params),
        "wall_s": round(wall_s, 1),
        "results": results,
        "versions": versions or [],
        "warm": asdict(warm) if warm else None,
    }
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
    if warm:
        text += f"\n{WARM_TITLE}:\n\n" + render_markdown(warm.rows, WARM_COLUMNS) + "\n"
        text += "\n".join(f"- {line}" for line in warm_notes(warm, params)) + "\n"
        text += f"\n{FRESHNESS_TITLE}:\n\n" + render_markdown(warm.freshness, FRESHNESS_COLUMNS)
        text += f"\n{FLEX_TITLE}:\n\n" + render_markdown(warm.flex, FLEX_COLUMNS)
    (out / "simulation.md").write_text(text)


def warm_notes(report: WarmReport, params: SimParams) -> list[str]:
    """The warm design's inputs, and what each goal needs, one line each."""
    warm = params.warm
    lines = [
        f"Warm inputs: batch {warm.batch_s:g} s of which {warm.cpu_s:g} s CPU, {warm.parallel_tables} tables at once "
        f"on {warm.vcpus} vCPUs ({warm.lane_s(warm.parallel_tables):g} s a lane), {warm.workers} G.025X workers "
        f"({warm.dpu:g} DPU) a run, start-up {params.costs.startup_s:g} s + {params.noop_s:g} s, quiet "
        f"{warm.quiet_s:g} s, {params.extra_file_s:g} s per further file, upkeep {params.upkeep_share_s:.2f} s a "
        f"batch, ${params.costs.usd_per_dpu_hour:g}/DPU-hour; a busy run costs ${shard_usd_per_month(params):,.2f} a "
        "month.",
    ]
    for solution in report.solutions:
        limit = f"{solution['shards_allowed']} run(s)"
        if solution["max_usd_per_month"] is not None:
            limit += f", the most ${solution['max_usd_per_month']:,.0f} a month pays for"
        needed = solution["batch_s_needed"]
        batch = f"a batch of at most {needed:g} s" if needed else "no batch time"
        lines.append(
            f"{solution['tables']:,} busy tables, p95 under {solution['p95_goal_s']:g} s: with today's "
            f"{solution['today_batch_s']:g} s batch, {solution['shards_at_today_batch']} run(s) of at most "
            f"{solution['tables_per_job_at_today_batch']} tables (${solution['usd_per_month_at_today_batch']:,.2f} a "
            f"month); on {limit}, {batch} (to 0.05 s)."
        )
    return lines


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
    parser.add_argument(
        "--check-seconds", type=float, default=defaults.check_s, help="a coalesced run's first look at an idle table"
    )
    parser.add_argument(
        "--warm-batch-seconds", type=float, default=defaults.warm.batch_s, help="a warm small batch on AWS"
    )
    parser.add_argument(
        "--warm-cpu-seconds", type=float, default=defaults.warm.cpu_s, help="the CPU part of --warm-batch-seconds"
    )
    parser.add_argument(
        "--tables-per-job", type=int, default=defaults.warm.tables_per_job, help="tables a warm run owns"
    )
    parser.add_argument("--flex-usd-per-dpu-hour", type=float, default=defaults.flex_usd_per_dpu_hour)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    try:
        costs = override_costs(
            per_version(args.usd_per_dpu_hour, "--usd-per-dpu-hour"),
            per_version(args.startup_seconds, "--startup-seconds"),
        )
        warm = replace(
            defaults.warm,
            batch_s=args.warm_batch_seconds,
            cpu_s=args.warm_cpu_seconds,
            tables_per_job=args.tables_per_job,
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
        check_s=args.check_seconds,
        warm=warm,
        flex_usd_per_dpu_hour=args.flex_usd_per_dpu_hour,
    )
    started = time.perf_counter()
    results = simulate_all(params)
    versions = simulate_versions(params, results)
    report = warm_report(params, results)
    wall_s = time.perf_counter() - started
    print_table(results)
    print_table(versions, VERSION_COLUMNS, VERSIONS_TITLE)
    print_table(report.rows, WARM_COLUMNS, WARM_TITLE)
    print_table(report.freshness, FRESHNESS_COLUMNS, FRESHNESS_TITLE)
    print_table(report.flex, FLEX_COLUMNS, FLEX_TITLE)
    write_results(results, params, args.out, wall_s, versions, report)
    print(f"simulated {len(results)} cases in {wall_s:.1f} s; wrote {args.out / 'simulation.json'} and .md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
