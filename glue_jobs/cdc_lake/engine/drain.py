"""A coalesced run: apply everything landed for every table, several tables at once, round after round.

The Lambda starts such a run only when no run of the job is still waiting or starting, so one run takes
the place of one run per file (docs/runs.md). The first round takes every configured table; a later round
lists each table from where its record says new files can be (``plan.listing_start``: S3's StartAfter,
so a listing costs the new files, not the folder's history) and takes those with a file newer than their
last batch saw. A table's batch is ``replay.replay`` of everything landed: one commit. The run
keeps going while files land, up to its time budget, so Glue's start-up and minimum billing are paid once
per busy period. A table whose batch is refused (bad input, broken order) is left for the rest of the run,
with its files in place; the other tables go on, and the run reports the failure at its end.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from cdc_lake.core.config import PipelineConfig, TableSpec
from cdc_lake.core.dms_files import DmsFile, LandedFiles, list_landed, unconfigured_folders
from cdc_lake.core.exceptions import CdcLakeError, CommitConflictError, RecordLostError
from cdc_lake.core.notices import Notice, unique
from cdc_lake.core.plan import ReplayState, listing_start, plan_run
from cdc_lake.core.storage import ObjectStore, StoredObject
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.record import table_record
from cdc_lake.engine.rejects import applied
from cdc_lake.engine.replay import RunResult, replay
from cdc_lake.engine.tables import table_exists

log = logging.getLogger(__name__)

# Listing is waiting on S3, not work: more threads than tables applied at once.
LISTING_THREADS = 16


@dataclass
class DrainResult:
    """What one run did: a result per table batch (no-op checks included), the failed tables, and its rounds."""

    results: list[RunResult] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)
    rounds: int = 0
    seconds: float = 0.0
    surveyed: list[Notice] = field(default_factory=list)  # what the run found beside its tables' folders

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
    (waits by ``sleep``; tests give their own)."""

    seconds: float
    idle_seconds: float
    poll_seconds: float
    parallel_tables: int
    clock: Callable[[], float] = field(default=time.monotonic, compare=False, repr=False)
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False, repr=False)

    @classmethod
    def of(cls, config: PipelineConfig, *, idle_seconds: float | None = None) -> Budget:
        runs = config.runs
        idle = runs.idle_seconds if idle_seconds is None else idle_seconds
        return cls(runs.time_budget_seconds, idle, runs.poll_seconds, runs.parallel_tables)


def drain(
    context: ReplayContext,
    budget: Budget,
    *,
    first: str | None = None,
    on_batch: Callable[[RunResult], None] | None = None,
    on_round: Callable[[int, int], None] | None = None,
) -> DrainResult:
    """Apply every table's landed files until a round commits nothing for ``idle_seconds`` or the budget is spent.

    The first round takes every configured table (``first``, the trigger's table, before the others); later
    rounds only the tables whose listing shows a file newer than their last batch saw. ``on_batch`` sees
    every committed batch (the Glue job publishes its metrics from it); ``on_round(round, commits)`` sees
    every finished round.
    """
    config, store, clock = context.config, context.store, budget.clock
    started = clock()
    result = DrainResult()
    newest: dict[str, DmsFile | None] = {}  # per table: the newest file its last batch saw
    starts: dict[str, str | None] = {}  # per table: where its listing may start
    last_work = started
    tables = sorted(config.tables, key=lambda t: t.name != first)
    result.surveyed = survey(context)
    with (
        ThreadPoolExecutor(max_workers=budget.parallel_tables, thread_name_prefix="cdc-lake-table") as pool,
        ThreadPoolExecutor(max_workers=LISTING_THREADS, thread_name_prefix="cdc-lake-list") as lister,
    ):
        while True:
            work: list[tuple[TableSpec, LandedFiles | None]]
            if result.rounds == 0:
                work = [(t, None) for t in tables]
            else:
                candidates = [t for t in tables if t.name not in result.failures]
                found = lister.map(
                    lambda t: _new_files(config, store, t, starts.get(t.name), newest.get(t.name)), candidates
                )
                work = [(t, landed) for t, landed in zip(candidates, found, strict=True) if landed is not None]
            log.info("round %d: %d table(s) to apply, %d at once", result.rounds + 1, len(work), budget.parallel_tables)
            done = _round(context, pool, work, result, on_batch)
            for batch in done:
                starts[batch.table] = batch.listing_start
                newest[batch.table] = batch.trigger
            commits = sum(1 for batch in done if not batch.already_applied)
            result.rounds += 1
            if on_round:
                on_round(result.rounds, commits)
            now = clock()
            if commits:
                last_work = now
            if now - started >= budget.seconds:
                log.info("time budget of %ss spent after %d round(s)", budget.seconds, result.rounds)
                break
            if commits:
                continue
            if now - last_work >= budget.idle_seconds:
                break
            budget.sleep(budget.poll_seconds)
    result.seconds = clock() - started
    return result


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
    on_batch: Callable[[RunResult], None] | None,
) -> list[RunResult]:
    """One batch per table in ``work``, ``parallel_tables`` at a time; returns their results (also appended to
    ``result``), failed tables recorded in ``result.failures`` instead."""

    def batch(work: tuple[TableSpec, LandedFiles | None]) -> tuple[TableSpec, RunResult | None, str | None]:
        table, landed = work
        try:
            return table, replay(context, table, landed), None
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


def oldest_waiting(context: ReplayContext, tables: Sequence[TableSpec] | None = None) -> dt.datetime | None:
    """When the oldest landed file no table has applied landed (None: none waits), over ``tables`` (default: every
    configured one). A table whose record is lost counts every file it has landed."""
    landed: list[dt.datetime] = []
    for table in tables or context.config.tables:
        state: ReplayState | None = None
        if table_exists(context, table):
            try:
                state = table_record(context, table.lake_table).state
            except RecordLostError:
                state = None
        waiting, _ = waiting_files(context, table, state)
        landed += [o.last_modified for o in waiting if o.last_modified is not None]
    return min(landed, default=None)
