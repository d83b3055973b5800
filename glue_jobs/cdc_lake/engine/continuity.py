"""Holes in a table's history: where the lake table and the raw landing disagree, a run refuses the table rather
than apply the files after the hole.

Two disagreements are caught here; a rollback the landing cannot replay is refused by ``ops.operations``, and a
record main no longer descends from by ``record.record_in``.

- **A lake table whose record holds nothing, built from what the landing still has** (the table was dropped, or
  ``target`` changed). A pending file carries the ``cdc-lake:applied`` tag: a lake table applied it before. Every
  pending file is asked, not only the first: a run that died between its commit and its tags, or a tag write
  refused, leaves applied files untagged. The raw bucket's lifecycle expires applied files oldest first, so a
  table's history is still whole when its first listed file is LOAD00000001 of an unbroken run of LOAD files and
  every file before the newest tagged one is tagged: the run applies it and announces it. Otherwise it is refused:
  the first listed file is a CDC file (every LOAD file expired), the LOAD files have gaps, or an untagged file
  lies before a tagged one (it outlives tagged files younger than it, which may have expired). No pending file
  with the tag is a first replay, as a fresh pipeline or a CDC-only task has.
- **A refused table whose waiting file left the landing unapplied** (the catch-all expiry, or removed by hand).
  A refusal records the oldest-landed file the table had not applied (``waiting``); expiry is by age, so it goes
  first. While the refusal stands, a run finds that file listed or refuses.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from cdc_lake.core.config import PipelineConfig, TableSpec
from cdc_lake.core.dms_files import DmsFile, LandedFiles, load_counter
from cdc_lake.core.exceptions import HistoryGapError
from cdc_lake.core.notices import Notice
from cdc_lake.core.plan import ReplayState, RunPlan, unapplied_files
from cdc_lake.core.storage import ObjectStore, StoredObject, holds

# A first batch of 10,000 LOAD files reads 10,000 tags: about 13 s at 16 in flight and S3's 20 ms a request.
TAG_READS_AT_ONCE = 16


def _rebuild_hint(table: TableSpec) -> str:
    return (
        f"Nothing was applied and no file was removed. Reload the table in DMS (its LOAD files are written again), "
        f"then run `cdc-lake reload -t {table.name}` or the maintenance job's --action reload --table {table.name} "
        "(docs/deploy.md#reload)"
    )


def first_batch_notices(store: ObjectStore, config: PipelineConfig, plan: RunPlan) -> list[Notice]:
    """Check a table's first batch (its record holds nothing) against what the landing's tags say: a notice when it
    rebuilds a lake table from files another one applied, a ``HistoryGapError`` when what is left is not whole.
    One tag read per pending file, ``TAG_READS_AT_ONCE`` at a time (a first batch happens once per lake table)."""
    with ThreadPoolExecutor(max_workers=TAG_READS_AT_ONCE) as pool:
        tagged = list(pool.map(store.is_applied, [f.key for f in plan.pending]))
    if not any(tagged):
        return []
    first, newest = plan.pending[0], max(i for i, applied in enumerate(tagged) if applied)
    table, prefix = plan.table, config.table_prefix(plan.table)
    lake = f"{config.lake.database}.{table.lake_table}"
    applied = f"its landed file {plan.pending[tagged.index(True)].key} was applied before"
    if not first.is_full_load:
        raise HistoryGapError(
            f"{table.name}: the lake table {lake} holds nothing yet, but {applied}, to a lake table that is gone "
            f"(dropped, or `target` changed), and no LOAD file is left (its oldest landed file is {first.key}; the "
            "raw bucket's lifecycle expires applied files after rawRetentionDays). A table built from what is "
            "left would lack every row the expired files held. If the earlier lake table still exists, point "
            f"`target` back at it. {_rebuild_hint(table)}"
        )
    untagged = next((f for f, applied in zip(plan.pending[:newest], tagged, strict=False) if not applied), None)
    if untagged is not None:
        raise HistoryGapError(
            f"{table.name}: the lake table {lake} holds nothing yet, {applied} to a lake table that is gone "
            f"(dropped, or `target` changed), and the older {untagged.key} lacks the cdc-lake:applied tag (a run "
            "ended between its commit and its tags, or a tag write was refused): the lifecycle may have expired "
            "applied files landed after it, so what is left cannot be shown whole. If the earlier lake table still "
            f"exists, point `target` back at it. {_rebuild_hint(table)}"
        )
    gap = _load_gap([f for f in plan.pending if f.is_full_load])
    if gap is not None:
        raise HistoryGapError(
            f"{table.name}: the lake table {lake} holds nothing yet, and its LOAD files were applied before, to a lake "
            f"table that is gone (dropped, or `target` changed), but {gap}: some expired or were removed. "
            + _rebuild_hint(table)
        )
    return [
        Notice(
            "history-rebuilt",
            prefix,
            f"the lake table {lake} held nothing, and the landed files were applied before to a lake table that is "
            f"gone (dropped, or `target` changed): rebuilt from every landed file since {first.key}, the landing "
            "still holding the whole history",
        )
    ]


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
