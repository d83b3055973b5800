"""Operating a replicated table: its change log, rollback to a change, and re-applying what came after.

A change is a snapshot of the table's current lineage; replay commits carry the DMS files they applied,
so rolling the table back to a change also rolls back its record of applied files, and the next trigger
(or ``reapply``) applies the later files again, in order.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from cdc_lake.core.config import TableSpec
from cdc_lake.core.dms_files import list_landed
from cdc_lake.core.exceptions import CdcLakeError
from cdc_lake.core.notices import Notice, notices_from_json
from cdc_lake.core.sql import quote, sql_string
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.record import (
    APPLIED,
    CHANGES,
    DIVERGED,
    FRESHNESS,
    HISTORY_SNAPSHOT,
    NOTICES,
    REJECTS_REPLAYED,
    RELOAD,
    STATE,
    TRIGGER,
    keep_record,
    snapshot_summaries,
)
from cdc_lake.engine.rejects import reopen_rejects
from cdc_lake.engine.replay import RunResult, replay
from cdc_lake.engine.tables import Lake, history_name, quarantines, table_exists

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Change:
    """One snapshot of a table's current lineage."""

    snapshot_id: int
    made_current_at: Any
    operation: str
    kind: str  # "replay", "reload", "rejects" (a replay or accept of quarantined rows), "maintenance" or "created"
    files: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    trigger: str | None = None
    history_snapshot: int | None = None
    freshness: dict[str, Any] = field(default_factory=dict)  # record.freshness of a replay commit
    notices: list[Notice] = field(default_factory=list)  # what the commit announced (core.notices)
    diverged: dict[str, Any] | None = None  # the outstanding quarantined rows after the commit (engine.rejects)
    rejects_replayed: dict[str, Any] | None = None  # what a rejects replay or accept applied and dropped


def list_changes(lake: Lake, table: TableSpec) -> list[Change]:
    """The table's changes, oldest first (empty if the table does not exist yet)."""
    if not table_exists(lake, table):
        return []
    changes = []
    for snapshot in snapshot_summaries(lake, table):
        summary = snapshot["summary"] or {}
        if RELOAD in summary:
            kind = "reload"
        elif REJECTS_REPLAYED in summary:
            kind = "rejects"
        elif STATE in summary:
            kind = "replay"
        elif snapshot["operation"] == "append" and summary.get("added-data-files", "0") == "0":
            kind = "created"
        else:
            kind = "maintenance"
        files = [f["key"] for f in json.loads(summary[APPLIED])] if APPLIED in summary else []
        history = summary.get(HISTORY_SNAPSHOT)
        changes.append(
            Change(
                snapshot_id=int(snapshot["snapshot_id"]),
                made_current_at=snapshot["made_current_at"],
                operation=snapshot["operation"],
                kind=kind,
                files=files,
                counts=json.loads(summary[CHANGES]) if CHANGES in summary else {},
                trigger=summary.get(TRIGGER),
                history_snapshot=int(history) if history else None,
                freshness=json.loads(summary[FRESHNESS]) if FRESHNESS in summary else {},
                notices=notices_from_json(summary[NOTICES]) if NOTICES in summary else [],
                diverged=json.loads(summary[DIVERGED]) if DIVERGED in summary else None,
                rejects_replayed=json.loads(summary[REJECTS_REPLAYED]) if REJECTS_REPLAYED in summary else None,
            )
        )
    return changes


@dataclass(frozen=True)
class Rollback:
    table: str
    snapshot_id: int
    history_snapshot_id: int | None
    files_to_reapply: int


def rollback(lake: Lake, table: TableSpec, to_snapshot: int) -> Rollback:
    """Return the table (and its history) to change ``to_snapshot`` with Iceberg's snapshot procedures; quarantined
    rows that an undone rejects replay or reload resolved are outstanding again."""
    changes = list_changes(lake, table)
    position = next((i for i, c in enumerate(changes) if c.snapshot_id == to_snapshot), None)
    if position is None:
        raise CdcLakeError(
            f"{table.name}: {to_snapshot} is not a change of the table's current lineage; "
            "see `cdc-lake changes` for the ones you can roll back to"
        )
    undone = sum(len(c.files) for c in changes[position + 1 :])
    history_target = None
    if table.history and table_exists(lake, history_name(table)):
        # The history commit of the same run; before any replay, history's own first (empty) snapshot.
        recorded = [c.history_snapshot for c in changes[: position + 1] if c.history_snapshot is not None]
        history_target = recorded[-1] if recorded else _first_snapshot(lake, history_name(table))
        _set_current(lake, history_name(table), history_target)
    _set_current(lake, table.lake_table, to_snapshot)
    resolving = [c.made_current_at for c in changes[position + 1 :] if c.kind in {"rejects", "reload"}]
    if quarantines(table) and resolving:
        reopen_rejects(lake, table, min(resolving))
    log.info("%s: rolled back to %s; %d applied file(s) will be applied again", table.name, to_snapshot, undone)
    return Rollback(table.name, to_snapshot, history_target, undone)


def reapply(context: ReplayContext, table: TableSpec) -> RunResult | None:
    """Apply every landed file of the table not yet applied (after a rollback, or lost events)."""
    landed = list_landed(context.store, context.config, table)
    if landed.newest is None:
        return None
    return replay(context, landed.newest, landed)


def _set_current(lake: Lake, table_name: str, snapshot_id: int) -> None:
    target = sql_string(f"{lake.location.database}.{table_name}")
    procedure = f"{quote(lake.location.catalog)}.system.set_current_snapshot"
    lake.spark.sql(f"CALL {procedure}(table => {target}, snapshot_id => {int(snapshot_id)})").collect()
    keep_record(lake, table_name)  # the table property must not describe the undone commits


def _first_snapshot(lake: Lake, table_name: str) -> int:
    lineage = snapshot_summaries(lake, table_name)
    if not lineage:
        raise CdcLakeError(f"{lake.location.dotted(table_name)} has no snapshot to roll back to")
    return int(lineage[0]["snapshot_id"])
