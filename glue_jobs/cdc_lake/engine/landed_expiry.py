"""The scheduled maintenance's removal of landed DMS files: those a table's record holds (and its history's, where it
keeps one) once they are ``rawRetentionDays`` old, by S3's DeleteObjects, a thousand a request.

It replaces a tag per applied file, which the raw bucket's lifecycle expired: that tag was a PUT a file, where this
is a listing a thousand kept files and a request a thousand removed, once a day. The record is the one the runs
trust for exactly-once, so nothing a table has not applied is removed: a table without a lake table or whose record
is lost keeps every file, a late CDC file (sorting before the newest applied, written after it) and a LOAD file
written again (a reload) are not applied, and the raw bucket's catch-all rule expires whatever is never applied.
Before removing, it writes what it removes into the table's mark (``core.expiry_marks``): a removal that fails
half-way leaves a mark that says more than was removed, which only makes a rebuilt table's check stricter.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from cdc_lake.core.config import TableSpec
from cdc_lake.core.dms_files import DmsFile, LandedFiles, list_landed
from cdc_lake.core.exceptions import RecordLostError
from cdc_lake.core.expiry_marks import ExpiryMark, read_mark, write_mark
from cdc_lake.core.plan import ReplayState, unapplied_files
from cdc_lake.core.storage import StoredObject
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.record import table_record
from cdc_lake.engine.tables import history_name, table_exists

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Expired:
    """One table's removal: the files removed, or why none could be."""

    table: str
    removed: int
    kept_because: str | None = None


def expire_landed(context: ReplayContext, days: int, tables: Sequence[TableSpec] | None = None) -> list[Expired]:
    """Remove, table by table, the landed files applied ``days`` ago or more. A table that fails is logged and
    skipped; the others are still done."""
    now = dt.datetime.now(dt.UTC)
    results = []
    for table in context.config.tables if tables is None else tables:
        try:
            results.append(expire_table(context, table, now - dt.timedelta(days=days)))
        except Exception as error:  # told, not raised: a file kept is only kept longer
            reason = f"{type(error).__name__}: {error}"[:300]
            log.error("%s: its applied landed files were not removed: %s", table.name, reason)
            results.append(Expired(table.name, 0, reason))
    return results


def expire_table(context: ReplayContext, table: TableSpec, landed_before: dt.datetime) -> Expired:
    """Remove the table's landed files that every one of its lake tables applied and that landed before
    ``landed_before``."""
    states = _states(context, table)
    if isinstance(states, str):
        log.info("%s: no landed file removed: %s", table.name, states)
        return Expired(table.name, 0, states)
    config = context.config
    landed = list_landed(context.store, config, table)
    applied = _applied(landed, states, context)
    due = [o for o in applied if o.last_modified is not None and o.last_modified < landed_before]
    mark = read_mark(context.store, config, table)
    # Written (again) once the table applied anything, even with nothing removed: a rebuilt lake table then knows
    # none was, and the bucket's catch-all rule never expires the mark.
    if not due and mark is None and all(s.applied_nothing for s in states):
        return Expired(table.name, 0)
    removed = ExpiryMark(0)
    if due:  # the newest in DMS order, as listed
        removed = ExpiryMark(len(due), due[-1].key, max(o.last_modified for o in due if o.last_modified is not None))
    write_mark(context.store, config, table, (mark or ExpiryMark(0)).adding(removed))
    if not due:
        return Expired(table.name, 0)
    context.store.delete_many([o.key for o in due])
    log.info(
        "%s: removed %d landed file(s) its record holds, landed before %s, the newest %s",
        table.name,
        len(due),
        landed_before.isoformat(),
        removed.newest_key,
    )
    return Expired(table.name, len(due))


def _states(context: ReplayContext, table: TableSpec) -> list[ReplayState] | str:
    """The recorded state of each lake table that applies the table's files, or why there is none to trust."""
    names = [table.lake_table, *([history_name(table)] if table.history else [])]
    states = []
    for name in names:
        if not table_exists(context, name):
            return f"the lake table {name} does not exist"
        try:
            states.append(table_record(context, name).state)
        except RecordLostError as error:
            return f"the record of {name} cannot be read ({str(error)[:200]})"
    return states


def _applied(landed: LandedFiles, states: Sequence[ReplayState], context: ReplayContext) -> list[StoredObject]:
    """The landed files every state holds: never a late CDC file, nor a LOAD file written after the newest one
    applied (a reload the table has not taken)."""
    config = context.config
    held = set(landed.objects)
    for state in states:
        held -= {o.key for o in unapplied_files(config, landed, state)}
        held -= {f.key for f in landed.files if f.is_full_load and not _load_applied(landed, f, state)}
    return [landed.objects[f.key] for f in landed.files if f.key in held]


def _load_applied(landed: LandedFiles, dms_file: DmsFile, state: ReplayState) -> bool:
    written = landed.objects[dms_file.key].last_modified
    if state.load_written is None or written is None:
        return False
    return written <= dt.datetime.fromisoformat(state.load_written)
