"""A coalesced run: apply everything landed for every table, several tables at once, round after round.

The Lambda starts such a run only when no run of the job is still waiting or starting, so one run takes
the place of one run per file (docs/runs.md). The first round takes every configured table; a later round
lists each table from where its record says new files can be (``plan.listing_start``: S3's StartAfter,
so a listing costs the new files, not the folder's history) and takes those with a file newer than their
last batch saw. A table's batch is ``replay.replay`` of everything landed: one commit. The run
keeps going while files land, up to its time budget, so Glue's start-up and minimum billing are paid once
per busy period. A table whose batch is refused (bad input, broken order) is left for the rest of the run,
with its files in place; the other tables go on, and the run reports the failure at its end.

At its end a run also tells how long the landed files it saw have waited unapplied (``waiting.Waiting``): none
for a table it applied up to the newest file its listings showed, the oldest unapplied file of a refused one. It
tells that from the listings it made anyway (``listings.ListingLog``), not from listings of its own. A warm run is
this loop with a ``shift.Shift`` (``warm``).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from enum import Enum, auto

from cdc_lake.core.config import PipelineConfig, TableSpec
from cdc_lake.core.dms_files import DmsFile, LandedFiles, list_landed, unconfigured_folders
from cdc_lake.core.exceptions import CdcLakeError, CommitConflictError, HandOver
from cdc_lake.core.notices import Notice
from cdc_lake.core.storage import ObjectStore
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.replay import RunResult, replay
from cdc_lake.engine.runs.events import Landings
from cdc_lake.engine.runs.listings import ListingLog
from cdc_lake.engine.runs.outcome import DrainResult
from cdc_lake.engine.runs.shift import NO_HOOKS, DrainHooks, Shift
from cdc_lake.engine.runs.waiting import still_waiting

log = logging.getLogger(__name__)

# Listing is waiting on S3, not work: more threads than tables applied at once.
LISTING_THREADS = 16


@dataclass(frozen=True)
class Budget:
    """How long a run goes on: rounds while files land, none started after ``seconds``, measured by ``clock``
    (waits by ``sleep``; tests give their own). A round starts at most every ``round_seconds``: each lists every
    table, and S3 bills the listings, so fast rounds would make them the bill. A shift's run (a warm one) starts a
    table's batches at least ``commit_interval_seconds`` apart: until then the table rests, unlisted, except in the
    run's last look. A shift's run told of landings (``events``) lists only the tables told, and every table at
    least every ``sweep_seconds``."""

    seconds: float
    idle_seconds: float
    poll_seconds: float
    parallel_tables: int
    round_seconds: float = 0.0
    commit_interval_seconds: float = 0.0
    sweep_seconds: float = 0.0
    clock: Callable[[], float] = field(default=time.monotonic, compare=False, repr=False)
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False, repr=False)

    @classmethod
    def of(cls, config: PipelineConfig, *, idle_seconds: float | None = None) -> Budget:
        runs = config.runs
        idle = runs.idle_seconds if idle_seconds is None else idle_seconds
        return cls(runs.time_budget_seconds, idle, runs.poll_seconds, runs.parallel_tables)


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
    config, clock = context.config, budget.clock
    started = clock()
    result = DrainResult()
    kept = _Kept()
    last_work = started
    tables = sorted(config.tables if tables is None else tables, key=lambda t: t.name != first)
    last_look = False  # whether ``shift.stopping`` was said: this round was the run's last look
    fed = _Fed(shift.landings, budget.sweep_seconds, started) if shift and shift.landings else None
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
                rested = None if last_look else round_started - budget.commit_interval_seconds
                candidates, lifted = _candidates(tables, result, shift, kept.committed, rested)
                if fed is not None:
                    candidates = fed.narrowed(candidates, lifted, round_started, every=last_look)
                work = _listed(context, lister, candidates, kept.starts, kept.newest)
            log.info("round %d: %d table(s) to apply, %d at once", result.rounds + 1, len(work), budget.parallel_tables)
            done = _round(context, pool, work, result, hooks)
            kept.keep(done, result.failures, round_started)
            commits = sum(1 for batch in done if not batch.already_applied)
            result.rounds += 1
            if hooks.on_round:
                hooks.on_round(result.rounds, commits)
            now = clock()
            if commits:
                last_work = now
            looking = _looking(shift, last_look, commits)
            # A deployment asked for the shard, or a batch overran: this run's time is up (its last look, then the end).
            ran = budget.seconds if shift is not None and shift.must_end() else now - started
            step = _next_step(budget, ran, now - last_work, commits, looking)
            last_look = step is Step.LAST_LOOK
            if step is Step.STOP:
                break
            if shift is not None and step in (Step.LAST_LOOK, Step.RESUME):
                (shift.stopping if last_look else shift.resumed)()
            if step is not Step.LAST_LOOK:
                _pause(budget, step, now - round_started, fed)
    result.seconds = clock() - started
    result.waiting = still_waiting(context, listings, kept.seen)
    return result


@dataclass
class _Kept:
    """What a run keeps of each table between its rounds."""

    seen: dict[str, RunResult | None] = field(default_factory=dict)  # its last batch's result, None when refused
    newest: dict[str, DmsFile | None] = field(default_factory=dict)  # the newest file its last batch saw
    starts: dict[str, str | None] = field(default_factory=dict)  # where its listing may start
    committed: dict[str, float] = field(default_factory=dict)  # when the round of this run's last commit of it began

    def keep(self, done: Sequence[RunResult], failures: Mapping[str, str], round_started: float) -> None:
        # A table's next batch starts an interval after this one's round did.
        self.committed |= {batch.table: round_started for batch in done if not batch.already_applied}
        self.starts |= {batch.table: batch.listing_start for batch in done}
        self.newest |= {batch.table: batch.trigger for batch in done}
        self.seen |= {batch.table: batch for batch in done} | dict.fromkeys(failures)


def _looking(shift: Shift | None, last_look: bool, commits: int) -> Looking:
    """How the run looks at the landing after a round that made ``commits`` (``last_look``: after its last look)."""
    if shift is None:
        return Looking.PLAIN
    if last_look:
        return Looking.LAST
    return Looking.HOLDING if not commits and shift.holding() else Looking.SHIFT


def _candidates(
    tables: Sequence[TableSpec],
    result: DrainResult,
    shift: Shift | None,
    committed: dict[str, float],
    rested: float | None,
) -> tuple[list[TableSpec], set[str]]:
    """The tables a later round may list: not refused (a shift's refused table again once its refusal is lifted), not
    left to a run a shift handed them to, and, in a shift's run, none whose last batch's round began after ``rested``
    (None: the run's last look). A resting table is not listed; a run cannot stop while one rests (the interval is at
    most its quiet time), and its last look takes every table, so none is left behind. Also the tables whose refusal
    was lifted, which a run told of landings lists though none was told (``_Fed.narrowed``)."""
    if shift is None:
        return [t for t in tables if t.name not in result.failures], set()
    lifted = {t.name for t in tables if t.name in result.failures and shift.fixed(t)}
    for name in sorted(lifted):
        log.warning("%s: its refusal was lifted; trying it again", name)
        del result.failures[name]
    awake = [t for t in tables if rested is None or committed.get(t.name, rested) <= rested]
    return [t for t in awake if t.name not in result.failures and not shift.busy(t.name)], lifted


def _refused(table: TableSpec, error: str, result: DrainResult, hooks: DrainHooks) -> None:
    """A table's batch refused: logged, recorded, and told as it happens (a long-lived run's end may be a day off)."""
    log.error("%s: left as it was, its files kept in place: %s", table.name, error)
    result.failures[table.name] = error
    if hooks.shift is not None:
        hooks.shift.refused(table)
    if hooks.on_refusal:
        hooks.on_refusal(table.name, error)


def _pause(budget: Budget, step: Step, round_took: float, fed: _Fed | None) -> None:
    """Before the next round: ``poll_seconds`` after a round that found nothing to do (``Step.WAIT``), and what is
    left of ``round_seconds`` since the last round began; a run ``fed`` landings as ``_Fed.pause`` says."""
    if fed is not None:
        fed.pause(budget, step)
        return
    pause = max(budget.poll_seconds if step is Step.WAIT else 0.0, budget.round_seconds - round_took)
    if pause > 0:
        budget.sleep(pause)


@dataclass
class _Fed:
    """A shift's run told of landings (``events``): a later round lists the tables told since they were last listed,
    and every table it may when ``sweep_seconds`` have passed since it last did (its first round did), when the
    queue did not answer, and in its last look. So a lost message delays its file by a sweep at most."""

    landings: Landings
    sweep_seconds: float
    swept: float  # when the run last listed every table it may
    told: set[str] = field(default_factory=set)  # tables told, not listed since

    def narrowed(self, candidates: list[TableSpec], lifted: set[str], now: float, *, every: bool) -> list[TableSpec]:
        """Which of a round's ``candidates`` it lists: those told, and ``lifted`` (a refusal lifted, its files
        waiting), unless it lists ``every`` one (the last look) or a sweep is due."""
        self.told |= lifted
        heard = None if every else self.landings.tables(0)
        self.told |= heard or set()
        if heard is not None and now - self.swept < self.sweep_seconds:
            candidates = [t for t in candidates if t.name in self.told]
        else:
            if not every:
                log.info("listing every table: %s", "a sweep" if heard is not None else "the queue did not answer")
            self.swept = now
        self.told -= {t.name for t in candidates}
        return candidates

    def pause(self, budget: Budget, step: Step) -> None:
        """Before the next round: none after a round that committed (it listed only what landed, so rounds need no
        pace), else up to ``poll_seconds``, ending as soon as a landing is told."""
        if step is not Step.WAIT:
            return
        heard = self.landings.tables(budget.poll_seconds)
        if heard is None:  # the queue did not answer at once: the pause, then a round that lists every table
            budget.sleep(budget.poll_seconds)
            self.swept = -math.inf
        else:
            self.told |= heard


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


def _listed(
    context: ReplayContext,
    lister: ThreadPoolExecutor,
    candidates: Sequence[TableSpec],
    starts: dict[str, str | None],
    newest: dict[str, DmsFile | None],
) -> list[tuple[TableSpec, LandedFiles | None]]:
    """Each of ``candidates`` whose listing (from its start) shows a file newer than its last batch saw, with it."""
    config, store = context.config, context.store
    found = lister.map(lambda t: _new_files(config, store, t, starts.get(t.name), newest.get(t.name)), candidates)
    return [(t, landed) for t, landed in zip(candidates, found, strict=True) if landed is not None]


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
            _refused(table, error, result, hooks)
            continue
        if done is None:
            continue
        results.append(done)
        if on_batch and not done.already_applied:
            on_batch(done)
    # A long-lived run's older batches are counted, not kept: it holds what its tables need, not its files.
    result.add(results, long_lived=hooks.shift is not None)
    return results
