"""One run: apply every not-yet-applied DMS file of a table up to the triggering one, in one commit.

trigger (a parsed key) → plan (``plan.plan_run``) → read (``reader``) → order/reduce (``changes``) →
commit (``commit``) → ``RunResult``. A duplicated, late or repeated trigger finds its file already
applied and changes nothing; a trigger for a later file applies the earlier ones too; concurrent runs
for one table meet the commit's compare-and-swap, and the loser plans again from the winner's snapshot.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_lake.core.config import PipelineConfig, TableSpec
from cdc_lake.core.dms_files import DmsFile, LandedFiles, list_landed
from cdc_lake.core.exceptions import (
    AccessDeniedError,
    CdcLakeError,
    CommitConflictError,
    ConcurrentCommitError,
    DmsInputError,
    LakeTableMissingError,
    LandedFileChangedError,
    TableMovedError,
)
from cdc_lake.core.plan import ReplayState, RunPlan, listing_start, plan_run
from cdc_lake.core.retry import RetryPolicy, retried
from cdc_lake.core.shapes import FileLayout
from cdc_lake.core.storage import ObjectStore, changed_since_listed
from cdc_lake.engine.changes import (
    ChangeCounts,
    count_changes,
    describe_problems,
    last_change_per_key,
    split_key_updates,
)
from cdc_lake.engine.commit import (
    ChangedKeys,
    Step,
    base_snapshot,
    changed_keys,
    commit_on_branch,
    merge_step,
)
from cdc_lake.engine.history import commit_history, ensure_history_table, history_name
from cdc_lake.engine.iceberg_java import aws_denial, conflicts_raised
from cdc_lake.engine.load_append import LoadAppend, appendable_loads
from cdc_lake.engine.reader import FILE, file_layouts, read_changes
from cdc_lake.engine.record import FRESHNESS, HISTORY_SNAPSHOT, freshness, recorded_state, run_properties
from cdc_lake.engine.schema import align_lake_table, lake_fields, plan_schema
from cdc_lake.engine.tables import LakeLocation, ensure_table, table_exists

log = logging.getLogger(__name__)

Result = TypeVar("Result")


@dataclass(frozen=True)
class Applied:
    """What one attempt committed: files to the table and to its history, and the table's change counts."""

    applied_files: list[str] = field(default_factory=list)
    history_files: list[str] = field(default_factory=list)
    counts: ChangeCounts | None = None
    keys_changed: int = 0
    snapshot_id: int | None = None
    freshness: dict[str, float | int | None] | None = None
    trigger: str = ""
    listing_start: str | None = None


@dataclass(frozen=True)
class RunResult:
    table: str
    trigger: str
    applied_files: list[str] = field(default_factory=list)
    history_files: list[str] = field(default_factory=list)
    counts: ChangeCounts | None = None
    keys_changed: int = 0
    snapshot_id: int | None = None
    attempts: int = 1
    seconds: float = 0.0
    freshness: dict[str, float | int | None] | None = None  # as recorded in the commit (record.freshness)
    listing_start: str | None = None  # where the next run may start listing the table (plan.listing_start)

    @property
    def already_applied(self) -> bool:
        return not self.applied_files and not self.history_files


def apply_up_to(
    spark: SparkSession,
    config: PipelineConfig,
    location: LakeLocation,
    store: ObjectStore,
    trigger: DmsFile | TableSpec,
    *,
    landed: LandedFiles | None = None,
) -> RunResult:
    """Apply every pending file of the trigger's table up to ``trigger`` in one Iceberg commit; given a table
    instead of a file, every landed file of the table. ``landed``, a listing the caller just made, spares the
    first attempt its own when it covers the listing window the table's state asks for."""
    started = time.monotonic()
    if isinstance(trigger, TableSpec):
        table, upto = trigger, None
        # A configured table with no lake table yet is created only once a data file of it has landed.
        if not table_exists(spark, location, table):
            landed = landed if landed is not None and landed.covers(None) else list_landed(store, config, table)
            if not landed.files:
                return RunResult(table=table.name, trigger="")
    else:
        table, upto = config.table(trigger.table), trigger
    unused = [landed] if landed is not None else []  # a listing serves one attempt: a retry lists anew

    def attempt() -> Applied:
        return _attempt(spark, config, location, store, table, upto, started, unused.pop() if unused else None)

    applied, attempts = committed_with_retries(spark, config, location, table, attempt)
    return RunResult(
        table=table.name,
        trigger=applied.trigger,
        applied_files=applied.applied_files,
        history_files=applied.history_files,
        counts=applied.counts,
        keys_changed=applied.keys_changed,
        snapshot_id=applied.snapshot_id,
        attempts=attempts,
        seconds=time.monotonic() - started,
        freshness=applied.freshness,
        listing_start=applied.listing_start,
    )


def _attempt(
    spark: SparkSession,
    config: PipelineConfig,
    location: LakeLocation,
    store: ObjectStore,
    table: TableSpec,
    trigger: DmsFile | None,
    started: float,
    landed: LandedFiles | None,
) -> Applied:
    # The base is read before the state: if they differ, the table moved on and the commit will be refused.
    main = _recorded(spark, location, table.lake_table)
    history = _recorded(spark, location, history_name(table)) if table.history else None
    start = _common_start(config, table, [state for _base, state in filter(None, (main, history))])
    if trigger is not None and start is not None and trigger.key <= start:
        start = None  # an old file named by hand or by a late event: list all, and the plan says it is applied
    if landed is None or not landed.covers(start):
        landed = list_landed(store, config, table, start)
    listed = landed.listed
    if trigger is None:
        if landed.newest is None:
            return Applied(listing_start=start)
        trigger = landed.newest
    plan = plan_run(config, table, trigger, listed, main[1], main[0])
    # History keeps its own record of applied files: after a stop between the two commits it is ahead.
    history_plan = plan_run(config, table, trigger, listed, history[1], history[0]) if history else None
    plans = [p for p in (plan, history_plan) if p is not None]
    next_start = _common_start(config, table, [p.next_state for p in plans])
    if not plan.pending and not (history_plan and history_plan.pending):
        log.info("%s: %s is already applied; nothing to do", table.name, trigger.key)
        return Applied(trigger=trigger.key, listing_start=next_start)
    try:
        with conflicts_raised():
            applied = _apply(spark, config, location, store, plan, history_plan, main[1], started)
    except CdcLakeError:
        raise
    except Exception:
        # A file gone or rewritten under the run fails its read in many ways: the listing tells which file.
        changed = _changed_file(config, store, plan, history_plan)
        if changed is None:
            raise
        raise changed from None
    return dataclasses.replace(applied, trigger=trigger.key, listing_start=next_start)


def committed_with_retries(
    spark: SparkSession,
    config: PipelineConfig,
    location: LakeLocation,
    table: TableSpec,
    attempt: Callable[[], Result],
) -> tuple[Result, int]:
    """The lake table (and its history) created if missing, then ``attempt`` (plan, read, commit) until its commit
    is not beaten by a concurrent one; returns its result and the attempts. The loser of a race plans again from
    the winner's snapshot. AWS refusing the job's role, or the table dropped meanwhile, fail as errors that say
    what to do."""
    policy = RetryPolicy(attempts=config.lake.commit_retries + 1, first_delay=0.4, max_delay=5.0)

    def conflicts_typed() -> Result:
        with conflicts_raised():
            return attempt()

    try:
        ensure_table(spark, location, table, config.lake)
        if table.history:
            ensure_history_table(spark, location, table, config.lake)
        return retried(
            conflicts_typed,
            policy,
            lambda error: isinstance(error, ConcurrentCommitError | TableMovedError),
            what=f"{table.name}: concurrent commit, planning again",
        )
    except (ConcurrentCommitError, TableMovedError) as error:
        raise CommitConflictError(
            f"{table.name}: still conflicting with concurrent commits after {policy.attempts} attempts"
        ) from error
    except (Py4JJavaError, PySparkException) as error:
        refusal = _refusal(spark, location, table, error)
        if refusal is None:
            raise
        raise refusal from None


def _changed_file(
    config: PipelineConfig, store: ObjectStore, plan: RunPlan, history_plan: RunPlan | None
) -> LandedFileChangedError | None:
    """The refusal of the batch when a file it reads is gone or changed since the run listed it: what was read
    may not be what the commit records as applied (key, ETag, size)."""
    files = {f.key for f in [*plan.pending, *(history_plan.pending if history_plan else [])]}
    listed = [plan.objects[key] for key in sorted(files)]
    for item, now in changed_since_listed(store, config.table_prefix(plan.table), listed):
        current = None if now is None else (now.etag, now.size)
        return LandedFileChangedError(plan.table.name, item.key, (item.etag, item.size), current)
    return None


def _confirm_listed(config: PipelineConfig, store: ObjectStore, plan: RunPlan, history_plan: RunPlan | None) -> None:
    changed = _changed_file(config, store, plan, history_plan)
    if changed is not None:
        raise changed


def _refusal(
    spark: SparkSession, location: LakeLocation, table: TableSpec, error: Py4JJavaError | PySparkException
) -> CdcLakeError | None:
    """What a run's failure means for its user, when it is AWS refusing the job's role, or the lake table gone."""
    denial = aws_denial(error)
    lake_table = location.dotted(table.lake_table)
    if denial is not None:
        resource = denial.resource or (lake_table if denial.action.startswith("glue:") else f"{lake_table}'s files")
        return AccessDeniedError(resource, denial.action)
    try:
        gone = not table_exists(spark, location, table)
    except Exception:  # the run's own failure says more
        return None
    if not gone:
        return None
    return LakeTableMissingError(
        f"{lake_table}: the lake table (or its database) was dropped while this run applied it; nothing was applied "
        f"and no file was removed. Trigger the run again: it creates the table anew from every landed file of "
        f"{table.name}, complete only while the landing bucket holds every one since the full load (if some have "
        f"expired, reload the table in DMS, then run `cdc-lake reload -t {table.name}`, docs/deploy.md#reload)"
    )


def _recorded(spark: SparkSession, location: LakeLocation, table_name: str) -> tuple[int, ReplayState]:
    # The state is read from the base's own lineage: if the table moves on, the commit will be refused.
    base, state = recorded_state(spark, location, table_name)
    while base is None:  # a new table gets an empty first snapshot; read both again, another run may be ahead
        base_snapshot(spark, location, table_name)
        base, state = recorded_state(spark, location, table_name)
    return base, state


def _common_start(config: PipelineConfig, table: TableSpec, states: Sequence[ReplayState]) -> str | None:
    starts = [listing_start(config, table, state) for state in states]
    return None if None in starts else min(s for s in starts if s is not None)


def _apply(
    spark: SparkSession,
    config: PipelineConfig,
    location: LakeLocation,
    store: ObjectStore,
    plan: RunPlan,
    history_plan: RunPlan | None,
    state: ReplayState,
    started: float,
) -> Applied:
    history_pending = history_plan.pending if history_plan else []
    files = sorted({f.key: f for f in [*plan.pending, *history_pending]}.values(), key=lambda f: f.order_key)
    log.info("%s: applying %d file(s) up to %s", plan.table.name, len(files), plan.trigger.key)
    layouts = file_layouts(spark, files, plan.table, config.dms, store)
    table = plan_schema(config, plan.table, layouts, lake_fields(spark, location, plan.table.lake_table)).table
    loads = appendable_loads(plan.pending, state, history_plan is not None)
    if loads:
        load = LoadAppend(spark, config.dms, store, table, loads, layouts)
        appended = _commit(
            spark, config, location, store, plan, None, table, layouts, files[len(loads) :], load, started
        )
        if appended is not None:
            return appended
    merged = _commit(spark, config, location, store, plan, history_plan, table, layouts, files, None, started)
    assert merged is not None  # only the append's key check gives a commit up
    return merged


def _commit(
    spark: SparkSession,
    config: PipelineConfig,
    location: LakeLocation,
    store: ObjectStore,
    plan: RunPlan,
    history_plan: RunPlan | None,
    table: TableSpec,
    layouts: Mapping[str, FileLayout],
    merged: list[DmsFile],
    load: LoadAppend | None,
    started: float,
) -> Applied | None:
    """Commit the batch: ``load`` appended (when given), then ``merged`` files' changes merged, on one branch;
    None when the appended LOAD rows hold a key twice (nothing committed: the caller merges them instead)."""
    use_sequence = config.dms.change_sequence_column is not None
    changes = _checked_changes(spark, config, store, table, merged, layouts) if merged else None
    # Only a batch that will be applied alters the lake; the ALTERs are metadata commits of their own.
    align_lake_table(spark, location, table.lake_table, table.columns)
    history_snapshot: int | None = None
    history_files: list[str] = []
    if history_plan is not None and changes is not None:
        history_snapshot = history_plan.base_snapshot_id
        align_lake_table(spark, location, history_name(table), table.columns)
        if history_plan.pending:
            _confirm_listed(config, store, plan, history_plan)  # every file is read; history commits first
            history_snapshot = commit_history(
                spark,
                location,
                table,
                _only(changes, history_plan.pending, merged),
                use_sequence,
                run_properties(history_plan, None),
                history_plan.base_snapshot_id,
            )
            history_files = [f.key for f in history_plan.pending]
    if not plan.pending:
        return Applied(history_files=history_files)
    counts = ChangeCounts(0, 0, 0)
    keys = ChangedKeys(0, {})
    last_changes = None
    if changes is not None:
        main_changes = _only(changes, [f for f in plan.pending if f in merged], merged)
        counts = count_changes(main_changes)
        last_changes = last_change_per_key(main_changes, table, use_sequence).localCheckpoint(eager=True)
        keys = changed_keys(last_changes, table)
        log.info("%s: merging %d key(s) into %s", table.name, keys.count, table.lake_table)
    recorded: dict[str, Any] = {}

    def record() -> dict[str, str]:
        total = counts + load.counts if load is not None else counts
        changed = keys.count + (load.counts.rows if load is not None else 0)
        properties = run_properties(plan, {**total.as_dict(), "keys": changed})
        if history_snapshot is not None:
            properties[HISTORY_SNAPSHOT] = str(history_snapshot)
        now = dt.datetime.now(dt.UTC)
        facts = freshness(plan, total.rows, total.newest_change, time.monotonic() - started, now)
        properties[FRESHNESS] = json.dumps(facts, separators=(",", ":"))
        recorded.update(counts=total, keys=changed, facts=facts)
        return properties

    with contextlib.ExitStack() as stack:
        steps = [load.step()] if load is not None else []
        if last_changes is not None:
            steps.append(stack.enter_context(merge_step(spark, table, last_changes, keys, record)))
        else:
            steps.append(Step(None, record))
        snapshot_id = commit_on_branch(
            spark,
            location,
            table.lake_table,
            plan.base_snapshot_id,
            steps,
            check=lambda: _confirm_listed(config, store, plan, history_plan),
        )
    if snapshot_id is None:
        return None
    return Applied(
        applied_files=[f.key for f in plan.pending],
        history_files=history_files,
        counts=recorded["counts"],
        keys_changed=recorded["keys"],
        snapshot_id=snapshot_id,
        freshness=recorded["facts"],
    )


def _checked_changes(
    spark: SparkSession,
    config: PipelineConfig,
    store: ObjectStore,
    table: TableSpec,
    files: list[DmsFile],
    layouts: Mapping[str, FileLayout],
) -> DataFrame:
    """The files' change rows in DMS order, refused with every bad row named; key updates split in two."""
    # Materialized once: row positions are then fixed, and MERGE gets a deterministic source.
    read = read_changes(spark, files, table, config.dms, store.uri, layouts).localCheckpoint(eager=True)
    problems, total = describe_problems(read)
    if problems:
        raise DmsInputError(table.name, problems, total)
    log.info("%s: read and checked %d file(s)", table.name, len(files))
    return split_key_updates(read, table, config.dms)


def _only(changes: DataFrame, chosen: list[DmsFile], read: list[DmsFile]) -> DataFrame:
    if len(chosen) == len(read):
        return changes
    return changes.filter(F.col(FILE).isin([f.key for f in chosen]))
