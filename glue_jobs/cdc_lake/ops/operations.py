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
from cdc_lake.core.exceptions import CdcLakeError, RollbackRefusedError
from cdc_lake.core.notices import Notice, notices_from_json
from cdc_lake.core.plan import ReplayState, missing_to_reapply
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.iceberg_java import Metadata, move_main
from cdc_lake.engine.record import (
    CHANGES,
    DIVERGED,
    FRESHNESS,
    HISTORY_SNAPSHOT,
    NOTICES,
    REJECTS_REPLAYED,
    RELOAD,
    STATE,
    TRIGGER,
    TableRecord,
    applied_files,
    record_in,
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
    files: list[str] = field(
        default_factory=list
    )  # the files it applied; of a batch over APPLIED_NAMED, the first and last
    file_count: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    trigger: str | None = None
    history_snapshot: int | None = None
    freshness: dict[str, Any] = field(default_factory=dict)  # record.freshness of a replay commit
    notices: list[Notice] = field(default_factory=list)  # what the commit announced (core.notices)
    diverged: dict[str, Any] | None = None  # the outstanding quarantined rows after the commit (engine.rejects)
    rejects_replayed: dict[str, Any] | None = None  # what a rejects replay or accept applied and dropped
    state: ReplayState | None = None  # the replay state its commit recorded (None: it recorded none)


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
        applied = applied_files(summary)
        history = summary.get(HISTORY_SNAPSHOT)
        changes.append(
            Change(
                snapshot_id=int(snapshot["snapshot_id"]),
                made_current_at=snapshot["made_current_at"],
                operation=snapshot["operation"],
                kind=kind,
                files=list(applied.keys),
                file_count=applied.count,
                counts=json.loads(summary[CHANGES]) if CHANGES in summary else {},
                trigger=summary.get(TRIGGER),
                history_snapshot=int(history) if history else None,
                freshness=json.loads(summary[FRESHNESS]) if FRESHNESS in summary else {},
                notices=notices_from_json(summary[NOTICES]) if NOTICES in summary else [],
                diverged=json.loads(summary[DIVERGED]) if DIVERGED in summary else None,
                rejects_replayed=json.loads(summary[REJECTS_REPLAYED]) if REJECTS_REPLAYED in summary else None,
                state=ReplayState.from_json(summary[STATE], int(snapshot["snapshot_id"])) if STATE in summary else None,
            )
        )
    return changes


@dataclass(frozen=True)
class Rollback:
    table: str
    snapshot_id: int
    history_snapshot_id: int | None
    files_to_reapply: int


def rollback(context: ReplayContext, table: TableSpec, to_snapshot: int) -> Rollback:
    """Return the table (and its history) to change ``to_snapshot``; quarantined rows that an undone rejects replay
    or reload resolved are outstanding again. Refused before anything moves when the landing no longer holds every
    file the rollback undoes (the re-apply would skip them). Each table moves with its record in one commit."""
    changes = list_changes(context, table)
    position = next((i for i, c in enumerate(changes) if c.snapshot_id == to_snapshot), None)
    if position is None:
        raise CdcLakeError(
            f"{table.name}: {to_snapshot} is not a change of the table's current lineage; "
            "see `cdc-lake changes` for the ones you can roll back to"
        )
    move = _Move.of(context, table.lake_table, to_snapshot)
    _refuse_unreplayable(context, table, changes[position:], move.target.state, move.head.state)
    undone = sum(c.file_count for c in changes[position + 1 :])
    history_target = None
    if table.history and table_exists(context, history_name(table)):
        # The history commit of the same run; before any replay, history's own first (empty) snapshot.
        recorded = [c.history_snapshot for c in changes[: position + 1] if c.history_snapshot is not None]
        history_target = recorded[-1] if recorded else _first_snapshot(context, history_name(table))
        # History first: a stop before main moves leaves history behind, and the next run applies it again.
        _Move.of(context, history_name(table), history_target).commit(context)
    move.commit(context)
    resolving = [c.made_current_at for c in changes[position + 1 :] if c.kind in {"rejects", "reload"}]
    if quarantines(table) and resolving:
        reopen_rejects(context, table, min(resolving))
    log.info("%s: rolled back to %s; %d applied file(s) will be applied again", table.name, to_snapshot, undone)
    return Rollback(table.name, to_snapshot, history_target, undone)


def _refuse_unreplayable(
    context: ReplayContext,
    table: TableSpec,
    changes: list[Change],
    target: ReplayState,
    head: ReplayState,
) -> None:
    """Refuse the rollback to ``changes[0]`` when the landing lacks files it undoes, naming the oldest of the later
    ``changes`` it can still reach."""
    landed = list_landed(context.store, context.config, table)
    missing = missing_to_reapply(context.config, landed, target, head)
    if missing is None:
        return
    reachable = None
    for change in changes[1:]:
        if change.state is not None and missing_to_reapply(context.config, landed, change.state, head) is None:
            reachable = change.snapshot_id
            break
    instead = (
        f"Roll back to change {reachable} or later (the oldest the landing still covers), or rebuild"
        if reachable is not None
        else "Rebuild"
    )
    raise RollbackRefusedError(
        f"{table.name}: rolling back to change {changes[0].snapshot_id} would undo files the landing no "
        f"longer holds: {missing} applied since are gone (expired by the raw bucket's lifecycle after "
        "rawRetentionDays, or removed), so the re-apply could not restore their changes. Nothing was moved. "
        f"{instead} the table from its LOAD files with `cdc-lake reload -t {table.name}` (docs/deploy.md#reload)"
    )


def reapply(context: ReplayContext, table: TableSpec) -> RunResult | None:
    """Apply every landed file of the table not yet applied (after a rollback, or lost events)."""
    landed = list_landed(context.store, context.config, table)
    if landed.newest is None:
        return None
    return replay(context, landed.newest, landed)


@dataclass(frozen=True)
class _Move:
    """A lake table's main set back to ``target.head``: its record there and at main's head, read together."""

    dotted: str
    head: TableRecord
    target: TableRecord

    @classmethod
    def of(cls, context: ReplayContext, table_name: str, snapshot_id: int) -> _Move:
        dotted = context.location.dotted(table_name)
        metadata = Metadata(context.spark, dotted)
        return cls(dotted, record_in(metadata, dotted), record_in(metadata, dotted, at=snapshot_id))

    def commit(self, context: ReplayContext) -> None:
        """Main and the record it holds there, in one commit, from the head read (else TableMovedError)."""
        if self.head.head != self.target.head:
            move_main(context.spark, self.dotted, self.head.head or 0, self.target.head or 0, self.target.properties)


def _first_snapshot(lake: Lake, table_name: str) -> int:
    lineage = snapshot_summaries(lake, table_name)
    if not lineage:
        raise CdcLakeError(f"{lake.location.dotted(table_name)} has no snapshot to roll back to")
    return int(lineage[0]["snapshot_id"])
