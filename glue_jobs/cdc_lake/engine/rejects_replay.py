"""``cdc-lake rejects``: list a quarantining table's outstanding rejects, replay them, or accept their loss.

A replay parses each outstanding row's ``fields`` again with the table's current configuration (so a fixed type
or a row fixed in the rejects table with SQL both count), and applies them, with the rows held behind them, in
DMS order: each frozen key then takes its last change, as if no row had been bad. Any row still bad refuses the
replay, named by file, row and column. ``accept`` drops the bad rows and applies the held ones.

The table's commit comes first (from the snapshot the rows were read against, like any run), then the rows are
marked resolved: a replay stopped between the two leaves them outstanding, and the next replay applies the same
last change of each key again, which changes nothing.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_lake.core.config import TableSpec
from cdc_lake.core.dms_files import parse_key
from cdc_lake.core.exceptions import CdcLakeError, DmsInputError
from cdc_lake.core.shapes import CHANGE_SEQ, DMS_TS, FILE, FILE_SEQ, OP, RAW, ROW
from cdc_lake.engine.changes import describe_problems, last_change_per_key, split_key_updates
from cdc_lake.engine.commit import (
    Properties,
    Transaction,
    Update,
    batch_updates,
    changed_keys,
    commit_transaction,
    summary_of,
)
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.reader import AsRead, raw_fields, typed_changes
from cdc_lake.engine.record import REJECTS_REPLAYED, recorded_state
from cdc_lake.engine.rejects import HELD, REJECTED, outstanding, resolve_rejects
from cdc_lake.engine.replay import committed_with_retries
from cdc_lake.engine.tables import quarantines, rejects_name

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RejectsReplayed:
    """What a replay (or an accept) did: rows applied, bad rows dropped, and the snapshot it made (None: none)."""

    table: str
    applied: int = 0
    dropped: int = 0
    keys: int = 0
    snapshot_id: int | None = None


def outstanding_rejects(context: ReplayContext, table: TableSpec) -> DataFrame | None:
    """The table's outstanding rejects rows (those of files the table has applied), in DMS order."""
    _quarantining(table)
    _, state = recorded_state(context, table.lake_table)
    rows = outstanding(context, table, state)
    return None if rows is None else rows.orderBy("file", "row")


def replay_rejects(context: ReplayContext, table: TableSpec, *, accept: bool = False) -> RejectsReplayed:
    """Apply the table's outstanding rejects in DMS order (with ``accept``, the held ones only) and mark them
    resolved."""
    _quarantining(table)

    def attempt() -> tuple[RejectsReplayed, DataFrame | None]:
        return _replay(context, table, accept)

    (result, rows), _ = committed_with_retries(context, table, attempt)
    if rows is not None:
        resolve_rejects(context, table, rows, ("accepted" if accept else "replayed", "replayed"))
    return result


def _quarantining(table: TableSpec) -> None:
    if not quarantines(table):
        raise CdcLakeError(f"{table.name} does not quarantine bad rows (on_bad_rows: refuse): it has no rejects")


def _replay(context: ReplayContext, table: TableSpec, accept: bool) -> tuple[RejectsReplayed, DataFrame | None]:
    base, state = recorded_state(context, table.lake_table)
    rows = outstanding(context, table, state)
    if rows is None or base is None:
        return RejectsReplayed(table.name), None
    rows = rows.localCheckpoint(eager=True)
    dropped = rows.where(F.col("status") == REJECTED).count() if accept else 0
    kept = rows.where(F.col("status") == HELD) if accept else rows
    applied = kept.count()
    updates, key_count = [Update("record")], 0  # all dropped: the commit only clears the mark
    if applied:
        last = _last_changes(context, table, kept)
        keys = changed_keys(last, table)
        updates, key_count = batch_updates(context, table, last, summary_of(context, table, base), keys), keys.count
    summary = {"applied": applied, "dropped": dropped, "keys": key_count, "accepted": accept}
    # No DIVERGED mark: nothing this replay read stays outstanding; rows held meanwhile mark their own commit.
    properties = {REJECTS_REPLAYED: json.dumps(summary, separators=(",", ":"))}
    transaction = Transaction(table.lake_table, base, updates, lambda: Properties(properties))
    committed = commit_transaction(context, transaction)
    assert committed is not None  # a merge has no check that could give the commit up
    log.info("%s: replayed %d quarantined row(s) over %d key(s); dropped %d", table.name, applied, key_count, dropped)
    return RejectsReplayed(table.name, applied, dropped, key_count, committed.snapshot_id), rows


def _last_changes(context: ReplayContext, table: TableSpec, rows: DataFrame) -> DataFrame:
    """Each key's last change among ``rows``, parsed again; refused, naming them, if any is still bad."""
    dms = context.config.dms
    changes = _parsed(context, table, rows)
    problems, total = describe_problems(changes, numbered=True)
    if problems:
        raise DmsInputError(table.name, [f"{p} [{rejects_name(table)}]" for p in problems], total)
    changes = split_key_updates(changes, table, dms)
    return last_change_per_key(changes, table, dms.change_sequence_column is not None).localCheckpoint(eager=True)


def _parsed(context: ReplayContext, table: TableSpec, rows: DataFrame) -> DataFrame:
    """The rows' fields typed and checked by the table's configuration now, each at its place in DMS order."""
    config = context.config
    files = sorted(
        (parse_key(r["file"], config) for r in rows.select("file").distinct().collect()), key=lambda f: f.order_key
    )
    sequence = {f.key: index for index, f in enumerate(files)}
    parts = []
    for full_load in (True, False):
        keys = [f.key for f in files if f.is_full_load == full_load]
        if not keys:
            continue
        absent = [(role, F.lit(None).cast("string")) for role in (OP, CHANGE_SEQ, DMS_TS)]
        kept = [(role, F.col("fields")[name]) for role, name in raw_fields(table, config.dms)]
        fields = rows.where(F.col("file").isin(keys)).select(
            *[value.alias(role) for role, value in dict([*absent, *kept]).items()],
            F.col("row").alias(ROW),
            F.struct(F.col("file").alias("file_name")).alias("_metadata"),
        )
        parts.append(typed_changes(fields, table, config.dms, full_load, AsRead([])))
    frame = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    order = F.create_map(*[p for key, index in sequence.items() for p in (F.lit(key), F.lit(index))])
    file_key = F.col("_metadata.file_name")
    return frame.drop(RAW).withColumn(FILE_SEQ, order[file_key]).withColumn(FILE, file_key)
