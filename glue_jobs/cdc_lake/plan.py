"""Planning a run, without Spark: the table's listed files and its recorded state in, what to apply out.

A plan applies every pending file of the table up to the trigger, in DMS order, or refuses when applying
would break that order (a CDC file landing behind applied ones, LOAD files rewritten by a reload).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cdc_lake.config import PipelineConfig, TableSpec
from cdc_lake.dms_files import DmsFile, parse_key, table_files
from cdc_lake.exceptions import ReplayOrderError
from cdc_lake.storage import StoredObject

STATE_VERSION = 1


@dataclass(frozen=True)
class ReplayState:
    """Which of a table's DMS files its current snapshot holds.

    LOAD files are kept by name until CDC starts; from then on only their count and digest (the table's
    metadata must not grow with every commit), which still reveals a reload. CDC files are applied
    strictly in order, so the last one names them all.
    """

    load_files: Mapping[str, tuple[str | None, int]] = field(default_factory=dict)
    load_count: int = 0
    load_digest: str = ""
    cdc_last: str | None = None
    cdc_count: int = 0
    snapshot_id: int | None = None

    @property
    def cdc_started(self) -> bool:
        return self.cdc_last is not None

    def to_json(self) -> str:
        load: dict[str, Any] = {"count": self.load_count, "digest": self.load_digest}
        if not self.cdc_started:
            load["files"] = {k: [etag, size] for k, (etag, size) in sorted(self.load_files.items())}
        return json.dumps(
            {"v": STATE_VERSION, "load": load, "cdc": {"last": self.cdc_last, "count": self.cdc_count}},
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str, snapshot_id: int | None) -> ReplayState:
        data = json.loads(text)
        if data.get("v") != STATE_VERSION:
            raise ValueError(f"unsupported replay state version {data.get('v')!r}")
        load = data["load"]
        files = {k: (v[0], int(v[1])) for k, v in (load.get("files") or {}).items()}
        return cls(
            load_files=files,
            load_count=int(load["count"]),
            load_digest=load["digest"],
            cdc_last=data["cdc"]["last"],
            cdc_count=int(data["cdc"]["count"]),
            snapshot_id=snapshot_id,
        )


def load_digest(objects: Iterable[StoredObject]) -> str:
    digest = hashlib.sha256()
    for item in sorted(objects, key=lambda o: o.key):
        digest.update(f"{item.key}\0{item.etag}\0{item.size}\n".encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class RunPlan:
    """What one run applies to one lake table, planned from the table's snapshot ``base_snapshot_id``."""

    table: TableSpec
    trigger: DmsFile
    pending: list[DmsFile]
    objects: dict[str, StoredObject]
    next_state: ReplayState
    base_snapshot_id: int


def plan_run(
    config: PipelineConfig,
    table: TableSpec,
    trigger: DmsFile,
    listed: Sequence[StoredObject],
    state: ReplayState,
    base_snapshot_id: int,
) -> RunPlan:
    """Decide which of the table's ``listed`` objects this run applies, or refuse when that would break DMS order."""
    objects = {o.key: o for o in listed if o.size > 0}
    if trigger.key not in objects:
        raise ReplayOrderError(f"{trigger.key}: not found in the landing bucket (removed, or empty?)")
    files = table_files(list(objects), table, config)
    load_objects = [objects[f.key] for f in files if f.is_full_load]
    watermark = parse_key(state.cdc_last, config).order_key if state.cdc_last is not None else None
    pending: list[DmsFile] = []
    for dms_file in files:
        if dms_file.order_key > trigger.order_key:
            break
        stored = objects[dms_file.key]
        if dms_file.is_full_load:
            if state.cdc_started:
                continue  # checked as a whole below
            applied = state.load_files.get(dms_file.key)
            if applied is not None:
                if applied != (stored.etag, stored.size):
                    raise ReplayOrderError(
                        f"{dms_file.key}: changed since it was applied (ETag/size {applied} -> "
                        f"{(stored.etag, stored.size)}); DMS reloaded the table? Rebuild the lake table to reload it"
                    )
                continue
        elif watermark is not None and dms_file.order_key <= watermark:
            continue
        pending.append(dms_file)
    if watermark is not None:
        behind = [f for f in files if not f.is_full_load and f.order_key <= watermark]
        # Lifecycle rules may expire applied files (fewer listed is fine); more means one landed late.
        if len(behind) > state.cdc_count:
            raise ReplayOrderError(
                f"{table.name}: {len(behind)} CDC files sort at or before the last applied one ({state.cdc_last}) "
                f"but only {state.cdc_count} were applied: a file landed after later changes were applied; "
                "applying it now would break DMS order"
            )
    # Lifecycle rules may expire LOAD files; the same number with other content means a reload.
    if state.cdc_started and (
        len(load_objects) > state.load_count
        or (len(load_objects) == state.load_count and load_digest(load_objects) != state.load_digest)
    ):
        raise ReplayOrderError(
            f"{table.name}: its LOAD files changed after CDC files were applied ({state.load_count} applied, "
            f"{len(load_objects)} now listed); DMS reloaded the table? Rebuild the lake table to reload it"
        )
    return RunPlan(table, trigger, pending, objects, _next_state(state, pending, objects), base_snapshot_id)


def _next_state(state: ReplayState, pending: list[DmsFile], objects: dict[str, StoredObject]) -> ReplayState:
    load_files = dict(state.load_files)
    for dms_file in pending:
        if dms_file.is_full_load:
            load_files[dms_file.key] = (objects[dms_file.key].etag, objects[dms_file.key].size)
    cdc = [f for f in pending if not f.is_full_load]
    applied_loads = [objects[k] for k in load_files if k in objects]
    if state.cdc_started:
        load_count, digest = state.load_count, state.load_digest
    else:
        load_count, digest = len(load_files), load_digest(applied_loads)
    return ReplayState(
        load_files=load_files,
        load_count=load_count,
        load_digest=digest,
        cdc_last=cdc[-1].key if cdc else state.cdc_last,
        cdc_count=state.cdc_count + len(cdc),
    )
