"""One run: apply every not-yet-applied DMS file of a table up to the triggering one, in one commit.

A table's batch is a sequence of steps, each a function from a typed input to a typed output:

    plan (Batch) → read (BatchRead) → reduce (Reduced) → evolve schema → write history (HistoryWritten) → commit

``_attempt`` plans; ``apply_batch`` runs the steps up to the commit (``steps``), then commits. A duplicated, late
or repeated trigger finds its file already applied and changes nothing; a trigger for a later file applies the
earlier ones too; concurrent runs for one table meet the commit's compare-and-swap (``commit.commit_transaction``),
and the loser plans again from the winner's snapshot (``committed_with_retries``).
"""

from __future__ import annotations

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
from pyspark.sql import types as T

from cdc_lake.core.config import PipelineConfig, TableSpec
from cdc_lake.core.dms_files import DmsFile, LandedFiles, list_landed
from cdc_lake.core.exceptions import (
    AccessDeniedError,
    CdcLakeError,
    CommitConflictError,
    ConcurrentCommitError,
    DmsInputError,
    HistoryGapError,
    LakeTableCreateError,
    LakeTableMissingError,
    LandedFileChangedError,
    ReplayOrderError,
    SchemaChangeError,
    TableMovedError,
    UnreadableFileError,
)
from cdc_lake.core.notices import Notice, unique
from cdc_lake.core.plan import ReplayState, listing_start, plan_run
from cdc_lake.core.retry import RetryPolicy, retried
from cdc_lake.engine.changes import ChangeCounts
from cdc_lake.engine.commit import (
    Committed,
    Transaction,
    Update,
    base_snapshot,
    batch_updates,
    branch_head,
    commit_transaction,
    remove_dead_run_branches,
)
from cdc_lake.engine.context import Batch, ReplayContext
from cdc_lake.engine.continuity import check_waiting_file, first_batch_notices, waiting_mark
from cdc_lake.engine.driver_batch import holding_small_files
from cdc_lake.engine.history import ensure_history_table
from cdc_lake.engine.iceberg_errors import aws_denial, conflicts_raised, root_cause
from cdc_lake.engine.iceberg_java import Metadata, set_table_property, table_properties
from cdc_lake.engine.iceberg_row_delta import RowDeltaTarget
from cdc_lake.engine.load_append import appendable_loads
from cdc_lake.engine.maintenance import MaintenanceResult, upkeep
from cdc_lake.engine.reader import file_layouts, unreadable
from cdc_lake.engine.record import REFUSED, BatchRecord, freshness, read_state, record_in
from cdc_lake.engine.rejects import ensure_rejects_table
from cdc_lake.engine.row_delta import BatchChanges, SparkChanges, commit_changes, row_delta_target_of
from cdc_lake.engine.schema import plan_schema
from cdc_lake.engine.steps import (
    BatchRead,
    HistoryWritten,
    Reduced,
    changed_file,
    confirm_listed,
    evolve_schema,
    in_spark,
    quarantine_notices,
    read_files,
    reduce_changes,
    write_history,
    write_quarantined,
)
from cdc_lake.engine.tables import (
    ensure_table,
    history_name,
    lake_tables,
    quarantines,
    refuse_legacy_table,
    table_exists,
)

log = logging.getLogger(__name__)

Result = TypeVar("Result")
# What refuses a table's batch until someone acts (bad input, broken order, a file changed under the run); kept
# on the table until a run of it commits. Conflicts, denials and dropped tables say what to do themselves.
REFUSALS = (DmsInputError, UnreadableFileError, ReplayOrderError, SchemaChangeError, LandedFileChangedError)


@dataclass(frozen=True)
class RunResult:
    """What one table's run did: the files it applied to the table and to its history, what its commit recorded
    (``record``: counts, keys, freshness) and the snapshot it made; ``listing_start``: where the next run may
    start listing the table (``plan.listing_start``)."""

    table: str
    trigger: DmsFile | None = None
    applied_files: list[str] = field(default_factory=list)
    history_files: list[str] = field(default_factory=list)
    record: BatchRecord | None = None
    snapshot_id: int | None = None
    listing_start: str | None = None
    attempts: int = 1
    seconds: float = 0.0
    notices: list[Notice] = field(default_factory=list)
    upkeep: list[MaintenanceResult] = field(default_factory=list)  # the compaction or expiry the commit called for

    @property
    def already_applied(self) -> bool:
        return not self.applied_files and not self.history_files

    @property
    def counts(self) -> ChangeCounts | None:
        return self.record.counts if self.record is not None else None

    @property
    def keys_changed(self) -> int:
        return self.record.keys if self.record is not None else 0

    @property
    def freshness(self) -> dict[str, float | int | None] | None:
        return self.record.freshness if self.record is not None else None


@dataclass(frozen=True)
class Recorded:
    """A lake table's base snapshot and the replay state its lineage records there, read before anything else (if
    the table moves on after this, its commit is refused); ``history``: the same of its history table."""

    base_snapshot_id: int
    state: ReplayState
    fields: tuple[T.StructField, ...]  # the table's columns, and the base's summary, in the same version
    base_summary: Mapping[str, str]
    history: Recorded | None = None
    refused: Mapping[str, Any] | None = None  # the table's standing refusal (``REFUSED``), if any

    @property
    def states(self) -> list[ReplayState]:
        return [self.state, *([self.history.state] if self.history is not None else [])]


def replay(context: ReplayContext, trigger: DmsFile | TableSpec, landed: LandedFiles | None = None) -> RunResult:
    """Apply every pending file of the trigger's table up to ``trigger`` in one Iceberg commit; given a table
    instead of a file, every landed file of the table. ``landed``, a listing the caller just made, spares the first
    attempt its own when it covers the listing window the table's state asks for."""
    started = time.monotonic()
    if isinstance(trigger, TableSpec):
        table, upto = trigger, None
        # A configured table with no lake table yet is created only once a data file of it has landed.
        if not table_exists(context, table, own_commit=True):
            if landed is None or not landed.covers(None):
                landed = list_landed(context.store, context.config, table)
            if not landed.files:
                return RunResult(table.name)
    else:
        table, upto = context.config.table(trigger.table), trigger
    refuse_legacy_table(context, table)
    unused = [landed] if landed is not None else []  # a listing serves one attempt: a retry lists anew

    def attempt() -> RunResult:
        return _attempt(context, table, upto, unused.pop() if unused else None, started)

    try:
        result, attempts = committed_with_retries(context, table, attempt)
    except REFUSALS as error:
        record_refusal(context, table, error)
        raise
    upkept: list[MaintenanceResult] = []
    if result.snapshot_id is not None:  # only a commit clears a refusal: a run with nothing to apply reads nothing
        record_refusal(context, table, None)
        upkept = _upkeep(context, table)
    return dataclasses.replace(result, attempts=attempts, seconds=time.monotonic() - started, upkeep=upkept)


def _upkeep(context: ReplayContext, table: TableSpec) -> list[MaintenanceResult]:
    """The table's ``upkeep`` after its commit, part of the run's cost. Its failure fails nothing: the batch is
    committed, and the next commit starts what is still due again."""
    results: list[MaintenanceResult] = []
    for name in lake_tables(table):
        try:
            results += upkeep(context, name, context.config.write_mode(table))  # a rejects table's pin wins
        except (Py4JJavaError, PySparkException) as error:
            log.warning("%s: upkeep left for the next commit: %s", context.location.dotted(name), root_cause(error))
    return results


def record_refusal(context: ReplayContext, table: TableSpec, error: CdcLakeError | None) -> None:
    """Keep the table's refusal on the lake table (``REFUSED``, a table property: the table's data and record stay
    as they were), for ``cdc-lake status``; with None, clear it once a run of the table commits. The refusal names
    the table's oldest-landed file not applied (``continuity.waiting_mark``); a later refusal keeps the first one
    named, which no commit has applied since."""
    spark, dotted = context.spark, context.location.dotted(table.lake_table)
    try:
        if error is not None and not table_exists(context, table):
            return
        # Read as this run last saw the table: just asked whether it exists, or committed to it.
        kept = table_properties(spark, dotted, as_kept=True).get(REFUSED)
        if error is None and kept is not None:
            set_table_property(spark, dotted, REFUSED, None)
        elif error is not None:
            waiting = json.loads(kept).get("waiting") if kept is not None else None
            if waiting is None:
                landed = list_landed(context.store, context.config, table)
                waiting = waiting_mark(context.config, landed, read_state(context, table.lake_table))
            refusal = {
                "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "message": error.without_values()[:4000],
                "waiting": waiting,
            }
            set_table_property(spark, dotted, REFUSED, json.dumps(refusal, separators=(",", ":")))
    except (Py4JJavaError, PySparkException, CdcLakeError) as failure:  # the run's own outcome comes first
        log.warning("%s: could not record the refusal on the table: %s", table.name, str(failure)[:300])


def _attempt(
    context: ReplayContext, table: TableSpec, trigger: DmsFile | None, landed: LandedFiles | None, started: float
) -> RunResult:
    # The bases are read before the listing: if a table moves on after this, its commit is refused. A table this
    # process's own row delta last wrote is planned from that commit (a refused commit forgets it: a retry reads).
    recorded = _recorded(context, table)
    start = _common_start(context.config, table, recorded.states)
    if trigger is not None and start is not None and trigger.key <= start:
        start = None  # an old file named by hand or by a late event: list all, and the plan says it is applied
    if landed is None or not landed.covers(start):
        landed = list_landed(context.store, context.config, table, start)
    check_waiting_file(context.store, table, recorded.refused, landed)
    notices = landed.notices()
    if trigger is not None and trigger.key in landed.empty:  # an empty object's event: apply what precedes it
        earlier = [f for f in landed.files if f.order_key <= trigger.order_key]
        trigger = earlier[-1] if earlier else None
    trigger = trigger or landed.newest
    if trigger is None:
        return RunResult(table.name, listing_start=start, notices=notices)
    batch = plan_batch(context, recorded, trigger, landed, started)
    if batch.nothing_pending:
        log.info("%s: %s is already applied; nothing to do", table.name, trigger.key)
        return RunResult(table.name, trigger, listing_start=batch.next_listing_start, notices=notices)
    if context.admit is not None:
        context.admit(batch)
    if recorded.state.applied_nothing and batch.plan.pending:
        notices = [*notices, *_first_batch_notices(context, recorded, batch)]
    try:
        with conflicts_raised():
            return apply_batch(context, batch, notices)
    except CdcLakeError:
        raise
    except Exception as error:
        # A file gone or rewritten under the run fails its read in many ways: the listing tells which file;
        # else a file that cannot be read at all is found by reading each alone.
        refusal = changed_file(context, batch) or _unreadable_file(context, batch, error)
        if refusal is None:
            raise
        raise refusal from None


def _first_batch_notices(context: ReplayContext, recorded: Recorded, batch: Batch) -> list[Notice]:
    """``first_batch_notices``, where the expiry's mark may follow a concurrent run's: one that committed the
    table's first batch after this run read it empty, whose files the scheduled maintenance then removed, looks
    like a lake table gone with its history expired. A refusal stands only while main is still where this run
    read it; else the run plans again."""
    try:
        return first_batch_notices(context.store, context.config, batch.plan)
    except HistoryGapError:
        table = batch.table.lake_table
        if branch_head(context, table) != recorded.base_snapshot_id:
            raise TableMovedError(
                f"{context.location.dotted(table)}: main moved on since snapshot {recorded.base_snapshot_id}"
            ) from None
        raise


def plan_batch(
    context: ReplayContext, recorded: Recorded, trigger: DmsFile, landed: LandedFiles, started: float
) -> Batch:
    """The batch: what the listing holds up to ``trigger`` that the table's and its history's recorded states
    have not applied, each planned from its base snapshot."""
    config, table = context.config, context.config.table(trigger.table)
    main = plan_run(config, trigger, landed.listed, recorded.state, recorded.base_snapshot_id)
    history, history_plan = recorded.history, None
    if history is not None:
        history_plan = plan_run(config, trigger, landed.listed, history.state, history.base_snapshot_id)
    next_start = _common_start(config, table, [p.next_state for p in (main, history_plan) if p is not None])
    return Batch(
        trigger,
        landed,
        main,
        history_plan,
        recorded.state,
        next_start,
        started,
        recorded.fields,
        recorded.base_summary,
        history.base_summary if history is not None else {},
    )


def apply_batch(context: ReplayContext, batch: Batch, notices: Sequence[Notice] = ()) -> RunResult:
    """The batch's steps after its plan. LOAD files the table may take as they are (it has applied nothing but
    LOAD files) are appended, not merged; if they hold a key twice that commit is given up, and they are merged.
    The files' fields and the run's columns are found once, for both. ``notices``, and what the batch itself
    announces (schema changes, files lacking a column, repeated LOAD keys), go into its record."""
    log.info("%s: applying %d file(s) up to %s", batch.table.name, len(batch.files), batch.trigger.key)
    context = holding_small_files(context, batch.landed.objects, batch.files)
    layouts = file_layouts(context, batch.files, batch.table)
    schema = plan_schema(context.config, batch.table, layouts, list(batch.lake_fields))
    table = schema.table
    announced = [*notices, *schema.notices(table.lake_table)]
    if appendable_loads(batch):
        read = read_files(context, batch, table, layouts, append=True)
        appended = _steps(context, batch, read, announced)
        if appended is not None:
            return appended
        assert read.load is not None
        loads = read.load.files
        announced.append(
            Notice(
                "load-duplicate-keys",
                loads[0].key if len(loads) == 1 else context.config.table_prefix(batch.table),
                f"{len(loads)} LOAD file(s) hold a key more than once (a key that is not unique at the source, or "
                "overlapping parallel-load segments): each key's last row in DMS order was kept",
            )
        )
    merged = _steps(context, batch, read_files(context, batch, table, layouts, append=False), announced)
    assert merged is not None  # only the append's key check gives a commit up
    return merged


def _steps(context: ReplayContext, batch: Batch, read: BatchRead, notices: list[Notice]) -> RunResult | None:
    notices = [*notices, *quarantine_notices(read)]
    read = dataclasses.replace(read, notices=tuple(unique(notices)))
    reduced = reduce_changes(context, batch, read)
    evolve_schema(context, batch, read)
    history = write_history(context, batch, read)
    return commit_batch(context, batch, read, reduced, history)


def commit_batch(
    context: ReplayContext, batch: Batch, read: BatchRead, reduced: Reduced, history: HistoryWritten
) -> RunResult | None:
    """Commit the batch on the lake table, from its base snapshot: the LOAD files appended, then each key's last
    change merged, and the record of the run in the last snapshot; main moves only if every listed file is
    still as listed. None when the appended LOAD files hold a key twice (nothing committed)."""
    table, plan, notices = read.table, batch.plan, read.notices
    if not plan.pending:  # history was ahead: it alone had files to apply
        return RunResult(
            table.name,
            batch.trigger,
            history_files=history.files,
            listing_start=batch.next_listing_start,
            notices=list(notices),
        )
    rejects = write_quarantined(context, batch, read)
    load = read.load
    updates = [load.update()] if load is not None else []
    target = _row_delta(context, read, reduced, batch)
    if reduced.in_driver is not None and (target is None or not reduced.in_driver.fits(target)):
        # The MERGE, or a lake column typed otherwise than the run types it: Spark reads, casts and reduces.
        read = in_spark(context, read)
        reduced = reduce_changes(context, batch, read)
        target = _row_delta(context, read, reduced, batch)
    if reduced.last_changes is not None and target is None:
        updates += batch_updates(context, table, reduced.last_changes, batch.base_summary, reduced.keys)
    else:
        updates.append(Update("record"))

    def record() -> BatchRecord:
        counts = reduced.counts + load.counts if load is not None else reduced.counts
        keys = reduced.keys.count + (load.counts.rows if load is not None else 0)
        seconds = time.monotonic() - batch.started
        facts = freshness(plan, counts.rows, counts.newest_change, seconds, dt.datetime.now(dt.UTC))
        return BatchRecord(
            plan, counts, keys, facts, history.snapshot_id, tuple(notices), rejects.snapshot_id, rejects.divergence
        )

    # Spark read the files by name: main moves only if each is still as listed. The driver read each as listed.
    confirmed = [] if reduced.in_driver is not None else [lambda: confirm_listed(context, batch)]
    transaction = Transaction(table.lake_table, plan.base_snapshot_id, updates, record, requirements=confirmed)
    if target is not None:
        changes: BatchChanges | None = reduced.in_driver
        if changes is None:
            assert reduced.last_changes is not None
            changes = SparkChanges(table, reduced.last_changes, reduced.keys)
        committed: Committed[BatchRecord] | None = commit_changes(context, target, changes, transaction)
    else:
        committed = commit_transaction(context, transaction)
    if committed is None:
        return None
    return RunResult(
        table.name,
        batch.trigger,
        applied_files=[f.key for f in plan.pending],
        history_files=history.files,
        record=committed.record,
        snapshot_id=committed.snapshot_id,
        listing_start=batch.next_listing_start,
        notices=list(notices),
    )


def _row_delta(context: ReplayContext, read: BatchRead, reduced: Reduced, batch: Batch) -> RowDeltaTarget | None:
    """The lake table when the batch commits as a row delta (``row_delta``): a small batch of change files alone,
    into a table without history or rejects."""
    if not read.checked_in_reduce or read.load is not None or batch.history_plan is not None:
        return None
    if (reduced.last_changes is None and reduced.in_driver is None) or quarantines(read.table):
        return None
    return row_delta_target_of(context, read.table, reduced.keys)


def committed_with_retries(
    context: ReplayContext, table: TableSpec, attempt: Callable[[], Result]
) -> tuple[Result, int]:
    """The lake table (and its history) created if missing, then ``attempt`` (plan, read, commit) until its commit
    is not beaten by a concurrent one; returns its result and the attempts. The loser of a race plans again from
    the winner's snapshot. AWS refusing the job's role, or the table dropped meanwhile, fail as errors that say
    what to do."""
    config = context.config
    policy = RetryPolicy(attempts=config.lake.commit_retries + 1, first_delay=0.4, max_delay=5.0)

    def conflicts_typed() -> Result:
        with conflicts_raised():
            return attempt()

    seen = False  # whether the lake tables were found or made: only then can a failure mean one vanished
    try:
        ensure_table(context, table, config.lake)
        if table.history:
            ensure_history_table(context, table, config.lake)
        if quarantines(table):
            ensure_rejects_table(context, table, config.lake)
        seen = True
        for name in lake_tables(table):  # each was just asked whether it exists
            remove_dead_run_branches(context, name, config.runs.longest_run, as_kept=True)
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
        refusal = _refusal(context, table, error, seen)
        if refusal is None:
            raise
        raise refusal from None


def _unreadable_file(context: ReplayContext, batch: Batch, error: Exception) -> UnreadableFileError | None:
    found = unreadable(context, batch.files)
    if found is None:
        return None
    dms_file, what, failure = found
    log.info("%s: the read failed (%s): %s cannot be read", batch.table.name, type(error).__name__, dms_file.key)
    return UnreadableFileError(batch.table.name, dms_file.key, what, root_cause(failure)[:300])


def _refusal(
    context: ReplayContext, table: TableSpec, error: Py4JJavaError | PySparkException, seen: bool
) -> CdcLakeError | None:
    """What a run's failure means for its user: AWS refusing the job's role, the catalog refusing to make the lake
    table (its own error kept), or a table the run had seen gone; None when it is none of these."""
    denial = aws_denial(error)
    lake_table = context.location.dotted(table.lake_table)
    if denial is not None:
        resource = denial.resource or (lake_table if denial.action.startswith("glue:") else f"{lake_table}'s files")
        return AccessDeniedError(resource, denial.action)
    if not seen:
        return LakeTableCreateError(
            f"{lake_table}: the lake table could not be found or created: {root_cause(error)[:500]}. Nothing "
            f"was applied and no file was removed. Fix what the catalog names (the lake names, types or "
            f"partitioning of {table.name} in the configuration, or the catalog's settings), then trigger the run "
            "again"
        )
    try:
        gone = not table_exists(context, table)
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


def _recorded(context: ReplayContext, table: TableSpec) -> Recorded:
    main = _recorded_of(context, table.lake_table, own_commit=True)
    history = _recorded_of(context, history_name(table)) if table.history else None
    return dataclasses.replace(main, history=history)


def _recorded_of(context: ReplayContext, table_name: str, *, own_commit: bool = False) -> Recorded:
    # The state is read from the base's own lineage: if the table moves on, the commit will be refused. The
    # columns and the base's summary come from the same version of the metadata: one load of the table, none with
    # ``own_commit`` when this process's own row delta last wrote it (``iceberg_java.kept_commit``).
    dotted = context.location.dotted(table_name)
    metadata = Metadata(context.spark, dotted, own_commit=own_commit)
    record = record_in(metadata, dotted)
    while record.head is None:  # a new table gets an empty first snapshot; read again, another run may be ahead
        base_snapshot(context, table_name)
        metadata = Metadata(context.spark, dotted)
        record = record_in(metadata, dotted)
    fields = tuple(metadata.spark_fields())
    refused = metadata.properties().get(REFUSED)
    return Recorded(
        record.head,
        record.state,
        fields,
        metadata.summary(record.head),
        refused=json.loads(refused) if refused is not None else None,
    )


def _common_start(config: PipelineConfig, table: TableSpec, states: Sequence[ReplayState]) -> str | None:
    starts = [listing_start(config, table, state) for state in states]
    return None if None in starts else min(s for s in starts if s is not None)
