"""A planned batch's steps before its commit, each a function from a typed input to a typed output: read the
files (``BatchRead``: LOAD files to append, change rows checked or quarantined), reduce the change rows to each
key's last change (``Reduced``), evolve the lake table's schema, write the history table's versions
(``HistoryWritten``) and the rejects table's rows (``RejectsWritten``); and the check, before a commit, that every
listed file is still as listed. ``replay`` runs them and commits.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_lake.core.config import TableSpec
from cdc_lake.core.dms_files import DmsFile
from cdc_lake.core.exceptions import DmsInputError, LandedFileChangedError
from cdc_lake.core.notices import Notice
from cdc_lake.core.shapes import FILE, FileLayout
from cdc_lake.core.storage import changed_since_listed
from cdc_lake.engine.changes import (
    TOTALS,
    ChangeCounts,
    count_changes,
    describe_problems,
    last_change_per_key,
    last_change_per_key_in_one_task,
    split_key_updates,
)
from cdc_lake.engine.commit import ChangedKeys, changed_keys, ranged_keys, rewritten_whole
from cdc_lake.engine.context import Batch, ReplayContext
from cdc_lake.engine.driver_batch import DriverChanges, driver_changes
from cdc_lake.engine.history import commit_history
from cdc_lake.engine.load_append import LoadAppend
from cdc_lake.engine.reader import read_changes
from cdc_lake.engine.rejects import REJECTED, Quarantined, divergence, outstanding, quarantine, write_rejects
from cdc_lake.engine.schema import align_lake_table
from cdc_lake.engine.spark_types import local_relation
from cdc_lake.engine.tables import history_name, quarantines, rejects_name

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchRead:
    """The batch's files read: the run's columns (``table``, the schema evolved as the files ask), the LOAD files
    appended as they are (``load``), and the change rows of the others (``merged``), checked, in DMS order."""

    table: TableSpec
    load: LoadAppend | None
    merged: list[DmsFile]
    changes: DataFrame | None
    notices: tuple[Notice, ...] = ()  # what the batch announces (core.notices), recorded by its commit
    quarantined: Quarantined | None = None  # with on_bad_rows: quarantine, the rows kept out (``rejects``)
    # A small batch's rows are checked by ``reduce_changes``, in the same pass as its counts and reduction: a bad
    # row refuses the batch there, named by reading the files again (``layouts``).
    checked_in_reduce: bool = False
    layouts: Mapping[str, FileLayout] = field(default_factory=dict)
    # A small batch of small CSV change files, read, checked and reduced in the driver (``driver_batch``): no
    # ``changes`` then, until ``in_spark`` reads them.
    in_driver: DriverChanges | None = None


@dataclass(frozen=True)
class Reduced:
    """The lake table's part of the merged change rows: their counts, and each changed key's last change."""

    counts: ChangeCounts = field(default_factory=lambda: ChangeCounts(0, 0, 0))
    last_changes: DataFrame | None = None
    keys: ChangedKeys = field(default_factory=lambda: ChangedKeys(0, {}))
    in_driver: DriverChanges | None = None  # the same, reduced in the driver: ``last_changes`` is None


@dataclass(frozen=True)
class RejectsWritten:
    """The rejects table's snapshot after the batch (None: not written) and the table's divergence after it."""

    snapshot_id: int | None = None
    divergence: Mapping[str, object] | None = None


@dataclass(frozen=True)
class HistoryWritten:
    """The history table's snapshot after the batch (None: no history written) and the files it applied."""

    snapshot_id: int | None = None
    files: list[str] = field(default_factory=list)


def read_files(
    context: ReplayContext, batch: Batch, table: TableSpec, layouts: Mapping[str, FileLayout], *, append: bool
) -> BatchRead:
    """Read the batch's files (their ``layouts``, with the run's columns in ``table``): with ``append``, the LOAD
    files it starts with (``appendable_loads``), to append as they are; the others' checked change rows."""
    load = LoadAppend(context, batch, table, layouts) if append else None
    merged = batch.files[len(load.files) if load is not None else 0 :]
    if not merged:
        return BatchRead(table, load, merged, None)
    if quarantines(table):
        quarantined = _quarantined_changes(context, batch, table, merged, layouts)
        changes = split_key_updates(quarantined.good, table, context.config.dms)
        return BatchRead(table, load, merged, changes, quarantined=quarantined)
    if _small(context, batch, merged):
        in_driver = None
        if _may_be_row_delta(context, batch, table, load):
            in_driver = driver_changes(context, batch.landed.objects, merged, table, layouts)
        small = BatchRead(table, load, merged, None, checked_in_reduce=True, layouts=layouts, in_driver=in_driver)
        return small if in_driver is not None else in_spark(context, small)
    return BatchRead(table, load, merged, _checked_changes(context, table, merged, layouts))


# A task keeps each file it read open until it ends (Spark closes a file's stream at task completion): one task
# reading a catch-up of 100,000 one-row files ran out of a 4 GB heap. Beyond this many, the batch is read in parallel.
SMALL_BATCH_FILES = 1000


def _may_be_row_delta(context: ReplayContext, batch: Batch, table: TableSpec, load: LoadAppend | None) -> bool:
    """Whether the batch may commit as a row delta (``replay._row_delta``): only its changes reduced in the driver
    can; a MERGE reads them with Spark."""
    config = context.config
    row_delta = config.lake.row_delta_keys > 0 and config.write_mode(table) != "copy-on-write"
    return row_delta and load is None and batch.history_plan is None


def in_spark(context: ReplayContext, read: BatchRead) -> BatchRead:
    """A small batch's change rows read by Spark, to be checked and reduced in one task (``reduce_changes``)."""
    changes = read_changes(context, read.merged, read.table, read.layouts)
    changes = split_key_updates(changes, read.table, context.config.dms)
    return dataclasses.replace(read, changes=changes, in_driver=None)


def _small(context: ReplayContext, batch: Batch, merged: list[DmsFile]) -> bool:
    """Whether the batch's change rows are reduced in one task (``lake.small_batch_mb``). History, when kept, must
    have the same files pending (it is behind only after a run stopped between its commits): the pass then checks
    every row history reads too, before history is written."""
    size = sum(batch.landed.objects[f.key].size for f in merged)
    in_step = batch.history_plan is None or batch.history_plan.pending == batch.plan.pending
    small = size <= context.config.lake.small_batch_mb * 1024 * 1024 and len(merged) <= SMALL_BATCH_FILES
    return in_step and small


def reduce_changes(context: ReplayContext, batch: Batch, read: BatchRead) -> Reduced:
    """The lake table's merged change rows reduced to each key's last change in DMS order (materialized: the
    MERGE then gets a deterministic source), with their counts and the changed keys' range."""
    if read.in_driver is not None:
        in_driver = read.in_driver
        log.info("%s: %d key(s) reduced in the driver", read.table.name, in_driver.changed.count)
        return Reduced(in_driver.counts, None, in_driver.changed, in_driver)
    if read.changes is None or not batch.plan.pending:
        return Reduced()
    use_sequence = context.config.dms.change_sequence_column is not None
    if read.checked_in_reduce:
        return _reduced_in_one_task(context, batch, read, use_sequence)
    merged = set(read.merged)  # a catch-up's 100,000 files: not a list searched once for each of them
    changes = _only(read.changes, [f for f in batch.plan.pending if f in merged], read.merged)
    last_changes = last_change_per_key(changes, read.table, use_sequence).localCheckpoint(eager=True)
    keys = changed_keys(last_changes, read.table)
    log.info("%s: merging %d key(s) into %s", read.table.name, keys.count, read.table.lake_table)
    return Reduced(count_changes(changes), last_changes, keys)


def _reduced_in_one_task(context: ReplayContext, batch: Batch, read: BatchRead, use_sequence: bool) -> Reduced:
    """``reduce_changes`` of a small batch: its rows read, checked, counted and reduced in one job, the changed keys'
    last changes kept on the driver (``local_relation``) as the MERGE's source. A bad row refuses the batch, named
    by the checked read."""
    assert read.changes is not None
    table, ranged = read.table, ranged_keys(read.table)
    reduced = local_relation(last_change_per_key_in_one_task(read.changes, table, use_sequence, ranged))
    last_changes = reduced.drop(TOTALS)
    first = reduced.limit(1).collect()  # a local relation's: no job
    if not first:
        return Reduced(last_changes=last_changes)
    totals = first[0][TOTALS]
    if totals["bad"]:
        checked = _checked_changes(context, table, read.merged, read.layouts)  # raises, naming the bad rows
        return reduce_changes(context, batch, dataclasses.replace(read, changes=checked, checked_in_reduce=False))
    bounds = {key: (totals[f"lo{i}"], totals[f"hi{i}"]) for i, key in enumerate(ranged)}
    keys = ChangedKeys(totals["keys"], bounds, totals["upserts"])
    log.info("%s: merging %d key(s) into %s", table.name, keys.count, table.lake_table)
    return Reduced(ChangeCounts(totals["I"], totals["U"], totals["D"], totals["newest"]), last_changes, keys)


def evolve_schema(context: ReplayContext, batch: Batch, read: BatchRead) -> list[str]:
    """Alter the lake table, and the history table it writes, to hold the run's columns; returns what changed.
    Only a batch that will be applied alters the lake; the ALTERs are metadata commits of their own."""
    columns = read.table.columns
    changed = align_lake_table(context, read.table.lake_table, columns, batch.lake_fields)
    if batch.history_plan is not None and read.changes is not None:
        changed += align_lake_table(context, history_name(read.table), columns)
    return changed


def write_history(context: ReplayContext, batch: Batch, read: BatchRead) -> HistoryWritten:
    """Commit the versions the history table has not applied yet; the history commit comes first, so a run
    stopped between the two commits leaves history ahead, never behind."""
    history_plan = batch.history_plan
    if history_plan is None or read.changes is None:
        return HistoryWritten()
    if not history_plan.pending:
        return HistoryWritten(history_plan.base_snapshot_id)
    confirm_listed(context, batch)  # every file is read: what history records as applied is what was read
    changes = _only(read.changes, history_plan.pending, read.merged)
    snapshot_id = commit_history(
        context, history_plan, read.table, changes, whole=rewritten_whole(batch.history_summary)
    )
    return HistoryWritten(snapshot_id, [f.key for f in history_plan.pending])


def write_quarantined(context: ReplayContext, batch: Batch, read: BatchRead) -> RejectsWritten:
    """Commit the batch's quarantined rows to the rejects table, before the table's own commit (``rejects``); the
    table's commit then marks it diverged while any rows of its applied files are outstanding."""
    if not quarantines(read.table) or read.quarantined is None:
        return RejectsWritten()
    table, name = read.table, rejects_name(read.table)
    rows = read.quarantined.rejects
    pending = batch.plan.pending
    stale = context.spark.table(context.location.named(name)).where(
        F.col("resolution").isNull() & F.col("file").isin([f.key for f in pending])
    )
    if rows is None and not stale.limit(1).count():
        return RejectsWritten(divergence=divergence(read.quarantined.frozen, table))  # nothing changed in them
    snapshot = write_rejects(context, table, rows, pending)
    after = outstanding(context, table, batch.plan.next_state)
    return RejectsWritten(snapshot, divergence(after, table))


def _checked_changes(
    context: ReplayContext, table: TableSpec, files: list[DmsFile], layouts: Mapping[str, FileLayout]
) -> DataFrame:
    """The files' change rows in DMS order, refused with every bad row named; key updates split in two."""
    # Materialized once: row positions are then fixed, and MERGE gets a deterministic source.
    read = read_changes(context, files, table, layouts).localCheckpoint(eager=True)
    problems, total = describe_problems(read)
    if problems:
        raise DmsInputError(table.name, problems, total)
    log.info("%s: read and checked %d file(s)", table.name, len(files))
    return split_key_updates(read, table, context.config.dms)


def _quarantined_changes(
    context: ReplayContext, batch: Batch, table: TableSpec, files: list[DmsFile], layouts: Mapping[str, FileLayout]
) -> Quarantined:
    """``_checked_changes`` for a table that quarantines: bad rows, and later changes of their keys or of keys
    already frozen, kept out; bad rows that cannot be held still refuse the batch."""
    read = read_changes(context, files, table, layouts).localCheckpoint(eager=True)
    frozen = outstanding(context, table, batch.state)
    quarantined = quarantine(context.config, table, read, frozen)
    log.info(
        "%s: read and checked %d file(s); %d row(s) quarantined, %d held behind them",
        table.name,
        len(files),
        quarantined.rejected,
        quarantined.held,
    )
    return quarantined


def quarantine_notices(read: BatchRead) -> list[Notice]:
    quarantined = read.quarantined
    if quarantined is None or quarantined.rejects is None:
        return []
    table, name = read.table, rejects_name(read.table)
    first = quarantined.rejects.where(F.col("status") == REJECTED).orderBy("file", "row").limit(3).collect()
    places = "; ".join(f"{r['file']}: row {r['row']}, column {r['column']}: {r['reason']}" for r in first)
    more = f" (first: {places})" if places else ""
    return [
        Notice(
            "rows-quarantined",
            name,
            f"{quarantined.rejected} bad row(s) quarantined and {quarantined.held} later change(s) of their keys held"
            f"{more}; those keys stay at their state before them. Fix the rows (or the configuration) and run "
            f"`cdc-lake rejects replay -t {table.name}`, or drop the bad rows with `cdc-lake rejects accept -t "
            f"{table.name}` (docs/bad-input.md#quarantine)",
        )
    ]


def _only(changes: DataFrame, chosen: list[DmsFile], read: list[DmsFile]) -> DataFrame:
    if len(chosen) == len(read):
        return changes
    return changes.filter(F.col(FILE).isin([f.key for f in chosen]))


def confirm_listed(context: ReplayContext, batch: Batch) -> None:
    changed = changed_file(context, batch)
    if changed is not None:
        raise changed


def changed_file(context: ReplayContext, batch: Batch) -> LandedFileChangedError | None:
    """The refusal of the batch when a file it reads is gone or changed since the run listed it: what was read
    may not be what the commit records as applied (key, ETag, size)."""
    listed = [batch.landed.objects[f.key] for f in batch.files]
    prefix = context.config.table_prefix(batch.table)
    for item, now in changed_since_listed(context.store, prefix, listed):
        current = None if now is None else (now.etag, now.size)
        return LandedFileChangedError(batch.table.name, item.key, (item.etag, item.size), current)
    return None
