"""Holes in a table's history: where the lake table and the raw landing disagree, a run refuses the table rather
than apply the files after the hole.

Two disagreements are caught here; a rollback the landing cannot replay is refused by ``ops.operations``, and a
record main no longer descends from by ``record.record_in``.

- **A lake table whose record holds nothing, built from what the landing still has** (the table was dropped, or
  ``target`` changed). The scheduled maintenance removes only files a lake table applied, and leaves a mark per
  table it saw apply files (``core.expiry_marks``) of what it removed. No mark: the landing holds the table's whole
  history (a fresh pipeline, a CDC-only task, or a lake table gone before the maintenance saw it). A mark of none
  removed: the same, and the rebuild is announced. A mark of files removed: the table's history is whole only
  when its first listed file is LOAD00000001 of an unbroken run of LOAD files that landed after the newest file
  removed (DMS reloaded it since): the run applies it and announces it. Otherwise it is refused.
- **A refused table whose waiting file left the landing unapplied** (the catch-all expiry, or removed by hand).
  A refusal records the oldest-landed file the table had not applied (``waiting``); expiry is by age, so it goes
  first. While the refusal stands, a run finds that file listed or refuses.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from cdc_lake.core.config import PipelineConfig, TableSpec
from cdc_lake.core.dms_files import DmsFile, LandedFiles, load_counter
from cdc_lake.core.exceptions import HistoryGapError
from cdc_lake.core.expiry_marks import read_mark
from cdc_lake.core.notices import Notice
from cdc_lake.core.plan import ReplayState, RunPlan, unapplied_files
from cdc_lake.core.storage import ObjectStore, StoredObject, holds


def _rebuild_hint(table: TableSpec) -> str:
    return (
        f"Nothing was applied and no file was removed. Reload the table in DMS (its LOAD files are written again), "
        f"then run `cdc-lake reload -t {table.name}` or the maintenance job's --action reload --table {table.name} "
        "(docs/deploy.md#reload)"
    )


def first_batch_notices(store: ObjectStore, config: PipelineConfig, plan: RunPlan) -> list[Notice]:
    """Check a table's first batch (its record holds nothing) against the expiry's mark (one request, once per lake
    table): a notice when it rebuilds a lake table from files another one applied, a ``HistoryGapError`` when
    what is left is not whole."""
    table, prefix = plan.table, config.table_prefix(plan.table)
    mark = read_mark(store, config, table)
    if mark is None:
        return []
    first = plan.pending[0]
    lake = f"{config.lake.database}.{table.lake_table}"
    if not mark.files:
        return [
            Notice(
                "history-rebuilt",
                prefix,
                f"the lake table {lake} held nothing, and the landed files were applied before to a lake table that is "
                f"gone (dropped, or `target` changed), none of them removed since: rebuilt from every landed file "
                f"since {first.key}, the landing still holding the whole history",
            )
        ]
    assert mark.newest_landed is not None  # set with files
    removed = (
        f"the scheduled maintenance removed {mark.files} of its landed files a lake table had applied, the newest "
        f"{mark.newest_key}, landed {mark.newest_landed.isoformat()}"
    )
    gone = f"the lake table {lake} holds nothing yet (dropped, or `target` changed), but {removed}"
    if not first.is_full_load:
        raise HistoryGapError(
            f"{table.name}: {gone}, and no LOAD file is left (its oldest landed file is {first.key}). A table built "
            f"from what is left would lack every row the removed files held. If the earlier lake table still "
            f"exists, point `target` back at it. {_rebuild_hint(table)}"
        )
    loads = [f for f in plan.pending if f.is_full_load]
    stale = next((f for f in loads if not _landed_after(plan, f, mark.newest_landed)), None)
    if stale is not None:
        raise HistoryGapError(
            f"{table.name}: {gone}, and its LOAD file {stale.key} landed before that: it is the load those files "
            f"followed, not a reload since. {_rebuild_hint(table)}"
        )
    gap = _load_gap(loads)
    if gap is not None:
        raise HistoryGapError(f"{table.name}: {gone}, and {gap}: some were removed. " + _rebuild_hint(table))
    return [
        Notice(
            "history-rebuilt",
            prefix,
            f"the lake table {lake} held nothing, and {removed}: rebuilt from the LOAD files DMS wrote since and "
            f"every landed file after them, from {first.key}",
        )
    ]


def _landed_after(plan: RunPlan, dms_file: DmsFile, moment: dt.datetime) -> bool:
    landed = plan.objects[dms_file.key].last_modified
    return landed is not None and landed > moment


def _load_gap(loads: Sequence[DmsFile]) -> str | None:
    """What is missing from LOAD files that should be whole runs from counter 1, or None."""
    counters: dict[str, list[int]] = {}
    for dms_file in loads:
        stem, counter = load_counter(dms_file.key) or (dms_file.key, 0)
        counters.setdefault(stem, []).append(counter)
    for stem, found in sorted(counters.items()):
        expected = set(range(1, max(found) + 1))
        missing = sorted(expected - set(found))
        if missing:
            name = stem.replace("*", f"{missing[0]:08X}")
            return f"{len(missing)} of its {max(found)} LOAD files are not listed (the first: {name})"
    return None


def waiting_mark(config: PipelineConfig, landed: LandedFiles, state: ReplayState) -> dict[str, Any] | None:
    """What a refusal records of the table's oldest-landed file not applied (None: none waits)."""
    waiting = [o for o in unapplied_files(config, landed, state) if o.last_modified is not None]
    if not waiting:
        return None
    oldest = min(waiting, key=lambda o: (o.last_modified or dt.datetime.min.replace(tzinfo=dt.UTC), o.key))
    return {"key": oldest.key, "etag": oldest.etag, "landed": _iso(oldest)}


def check_waiting_file(
    store: ObjectStore, table: TableSpec, refused: Mapping[str, Any] | None, landed: LandedFiles
) -> None:
    """Refuse the table when its standing refusal's waiting file has left the landing without being applied."""
    refused = refused or {}
    waiting = refused.get("waiting")
    if not waiting:
        return
    key = waiting["key"]
    # Asked of the store by key when the run's listing started after it.
    if key in landed.objects or holds(store, key):
        return
    raise HistoryGapError(
        f"{table.name}: {key}, which had waited unapplied since {waiting.get('landed')} when the table was refused "
        f"on {refused.get('at')}, has left the landing without being applied (expired by the raw "
        "bucket's catch-all rule after rawUnappliedRetentionDays, or removed): applying the files after it would "
        f"skip its changes. The refusal was: {str(refused.get('message', ''))[:300]}. " + _rebuild_hint(table)
    )


def _iso(item: StoredObject) -> str | None:
    return item.last_modified.astimezone(dt.UTC).isoformat() if item.last_modified is not None else None
