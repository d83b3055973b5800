"""A run's rounds on a clock of its own, without Spark: a warm run starts a round at most every ``round_seconds``, so
the listings each round makes do not grow with how fast its batches are; a coalesced run's rounds follow at once. A
warm run with ``commit_interval_seconds`` starts a table's batches that far apart, lists it only then, and still
applies every landed file in its last look."""

from __future__ import annotations

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
from cdc_lake.engine.runs.warm import warm_budget
from cdc_lake.engine.tables import LakeLocation
from tests.support.shift import QuietShift

CONFIG = parse_config(
    {
        "runs": {"mode": "warm"},
        "tables": [{"name": "app.orders", "primary_key": ["id"], "columns": [{"name": "id", "type": "bigint"}]}],
    }
)
BATCH_S = 2.0  # what each batch takes on the clock
LANDING_S = 1.0  # a CDC file lands this often


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self.batches: list[float] = []  # when each batch began

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class Landing(LocalFolderStore):
    """The raw bucket, where a file of ``app.orders`` lands every ``LANDING_S`` of the clock, and listings counted."""

    def __init__(self, root: Path, clock: Clock) -> None:
        super().__init__(root)
        self.clock = clock
        self.landed = 0
        self.table_listings: list[float] = []

    def list(self, prefix: str, start_after: str | None = None) -> list[StoredObject]:
        while self.landed * LANDING_S <= self.clock.now:
            minute, second = divmod(self.landed, 60)
            name = self.root / "app" / "orders" / f"20250301-12{minute:02d}{second:02d}000.csv"
            name.parent.mkdir(parents=True, exist_ok=True)
            name.write_text("I,1\n")
            self.landed += 1
        if prefix == "app/orders/":
            self.table_listings.append(self.clock.now)
        return super().list(prefix, start_after)


@pytest.fixture()
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """Each table's batch applies its listed files and takes ``BATCH_S`` of the clock."""
    clock = Clock()

    def batch(context: ReplayContext, table: object, landed: LandedFiles | None = None) -> RunResult:
        landed = landed if landed is not None else list_landed(context.store, context.config, CONFIG.tables[0])
        clock.batches.append(clock.now)
        clock.now += BATCH_S
        return RunResult("app.orders", landed.newest, applied_files=[f.key for f in landed.files])

    monkeypatch.setattr(drain_module, "replay", batch)
    return clock


def rounds_of(
    tmp_path: Path, clock: Clock, budget: Budget, shift: QuietShift | None = None
) -> tuple[list[float], Landing, int]:
    """When each round ended, for a run of ``budget`` on the landing, and how many files its last batch saw (this
    fake batch applies every file it lists, so that is every file landed by its listing)."""
    store = Landing(tmp_path, clock)
    context = ReplayContext(spark=None, location=LakeLocation("c", "db"), config=CONFIG, store=store)  # type: ignore[arg-type]
    ends: list[float] = []
    result = drain(
        context, budget, hooks=DrainHooks(on_round=lambda number, commits: ends.append(clock.now), shift=shift)
    )
    return ends, store, len(result.results[-1].applied_files)


def test_a_paced_run_starts_a_round_at_most_every_round_seconds(tmp_path: Path, clock: Clock) -> None:
    budget = Budget(60, 0, 5, parallel_tables=1, round_seconds=20, clock=lambda: clock.now, sleep=clock.sleep)
    ends, store, _ = rounds_of(tmp_path, clock, budget)
    # Rounds start at 0, 20, 40 and 60 s: each batch's 2 s, then the rest of the 20 s waited out.
    assert ends == [2.0, 22.0, 42.0, 62.0]
    assert clock.sleeps == [18.0, 18.0, 18.0]
    assert store.table_listings[1:] == [20.0, 40.0, 60.0]  # the first round's batch lists for itself, at 0


def test_an_unpaced_run_lists_after_every_batch(tmp_path: Path, clock: Clock) -> None:
    budget = Budget(60, 0, 5, parallel_tables=1, clock=lambda: clock.now, sleep=clock.sleep)
    ends, store, _ = rounds_of(tmp_path, clock, budget)
    assert ends == [2.0 * n for n in range(1, 31)]  # back to back, 2 s each, until 60 s are spent
    assert clock.sleeps == []
    assert store.table_listings[1:] == [2.0 * n for n in range(1, 30)]  # ten times the paced run's 3 listings


def test_a_warm_run_paces_its_rounds_no_longer_than_its_quiet_time() -> None:
    context = ReplayContext(spark=None, location=LakeLocation("c", "db"), config=CONFIG, store=None)  # type: ignore[arg-type]
    assert CONFIG.runs.warm.round_seconds == 20
    assert warm_budget(context).round_seconds == 20
    assert warm_budget(context, quiet_seconds=5).round_seconds == 5
    assert warm_budget(context, quiet_seconds=0).round_seconds == 0  # a local run: nothing lands while it works
    assert Budget.of(CONFIG).round_seconds == 0  # a coalesced run's rounds follow at once


def interval_budget(clock: Clock, interval: float) -> Budget:
    """A warm run's: 300 s of life, as quiet a time as the interval, a round at most every 20 s."""
    return Budget(300, interval, 5, 1, 20, interval, clock=lambda: clock.now, sleep=clock.sleep)


def test_a_warm_run_starts_a_tables_batches_an_interval_apart_and_lists_it_only_then(
    tmp_path: Path, clock: Clock
) -> None:
    shift = QuietShift()
    _, store, last_saw = rounds_of(tmp_path, clock, interval_budget(clock, 60), shift)
    # One batch a minute (each of about 60 files) where each 20 s round would make one; then the last look, which
    # takes the table though it rests, so the run ends with nothing landed left behind.
    assert clock.batches == [0.0, 60.0, 120.0, 180.0, 240.0, 300.0, 302.0]
    assert store.table_listings[1:] == clock.batches[1:]  # a resting table is not listed: 6 listings, not 16
    assert shift.said == ["stopping"]
    assert last_saw == store.landed == 303  # every file landed by the last look's listing, at 302 s


def test_without_an_interval_a_warm_run_batches_every_round(tmp_path: Path, clock: Clock) -> None:
    shift = QuietShift()
    _, store, last_saw = rounds_of(tmp_path, clock, interval_budget(clock, 0), shift)
    assert clock.batches == [20.0 * n for n in range(16)] + [302.0]
    assert last_saw == store.landed


def test_a_coalesced_run_takes_no_interval_and_a_local_warm_run_rests_no_longer_than_it_waits() -> None:
    config = parse_config(
        {
            "runs": {"mode": "warm", "warm": {"commit_interval_seconds": 300}},
            "tables": [{"name": "app.orders", "primary_key": ["id"], "columns": [{"name": "id", "type": "bigint"}]}],
        }
    )
    context = ReplayContext(spark=None, location=LakeLocation("c", "db"), config=config, store=None)  # type: ignore[arg-type]
    assert warm_budget(context).commit_interval_seconds == 300
    assert warm_budget(context, quiet_seconds=0).commit_interval_seconds == 0  # nothing lands while it works
    assert Budget.of(config).commit_interval_seconds == 0
