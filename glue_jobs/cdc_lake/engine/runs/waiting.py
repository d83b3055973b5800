"""How long landed files wait unapplied (``Waiting``): told by a run at its end from its own listings
(``still_waiting``), and by maintenance and status from a listing of each table (``waiting_in``); the metrics put
it, and the stack alarms on it."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cdc_lake.core.config import TableSpec
from cdc_lake.core.dms_files import list_landed
from cdc_lake.core.exceptions import CdcLakeError, RecordLostError
from cdc_lake.core.plan import ReplayState, applied, listing_start, plan_run
from cdc_lake.core.storage import StoredObject
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.record import table_record
from cdc_lake.engine.replay import RunResult
from cdc_lake.engine.runs.listings import ListingLog, RecordedListings
from cdc_lake.engine.tables import table_exists

log = logging.getLogger(__name__)


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
