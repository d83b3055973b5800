"""No lost wake-up with warm runs (``runs.mode: warm``): random interleavings of files landing, concurrent Lambdas
(the real ``handle()``) and warm runs (the real ``WarmShift`` and ``engine.runs.warm.warm``, so the real ``drain``) that
list and apply in rounds, stop when quiet and say so first, checked at quiescence.

As in ``test_coalescing_protocol`` (the model is ``tests.support.protocol``'s), a run's script is a thread the
scheduler lets go one round at a time, and a table's batch is a stand-in without Spark that applies every listed file
not applied yet. Here several runs are
active at once (one job, a run per shard), a run's wait for a stopping run of its shard hands control back too, and
the bucket keeps the runs' stop markers. Two properties: every landed file is applied by a run that listed after it
landed, and no two runs of one shard ever apply batches at the same time.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest

from cdc_lake.core.config import PipelineConfig, parse_config
from cdc_lake.core.names import WARM_JOB, WARM_MARKER_PREFIX
from cdc_lake.core.shards import (
    VERSION_ARGUMENT,
    ShardState,
    hold_key,
    marker_key,
    runs_of_shard,
    shard_count,
    state_prefix,
    version_key,
)
from cdc_lake.engine.runs import coalesced as coalesced_module
from cdc_lake.engine.runs import warm as warm_module
from cdc_lake.engine.runs.coalesced import Budget
from cdc_lake.engine.runs.shift import DrainHooks
from cdc_lake.engine.runs.warm import LIVE_STATES, WarmShift, warm
from cdc_lake.local.events import s3_object_created_event
from dms_trigger.handler import GlueJobStarter, handle
from dms_trigger.routing import WARM_MARKER
from tests.support import protocol
from tests.support.protocol import BUCKET, EPOCH, ModelGlue, RunScript, cdc_keys, lost_wake_ups

TABLES = ("app.orders", "app.users", "app.items")  # shards 0, 1, 0
CONFIG: PipelineConfig = parse_config(
    {
        "runs": {"mode": "warm", "warm": {"tables_per_job": 2}},
        "tables": [
            {"name": name, "primary_key": ["id"], "columns": [{"name": "id", "type": "bigint"}]} for name in TABLES
        ],
    }
)
# A deployment that adds a table (scenario 2 of issue 69): DMS lands its files once the deployed task maps it.
ADDED = "app.events"
DEPLOYED: PipelineConfig = parse_config(
    {
        "runs": {"mode": "warm", "warm": {"tables_per_job": 2}},
        "tables": [
            {"name": name, "primary_key": ["id"], "columns": [{"name": "id", "type": "bigint"}]}
            for name in (*TABLES, ADDED)
        ],
    }
)
JOBS = {"full_load": "full_load", "cdc_replay": "cdc_replay", WARM_JOB: WARM_JOB}


@dataclass
class Run(protocol.Run):
    shard: int = field(kw_only=True)
    config: PipelineConfig = field(kw_only=True, default=CONFIG)  # the stack's when the run was started
    arguments: Mapping[str, str] = field(kw_only=True, default_factory=dict)


@dataclass(kw_only=True)
class World(protocol.World):
    """The model's world with the runs of the warm job, one active per shard at most, and their stop markers in the
    bucket; a run stops after ``quiet_rounds`` quiet rounds."""

    config: ClassVar[PipelineConfig] = CONFIG
    max_active: ClassVar[int] = 2 * shard_count(CONFIG)  # the job's MaxConcurrentRuns: two per shard (infra.glue)

    quiet_rounds: int
    interval_rounds: int = 0  # runs.warm.commit_interval_seconds, in rounds (at most quiet_rounds, as configured)
    deployed: PipelineConfig = CONFIG  # the stack's configuration: the Lambda's, and a run's started now
    markers: list[str] = field(default_factory=list)
    data: dict[str, bytes] = field(default_factory=dict)
    applying: dict[int, set[str]] = field(default_factory=dict)  # per shard: the runs inside their loop
    overlaps: list[tuple[int, set[str]]] = field(default_factory=list)
    rounds_asked: dict[str, int] = field(default_factory=dict)  # per run: its rounds once another version asked
    kills: int = 0  # how many runs may yet be killed (SIGKILL, a lost worker) between two of their steps
    # The shards' event queues (``engine.runs.events``): the Lambda tells them, a run reads its own.
    fed: bool = False
    lose: float = 0.0  # the chance that a file's message is lost
    twice: float = 0.0  # the chance that it is sent twice
    sweep_rounds: int = 10_000  # runs.warm.sweep_seconds, in rounds
    queues: dict[int, list[str]] = field(default_factory=dict)
    lost: list[str] = field(default_factory=list)
    table_listings: int = 0
    killed: list[str] = field(default_factory=list)  # where each killed run was: ``WarmScript.phase``

    def enabled(self) -> list[Callable[[], None]]:
        steps = super().enabled()
        if self.kills:
            alive = [r for r in self.runs if r.state == "RUNNING" and r.script is not None and not r.script.returned]
            steps += [lambda run=run: self.kill(run) for run in alive]
        return steps

    def kill(self, run: protocol.Run) -> None:
        """The run's process dies between two of its steps: Glue shows it FAILED; it says nothing more."""
        assert isinstance(run, Run) and isinstance(run.script, WarmScript)
        self.kills -= 1
        asked = self.data.get(version_key(run.shard))
        version = run.config.version
        older = any(r.state in LIVE_STATES and r.config.version != version for r in self.runs if isinstance(r, Run))
        told = ", asked to end" if asked is not None and asked.decode() != version else ""
        having = ", having asked" if asked is not None and asked.decode() == version and older else ""
        self.killed.append(f"{run.script.phase}{told}{having}")
        run.state = "FAILED"
        self.applying.get(run.shard, set()).discard(run.run_id)
        self.tick()

    def objects(self) -> list[str]:
        return [*self.landed, *self.markers]

    def list(self, prefix: str, start_after: str | None = None) -> list[protocol.StoredObject]:
        self.table_listings += any(prefix == self.config.table_prefix(t) for t in self.deployed.tables)
        return super().list(prefix, start_after)

    def tell(self, shard: int, requests: Any) -> None:
        for request in requests:
            self.tick()
            if self.rng.random() < self.lose:
                self.lost.append(request.key)
                continue
            copies = 2 if self.rng.random() < self.twice else 1
            self.queues.setdefault(shard, []).extend([request.table] * copies)

    def put(self, key: str, data: bytes) -> None:
        if key not in self.markers:
            self.markers.append(key)
        self.data[key] = data
        self.tick()

    def read_head(self, key: str, size: int) -> bytes:
        self.tick()
        if key not in self.markers:
            raise FileNotFoundError(key)
        return self.data[key][:size]

    def land(self, key: str) -> None:
        if key.startswith(DEPLOYED.table_prefix(DEPLOYED.table(ADDED))):
            self.deployed = DEPLOYED
        super().land(key)

    def invoke(self, key: str) -> None:
        self.lambdas.remove(key)
        event = s3_object_created_event(BUCKET, [(key, 10, "etag")])
        handle(event, config=self.deployed, starter=self.starter())

    def delete(self, key: str) -> None:
        if key in self.markers:
            self.markers.remove(key)
        self.tick()

    def starter(self) -> GlueJobStarter:
        return GlueJobStarter(
            ModelGlue(self, window=True),
            JOBS,
            sleep=lambda _: None,
            exists=lambda _bucket, key: key in self.markers,
            now=self.now,
            tell=self.tell if self.fed else None,
        )

    def now(self) -> dt.datetime:
        return EPOCH + dt.timedelta(seconds=self.clock)

    def script(self, run: protocol.Run) -> RunScript:
        return WarmScript(self, run)

    def job_runs(self, job: str) -> list[dict[str, Any]]:
        assert job == WARM_JOB
        return [
            {"Id": r.run_id, "JobRunState": r.state, "Arguments": {**r.arguments}, "StartedOn": r.started_on}
            for r in reversed(self.runs)
        ]

    def new_run(self, run_id: str, job: str, arguments: Mapping[str, str]) -> Run:
        assert job == WARM_JOB, "nothing here is handed over"
        return Run(run_id=run_id, shard=int(arguments["--shard"]), config=self.deployed, arguments=dict(arguments))


class WarmScript(RunScript):
    """A warm run's script: ``WarmShift.peer`` and then ``warm``, one round (or one wait for a stopping run) a step."""

    world: World
    run: Run

    phase = "starting"  # where the run is: ``deciding`` (``WarmShift.peer``), ``applying`` (``warm``)

    def main(self) -> None:
        world, run = self.world, self.run
        context = dataclasses.replace(world.context(), config=run.config)
        shift = WarmShift(
            context, ModelGlue(world, window=False), run.shard, run.run_id, JOBS, BUCKET,
            clock=lambda: self.rounds, sleep=lambda _: self.hand_back(), now=world.now,
        )  # fmt: skip
        if world.fed:
            shift.landings = ModelQueue(world, run.shard)
        # No time passes but rounds: quiet for ``quiet_rounds`` rounds, a lifetime far beyond the exploration.
        budget = Budget(
            10_000, world.quiet_rounds, 0, parallel_tables=1, commit_interval_seconds=world.interval_rounds,
            sweep_seconds=world.sweep_rounds, clock=lambda: self.rounds,
        )  # fmt: skip
        self.phase = "deciding"
        if shift.peer() is None:
            self.phase = "applying"
            self._enter()
            try:
                warm(context, shift, budget, DrainHooks(on_round=self.on_round))
            finally:
                world.applying[run.shard].discard(run.run_id)

    def on_round(self, number: int, commits: int) -> None:
        asked = self.world.data.get(version_key(self.run.shard))
        if asked is not None and asked.decode() != self.run.config.version:
            self.world.rounds_asked[self.run.run_id] = self.world.rounds_asked.get(self.run.run_id, 0) + 1
        super().on_round(number, commits)

    def _enter(self) -> None:
        inside = self.world.applying.setdefault(self.run.shard, set())
        inside.add(self.run.run_id)
        if len(inside) > 1:
            self.world.overlaps.append((self.run.shard, set(inside)))


@dataclass
class ModelQueue:
    """A shard's event queue as its run reads it: every message told so far, deleted once received."""

    world: World
    shard: int

    def tables(self, wait_seconds: float) -> set[str] | None:
        self.world.tick()
        return set(self.world.queues.pop(self.shard, []))


@pytest.fixture(autouse=True)
def batches_without_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    protocol.batches_without_spark(monkeypatch)


def explore(seed: int, files: int = 8, quiet_rounds: int = 1, interval_rounds: int = 0, **fed: Any) -> World:
    world = World(rng=random.Random(seed), quiet_rounds=quiet_rounds, interval_rounds=interval_rounds, **fed)
    return protocol.explore(world, cdc_keys(TABLES, files))


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


def test_a_table_resting_out_its_commit_interval_loses_no_file_and_commits_less_often():
    """runs.warm.commit_interval_seconds: a table rests unlisted after a commit, even while its files land; its run
    cannot stop while it rests and takes it in its last look, so no interleaving leaves a file behind."""
    commits = {0: 0, 3: 0}
    for seed in range(SCHEDULES // 2):
        for interval in commits:
            world = explore(seed, files=12, quiet_rounds=3, interval_rounds=interval)
            assert not lost_wake_ups(world), f"seed {seed}, interval {interval}: lost {lost_wake_ups(world)}"
            assert not world.overlaps, f"seed {seed}: two runs of a shard applied at once: {world.overlaps}"
            commits[interval] += len({when for applied in world.applied.values() for when in applied})
    # The same seeds play the same landings: without the rest, both counts would be equal (918 and 887 on 100).
    assert commits[3] < commits[0], f"batches that applied files, without and with the interval: {commits}"


FED = {"fed": True, "lose": 0.2, "twice": 0.2, "sweep_rounds": 4}


def test_runs_told_by_event_queues_lose_no_file_to_lost_duplicated_or_killed_runs_events_and_list_less():
    """Event queues (``engine.runs.events``): the Lambda tells the shard's queue of each file before it reads the
    runs, a run lists only the tables told, every table every ``sweep_rounds`` and in its last look; messages are
    lost, sent twice, and runs killed with messages received and not yet listed."""
    listings = {False: 0, True: 0}
    lost = 0
    for seed in range(SCHEDULES // 4):
        for fed in (False, True):
            world = World(rng=random.Random(seed), quiet_rounds=3, kills=seed % 2, **(FED if fed else {}))
            protocol.explore(world, cdc_keys(TABLES, 12))
            # A killed run's files wait for the next landing (as in the kill test below): one more file a table.
            world.kills = 0
            protocol.explore(world, [f"{CONFIG.table_prefix(t)}20250301-140000000.csv" for t in CONFIG.tables])
            assert not lost_wake_ups(world), f"seed {seed}, fed {fed}: lost wake-up for {lost_wake_ups(world)}"
            assert not world.overlaps, f"seed {seed}: two runs of a shard applied at once: {world.overlaps}"
            listings[fed] += world.table_listings
            lost += len(world.lost)
    assert lost > 25, "the exploration lost too few messages to tell"
    assert listings[True] < 0.7 * listings[False], f"tables listed, without and with the queues: {listings}"


def test_the_exploration_finds_a_file_lost_with_its_message_when_the_last_look_lists_only_what_was_told(monkeypatch):
    """The check can fail: a run whose last look lists only the tables told leaves a file whose message was lost."""
    narrowed = coalesced_module._Fed.narrowed
    monkeypatch.setattr(
        coalesced_module._Fed,
        "narrowed",
        lambda self, candidates, lifted, now, every: narrowed(self, candidates, lifted, now, every=False),
    )
    fed = {**FED, "sweep_rounds": 10_000}
    found = next((s for s in range(SCHEDULES) if lost_wake_ups(explore(s, files=12, quiet_rounds=3, **fed))), None)
    assert found is not None, "no interleaving lost a file without the last look: the exploration is too weak"


def test_the_exploration_finds_the_lost_wake_up_when_a_run_stops_without_saying_so(monkeypatch):
    """The check can fail: a run that writes no stop marker leaves the files landing during its last look to it."""
    monkeypatch.setattr(warm_module.WarmShift, "stopping", lambda self: None)
    found = next((seed for seed in range(SCHEDULES) if lost_wake_ups(explore(seed))), None)
    assert found is not None, "no interleaving lost a file without the marker: the exploration is too weak"


def test_the_marker_of_a_stopping_run_makes_the_lambda_start_the_next_one():
    world = World(rng=random.Random(0), quiet_rounds=1)
    world.runs.append(Run("jr_1", shard=0, state="RUNNING", arguments={"--shard": "0"}))
    world.markers.append(hold_key(0, "jr_1", CONFIG.version))
    world.depth = 2  # no race window
    world.land("app/orders/20250301-120500000.csv")
    world.invoke(world.lambdas[0])
    assert [r.run_id for r in world.runs] == ["jr_1"], "a running run that has not said it stops covers the file"
    world.markers.append(marker_key(0, "jr_1"))
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
    starter = GlueJobStarter(glue, JOBS, exists=lambda _bucket, _key: False)
    assert handle(event, config=CONFIG, starter=starter) == ["jr_1", "jr_2"]
    assert glue.started == [
        ("full_load", {"--bucket": BUCKET, "--key": "app/orders/LOAD00000001.csv", "--table": "app.orders"}),
        (WARM_JOB, {"--bucket": BUCKET, "--shard": "1", VERSION_ARGUMENT: CONFIG.version}),
    ]
    without = GlueJobStarter(glue, {"full_load": "full_load", "cdc_replay": "cdc_replay"})
    with pytest.raises(ConfigError, match="CDC_WARM_JOB_NAME"):
        handle(event, config=CONFIG, starter=without)


def test_the_deployed_function_reads_the_warm_jobs_name_and_reads_markers_only_in_warm_stacks(monkeypatch):
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
        assert WARM_JOB not in plain.job_names and plain.exists is None
        handler.clear_container_settings()
        warm = handler.container_settings({**environment, handler.WARM_JOB_ENV: "lake-cdc-warm"}).starter
        assert warm.job_names[WARM_JOB] == "lake-cdc-warm" and warm.exists is not None
    finally:
        handler.clear_container_settings()


def yield_to_any_live_peer(self: WarmShift) -> str | None:
    """The rule before the tie-break: yield to any run of the shard RUNNING without a stop marker."""
    runs = self.glue.get_job_runs(JobName=self.warm_job, MaxResults=50).get("JobRuns", [])
    stopping = ShardState.of(self.shard, (o.key for o in self.context.store.list(state_prefix(self.shard)))).stopping
    peers = [str(r["Id"]) for r in runs_of_shard(runs, self.shard, ["RUNNING"]) if r["Id"] != self.run_id]
    return next((peer for peer in peers if peer not in stopping), None)


def test_the_exploration_finds_a_shard_left_to_nobody_when_two_runs_yield_to_each_other(monkeypatch):
    """The check can fail: runs that yield to any live run of their shard, seen RUNNING after they decided to end,
    yield to each other, and the files they were started for wait for a landing that may not come."""
    monkeypatch.setattr(warm_module.WarmShift, "peer", yield_to_any_live_peer)
    found = next((seed for seed in range(SCHEDULES) if lost_wake_ups(explore(seed))), None)
    assert found is not None, "no interleaving left a shard to nobody: the exploration is too weak"


def across_a_deployment(seed: int, quiet_rounds: int = 1) -> World:
    """Files of the configured tables, then of a table a deployment adds among more of theirs."""
    before = cdc_keys(TABLES, 4)
    after = [*cdc_keys(TABLES, 8)[4:], *(f"app/events/20250301-1300{i:02d}000.csv" for i in range(3))]
    random.Random(seed).shuffle(after)
    # Tables interleave at random; each table's files land in the order of their names, as DMS writes them.
    folder = [key.rsplit("/", 1)[0] for key in after]
    in_order = {f: iter(sorted(k for k in after if k.startswith(f + "/"))) for f in set(folder)}
    after = [next(in_order[f]) for f in folder]
    return protocol.explore(World(rng=random.Random(seed), quiet_rounds=quiet_rounds), [*before, *after])


def test_every_landed_file_is_applied_across_a_deployment_that_adds_a_table():
    """Scenario 2 of issue 69: the live runs of the configuration before the deployment do not list the added table;
    the Lambda counts on none of them, and a run of the new configuration takes each shard once the old run, asked
    to, has ended."""
    superseded = 0
    for seed in range(SCHEDULES):
        world = across_a_deployment(seed, quiet_rounds=1 + seed % 3)
        assert not lost_wake_ups(world), f"seed {seed}: lost wake-up for {lost_wake_ups(world)}"
        assert not world.overlaps, f"seed {seed}: two runs of a shard applied at once: {world.overlaps}"
        # Asked to end, a run of the old configuration reads it after its round, looks once more and ends.
        assert max(world.rounds_asked.values(), default=0) <= 2, f"seed {seed}: {world.rounds_asked}"
        shards = {r.shard for r in world.runs if r.config is CONFIG} & {
            r.shard for r in world.runs if r.config is DEPLOYED
        }
        superseded += bool(shards)
    assert superseded > SCHEDULES // 10, "the exploration seldom has runs of both configurations on one shard"


def covered_by_any_unmarked_run(
    self: GlueJobStarter, bucket: str, shard: int, live_span: Any, version: str
) -> str | None:
    """The Lambda's rule before configuration versions: a live run of the shard without a stop marker covers."""
    runs = runs_of_shard(
        self.glue_client.get_job_runs(JobName=WARM_JOB, MaxResults=50)["JobRuns"],
        shard,
        ["WAITING", "STARTING", "RUNNING"],
    )
    assert self.exists is not None
    return next((str(r["Id"]) for r in runs if not self.exists(bucket, marker_key(shard, str(r["Id"])))), None)


def test_the_exploration_finds_an_added_tables_file_left_to_a_run_of_the_old_configuration(monkeypatch):
    """The check can fail: a Lambda that counts on a run of the configuration before the deployment leaves the added
    table's files to a run that never lists them."""
    monkeypatch.setattr(GlueJobStarter, "warm_run", covered_by_any_unmarked_run)
    found = [seed for seed in range(SCHEDULES // 4) if lost_wake_ups(across_a_deployment(seed))]
    assert found, "no interleaving lost a file to a run of the old configuration: the exploration is too weak"
    assert all(k.startswith("app/events/") for seed in found[:5] for k in lost_wake_ups(across_a_deployment(seed)))


def test_the_exploration_finds_a_run_of_the_old_configuration_going_on_when_it_does_not_read_the_request(monkeypatch):
    """The check can fail: a run that never reads ``version_key`` goes on until quiet while the new run waits."""
    monkeypatch.setattr(warm_module.WarmShift, "superseded", lambda self: False)
    found = next(
        (s for s in range(SCHEDULES) if max(across_a_deployment(s, 3).rounds_asked.values(), default=0) > 2), None
    )
    assert found is not None, "no old run outlived the request by more than its last look: the exploration is too weak"


def test_runs_killed_while_deciding_or_while_asked_to_end_leave_no_file_behind_once_the_next_files_land():
    """The kill tests' promise for warm runs: a run killed between any two of its steps (while it decides whether to
    take its shard, while it applies, after a deployment asked it to end, or having asked) leaves markers, holds and
    requests that no later run is misled by. A killed run's files wait for the next landing, as a failed Glue run's
    do (it alarms); once the next files land, every file is applied, and no two runs of a shard ever apply at once."""
    where: list[str] = []
    for seed in range(SCHEDULES // 2):
        world = World(rng=random.Random(seed), quiet_rounds=1 + seed % 2, kills=2)
        before = cdc_keys(TABLES, 6)
        after = [*cdc_keys(TABLES, 9)[6:], "app/events/20250301-130000000.csv"]
        protocol.explore(world, [*before, *after])
        world.kills = 0
        protocol.explore(world, [f"{DEPLOYED.table_prefix(t)}20250301-140000000.csv" for t in DEPLOYED.tables])
        assert not lost_wake_ups(world), f"seed {seed}: killed {world.killed}, lost {lost_wake_ups(world)}"
        assert not world.overlaps, f"seed {seed}: two runs of a shard applied at once: {world.overlaps}"
        where += world.killed
    wanted = {"deciding", "applying", "applying, asked to end", "deciding, having asked"}
    assert wanted <= set(where), sorted(set(where))
