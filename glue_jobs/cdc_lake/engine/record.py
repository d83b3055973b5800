"""The applied-files record: which DMS files a table holds, kept in its snapshots' summaries and in a table property.

Each commit records the files it applied (``cdc-lake.*`` properties) in the very snapshot that holds
their changes, so the record and the data can never disagree, and rolling the table back rolls the
record back with it. Maintenance makes snapshots without a record (compaction) and expires old ones, so the
newest record may no longer be in main's lineage; the same commit that moves main therefore also sets the
table property ``RECORD`` (state, divergence, and the snapshot they describe), which no maintenance touches.
It is read only when the lineage left holds no record, and trusted only when it provably describes an
ancestor of main; otherwise the run refuses (``RecordLostError``) rather than apply files again.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cdc_lake.core.config import TableSpec
from cdc_lake.core.exceptions import RecordLostError
from cdc_lake.core.notices import Notice, notices_json
from cdc_lake.core.plan import ReplayState, RunPlan, load_digest
from cdc_lake.engine.changes import ChangeCounts
from cdc_lake.engine.iceberg_java import Metadata, set_head_properties
from cdc_lake.engine.tables import Lake

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
# A table property: the record of main's head as its last cdc-lake commit left it ({snapshot, sequence, state,
# diverged}), set by the commit that moved main there (``commit.commit_transaction``).
RECORD = "cdc-lake.record"


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


# A commit's summary names the files it applied up to this many; a larger batch (a catch-up of 100,000 files) is
# named by its count, bytes, first and last key and a digest, so metadata.json, which every commit rewrites with up
# to keep_snapshots summaries, stays the size of the table's history, not of its largest batch. Exactly-once does
# not read this list: the state (``STATE``) decides what is applied.
APPLIED_NAMED = 100


@dataclass(frozen=True)
class AppliedFiles:
    """What a commit's ``APPLIED`` summary says it applied: ``count`` files, of which ``keys`` are named (all of
    them unless the batch had more than ``APPLIED_NAMED``: then the first and the last)."""

    count: int
    keys: tuple[str, ...]

    @property
    def complete(self) -> bool:
        return len(self.keys) == self.count


def applied_json(plan: RunPlan) -> str:
    """``APPLIED`` of a commit applying ``plan``: each file named with its ETag and size, or for a batch larger than
    ``APPLIED_NAMED``, its count, bytes, first and last file and a digest of them all (``load_digest``'s)."""
    objects = [plan.objects[f.key] for f in plan.pending]
    if len(objects) <= APPLIED_NAMED:
        applied: object = [{"key": o.key, "etag": o.etag, "size": o.size} for o in objects]
    else:
        applied = {
            "count": len(objects),
            "bytes": sum(o.size for o in objects),
            "first": objects[0].key,
            "last": objects[-1].key,
            "digest": load_digest(objects),
        }
    return json.dumps(applied, separators=(",", ":"))


def applied_files(summary: Mapping[str, str]) -> AppliedFiles:
    """The files a snapshot's summary says its commit applied (none for a snapshot cdc-lake did not commit)."""
    if APPLIED not in summary:
        return AppliedFiles(0, ())
    value = json.loads(summary[APPLIED])
    if isinstance(value, list):
        return AppliedFiles(len(value), tuple(entry["key"] for entry in value))
    return AppliedFiles(int(value["count"]), (value["first"], value["last"]))


def run_properties(plan: RunPlan, changes: Mapping[str, int] | None) -> dict[str, str]:
    """The record of one run's commit: the state after it, the files it applied, its trigger and counts."""
    properties = {
        STATE: plan.next_state.to_json(),
        APPLIED: applied_json(plan),
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


@dataclass(frozen=True)
class TableRecord:
    """What a table holds as of its main branch's head (``head``; None: no snapshot yet): its replay state and its
    divergence mark (``rejects``; None: not diverged)."""

    head: int | None
    state: ReplayState
    diverged: Mapping[str, object] | None = None

    def properties(self, snapshot_id: int, sequence: int) -> dict[str, str]:
        """The table property ``RECORD`` for this record once main is at ``snapshot_id`` (sequence ``sequence``)."""
        value = {"snapshot": snapshot_id, "sequence": sequence, "state": self.state.to_json()}
        return {RECORD: json.dumps(value | {"diverged": self.diverged}, separators=(",", ":"))}


def divergence_mark(summary: Mapping[str, str]) -> tuple[bool, dict[str, object] | None]:
    """Whether a snapshot's summary decides the table's divergence (a cdc-lake commit does; maintenance does not),
    and the mark it holds (None: not diverged)."""
    if DIVERGED in summary:
        return True, json.loads(summary[DIVERGED])
    return STATE in summary or REJECTS_REPLAYED in summary, None


def table_record(lake: Lake, table_name: str) -> TableRecord:
    """The record of the table's main branch: from the newest cdc-lake commits in its lineage, or where
    maintenance expired them, from the ``RECORD`` property; raises RecordLostError when neither holds it."""
    dotted = lake.location.dotted(table_name)
    return record_in(Metadata(lake.spark, dotted), dotted)


def record_in(metadata: Metadata, dotted: str, at: int | None = None) -> TableRecord:
    """``table_record`` of table ``dotted`` in one version of its metadata; of its snapshot ``at`` (an ancestor of
    main) instead of main's head when given."""
    head: int | None = None
    state: ReplayState | None = None
    decided, mark = False, None
    for snapshot_id, summary in metadata.lineage(at=at):
        head = snapshot_id if head is None else head
        if not decided:
            decided, mark = divergence_mark(summary)
        if STATE in summary:
            state = ReplayState.from_json(summary[STATE], snapshot_id)
            break
    if state is not None or head is None:
        return TableRecord(head, state or ReplayState(), mark)
    start = metadata.start(at=at)
    if start.complete:  # back to its first snapshot: no commit applied anything on this lineage
        return TableRecord(head, ReplayState(), mark)
    kept = metadata.properties().get(RECORD)
    described = ""
    if kept is not None:
        value = json.loads(kept)
        snapshot_id, sequence = int(value["snapshot"]), int(value["sequence"])
        # Expired, and the parent of main's oldest snapshot left: main descends from it. Any other expired snapshot
        # may be one main was set back from (Iceberg's own rollback, then another tool's compaction and expiry):
        # the metadata left is the same either way, so it is not trusted (docs/deploy.md#table-maintenance).
        expired_parent = snapshot_id == start.oldest_parent and not metadata.has_snapshot(snapshot_id)
        described = (
            f" (it describes snapshot {snapshot_id} of sequence number {sequence}; main's oldest snapshot left has "
            f"{start.oldest_sequence}, and its parent, expired, was {start.oldest_parent})"
        )
        if snapshot_id in start.snapshot_ids or expired_parent:
            state = ReplayState.from_json(value["state"], snapshot_id)
            return TableRecord(head, state, mark if decided else value.get("diverged"))
    raise RecordLostError(
        f"{dotted}: the record of which DMS files the table holds is lost: snapshot expiry removed every commit "
        f"that held it, and the table property {RECORD} "
        + (
            "is missing (the table was last written before cdc-lake kept it there, or it was removed by hand)"
            if kept is None
            else "describes a snapshot that cannot be shown to be an ancestor of main (main was set back, or "
            f"maintenance by other tools made more than one snapshot since cdc-lake last wrote it){described}"
        )
        + ". Nothing was applied and no file was removed. Rebuild the table from its landed files with "
        "`cdc-lake reload` locally or the maintenance job's --action reload (docs/deploy.md#reload); "
        "docs/deploy.md#table-maintenance says which maintenance keeps the record"
    )


def keep_record(lake: Lake, table_name: str) -> None:
    """Set ``RECORD`` to describe main's head as it is now, if main is still there when it lands: after cdc-lake's
    own maintenance made snapshots, so that another tool's maintenance and expiry after it leave main's oldest
    snapshot a child of the one it describes. Only on a table that keeps the record already."""
    dotted = lake.location.dotted(table_name)
    metadata = Metadata(lake.spark, dotted)
    kept = metadata.properties().get(RECORD)
    if kept is None:
        return
    try:
        record = record_in(metadata, dotted)
    except RecordLostError:
        return  # the next run refuses the table and says why
    if record.head is not None and json.loads(kept)["snapshot"] != record.head:  # else main's own commit set it
        set_head_properties(lake.spark, dotted, record.properties, expected_head=record.head)


def read_state(lake: Lake, table_name: str) -> ReplayState:
    """The replay state recorded for the table's current snapshot (``table_record``)."""
    return table_record(lake, table_name).state


def recorded_state(lake: Lake, table_name: str) -> tuple[int | None, ReplayState]:
    """The table's current snapshot and the replay state recorded for it, read together."""
    record = table_record(lake, table_name)
    return record.head, record.state


def snapshot_summaries(lake: Lake, table: TableSpec | str) -> list[dict[str, Any]]:
    """Snapshots of the table's current lineage, oldest first, with their cdc-lake properties."""
    name = table if isinstance(table, str) else table.lake_table
    # A rollback makes an older snapshot current again: keep each ancestor once, at its first time.
    rows = lake.spark.sql(
        "SELECT h.snapshot_id, h.made_current_at, s.operation, s.summary FROM ("
        f"SELECT snapshot_id, min(made_current_at) AS made_current_at FROM {lake.location.metadata(name, 'history')} "
        "WHERE is_current_ancestor GROUP BY snapshot_id) h "
        f"JOIN {lake.location.metadata(name, 'snapshots')} s ON h.snapshot_id = s.snapshot_id "
        "ORDER BY h.made_current_at"
    ).collect()
    return [row.asDict(recursive=True) for row in rows]
