"""Planning a run, without Spark: the table's listed files and its recorded state in, what to apply out.

A plan applies every pending file of the table up to the trigger, in DMS order, or refuses when applying
would break that order (a CDC file landing behind applied ones, LOAD files rewritten by a reload).
A reload plan (``plan_reload``) instead rebuilds the table from its current LOAD files and the CDC files
that belong after them; docs/deploy.md#reload explains how that boundary is chosen.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cdc_lake.core.config import PipelineConfig, TableSpec
from cdc_lake.core.dms_files import (
    DATE_FOLDER_PARTS,
    DmsFile,
    LandedFiles,
    date_folder,
    landed_files,
    load_counter,
    order_key_for,
    parse_key,
)
from cdc_lake.core.exceptions import JobArgumentError, ReplayOrderError
from cdc_lake.core.storage import StoredObject

STATE_VERSION = 1

# How far before the reload's first LOAD file a CDC file may be named and still hold changes made after
# the reload's snapshot: the CDC batch interval (a file holds up to that much of earlier changes), clock
# skew between DMS and S3, and upload time, with room to spare. Too early costs only work (re-applying a
# change the LOAD rows already hold leaves the key as it is); too late loses changes.
RELOAD_MARGIN = dt.timedelta(hours=1)
RELOAD_MARGIN_BATCHES = 10


def reload_hint(table_name: str) -> str:
    """What a user runs to rebuild the table after DMS reloaded it: named in every reload refusal."""
    return (
        f"To rebuild the lake table from its current LOAD files, run `cdc-lake reload -t {table_name}` locally, "
        f"or start the cdc-lake maintenance Glue job with --action reload --table {table_name} "
        "(docs/deploy.md#reload)"
    )


@dataclass(frozen=True)
class ReplayState:
    """Which of a table's DMS files its current snapshot holds.

    LOAD files are kept as runs of consecutive counters until CDC starts (one entry for a load's 10,000 files);
    from then on only their count, digest and newest write time (the table's metadata must not grow with every
    commit or with the load's file count), which still reveal a reload. CDC files are applied strictly in order, so
    the last one names them all.
    """

    # The applied LOAD files before CDC starts: (first key, last key) of each run of consecutive counters.
    load_runs: tuple[tuple[str, str], ...] = ()
    load_count: int = 0
    load_digest: str = ""
    load_written: str | None = None  # ISO 8601 UTC: the newest LastModified among the applied LOAD files
    cdc_last: str | None = None
    cdc_count: int = 0
    # The listing window: CDC files positioned before ``cdc_from`` (a CDC position, see ``cdc_position``)
    # are ``cdc_before`` applied ones, so a run lists only from there on (``listing_start``).
    cdc_from: str | None = None
    cdc_before: int = 0
    # ISO 8601 UTC: the newest LastModified among the applied CDC files. A CDC file that sorts before the last
    # applied one but was written after this landed late, or was rewritten after it was applied.
    cdc_written: str | None = None
    snapshot_id: int | None = None

    @property
    def cdc_started(self) -> bool:
        return self.cdc_last is not None

    @property
    def applied_nothing(self) -> bool:
        return not self.cdc_started and self.load_count == 0

    def holds_load(self, key: str) -> bool:
        """Whether LOAD file ``key`` is applied: every listed one is once CDC started, else those in the runs."""
        if self.cdc_started:
            return True
        position = load_counter(key)
        if position is None:
            return False
        stem, counter = position
        return any(stem == s and lo <= counter <= hi for s, lo, hi, _, _ in _run_bounds(self.load_runs))

    def to_json(self) -> str:
        load: dict[str, Any] = {"count": self.load_count, "digest": self.load_digest}
        if self.load_written is not None:
            load["written"] = self.load_written
        if not self.cdc_started:
            load["runs"] = [list(run) for run in self.load_runs]
        cdc: dict[str, Any] = {"last": self.cdc_last, "count": self.cdc_count}
        if self.cdc_from is not None:
            cdc |= {"from": self.cdc_from, "before": self.cdc_before}
        if self.cdc_written is not None:
            cdc["written"] = self.cdc_written
        return json.dumps({"v": STATE_VERSION, "load": load, "cdc": cdc}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str, snapshot_id: int | None) -> ReplayState:
        data = json.loads(text)
        if data.get("v") != STATE_VERSION:
            raise ValueError(f"unsupported replay state version {data.get('v')!r}")
        load = data["load"]
        # Written before runs: every applied LOAD file by name (the digest checks their content).
        runs = tuple((a, b) for a, b in load.get("runs") or merged_load_runs((), load.get("files") or {}))
        return cls(
            load_runs=runs,
            load_count=int(load["count"]),
            load_digest=load["digest"],
            load_written=load.get("written"),
            cdc_last=data["cdc"]["last"],
            cdc_count=int(data["cdc"]["count"]),
            cdc_from=data["cdc"].get("from"),
            cdc_before=int(data["cdc"].get("before", 0)),
            cdc_written=data["cdc"].get("written"),
            snapshot_id=snapshot_id,
        )


def _run_bounds(runs: Iterable[tuple[str, str]]) -> Iterable[tuple[str, int, int, str, str]]:
    """Each run as its key stem, first and last counter, and first and last key."""
    for first, last in runs:
        (stem, lo), (_, hi) = load_counter(first) or ("", 0), load_counter(last) or ("", -1)
        yield stem, lo, hi, first, last


def merged_load_runs(runs: Iterable[tuple[str, str]], keys: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """``runs`` with the LOAD files ``keys`` added, consecutive counters of one key stem joined into one run."""
    spans: dict[str, list[tuple[int, int, str, str]]] = {}
    for stem, lo, hi, first, last in _run_bounds(runs):
        spans.setdefault(stem, []).append((lo, hi, first, last))
    for key in keys:
        stem, counter = load_counter(key) or ("", 0)
        spans.setdefault(stem, []).append((counter, counter, key, key))
    merged: list[tuple[str, str]] = []
    for stem in sorted(spans):
        current: list[Any] | None = None
        for lo, hi, first, last in sorted(spans[stem]):
            if current is not None and lo <= current[1] + 1:
                if hi > current[1]:
                    current[1], current[3] = hi, last
                continue
            if current is not None:
                merged.append((current[2], current[3]))
            current = [lo, hi, first, last]
        if current is not None:
            merged.append((current[2], current[3]))
    return tuple(merged)


def load_run_count(runs: Iterable[tuple[str, str]]) -> int:
    return sum(hi - lo + 1 for _, lo, hi, _, _ in _run_bounds(runs))


def newest_write(objects: Iterable[StoredObject]) -> str | None:
    times = [o.last_modified for o in objects if o.last_modified is not None]
    return max(times).astimezone(dt.UTC).isoformat() if times else None


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
    config: PipelineConfig, trigger: DmsFile, listed: Sequence[StoredObject], state: ReplayState, base_snapshot_id: int
) -> RunPlan:
    """Decide which of the trigger's table's ``listed`` objects this run applies (those up to ``trigger`` that
    ``state`` has not applied), or refuse when that would break DMS order."""
    table = config.table(trigger.table)
    landed = landed_files(listed, table, config)
    objects, files = dict(landed.objects), landed.files
    if trigger.key not in objects:
        raise ReplayOrderError(f"{trigger.key}: not found in the landing bucket (removed, or empty?)")
    # Every listed LOAD file once CDC started (checked as a whole below), else those the state's runs hold.
    load_objects = [objects[f.key] for f in files if f.is_full_load and state.holds_load(f.key)]
    watermark = parse_key(state.cdc_last, config).order_key if state.cdc_last is not None else None
    pending: list[DmsFile] = []
    for dms_file in files:
        if dms_file.order_key > trigger.order_key:
            break
        if dms_file.is_full_load:
            if state.holds_load(dms_file.key):
                continue  # checked as a whole below
        elif watermark is not None and dms_file.order_key <= watermark:
            continue
        pending.append(dms_file)
    if watermark is not None:
        _refuse_late_files(table, state, files, objects, watermark)
    # Lifecycle rules may expire LOAD files; the same number with other content means a reload, and so do
    # fewer written after the applied ones (a reload into an emptied folder that needed fewer files).
    if state.load_count and (
        len(load_objects) > state.load_count
        or (len(load_objects) == state.load_count and load_digest(load_objects) != state.load_digest)
        or (len(load_objects) < state.load_count and _written_after(load_objects, state.load_written))
    ):
        rewritten = [o.key for o in load_objects if _written_after([o], state.load_written)]
        named = f" ({', '.join(rewritten)} written since)" if rewritten else ""
        since = "after CDC files were applied" if state.cdc_started else "since they were applied"
        raise ReplayOrderError(
            f"{table.name}: its LOAD files changed {since} ({state.load_count} applied, "
            f"{len(load_objects)} now listed{named}): DMS reloaded the table or restarted with a full load. Nothing "
            "was applied and no file was removed. " + reload_hint(table.name)
        )
    next_state = _next_state(state, pending, objects, _advance_window(config, state, files, pending))
    return RunPlan(table, trigger, pending, objects, next_state, base_snapshot_id)


def applied(dms_file: DmsFile, state: ReplayState, config: PipelineConfig) -> bool:
    """Whether the table's recorded ``state`` holds ``dms_file``."""
    if dms_file.is_full_load:
        return state.holds_load(dms_file.key)
    return state.cdc_last is not None and dms_file.order_key <= parse_key(state.cdc_last, config).order_key


def unapplied_files(config: PipelineConfig, landed: LandedFiles, state: ReplayState) -> list[StoredObject]:
    """The landed files that ``state`` does not hold (``applied``), and CDC files it seems to hold but that were
    written after the newest it applied (late ones)."""
    return [
        landed.objects[f.key]
        for f in landed.files
        if not applied(f, state, config)
        or (not f.is_full_load and _written_after([landed.objects[f.key]], state.cdc_written))
    ]


def missing_to_reapply(
    config: PipelineConfig, landed: LandedFiles, since: ReplayState, until: ReplayState
) -> str | None:
    """What the landing lacks to apply again the files ``until`` holds beyond ``since`` (a rollback from ``until``
    back to ``since``), said for a person; None when every one of them is still listed."""
    files = landed.files
    missing = []
    if not since.cdc_started:
        loads = [f for f in files if f.is_full_load and until.holds_load(f.key) and not since.holds_load(f.key)]
        needed = until.load_count - since.load_count
        if len(loads) < needed:
            missing.append(f"{needed - len(loads)} of the {needed} LOAD files")
    if until.cdc_last is not None:
        low = parse_key(since.cdc_last, config).order_key if since.cdc_last is not None else None
        high = parse_key(until.cdc_last, config).order_key
        cdc = [f for f in files if not f.is_full_load and f.order_key <= high and (low is None or f.order_key > low)]
        needed = until.cdc_count - since.cdc_count
        if len(cdc) < needed:
            first = f" (the oldest left: {cdc[0].key})" if cdc else ""
            missing.append(f"{needed - len(cdc)} of the {needed} CDC files{first}")
    return " and ".join(missing) if missing else None


def _refuse_late_files(
    table: TableSpec,
    state: ReplayState,
    files: Sequence[DmsFile],
    objects: Mapping[str, StoredObject],
    watermark: tuple[int, str, str],
) -> None:
    """Refuse CDC files that sort at or before the last applied one but are not among the applied: late, or
    rewritten after they were applied (named by their write time), or more of them than were applied."""
    behind = [f for f in files if not f.is_full_load and f.order_key <= watermark and _in_window(f, state)]
    late = [f.key for f in behind if _written_after([objects[f.key]], state.cdc_written)]
    # Lifecycle rules may expire applied files (fewer listed is fine); more means one landed late.
    if late:
        raise ReplayOrderError(
            f"{table.name}: CDC file(s) {', '.join(late)} sort before the last applied one ({state.cdc_last}) "
            "but were written after it was applied: landed late, or rewritten after they were applied. "
            + _late_consequence(table)
        )
    if state.cdc_before + len(behind) > state.cdc_count:
        raise ReplayOrderError(
            f"{table.name}: {state.cdc_before + len(behind)} CDC files sort at or before the last applied one "
            f"({state.cdc_last}) but only {state.cdc_count} were applied: a file landed after later changes "
            "were applied. " + _late_consequence(table)
        )


def _late_consequence(table: TableSpec) -> str:
    return (
        "Applying it now would break DMS order; nothing was applied and no file was removed. The lake has missed "
        "its changes: " + reload_hint(table.name)
    )


def _in_window(dms_file: DmsFile, state: ReplayState) -> bool:
    return state.cdc_from is None or dms_file.order_key[1] >= state.cdc_from


def _advance_window(
    config: PipelineConfig, state: ReplayState, files: Sequence[DmsFile], pending: Sequence[DmsFile]
) -> tuple[str | None, int]:
    """The listing window after applying ``pending``: it starts ``listing_lookback`` before the newest applied
    CDC file (never earlier than before), and counts the applied CDC files it leaves behind."""
    cdc = [f for f in pending if not f.is_full_load]
    last = cdc[-1] if cdc else None
    if last is None:
        return state.cdc_from, state.cdc_before
    start = cdc_position(_position_time(last.order_key[1]) - listing_lookback(config))
    if state.cdc_from is not None and start <= state.cdc_from:
        return state.cdc_from, state.cdc_before
    left_behind = [
        f
        for f in files
        if not f.is_full_load and _in_window(f, state) and f.order_key[1] < start and f.order_key <= last.order_key
    ]
    return start, state.cdc_before + len(left_behind)


def _position_time(position: str) -> dt.datetime:
    return dt.datetime.strptime(position[:14], "%Y%m%d%H%M%S").replace(tzinfo=dt.UTC)


def listing_lookback(config: PipelineConfig) -> dt.timedelta:
    """How long before the newest applied CDC file a run still lists: a file listed later than this after its
    name's time would not be seen. The same bound as the reload boundary (``reload_margin``)."""
    return reload_margin(config)


# Date folders whose names sort as time does, so a listing can start at one.
_TIME_SORTED_DATE_FOLDERS = frozenset({"YYYYMMDD", "YYYYMMDDHH", "YYYYMM"})


def listing_start(config: PipelineConfig, table: TableSpec, state: ReplayState) -> str | None:
    """Where a run may start listing the table (S3 StartAfter), or None to list it all.

    Keys sort as DMS order goes: CDC names and sortable date folders are times, and LOAD names sort after
    both, so every LOAD file is always listed. The start is a day earlier in date-folder layouts, in case a
    file's folder and name fall on either side of midnight.
    """
    if state.cdc_from is None:
        return None
    prefix = config.table_prefix(table)
    moment = _position_time(state.cdc_from)
    dms = config.dms
    if not dms.date_partition_enabled:
        return f"{prefix}{moment:%Y%m%d-%H}"
    if dms.date_partition_sequence not in _TIME_SORTED_DATE_FOLDERS:
        return None  # MMYYYYDD, DDMMYYYY: folder names do not sort as time
    days = DATE_FOLDER_PARTS[dms.date_partition_sequence][:3]  # down to the day: an hour folder adds nothing
    return prefix + date_folder(dms, moment - dt.timedelta(days=1), days)


def _written_after(objects: Sequence[StoredObject], written: str | None) -> bool:
    if written is None:
        return False
    applied = dt.datetime.fromisoformat(written)
    return any(o.last_modified is not None and o.last_modified > applied for o in objects)


def _next_state(
    state: ReplayState, pending: list[DmsFile], objects: dict[str, StoredObject], window: tuple[str | None, int]
) -> ReplayState:
    runs = state.load_runs
    cdc = [f for f in pending if not f.is_full_load]
    cdc_written = [w for w in (state.cdc_written, newest_write(objects[f.key] for f in cdc)) if w is not None]
    if state.cdc_started:
        load_count, digest, written = state.load_count, state.load_digest, state.load_written
    else:
        runs = merged_load_runs(runs, [f.key for f in pending if f.is_full_load])
        held = ReplayState(load_runs=runs)
        applied_loads = [o for k, o in objects.items() if load_counter(k) is not None and held.holds_load(k)]
        load_count, digest, written = load_run_count(runs), load_digest(applied_loads), newest_write(applied_loads)
    return ReplayState(
        load_runs=runs,
        load_count=load_count,
        load_digest=digest,
        load_written=written,
        cdc_last=cdc[-1].key if cdc else state.cdc_last,
        cdc_count=state.cdc_count + len(cdc),
        cdc_from=window[0],
        cdc_before=window[1],
        cdc_written=max(cdc_written, key=dt.datetime.fromisoformat, default=None),
    )


@dataclass(frozen=True)
class ReloadPlan:
    """How a reload rebuilds one table: its current LOAD files, then the CDC files from ``boundary`` on.

    Every listed file is recorded as applied (stale LOAD files and CDC files before the boundary too), so
    the next ordinary run goes on from the newest CDC file, and refuses nothing.
    """

    table: TableSpec
    load_files: list[DmsFile]
    stale_load_files: list[DmsFile]
    cdc_files: list[DmsFile]
    skipped_cdc_files: list[DmsFile]
    boundary: str
    boundary_source: str
    objects: dict[str, StoredObject]
    next_state: ReplayState
    base_snapshot_id: int

    @property
    def files(self) -> list[DmsFile]:
        """The files the rebuild reads, in DMS order."""
        return [*self.load_files, *self.cdc_files]

    def run_plan(self) -> RunPlan:
        """The reload as a run that applied exactly its files (for the snapshot's applied-files record)."""
        files = self.files
        return RunPlan(self.table, files[-1], files, self.objects, self.next_state, self.base_snapshot_id)


def reload_margin(config: PipelineConfig) -> dt.timedelta:
    return max(RELOAD_MARGIN, dt.timedelta(seconds=RELOAD_MARGIN_BATCHES * config.dms.cdc_max_batch_interval))


def cdc_position(moment: dt.datetime) -> str:
    """Where a CDC file written at ``moment`` (UTC) sorts: comparable with ``DmsFile.order_key[1]``."""
    utc = moment.astimezone(dt.UTC) if moment.tzinfo else moment
    return order_key_for(f"{utc:%Y%m%d-%H%M%S}{utc.microsecond:06d}.csv")[1]  # type: ignore[index]


def show_position(position: str) -> str:
    """A CDC position as DMS writes it in file names: ``YYYYMMDD-HHMMSSmmm``."""
    return f"{position[:8]}-{position[8:17]}"


_TIMESTAMP = re.compile(r"^\d{8}-\d{6,}$")


def parse_since(text: str) -> str:
    """The CDC position of a ``--since`` value: a CDC file's key or name, ``YYYYMMDD-HHMMSS[fff]`` or ISO 8601 (UTC)."""
    value = text.strip()
    name = value.rsplit("/", 1)[-1]
    order = order_key_for(name) or (order_key_for(name + ".csv") if _TIMESTAMP.match(name) else None)
    if order is not None and order[0] == 1:
        return order[1]
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        raise JobArgumentError(
            f"--since {text!r}: expected a CDC file name (20250301-120500123.csv), a time as DMS names CDC files "
            "(20250301-120500123) or an ISO 8601 UTC time (2025-03-01T12:05:00)"
        ) from None
    return cdc_position(moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC))


def plan_reload(
    config: PipelineConfig,
    table: TableSpec,
    listed: Sequence[StoredObject],
    base_snapshot_id: int,
    since: str | None = None,
) -> ReloadPlan:
    """Which listed files rebuild ``table`` after a DMS reload, or a refusal naming what is missing.

    The current load is the LOAD files written by the latest load. DMS writes them from the first one on,
    so a LOAD file written more than ``reload_margin`` before the first one was left by an earlier, longer
    load (folder not emptied) and is not read; one within the margin is read, which is safe for the same
    reason as early CDC files are (every later change to its rows is applied after it). CDC files are
    applied from ``since`` on, or else from the earliest current LOAD file's LastModified less the margin.
    """
    landed = landed_files(listed, table, config)
    objects, files = dict(landed.objects), landed.files
    loads = [f for f in files if f.is_full_load]
    cdc = [f for f in files if not f.is_full_load]
    if not loads:
        raise ReplayOrderError(
            f"{table.name}: no LOAD files under {config.table_prefix(table)}: nothing to reload from "
            "(DMS writes them again when it reloads the table; wait until it has, then reload)"
        )
    margin = reload_margin(config)
    times = [objects[f.key].last_modified for f in loads]
    current, stale = loads, []
    first_time = times[0]
    if first_time is not None:
        stale = [f for f, t in zip(loads, times, strict=True) if t is not None and t < first_time - margin]
        left_out = set(stale)
        current = [f for f in loads if f not in left_out]
    if since is not None:
        boundary = parse_since(since)
        source = f"--since {since}"
    else:
        current_times = [objects[f.key].last_modified for f in current]
        if any(t is None for t in current_times):
            raise ReplayOrderError(
                f"{table.name}: the object store gives no write times for its LOAD files, so the CDC files "
                "that belong after the reload cannot be told; pass --since <first CDC file after the reload>"
            )
        earliest = min(t for t in current_times if t is not None)
        boundary = cdc_position(earliest - margin)
        source = (
            f"automatic: earliest current LOAD file written {earliest:%Y-%m-%d %H:%M:%S} UTC, "
            f"less {int(margin.total_seconds() // 60)} min"
        )
    applied_cdc = [f for f in cdc if f.order_key[1] >= boundary]
    skipped_cdc = [f for f in cdc if f.order_key[1] < boundary]
    load_objects = [objects[f.key] for f in loads]
    state = ReplayState(
        load_runs=merged_load_runs((), [o.key for o in load_objects]),
        load_count=len(load_objects),
        load_digest=load_digest(load_objects),
        load_written=newest_write(load_objects),
        # Every listed CDC file is before the boundary (superseded by the LOAD rows) or applied now.
        cdc_last=cdc[-1].key if cdc else None,
        cdc_count=len(cdc),
        cdc_written=newest_write(objects[f.key] for f in cdc),
    )
    return ReloadPlan(
        table=table,
        load_files=current,
        stale_load_files=stale,
        cdc_files=applied_cdc,
        skipped_cdc_files=skipped_cdc,
        boundary=boundary,
        boundary_source=source,
        objects=objects,
        next_state=state,
        base_snapshot_id=base_snapshot_id,
    )
