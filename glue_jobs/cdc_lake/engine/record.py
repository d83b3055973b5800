"""The applied-files record: which DMS files a table holds, kept in its snapshots' summaries.

Each commit records the files it applied (``cdc-lake.*`` properties) in the very snapshot that holds
their changes, so the record and the data can never disagree, and rolling the table back rolls the
record back with it.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

from cdc_lake.core.config import TableSpec
from cdc_lake.core.notices import Notice, notices_json
from cdc_lake.core.plan import ReplayState, RunPlan
from cdc_lake.engine.changes import ChangeCounts
from cdc_lake.engine.iceberg_java import branch_lineage
from cdc_lake.engine.tables import LakeLocation

STATE = "cdc-lake.state"
APPLIED = "cdc-lake.applied-files"
CHANGES = "cdc-lake.changes"
TRIGGER = "cdc-lake.trigger"
RUN_ID = "cdc-lake.run-id"
HISTORY_SNAPSHOT = "cdc-lake.history-snapshot"
# A reload commit: its boundary and what it left out (``reload.reload_table``).
RELOAD = "cdc-lake.reload"
# How fresh the table is after a replay commit, and what the batch cost (``freshness``).
FRESHNESS = "cdc-lake.freshness"
# Marks a snapshot a run makes on its branch before the one that records its files (a full load's rows
# appended before the merge or the record); main moves past it to that record in one step.
PART = "cdc-lake.part"
# What the batch announced (``core.notices``): accepted on purpose, never in silence.
NOTICES = "cdc-lake.notices"
# Outstanding quarantined rows (``rejects``): the table differs from the source for their keys until a replay.
DIVERGED = "cdc-lake.diverged"
# A ``cdc-lake rejects replay`` or ``accept`` commit: what it applied and dropped.
REJECTS_REPLAYED = "cdc-lake.rejects-replayed"
REJECTS_SNAPSHOT = "cdc-lake.rejects-snapshot"
# A table property, not a summary one: the refusal of the table's last run ({at, message}), until a run commits.
REFUSED = "cdc-lake.refused"
# A repair from the live source (ops.repair): the keys it rewrote, and the source's position when it read them.
REPAIR = "cdc-lake.repair"


def freshness(
    plan: RunPlan, rows: int, newest_change: str | None, seconds: float, committing_at: dt.datetime
) -> dict[str, float | int | None]:
    """The batch a commit applies and how far behind the source it leaves the table, at ``committing_at`` (UTC).

    ``change_lag_s``: from the newest change's DMS timestamp (the source commit time, UTC; None without a
    timestamp column); ``landed_lag_s``: from the oldest applied file's landing (its LastModified).
    """
    landed = [t for t in (plan.objects[f.key].last_modified for f in plan.pending) if t is not None]
    newest = _dms_time(newest_change)
    return {
        "files": len(plan.pending),
        "rows": rows,
        "bytes": sum(plan.objects[f.key].size for f in plan.pending),
        "seconds": round(seconds, 3),
        "change_lag_s": round((committing_at - newest).total_seconds(), 3) if newest else None,
        "landed_lag_s": round((committing_at - min(landed)).total_seconds(), 3) if landed else None,
    }


def _dms_time(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    try:
        return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)
    except ValueError:
        return None  # not DMS's yyyy-MM-dd HH:mm:ss.SSSSSS: no lag rather than a failed run


def run_properties(plan: RunPlan, changes: Mapping[str, int] | None) -> dict[str, str]:
    """The record of one run's commit: the state after it, the files it applied, its trigger and counts."""
    applied = [{"key": f.key, "etag": plan.objects[f.key].etag, "size": plan.objects[f.key].size} for f in plan.pending]
    properties = {
        STATE: plan.next_state.to_json(),
        APPLIED: json.dumps(applied, separators=(",", ":")),
        TRIGGER: plan.trigger.key,
    }
    if changes is not None:
        properties[CHANGES] = json.dumps(dict(changes), separators=(",", ":"))
    return properties


@dataclass(frozen=True)
class BatchRecord:
    """What a replay commit records in its snapshot: the plan it applied (files, state, trigger), its change
    counts and changed keys, the history commit it follows, and its ``freshness``."""

    plan: RunPlan
    counts: ChangeCounts
    keys: int
    freshness: dict[str, float | int | None]
    history_snapshot: int | None = None
    notices: tuple[Notice, ...] = ()
    rejects_snapshot: int | None = None
    diverged: Mapping[str, object] | None = None

    @property
    def properties(self) -> dict[str, str]:
        properties = run_properties(self.plan, {**self.counts.as_dict(), "keys": self.keys})
        if self.history_snapshot is not None:
            properties[HISTORY_SNAPSHOT] = str(self.history_snapshot)
        if self.notices:
            properties[NOTICES] = notices_json(self.notices)
        if self.rejects_snapshot is not None:
            properties[REJECTS_SNAPSHOT] = str(self.rejects_snapshot)
        if self.diverged:
            properties[DIVERGED] = json.dumps(self.diverged, separators=(",", ":"))
        properties[FRESHNESS] = json.dumps(self.freshness, separators=(",", ":"))
        return properties


def read_state(spark: SparkSession, location: LakeLocation, table_name: str) -> ReplayState:
    """The replay state recorded by the newest cdc-lake commit among the current snapshot's ancestors."""
    return recorded_state(spark, location, table_name)[1]


def recorded_state(spark: SparkSession, location: LakeLocation, table_name: str) -> tuple[int | None, ReplayState]:
    """The table's current snapshot and the replay state recorded in it or its nearest ancestor, read together."""
    head: int | None = None
    for snapshot_id, summary in branch_lineage(spark, location.dotted(table_name)):
        head = snapshot_id if head is None else head
        state = summary.get(STATE)
        if state is not None:
            return head, ReplayState.from_json(state, snapshot_id)
    return head, ReplayState()


def snapshot_summaries(spark: SparkSession, location: LakeLocation, table: TableSpec | str) -> list[dict[str, Any]]:
    """Snapshots of the table's current lineage, oldest first, with their cdc-lake properties."""
    name = table if isinstance(table, str) else table.lake_table
    # A rollback makes an older snapshot current again: keep each ancestor once, at its first time.
    rows = spark.sql(
        "SELECT h.snapshot_id, h.made_current_at, s.operation, s.summary FROM ("
        f"SELECT snapshot_id, min(made_current_at) AS made_current_at FROM {location.metadata(name, 'history')} "
        "WHERE is_current_ancestor GROUP BY snapshot_id) h "
        f"JOIN {location.metadata(name, 'snapshots')} s ON h.snapshot_id = s.snapshot_id "
        "ORDER BY h.made_current_at"
    ).collect()
    return [row.asDict(recursive=True) for row in rows]
