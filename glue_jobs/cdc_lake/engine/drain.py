"""A coalesced run: apply everything landed for every table, several tables at once, round after round.

The Lambda starts such a run only when no run of the job is still waiting or starting, so one run takes
the place of one run per file (docs/runs.md). The first round takes every configured table; a later round
lists each table from where its record says new files can be (``plan.listing_start``: S3's StartAfter,
so a listing costs the new files, not the folder's history) and takes those with a file newer than their
last batch saw. A table's batch is ``replay.replay`` of everything landed: one commit. The run
keeps going while files land, up to its time budget, so Glue's start-up and minimum billing are paid once
per busy period. A table whose batch is refused (bad input, broken order) is left for the rest of the run,
with its files in place; the other tables go on, and the run reports the failure at its end.

At its end a run also tells how long the landed files it saw have waited unapplied (``Waiting``): none for a
table it applied up to the newest file its listings showed, the oldest unapplied file of a refused one. It tells
that from the listings it made anyway (``ListingLog``), not from listings of its own.
"""

from __future__ import annotations

import builtins
import dataclasses
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from enum import Enum, auto
from typing import Any, Protocol

from cdc_lake.core.config import PipelineConfig, TableSpec
from cdc_lake.core.dms_files import DmsFile, LandedFiles, list_landed, unconfigured_folders
from cdc_lake.core.exceptions import CdcLakeError, CommitConflictError, HandOver, RecordLostError
from cdc_lake.core.notices import Notice, unique
from cdc_lake.core.plan import ReplayState, applied, listing_start, plan_run
from cdc_lake.core.storage import ObjectStore, StoredObject
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.record import table_record
from cdc_lake.engine.replay import RunResult, replay
from cdc_lake.engine.tables import table_exists

log = logging.getLogger(__name__)

# Listing is waiting on S3, not work: more threads than tables applied at once.
LISTING_THREADS = 16


@dataclass(frozen=True)
class Waiting:
    """How long landed files have waited unapplied, over the tables a run (or the maintenance's scan) saw:
    ``landed``, per table, when its oldest unapplied file landed (None: none waits); ``unmeasured``, per table
    whose files could not be told, why."""

    landed: Mapping[str, dt.datetime | None] = field(default_factory=dict)
    unmeasured: Mapping[str, str] = field(default_factory=dict)

    @property
    def oldest(self) -> dt.datetime | None:
        return min((moment for moment in self.landed.values() if moment is not None), default=None)

    def seconds(self, now: dt.datetime) -> float | None:
        """How long the oldest unapplied file has waited at ``now`` (0: none waits); None when no table was seen,
        or one could not be told: a figure over the others could hide its files."""
        if self.unmeasured or not self.landed:
            return None
        oldest = self.oldest
        return max(0.0, (now - oldest).total_seconds()) if oldest is not None else 0.0


@dataclass
class DrainResult:
    """What one run did: a result per table batch (no-op checks included), the failed tables, and its rounds."""

    results: list[RunResult] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)
    rounds: int = 0
    seconds: float = 0.0
    surveyed: list[Notice] = field(default_factory=list)  # what the run found beside its tables' folders
    waiting: Waiting = field(default_factory=Waiting)  # what the run saw still waiting at its end

    @property
    def notices(self) -> list[Notice]:
        """Everything the run announced, each once: its tables' batches' notices and its survey's."""
        return unique([*self.surveyed, *(n for r in self.results for n in r.notices)])

    @property
    def applied_files(self) -> list[str]:
        return [key for result in self.results for key in result.applied_files]

    @property
    def already_applied(self) -> bool:
        return not self.failures and all(result.already_applied for result in self.results)

    @property
    def commits(self) -> list[RunResult]:
        return [r for r in self.results if not r.already_applied]


@dataclass(frozen=True)
class Budget:
    """How long a run goes on: rounds while files land, none started after ``seconds``, measured by ``clock``
    (waits by ``sleep``; tests give their own). A round starts at most every ``round_seconds``: each lists every
    table, and S3 bills the listings, so fast rounds would make them the bill."""

    seconds: float
    idle_seconds: float
    poll_seconds: float
    parallel_tables: int
    round_seconds: float = 0.0
    clock: Callable[[], float] = field(default=time.monotonic, compare=False, repr=False)
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False, repr=False)

    @classmethod
    def of(cls, config: PipelineConfig, *, idle_seconds: float | None = None) -> Budget:
        runs = config.runs
        idle = runs.idle_seconds if idle_seconds is None else idle_seconds
        return cls(runs.time_budget_seconds, idle, runs.poll_seconds, runs.parallel_tables)


class Shift(Protocol):
    """What a long-lived run adds to a coalesced one (``engine.warm``): tables handed to other runs, a watch on each
    batch, and the stop protocol around its last look at the landing."""

    def busy(self, table: str) -> bool:
        """Whether a run the table was handed to still lives: the table is left to it."""
        ...

    def hand_over(self, handover: HandOver) -> None: ...

    def watch(self, table: str) -> AbstractContextManager[None]:
        """Around one table's batch."""
        ...

    def holding(self) -> bool:
        """Whether a run it handed a table to still lives: a quiet run waits for it, then takes the table back, since
        files of the table landing meanwhile are this run's to apply."""
        ...

    def stopping(self) -> None:
        """Said before the run's last look at the landing: files landing after it are not this run's."""
        ...

    def resumed(self) -> None:
        """The last look found work: the run goes on, and ``stopping`` no longer holds."""
        ...


@dataclass(frozen=True)
class DrainHooks:
    """What a caller adds to a run: ``on_batch`` sees every committed batch, ``on_round(round, commits)`` every
    finished round; a ``shift`` makes it a long-lived run's (``engine.warm``)."""

    on_batch: Callable[[RunResult], None] | None = None
    on_round: Callable[[int, int], None] | None = None
    shift: Shift | None = None


NO_HOOKS = DrainHooks()


class Looking(Enum):
    """How a run looks at the landing after a round: what decides its next step (``_next_step``)."""

    PLAIN = auto()  # no shift: a coalesced run
    SHIFT = auto()  # a shift's run, going on
    HOLDING = auto()  # a shift's run whose shift waits on a run it handed a table to
    LAST = auto()  # a shift's run that said it is stopping: this round was its last look


class Step(Enum):
    """What a run does after a round."""

    STOP = auto()
    LAST_LOOK = auto()  # say so (``Shift.stopping``), then one more round
    RESUME = auto()  # the last look found files: go on (``Shift.resumed``)
    GO_ON = auto()  # the next round at once (within the round's pace)
    WAIT = auto()  # the next round after ``poll_seconds``


def drain(
    context: ReplayContext,
    budget: Budget,
    *,
    first: str | None = None,
    hooks: DrainHooks = NO_HOOKS,
    tables: Sequence[TableSpec] | None = None,
) -> DrainResult:
    """Apply every table's landed files until a round commits nothing for ``idle_seconds`` or the budget is spent.

    The first round takes every configured table (``first``, the trigger's table, before the others; ``tables``,
    only those); later rounds only the tables whose listing shows a file newer than their last batch saw. The Glue
    job publishes its metrics from ``hooks.on_batch``. The result's ``waiting`` tells what the run saw still waiting
    at its end. With a ``hooks.shift``, tables it is busy with are left out, handed-over batches go to it, and before
    stopping the run says so (``Shift.stopping``) and looks at every table once more: if that finds work after a
    quiet time, it goes on.
    """
    shift = hooks.shift
    listings = ListingLog(context.store)
    context = dataclasses.replace(context, store=listings)
    config, store, clock = context.config, context.store, budget.clock
    started = clock()
    result = DrainResult()
    seen: dict[str, RunResult | None] = {}  # per table: its last batch's result, None when it was refused
    newest: dict[str, DmsFile | None] = {}  # per table: the newest file its last batch saw
    starts: dict[str, str | None] = {}  # per table: where its listing may start
    last_work = started
    tables = sorted(config.tables if tables is None else tables, key=lambda t: t.name != first)
    last_look = False  # whether ``shift.stopping`` was said: this round was the run's last look
    result.surveyed = survey(context)
    with (
        ThreadPoolExecutor(max_workers=budget.parallel_tables, thread_name_prefix="cdc-lake-table") as pool,
        ThreadPoolExecutor(max_workers=LISTING_THREADS, thread_name_prefix="cdc-lake-list") as lister,
    ):
        while True:
            round_started = clock()
            work: list[tuple[TableSpec, LandedFiles | None]]
            if result.rounds == 0:
                work = [(t, None) for t in tables]
            else:
                candidates = [
                    t
                    for t in tables
                    if t.name not in result.failures and not (shift is not None and shift.busy(t.name))
                ]
                found = lister.map(
                    lambda t: _new_files(config, store, t, starts.get(t.name), newest.get(t.name)), candidates
                )
                work = [(t, landed) for t, landed in zip(candidates, found, strict=True) if landed is not None]
            log.info("round %d: %d table(s) to apply, %d at once", result.rounds + 1, len(work), budget.parallel_tables)
            done = _round(context, pool, work, result, hooks)
            for batch in done:
                starts[batch.table] = batch.listing_start
                newest[batch.table] = batch.trigger
                seen[batch.table] = batch
            seen |= dict.fromkeys(result.failures)
            commits = sum(1 for batch in done if not batch.already_applied)
            result.rounds += 1
            if hooks.on_round:
                hooks.on_round(result.rounds, commits)
            now = clock()
            if commits:
                last_work = now
            looking = Looking.PLAIN if shift is None else Looking.LAST if last_look else Looking.SHIFT
            if looking is Looking.SHIFT and not commits and shift is not None and shift.holding():
                looking = Looking.HOLDING
            step = _next_step(budget, now - started, now - last_work, commits, looking)
            last_look = step is Step.LAST_LOOK
            if step is Step.STOP:
                break
            if shift is not None and step in (Step.LAST_LOOK, Step.RESUME):
                (shift.stopping if last_look else shift.resumed)()
            if step is not Step.LAST_LOOK:
                _pause(budget, step, now - round_started)
    result.seconds = clock() - started
    result.waiting = still_waiting(context, listings, seen)
    return result


def _pause(budget: Budget, step: Step, round_took: float) -> None:
    """Before the next round: ``poll_seconds`` after a round that found nothing to do (``Step.WAIT``), and what is
    left of ``round_seconds`` since the last round began."""
    pause = max(budget.poll_seconds if step is Step.WAIT else 0.0, budget.round_seconds - round_took)
    if pause > 0:
        budget.sleep(pause)


def _next_step(budget: Budget, ran: float, quiet: float, commits: int, looking: Looking) -> Step:
    """The step after a round that ``ran`` seconds into the run, ``quiet`` since its last commit, for a run
    ``looking`` at the landing as it does (``Looking``)."""
    spent = ran >= budget.seconds
    if looking is Looking.LAST:
        return Step.STOP if spent or not commits else Step.RESUME
    if looking is Looking.HOLDING and not spent:
        return Step.WAIT
    if spent or (not commits and quiet >= budget.idle_seconds):
        if spent:
            log.info("time budget of %ss spent", budget.seconds)
        return Step.STOP if looking is Looking.PLAIN else Step.LAST_LOOK
    return Step.GO_ON if commits else Step.WAIT


def survey(context: ReplayContext) -> list[Notice]:
    """Folders of tables the configuration lacks, each announced once per run (the trigger Lambda announces their
    files as they land, too)."""
    detail = (
        "holds files of a table that is not in the configuration: they are not applied. Add the table to the "
        "configuration (and `cdk deploy`), or take it out of the DMS task's table mappings"
    )
    notices = [
        Notice("unknown-table", folder, detail) for folder in unconfigured_folders(context.store, context.config)
    ]
    for notice in notices:
        log.warning("%s", notice)
    return notices


def _new_files(
    config: PipelineConfig, store: ObjectStore, table: TableSpec, start: str | None, newest: DmsFile | None
) -> LandedFiles | None:
    """The table's listing (from ``start``) when it shows a data file newer than ``newest``, else None; the batch
    then plans from this listing instead of listing the table again."""
    landed = list_landed(store, config, table, start)
    if landed.newest is None or (newest is not None and landed.newest.order_key <= newest.order_key):
        return None
    return landed


def _round(
    context: ReplayContext,
    pool: ThreadPoolExecutor,
    work: Sequence[tuple[TableSpec, LandedFiles | None]],
    result: DrainResult,
    hooks: DrainHooks,
) -> list[RunResult]:
    """One batch per table in ``work``, ``parallel_tables`` at a time; returns their results (also appended to
    ``result``), failed tables recorded in ``result.failures`` instead, handed-over ones given to the shift."""
    shift, on_batch = hooks.shift, hooks.on_batch

    def batch(work: tuple[TableSpec, LandedFiles | None]) -> tuple[TableSpec, RunResult | None, str | None]:
        table, landed = work
        try:
            with shift.watch(table.name) if shift is not None else nullcontext():
                return table, replay(context, table, landed), None
        except HandOver as handover:
            assert shift is not None  # only a shift's context admits batches
            try:
                shift.hand_over(handover)
            except Exception as error:  # Glue refused the run: the table waits, as a refused one
                log.exception("%s: could not hand the batch over", table.name)
                return table, None, f"{handover}, but the run could not be started: {type(error).__name__}: {error}"
            return table, None, None
        except CommitConflictError:
            # Another run (the other job's, or one started by hand) keeps committing this table: it is
            # applying these files. Not a failure: the table is looked at again in the next round.
            log.info("%s: another run is committing it; looking again in the next round", table.name)
            return table, None, None
        except CdcLakeError as error:
            return table, None, str(error)
        except Exception as error:  # one table's failure must not stop the others
            log.exception("%s: batch failed", table.name)
            return table, None, f"{type(error).__name__}: {error}"

    results: list[RunResult] = []
    for table, done, error in pool.map(batch, work):
        for notice in done.notices if done is not None else []:
            log.warning("%s: %s", table.name, notice)
        if error is not None:
            log.error("%s: left as it was, its files kept in place: %s", table.name, error)
            result.failures[table.name] = error
            continue
        if done is None:
            continue
        results.append(done)
        if on_batch and not done.already_applied:
            on_batch(done)
    result.results.extend(results)
    return results


def waiting_files(
    context: ReplayContext, table: TableSpec, state: ReplayState | None
) -> tuple[list[StoredObject], str | None]:
    """The landed objects the table has not applied (every landed one before its lake table exists: ``state``
    None), and the refusal a run would meet applying them. The store's failure propagates."""
    config = context.config
    if state is None:
        landed = list_landed(context.store, config, table)
        return [landed.objects[f.key] for f in landed.files], None
    landed = list_landed(context.store, config, table, listing_start(config, table, state))
    if landed.newest is None:
        return [], None
    try:
        plan = plan_run(config, landed.newest, landed.listed, state, state.snapshot_id or 0)
    except CdcLakeError as error:
        unapplied = [landed.objects[f.key] for f in landed.files if not applied(f, state, config)]
        return unapplied, str(error)
    return [plan.objects[f.key] for f in plan.pending], None


def waiting_in(context: ReplayContext, tables: Sequence[TableSpec] | None = None) -> Waiting:
    """What waits unapplied in ``tables`` (default: every configured one), each from its record and one listing of
    it (``waiting_files``); a table whose record is lost counts every file it has landed. A table that cannot be
    told is ``unmeasured``, its error logged; the others are still told."""
    landed: dict[str, dt.datetime | None] = {}
    unmeasured: dict[str, str] = {}
    for table in context.config.tables if tables is None else tables:
        try:
            landed[table.name] = _oldest_unapplied(context, table)
        except Exception as error:  # told, not raised: the caller puts no figure that could hide this table
            unmeasured[table.name] = _unmeasured(table, error)
    return Waiting(landed, unmeasured)


def still_waiting(context: ReplayContext, listings: ListingLog, seen: Mapping[str, RunResult | None]) -> Waiting:
    """What a run saw still waiting at its end, per table in ``seen``. A table its last batch applied up to the
    batch's trigger (its result): the data files its newest listing holds after the trigger, which a coalesced
    run's batch takes as the newest file of its own listing, so these landed after it. A refused table (None):
    its record read again, and every landed file it has not applied. The listings are the run's own
    (``listings``): telling this lists nothing again, unless a table was never listed (counted and logged)."""
    recorded = RecordedListings(listings)
    context = dataclasses.replace(context, store=recorded)
    landed: dict[str, dt.datetime | None] = {}
    unmeasured: dict[str, str] = {}
    for name, result in seen.items():
        if result is None:
            continue
        table = context.config.table(name)
        try:
            landed[name] = _first_landed(_after(context, listings, table, result))
        except Exception as error:  # told, not raised: the run's batches are committed
            unmeasured[name] = _unmeasured(table, error)
    refused = waiting_in(context, [context.config.table(name) for name, result in seen.items() if result is None])
    log.info(
        "landed files waiting after the run, in %d table(s): told from the run's listings, %d request(s) more",
        len(seen),
        recorded.requests,
    )
    return Waiting({**landed, **refused.landed}, {**unmeasured, **refused.unmeasured})


def _after(context: ReplayContext, listings: ListingLog, table: TableSpec, result: RunResult) -> list[StoredObject]:
    """The data files of the table's newest listing that sort after ``result``'s trigger (every one without)."""
    trigger, prefix = result.trigger, context.config.table_prefix(table)
    newest = listings.newest(prefix)
    start = result.listing_start
    if newest is not None and (newest[0] is None or (trigger is not None and newest[0] < trigger.key)):
        start = newest[0]  # it holds every file after the trigger, and is the freshest look at them
    landed = list_landed(context.store, context.config, table, start)
    return [landed.objects[f.key] for f in landed.files if trigger is None or f.order_key > trigger.order_key]


def _oldest_unapplied(context: ReplayContext, table: TableSpec) -> dt.datetime | None:
    state: ReplayState | None = None
    if table_exists(context, table):
        try:
            state = table_record(context, table.lake_table).state
        except RecordLostError:
            state = None
    waiting, _ = waiting_files(context, table, state)
    return _first_landed(waiting)


def _first_landed(objects: Sequence[StoredObject]) -> dt.datetime | None:
    return min((o.last_modified for o in objects if o.last_modified is not None), default=None)


def _unmeasured(table: TableSpec, error: Exception) -> str:
    reason = f"{type(error).__name__}: {error}"[:300]
    log.error("%s: could not tell which of its landed files wait unapplied: %s", table.name, reason)
    return reason


def _covers(start_after: str | None, other: str | None) -> bool:
    """Whether a listing from ``start_after`` holds everything a listing from ``other`` would."""
    return start_after is None or (other is not None and start_after <= other)


class ListingLog:
    """An object store that keeps each folder's listings as it returns them, and the heads of objects it reads, so
    that a run can look at what it listed again without asking S3 (``RecordedListings``). Everything else, and
    every listing, goes to ``store`` (any operation the store has, named here or not); runs' threads share it."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._listings: dict[str, list[tuple[str | None, list[StoredObject]]]] = {}  # per folder, oldest first
        self._heads: dict[tuple[str, int], bytes] = {}

    def list(self, prefix: str, start_after: str | None = None) -> list[StoredObject]:
        listed = self.store.list(prefix, start_after)
        with self._lock:
            # A newer listing that starts no later holds all an older one does: the older is dropped.
            kept = [(s, o) for s, o in self._listings.get(prefix, []) if not _covers(start_after, s)]
            self._listings[prefix] = [*kept, (start_after, listed)]
        return listed

    def uri(self, key: str) -> str:
        return self.store.uri(key)

    def read_head(self, key: str, size: int) -> bytes:
        data = self.store.read_head(key, size)
        with self._lock:
            self._heads[(key, size)] = data
        return data

    def folders(self, prefix: str) -> builtins.list[str]:
        return self.store.folders(prefix)

    def mark_applied(self, keys: Sequence[str]) -> None:
        self.store.mark_applied(keys)

    def __getattr__(self, name: str) -> Any:
        """Every other operation of ``store``, as it is."""
        if name.startswith("_") or name == "store":
            raise AttributeError(name)
        return getattr(self.store, name)

    def newest(self, prefix: str) -> tuple[str | None, builtins.list[StoredObject]] | None:
        """The folder's newest listing, and where it started; None when the folder was not listed."""
        with self._lock:
            found = self._listings.get(prefix)
            return found[-1] if found else None

    def covering(self, prefix: str, start_after: str | None) -> builtins.list[StoredObject] | None:
        """What the folder's newest listing that holds everything from ``start_after`` returned, from there on."""
        with self._lock:
            found = [o for s, o in reversed(self._listings.get(prefix, [])) if _covers(s, start_after)]
        if not found:
            return None
        return [o for o in found[0] if start_after is None or o.key > start_after]

    def head(self, key: str, size: int) -> bytes | None:
        with self._lock:
            return self._heads.get((key, size))


class RecordedListings:
    """An object store that answers from a ``ListingLog``: a listing from the newest recorded one of the folder that
    covers it, a head from those read. What was not recorded is asked of the store itself, counted in
    ``requests``."""

    def __init__(self, listings: ListingLog) -> None:
        self._listings = listings
        self.requests = 0

    def list(self, prefix: str, start_after: str | None = None) -> list[StoredObject]:
        found = self._listings.covering(prefix, start_after)
        if found is not None:
            return found
        self.requests += 1
        return self._listings.store.list(prefix, start_after)

    def uri(self, key: str) -> str:
        return self._listings.uri(key)

    def read_head(self, key: str, size: int) -> bytes:
        data = self._listings.head(key, size)
        if data is not None:
            return data
        self.requests += 1
        return self._listings.store.read_head(key, size)

    def folders(self, prefix: str) -> builtins.list[str]:
        self.requests += 1
        return self._listings.store.folders(prefix)

    def mark_applied(self, keys: Sequence[str]) -> None:
        self._listings.store.mark_applied(keys)

    def __getattr__(self, name: str) -> Any:
        """Every other operation of the store, asked of it and counted in ``requests``."""
        if name.startswith("_"):
            raise AttributeError(name)
        operation = getattr(self._listings.store, name)

        def asked(*args: Any, **kwargs: Any) -> Any:
            self.requests += 1
            return operation(*args, **kwargs)

        return asked if callable(operation) else operation
