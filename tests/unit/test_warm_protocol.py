"""No lost wake-up with warm runs (``runs.mode: warm``): random interleavings of files landing, concurrent Lambdas
(the real ``handle()``) and warm runs (the real ``WarmShift`` and ``engine.warm.warm``, so the real ``drain``) that
list and apply in rounds, stop when quiet and say so first, checked at quiescence.

As in ``test_coalescing_protocol``, a run's script is a thread the scheduler lets go one round at a time, and a
table's batch is a stand-in without Spark that applies every listed file not applied yet. Here several runs are
active at once (one job, a run per shard), a run's wait for a stopping run of its shard hands control back too, and
the bucket keeps the runs' stop markers. Two properties: every landed file is applied by a run that listed after it
landed, and no two runs of one shard ever apply batches at the same time.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from cdc_lake.core.config import PipelineConfig, TableSpec, parse_config
from cdc_lake.core.dms_files import LandedFiles, list_landed
from cdc_lake.core.names import WARM_JOB, WARM_MARKER_PREFIX
from cdc_lake.core.shards import shard_count
from cdc_lake.core.storage import StoredObject
from cdc_lake.engine import drain as drain_module
from cdc_lake.engine import warm as warm_module
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.drain import Budget, DrainHooks, ListingLog
from cdc_lake.engine.replay import RunResult
from cdc_lake.engine.tables import LakeLocation
from cdc_lake.engine.warm import WarmShift, warm
from cdc_lake.local.events import s3_object_created_event
from dms_trigger.handler import GlueJobStarter, handle
from dms_trigger.routing import WARM_MARKER

BUCKET = "landing"
TABLES = ("app.orders", "app.users", "app.items")  # shards 0, 1, 0
CONFIG: PipelineConfig = parse_config(
    {
        "runs": {"mode": "warm", "warm": {"tables_per_job": 2}},
        "tables": [
            {"name": name, "primary_key": ["id"], "columns": [{"name": "id", "type": "bigint"}]} for name in TABLES
        ],
    }
)
JOBS = {"full_load": "full_load", "cdc_replay": "cdc_replay", WARM_JOB: WARM_JOB}
STEP_TIMEOUT_S = 30


@dataclass
class Run:
    run_id: str
    shard: int
    state: str = "WAITING"
    script: RunThread | None = None


@dataclass
class World:
    """Landed files, the runs' stop markers, applied files (with the run that applied them and when it listed
    them), the Glue runs of the warm job, and the scheduler's RNG."""

    rng: random.Random
    quiet_rounds: int
    landed: list[str] = field(default_factory=list)
    landed_at: dict[str, int] = field(default_factory=dict)
    markers: list[str] = field(default_factory=list)
    applied: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    runs: list[Run] = field(default_factory=list)
    clock: int = 0
    lambdas: list[str] = field(default_factory=list)  # files whose event is not yet handled
    depth: int = 0
    listed_at: dict[str, int] = field(default_factory=dict)
    applying: dict[int, set[str]] = field(default_factory=dict)  # per shard: the runs inside their loop
    overlaps: list[tuple[int, set[str]]] = field(default_factory=list)
    active: Run | None = None  # the run the scheduler stepped: only its script moves until it hands back
    lock: threading.Lock = field(default_factory=threading.Lock)

    def tick(self) -> int:
        with self.lock:
            self.clock += 1
            return self.clock

    # --- the bucket --------------------------------------------------------------------------------------

    def list(self, prefix: str, start_after: str | None = None) -> list[StoredObject]:
        self.listed_at[prefix] = self.tick()
        keys = sorted(
            k
            for k in [*self.landed, *self.markers]
            if k.startswith(prefix) and (start_after is None or k > start_after)
        )
        return [StoredObject(key, 1000, "etag") for key in keys]

    def put(self, key: str, data: bytes) -> None:
        self.markers.append(key)
        self.tick()

    def delete(self, key: str) -> None:
        if key in self.markers:
            self.markers.remove(key)
        self.tick()

    def uri(self, key: str) -> str:
        return f"memory://{key}"

    def folders(self, prefix: str) -> list[str]:
        depth = prefix.count("/")
        return sorted({"/".join(k.split("/")[: depth + 1]) + "/" for k in self.landed if k.startswith(prefix)})

    def read_head(self, key: str, size: int) -> bytes:
        raise AssertionError("a batch stand-in reads no file")

    def batch(self, context: ReplayContext, table: TableSpec, landed: LandedFiles | None, run: Run) -> RunResult:
        landed = landed if landed is not None else list_landed(context.store, context.config, table)
        listed_at = self.listed_at[context.config.table_prefix(table)]
        new = [f.key for f in landed.files if f.key not in self.applied]
        for key in new:
            self.applied[key] = [*self.applied.get(key, []), (run.run_id, listed_at)]
        return RunResult(table.name, landed.newest, applied_files=new)

    # --- actors --------------------------------------------------------------------------------------------

    def enabled(self) -> list[Callable[[], None]]:
        steps: list[Callable[[], None]] = [lambda key=key: self.invoke(key) for key in self.lambdas]
        active = [r for r in self.runs if r.state in {"STARTING", "RUNNING"}]
        waiting = [r for r in self.runs if r.state == "WAITING"]
        if waiting and len(active) < shard_count(CONFIG):  # the job's MaxConcurrentRuns: one per shard
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
        starter = GlueJobStarter(
            ModelGlue(self, window=True),
            JOBS,
            sleep=lambda _: None,
            markers=lambda _bucket, prefix: [k for k in self.markers if k.startswith(prefix)],
        )
        handle(event, config=CONFIG, starter=starter)

    def start(self, run: Run) -> None:
        run.state = "STARTING"
        self.tick()

    def advance(self, run: Run) -> None:
        if run.state == "STARTING":
            run.state = "RUNNING"
        else:
            if run.script is None:
                run.script = RunThread(self, run)
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


class RunThread:
    """A warm run's script: ``WarmShift.peer`` and then ``warm`` in a thread, going one round (or one wait for a
    stopping run) each time ``step`` lets it; the run SUCCEEDED once the script returns."""

    def __init__(self, world: World, run: Run) -> None:
        self.world = world
        self.run = run
        self.rounds = 0
        self.error: BaseException | None = None
        self._go = threading.Semaphore(0)
        self._yielded = threading.Semaphore(0)
        threading.Thread(target=self._script, daemon=True).start()

    def step(self) -> None:
        self._go.release()
        if not self._yielded.acquire(timeout=STEP_TIMEOUT_S):
            raise AssertionError(f"{self.run.run_id}: the run did not finish its step")
        if self.error is not None:
            raise self.error

    def _script(self) -> None:
        self._go.acquire()
        world, run = self.world, self.run
        context = ReplayContext(spark=None, location=LakeLocation("lake", "db"), config=CONFIG, store=world)  # type: ignore[arg-type]
        shift = WarmShift(
            context, ModelGlue(world, window=False), run.shard, run.run_id, JOBS, BUCKET,
            clock=lambda: self.rounds, sleep=lambda _: self._hand_back(),
        )  # fmt: skip
        # No time passes but rounds: quiet for ``quiet_rounds`` rounds, a lifetime far beyond the exploration.
        budget = Budget(10_000, world.quiet_rounds, 0, parallel_tables=1, clock=lambda: self.rounds)
        try:
            if shift.peer() is None:
                self._enter()
                try:
                    warm(context, shift, budget, DrainHooks(on_round=lambda number, _commits: self._round(number)))
                finally:
                    world.applying[run.shard].discard(run.run_id)
        except BaseException as error:  # surfaced by step()
            self.error = error
        run.state = "SUCCEEDED"
        self._yielded.release()

    def _enter(self) -> None:
        inside = self.world.applying.setdefault(self.run.shard, set())
        inside.add(self.run.run_id)
        if len(inside) > 1:
            self.world.overlaps.append((self.run.shard, set(inside)))

    def _round(self, number: int) -> None:
        self.rounds = number
        self._hand_back()

    def _hand_back(self) -> None:
        self._yielded.release()
        self._go.acquire()


class ModelGlue:
    """The warm job's runs in the model: a Lambda's read is followed by the race window; a run's own reads are not
    (they happen inside its step)."""

    def __init__(self, world: World, *, window: bool) -> None:
        self.world = world
        self.window = window

    def get_job_runs(self, JobName: str, MaxResults: int = 100, **_: Any) -> dict[str, Any]:
        assert JobName == WARM_JOB
        runs = [
            {"Id": r.run_id, "JobRunState": r.state, "Arguments": {"--shard": str(r.shard)}}
            for r in reversed(self.world.runs)
        ][:MaxResults]
        self.world.tick()
        if self.window:
            self.world.race_window()
        return {"JobRuns": runs}

    def start_job_run(self, JobName: str, Arguments: dict[str, str], **_: Any) -> dict[str, str]:
        assert JobName == WARM_JOB, "nothing here is handed over"
        run = Run(run_id=f"jr_{len(self.world.runs) + 1}", shard=int(Arguments["--shard"]))
        self.world.runs.append(run)
        self.world.tick()
        return {"JobRunId": run.run_id}


@pytest.fixture(autouse=True)
def batches_without_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each table's batch goes to the world, as the run whose thread applies it."""

    def batch(context: ReplayContext, table: TableSpec, landed: LandedFiles | None = None) -> RunResult:
        assert isinstance(context.store, ListingLog)
        world = context.store.store
        assert isinstance(world, World)
        assert world.active is not None
        return world.batch(context, table, landed, world.active)

    monkeypatch.setattr(drain_module, "replay", batch)


def explore(seed: int, files: int = 8, quiet_rounds: int = 1) -> World:
    rng = random.Random(seed)
    world = World(rng=rng, quiet_rounds=quiet_rounds)
    to_land = [f"{TABLES[i % 3].replace('.', '/')}/20250301-1205{i:02d}000.csv" for i in range(files)]
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


SCHEDULES = 600


def test_every_landed_file_is_applied_and_no_two_runs_of_a_shard_apply_at_once():
    runs_per_file = []
    for seed in range(SCHEDULES):
        world = explore(seed)
        assert not lost_wake_ups(world), f"seed {seed}: lost wake-up for {lost_wake_ups(world)}"
        assert not world.overlaps, f"seed {seed}: two runs of a shard applied at once: {world.overlaps}"
        runs_per_file.append(len(world.runs) / len(world.landed))
    # The warm runs are few: far fewer runs than files.
    assert sum(runs_per_file) / len(runs_per_file) < 0.6


def test_the_exploration_finds_the_lost_wake_up_when_a_run_stops_without_saying_so(monkeypatch):
    """The check can fail: a run that writes no stop marker leaves the files landing during its last look to it."""
    monkeypatch.setattr(warm_module.WarmShift, "stopping", lambda self: None)
    found = next((seed for seed in range(SCHEDULES) if lost_wake_ups(explore(seed))), None)
    assert found is not None, "no interleaving lost a file without the marker: the exploration is too weak"


def test_the_marker_of_a_stopping_run_makes_the_lambda_start_the_next_one():
    world = World(rng=random.Random(0), quiet_rounds=1)
    world.runs.append(Run("jr_1", shard=0, state="RUNNING"))
    world.depth = 2  # no race window
    world.land("app/orders/20250301-120500000.csv")
    world.invoke(world.lambdas[0])
    assert [r.run_id for r in world.runs] == ["jr_1"], "a running run that has not said it stops covers the file"
    world.markers.append(f"{WARM_MARKER_PREFIX}0/jr_1")
    world.land("app/orders/20250301-120501000.csv")
    world.invoke(world.lambdas[0])
    assert [(r.run_id, r.shard, r.state) for r in world.runs] == [("jr_1", 0, "RUNNING"), ("jr_2", 0, "WAITING")]
    world.land("app/users/20250301-120502000.csv")  # shard 1: no run of its own yet
    world.invoke(world.lambdas[0])
    assert [(r.run_id, r.shard) for r in world.runs][-1] == ("jr_3", 1)


def test_a_stop_marker_object_is_ignored_by_the_lambda_not_announced_as_an_unknown_table():
    from dms_trigger.routing import objects_in_event, route

    event = s3_object_created_event(BUCKET, [(f"{WARM_MARKER_PREFIX}0/jr_1", 4, "e")])
    requests, ignored = route(objects_in_event(event), CONFIG)
    assert requests == []
    assert [i.category for i in ignored] == [WARM_MARKER]


def test_the_exploration_finds_two_runs_of_a_shard_applying_at_once_when_a_run_does_not_yield(monkeypatch):
    """The check can fail: a run that takes its shard whatever runs of it live meets another inside its loop."""
    monkeypatch.setattr(warm_module.WarmShift, "peer", lambda self: None)
    found = next((seed for seed in range(SCHEDULES) if explore(seed).overlaps), None)
    assert found is not None, "no interleaving overlapped without the yield: the exploration is too weak"


def test_a_load_file_starts_a_full_load_run_for_its_table_and_a_missing_warm_job_name_is_refused():
    from cdc_lake.core.exceptions import ConfigError

    class Recorder:
        def __init__(self) -> None:
            self.started: list[tuple[str, dict[str, str]]] = []

        def get_job_runs(self, **_: Any) -> dict[str, Any]:
            return {"JobRuns": []}

        def start_job_run(self, JobName: str, Arguments: dict[str, str], **_: Any) -> dict[str, str]:
            self.started.append((JobName, Arguments))
            return {"JobRunId": f"jr_{len(self.started)}"}

    glue = Recorder()
    event = s3_object_created_event(
        BUCKET, [("app/orders/LOAD00000001.csv", 10, "a"), ("app/users/20250301-120501000.csv", 10, "b")]
    )
    starter = GlueJobStarter(glue, JOBS, markers=lambda _bucket, _prefix: [])
    assert handle(event, config=CONFIG, starter=starter) == ["jr_1", "jr_2"]
    assert glue.started == [
        ("full_load", {"--bucket": BUCKET, "--key": "app/orders/LOAD00000001.csv", "--table": "app.orders"}),
        (WARM_JOB, {"--bucket": BUCKET, "--shard": "1"}),
    ]
    without = GlueJobStarter(glue, {"full_load": "full_load", "cdc_replay": "cdc_replay"})
    with pytest.raises(ConfigError, match="CDC_WARM_JOB_NAME"):
        handle(event, config=CONFIG, starter=without)


def test_the_deployed_function_reads_the_warm_jobs_name_and_lists_markers_only_in_warm_stacks(monkeypatch):
    from dms_trigger import handler

    monkeypatch.setattr(handler, "load_config_uri", lambda location, label: CONFIG)
    environment = {
        handler.CONFIG_ENV: "s3://assets/tables.json",
        handler.FULL_LOAD_JOB_ENV: "lake-full-load",
        handler.CDC_REPLAY_JOB_ENV: "lake-cdc-replay",
    }
    handler.clear_container_settings()
    try:
        plain = handler.container_settings(environment).starter
        assert WARM_JOB not in plain.job_names and plain.markers is None
        handler.clear_container_settings()
        warm = handler.container_settings({**environment, handler.WARM_JOB_ENV: "lake-cdc-warm"}).starter
        assert warm.job_names[WARM_JOB] == "lake-cdc-warm" and warm.markers is not None
    finally:
        handler.clear_container_settings()
