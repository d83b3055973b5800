"""The model the lost-wake-up tests explore (``tests/unit/test_coalescing_protocol.py``, ``test_warm_protocol.py``):
files landing, concurrent Lambdas (the real ``handle()``) and Glue runs (the real ``engine.runs.coalesced``), moved
one step at a time by a seeded scheduler, then checked at quiescence.

A ``World`` is the bucket (as ``drain`` and ``list_landed`` see it), the Glue runs and the scheduler's actors; a
run's script is a ``RunScript``, a thread the scheduler lets go one step at a time (one round, or one wait: the
script hands control back). A table's batch is a stand-in without Spark (``World.batch``, once a test module calls
``batches_without_spark``): it applies every listed file not applied yet, as a replay does. A Lambda's read of the
runs and what it does next are separate steps: between them, other Lambdas and runs may move (the race window).
Each test module gives its own configuration, its runs' Glue job and arguments, its Lambda's starter and its run's
script.
"""

from __future__ import annotations

import datetime as dt
import random
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest

from cdc_lake.core.config import PipelineConfig, TableSpec
from cdc_lake.core.dms_files import LandedFiles, list_landed
from cdc_lake.core.storage import StoredObject
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.replay import RunResult
from cdc_lake.engine.runs import coalesced as drain_module
from cdc_lake.engine.runs.listings import ListingLog
from cdc_lake.engine.tables import LakeLocation
from cdc_lake.local.events import s3_object_created_event
from dms_trigger.handler import GlueJobStarter, handle

BUCKET = "landing"
EPOCH = dt.datetime(2025, 3, 1, tzinfo=dt.UTC)
STEP_TIMEOUT_S = 30


@dataclass
class Run:
    """A Glue run in the model, and its script once it runs."""

    run_id: str
    state: str = "WAITING"
    script: RunScript | None = None
    submitted: int = 0  # the world's clock at StartJobRun: Glue's StartedOn (``started_on``)

    @property
    def started_on(self) -> dt.datetime:
        return EPOCH + dt.timedelta(seconds=self.submitted)


@dataclass(kw_only=True)
class World:
    """Landed files, applied files (with the run that applied them and when it listed them), the Glue runs, and the
    scheduler's RNG. A test module's world gives its configuration (``config``), how many runs may be active at
    once (``max_active``), and its Lambda's starter, runs and scripts."""

    config: ClassVar[PipelineConfig]
    max_active: ClassVar[int]

    rng: random.Random
    landed: list[str] = field(default_factory=list)
    landed_at: dict[str, int] = field(default_factory=dict)
    applied: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    runs: list[Run] = field(default_factory=list)
    clock: int = 0
    lambdas: list[str] = field(default_factory=list)  # files whose event is not yet handled
    depth: int = 0
    listed_at: dict[str, int] = field(default_factory=dict)  # per table prefix: when it was last listed
    active: Run | None = None  # the run the scheduler stepped: only its script moves until it hands back
    lock: threading.Lock = field(default_factory=threading.Lock)

    # --- what a test module's world says ------------------------------------------------------------------

    def starter(self) -> GlueJobStarter:
        """The Lambda's starter of job runs, on this world's Glue (``ModelGlue``)."""
        raise NotImplementedError

    def script(self, run: Run) -> RunScript:
        """The script of ``run``, started when the run first moves RUNNING."""
        raise NotImplementedError

    def job_runs(self, job: str) -> list[dict[str, Any]]:
        """``job``'s runs, newest first, as Glue's GetJobRuns gives them."""
        raise NotImplementedError

    def new_run(self, run_id: str, job: str, arguments: Mapping[str, str]) -> Run:
        """The run Glue's StartJobRun makes of ``job`` with ``arguments``."""
        raise NotImplementedError

    def objects(self) -> list[str]:
        """The keys in the bucket."""
        return self.landed

    # --- the clock --------------------------------------------------------------------------------------------

    def tick(self) -> int:
        with self.lock:  # a drain lists its tables from several threads
            self.clock += 1
            return self.clock

    # --- the bucket, as drain and list_landed see it ----------------------------------------------------------

    def list(self, prefix: str, start_after: str | None = None) -> list[StoredObject]:
        self.listed_at[prefix] = self.tick()
        keys = sorted(k for k in self.objects() if k.startswith(prefix) and (start_after is None or k > start_after))
        # Larger than a blank CSV object could be, so no listing reads one to tell.
        return [StoredObject(key, 1000, "etag") for key in keys]

    def uri(self, key: str) -> str:
        return f"memory://{key}"

    def folders(self, prefix: str) -> list[str]:
        depth = prefix.count("/")
        return sorted({"/".join(k.split("/")[: depth + 1]) + "/" for k in self.landed if k.startswith(prefix)})

    def read_head(self, key: str, size: int) -> bytes:
        raise AssertionError("a batch stand-in reads no file")

    def context(self) -> ReplayContext:
        """A run's context: this world as its store, no Spark."""
        location = LakeLocation("lake", "db")
        return ReplayContext(spark=None, location=location, config=self.config, store=self)  # type: ignore[arg-type]

    def batch(self, context: ReplayContext, table: TableSpec, landed: LandedFiles | None = None) -> RunResult:
        """A table's batch without Spark, by the active run: every listed file not applied yet is applied, as a
        replay does."""
        assert self.active is not None
        landed = landed if landed is not None else list_landed(context.store, context.config, table)
        listed_at = self.listed_at[context.config.table_prefix(table)]
        new = [f.key for f in landed.files if f.key not in self.applied]
        for key in new:
            self.applied[key] = [*self.applied.get(key, []), (self.active.run_id, listed_at)]
        return RunResult(table.name, landed.newest, applied_files=new)

    # --- actors -----------------------------------------------------------------------------------------------

    def enabled(self) -> list[Callable[[], None]]:
        steps: list[Callable[[], None]] = [lambda key=key: self.invoke(key) for key in self.lambdas]
        active = [r for r in self.runs if r.state in {"STARTING", "RUNNING"}]
        waiting = [r for r in self.runs if r.state == "WAITING"]
        if waiting and len(active) < self.max_active:  # the job's MaxConcurrentRuns
            steps.append(lambda run=waiting[0]: self.start(run))
        for run in active:
            steps.append(lambda run=run: self.advance(run))
        return steps

    def land(self, key: str) -> None:
        self.landed.append(key)
        self.landed_at[key] = self.tick()
        self.lambdas.append(key)

    def invoke(self, key: str) -> None:
        self.lambdas.remove(key)
        event = s3_object_created_event(BUCKET, [(key, 10, "etag")])
        handle(event, config=self.config, starter=self.starter())

    def start(self, run: Run) -> None:
        run.state = "STARTING"
        self.tick()

    def advance(self, run: Run) -> None:
        """STARTING becomes RUNNING (the script starts); a RUNNING run's script goes on for one step; a run whose
        script has returned is still RUNNING until a step of its own ends it (Glue shows a run that has decided to
        end RUNNING for a while)."""
        if run.state == "STARTING":
            run.state = "RUNNING"
        elif run.script is not None and run.script.returned:
            run.state = "SUCCEEDED"
        else:
            if run.script is None:
                run.script = self.script(run)
            self.active = run
            run.script.step()
        self.tick()

    def race_window(self) -> None:
        """Between a Lambda's read of the runs and what it does next: let 0..3 other steps happen."""
        if self.depth >= 2:
            return
        self.depth += 1
        try:
            for _ in range(self.rng.randint(0, 3)):
                steps = self.enabled()
                if not steps:
                    break
                self.rng.choice(steps)()
        finally:
            self.depth -= 1


class RunScript:
    """A Glue run's script (``main``) in a thread of its own, going one step each time ``step`` lets it (it hands
    control back with ``hand_back``, or ``on_round`` after a round); the run SUCCEEDED at its next step once the
    script has returned."""

    def __init__(self, world: World, run: Run) -> None:
        self.world = world
        self.run = run
        self.rounds = 0
        self.returned = False
        self.error: BaseException | None = None
        self._go = threading.Semaphore(0)
        self._yielded = threading.Semaphore(0)
        threading.Thread(target=self._thread, daemon=True).start()

    def main(self) -> None:
        raise NotImplementedError

    def step(self) -> None:
        self._go.release()
        if not self._yielded.acquire(timeout=STEP_TIMEOUT_S):
            raise AssertionError(f"{self.run.run_id}: the run did not finish its step")
        if self.error is not None:
            raise self.error

    def on_round(self, number: int, commits: int) -> None:
        """``DrainHooks.on_round``: the round is done, control goes back to the scheduler."""
        self.rounds = number
        self.hand_back()

    def hand_back(self) -> None:
        self._yielded.release()
        self._go.acquire()

    def _thread(self) -> None:
        self._go.acquire()
        try:
            self.main()
        except BaseException as error:  # surfaced by step()
            self.error = error
        self.returned = True
        self._yielded.release()


class ModelGlue:
    """The Glue client in the model: reads and starts the world's runs; a read is followed by the race window
    unless ``window`` is False (a run's own reads, which happen inside its step)."""

    def __init__(self, world: World, *, window: bool = True) -> None:
        self.world = world
        self.window = window

    def get_job_runs(self, JobName: str, MaxResults: int = 100, **_: Any) -> dict[str, Any]:
        runs = self.world.job_runs(JobName)[:MaxResults]
        self.world.tick()
        if self.window:
            self.world.race_window()
        return {"JobRuns": runs}

    def start_job_run(self, JobName: str, Arguments: dict[str, str], **_: Any) -> dict[str, str]:
        run = self.world.new_run(f"jr_{len(self.world.runs) + 1}", JobName, Arguments)
        self.world.runs.append(run)
        run.submitted = self.world.tick()
        return {"JobRunId": run.run_id}


def batches_without_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """drain applies each table's batch through the world that runs it (``World.batch``), the store drain keeps its
    listings with (``ListingLog``) in front of it."""

    def batch(context: ReplayContext, table: TableSpec, landed: LandedFiles | None = None) -> RunResult:
        assert isinstance(context.store, ListingLog)
        world = context.store.store
        assert isinstance(world, World)
        return world.batch(context, table, landed)

    monkeypatch.setattr(drain_module, "replay", batch)


def cdc_keys(tables: Sequence[str], files: int) -> list[str]:
    """``files`` CDC files to land, one table after the other."""
    return [f"{tables[i % len(tables)].replace('.', '/')}/20250301-1205{i:02d}000.csv" for i in range(files)]


def explore(world: World, to_land: list[str]) -> World:
    """Land ``to_land`` in order among steps of the world's actors, each chosen by its RNG, until none is left."""
    rng = world.rng
    while to_land or world.enabled():
        steps = world.enabled()
        if to_land and (not steps or rng.random() < 0.35):
            world.land(to_land.pop(0))
        else:
            rng.choice(steps)()
    return world


def lost_wake_ups(world: World) -> list[str]:
    """Files not applied by a run that listed after they landed."""
    return [
        key
        for key in world.landed
        if not any(listed_at > world.landed_at[key] for _run, listed_at in world.applied.get(key, []))
    ]
