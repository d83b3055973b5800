"""A warm run told of landings by its shard's queue (``engine.runs.events``), on a clock of its own, without Spark:
it lists only the tables told, a told file is applied within a pause and a batch of its landing, a file whose event
was lost within ``sweep_seconds`` more, a duplicated event costs one listing and no batch, and a queue that does not
answer makes the next round list every table."""

from __future__ import annotations

import itertools
from collections import defaultdict
from pathlib import Path

import pytest

from cdc_lake.core.config import parse_config
from cdc_lake.core.dms_files import LandedFiles, list_landed
from cdc_lake.core.storage import LocalFolderStore, StoredObject
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.replay import RunResult
from cdc_lake.engine.runs import coalesced as drain_module
from cdc_lake.engine.runs.coalesced import Budget, drain
from cdc_lake.engine.runs.shift import DrainHooks
from cdc_lake.engine.tables import LakeLocation
from tests.support.shift import QuietShift

TABLES = ("app.orders", "app.users", "app.items")
CONFIG = parse_config(
    {
        "runs": {"mode": "warm"},
        "tables": [{"name": n, "primary_key": ["id"], "columns": [{"name": "id", "type": "bigint"}]} for n in TABLES],
    }
)
BATCH_S = 2.0
POLL_S = 5.0
SWEEP_S = 60.0
QUIET_S = 100.0


class World(LocalFolderStore):
    """The raw bucket on a clock: files land at set times (told to the queue, or not: a lost event); the queue; the
    listings of each table and when each file was applied."""

    def __init__(self, root: Path, landings: list[tuple[float, str, int]]) -> None:
        super().__init__(root)
        self.now = 0.0
        self.to_land = sorted(landings)  # (when, table, how many times it is told: 0 is a lost event)
        self.queue: list[tuple[float, str]] = []  # (when told, table)
        self.table_listings: dict[str, list[float]] = defaultdict(list)
        self.applied: dict[str, float] = {}
        self.landed_at: dict[str, float] = {}
        self.deaf_at: float | None = None  # the queue's first long poll from then on gets no answer
        self.heard: list[set[str] | None] = []

    def land_due(self) -> None:
        while self.to_land and self.to_land[0][0] <= self.now:
            when, table, told = self.to_land.pop(0)
            schema, name = table.split(".")
            key = f"{schema}/{name}/20250301-12{int(when) // 60:02d}{int(when) % 60:02d}000.csv"
            (self.root / key).parent.mkdir(parents=True, exist_ok=True)
            (self.root / key).write_text("I,1\n")
            self.landed_at[key] = when
            self.queue += [(when, table)] * told

    def list(self, prefix: str, start_after: str | None = None) -> list[StoredObject]:
        self.land_due()
        table = prefix.rstrip("/").replace("/", ".")
        if table in TABLES:
            self.table_listings[table].append(self.now)
        return super().list(prefix, start_after)

    # ``events.Landings``
    def tables(self, wait_seconds: float) -> set[str] | None:
        self.land_due()
        if wait_seconds and self.deaf_at is not None and self.now >= self.deaf_at:
            self.deaf_at = None
            self.heard.append(None)
            return None
        if not self.queue and wait_seconds:
            # A long poll: until the next landing is told, or the wait is over.
            next_told = next((when for when, _table, told in self.to_land if told), None)
            self.now = min(self.now + wait_seconds, next_told if next_told is not None else self.now + wait_seconds)
            self.land_due()
        heard = {table for _when, table in self.queue}
        self.queue = []
        self.heard.append(heard)
        return heard

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture()
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    holder: dict[str, World] = {}

    def batch(context: ReplayContext, table: object, landed: LandedFiles | None = None) -> RunResult:
        w = holder["world"]
        spec = next(t for t in CONFIG.tables if t is table)
        landed = landed if landed is not None else list_landed(context.store, context.config, spec)
        new = [f.key for f in landed.files if f.key not in w.applied]
        w.now += BATCH_S
        w.applied |= dict.fromkeys(new, w.now)
        return RunResult(spec.name, landed.newest, applied_files=new)

    monkeypatch.setattr(drain_module, "replay", batch)

    def make(landings: list[tuple[float, str, int]]) -> World:
        holder["world"] = World(tmp_path, landings)
        return holder["world"]

    return make  # type: ignore[return-value]


def run(world: World) -> QuietShift:
    shift = QuietShift(world)
    context = ReplayContext(spark=None, location=LakeLocation("c", "db"), config=CONFIG, store=world)  # type: ignore[arg-type]
    budget = Budget(
        10_000, QUIET_S, POLL_S, 1, round_seconds=20, sweep_seconds=SWEEP_S, clock=lambda: world.now, sleep=world.sleep
    )
    drain(context, budget, hooks=DrainHooks(shift=shift))
    return shift


def told_listings(world: World, table: str) -> list[float]:
    """When ``table`` was listed for being told: not by the first round's batch, a sweep or the last look (the
    listings of app.items, never told, are those)."""
    untold = set(world.table_listings["app.items"])
    return [t for t in world.table_listings[table][1:] if t not in untold]


def delays(world: World) -> dict[str, float]:
    return {key: world.applied[key] - landed for key, landed in world.landed_at.items()}


def test_a_run_told_of_landings_lists_only_the_tables_told_and_applies_each_file_at_once(world) -> None:
    w = world([(t, "app.orders", 1) for t in (7, 21, 22, 40)] + [(30, "app.users", 1)])
    shift = run(w)
    # No pace: a told file waits for no round, only for its own batch (and the one before it, when it lands then).
    assert max(delays(w).values()) <= 2 * BATCH_S
    # Besides the first round's batches, the sweeps every 60 s and the last look, a table is listed when told.
    assert w.table_listings["app.items"][1:] == [62.0, 122.0, 142.0] and shift.said == ["stopping"]
    assert told_listings(w, "app.users") == [30.0]
    assert told_listings(w, "app.orders") == [7.0, 21.0, 23.0, 40.0]  # 22's file is told during 21's batch


def test_a_file_whose_event_was_lost_is_applied_by_the_next_sweep(world) -> None:
    busy = [(t, "app.orders", 1) for t in range(5, 200, 10)]  # keeps the run from going quiet
    w = world([*busy, (70, "app.users", 0)])
    run(w)
    users = next(k for k in w.landed_at if k.startswith("app/users/"))
    # The sweeps list every table from 60 s on, every 60 s: the one at 120 s finds it.
    assert 120 <= w.applied[users] <= 120 + 2 * BATCH_S
    assert delays(w)[users] <= SWEEP_S + 2 * BATCH_S
    sweeps = [t for t in w.table_listings["app.items"][1:] if t < 200]
    assert len(sweeps) == 3 and all(b - a >= SWEEP_S for a, b in itertools.pairwise(sweeps))


def test_a_duplicated_event_costs_a_listing_and_no_batch(world) -> None:
    w = world([(10, "app.users", 2), (50, "app.users", 1)])
    run(w)
    assert max(delays(w).values()) <= BATCH_S + POLL_S
    # One listing for the two messages of one file, one for the next file.
    assert told_listings(w, "app.users") == [10.0, 50.0]


def test_a_queue_that_does_not_answer_makes_the_next_round_list_every_table(world) -> None:
    w = world([(10, "app.orders", 1), (20, "app.users", 0), (30, "app.orders", 1)])
    w.deaf_at = 25.0
    run(w)
    users = next(k for k in w.landed_at if k.startswith("app/users/"))
    assert None in w.heard
    # Not left for the sweep at 60 s: the round after the queue failed listed every table.
    assert w.applied[users] < SWEEP_S
