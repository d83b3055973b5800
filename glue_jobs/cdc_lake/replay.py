"""One run: apply every not-yet-applied DMS file of a table up to the triggering one, in one commit.

A duplicated, late or repeated trigger finds its file already applied and changes nothing; a trigger
for a later file applies the earlier ones too; concurrent runs for one table meet Iceberg's optimistic
commit validation, and the loser plans again from the winner's snapshot.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_lake.changes import ChangeCounts, count_changes, describe_problems, last_change_per_key
from cdc_lake.config import PipelineConfig, TableSpec
from cdc_lake.dms_files import DmsFile, parse_key, table_files
from cdc_lake.exceptions import CommitConflictError, DmsInputError, JobArgumentError, ReplayOrderError
from cdc_lake.history import commit_history, ensure_history_table, history_name
from cdc_lake.lake import (
    APPLIED,
    CHANGES,
    HISTORY_SNAPSHOT,
    STATE,
    TRIGGER,
    LakeLocation,
    ReplayState,
    base_snapshot,
    commit_changes,
    ensure_table,
    load_digest,
    read_state,
)
from cdc_lake.reader import FILE, read_changes
from cdc_lake.storage import ObjectStore, StoredObject

log = logging.getLogger(__name__)

_CONFLICTS = (
    "org.apache.iceberg.exceptions.ValidationException",
    "org.apache.iceberg.exceptions.CommitFailedException",
    "Found conflicting files",
    "Found new conflicting",
    "Cannot commit, found",
    "Missing required files to delete",
    "Cannot fast-forward",
)


@dataclass(frozen=True)
class RunPlan:
    table: TableSpec
    trigger: DmsFile
    pending: list[DmsFile]
    objects: dict[str, StoredObject]
    next_state: ReplayState
    base_snapshot_id: int | None = None


@dataclass
class RunResult:
    table: str
    trigger: str
    applied_files: list[str] = field(default_factory=list)
    history_files: list[str] = field(default_factory=list)
    counts: ChangeCounts | None = None
    keys_changed: int = 0
    snapshot_id: int | None = None
    attempts: int = 1
    seconds: float = 0.0

    @property
    def already_applied(self) -> bool:
        return not self.applied_files and not self.history_files


def plan_run(
    config: PipelineConfig, table: TableSpec, trigger: DmsFile, listed: Sequence[StoredObject], state: ReplayState
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
    return RunPlan(table, trigger, pending, objects, _next_state(state, pending, objects))


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


def apply_up_to(
    spark: SparkSession,
    config: PipelineConfig,
    location: LakeLocation,
    store: ObjectStore,
    trigger_key: str,
    table_name: str | None = None,
) -> RunResult:
    """Apply every pending file of the trigger's table up to ``trigger_key`` in one Iceberg commit."""
    started = time.monotonic()
    trigger = parse_key(trigger_key, config)
    if table_name is not None and table_name != trigger.table:
        raise JobArgumentError(f"{trigger_key}: belongs to table {trigger.table}, not {table_name}")
    table = config.table(trigger.table)
    ensure_table(spark, location, table, config.lake)
    if table.history:
        ensure_history_table(spark, location, table, config.lake)
    result = RunResult(table=table.name, trigger=trigger_key)
    attempts = config.lake.commit_retries + 1
    for attempt in range(1, attempts + 1):
        result.attempts = attempt
        try:
            listed = store.list(config.table_prefix(table))
            plan = _plan(spark, config, location, listed, table, trigger, table.lake_table)
            # History keeps its own record of applied files: after a stop between the two commits it is ahead.
            history_plan = (
                _plan(spark, config, location, listed, table, trigger, history_name(table)) if table.history else None
            )
            if not plan.pending and not (history_plan and history_plan.pending):
                log.info("%s: %s is already applied; nothing to do", table.name, trigger_key)
                result.seconds = time.monotonic() - started
                return result
            _apply(spark, config, location, store, plan, history_plan, result)
        except (Py4JJavaError, PySparkException) as error:
            if attempt < attempts and _is_commit_conflict(error):
                log.warning("%s: concurrent commit, planning again (attempt %d/%d)", table.name, attempt, attempts)
                time.sleep(min(0.2 * 2**attempt, 5.0))
                continue
            if _is_commit_conflict(error):
                raise CommitConflictError(
                    f"{table.name}: still conflicting with concurrent commits after {attempts} attempts"
                ) from error
            raise
        result.seconds = time.monotonic() - started
        return result
    raise AssertionError("unreachable")


def _apply(
    spark: SparkSession,
    config: PipelineConfig,
    location: LakeLocation,
    store: ObjectStore,
    plan: RunPlan,
    history_plan: RunPlan | None,
    result: RunResult,
) -> None:
    table = plan.table
    use_sequence = config.dms.change_sequence_column is not None
    history_pending = history_plan.pending if history_plan else []
    files = sorted({f.key: f for f in [*plan.pending, *history_pending]}.values(), key=lambda f: f.order_key)
    log.info("%s: applying %d file(s) up to %s", table.name, len(files), plan.trigger.key)
    # Materialized once: row positions are then fixed, and MERGE gets a deterministic source.
    changes = read_changes(spark, files, table, config.dms, store.uri).localCheckpoint(eager=True)
    problems, total = describe_problems(changes)
    if problems:
        raise DmsInputError(table.name, problems, total)
    history_snapshot: int | None = None
    if history_plan is not None:
        if history_plan.pending:
            history_snapshot = commit_history(
                spark,
                location,
                table,
                _only(changes, history_plan.pending, files),
                use_sequence,
                _run_properties(history_plan, None),
                _base(history_plan),
            )
            result.history_files = [f.key for f in history_plan.pending]
        else:
            history_snapshot = _base(history_plan)
    if not plan.pending:
        return
    main_changes = _only(changes, plan.pending, files)
    counts = count_changes(main_changes)
    last_changes = last_change_per_key(main_changes, table, use_sequence).localCheckpoint(eager=True)
    keys_changed = last_changes.count()
    properties = _run_properties(plan, {**counts.as_dict(), "keys": keys_changed})
    if history_snapshot is not None:
        properties[HISTORY_SNAPSHOT] = str(history_snapshot)
    result.snapshot_id = commit_changes(spark, location, table, last_changes, properties, _base(plan))
    result.applied_files = [f.key for f in plan.pending]
    result.counts = counts
    result.keys_changed = keys_changed


def _plan(
    spark: SparkSession,
    config: PipelineConfig,
    location: LakeLocation,
    listed: Sequence[StoredObject],
    table: TableSpec,
    trigger: DmsFile,
    table_name: str,
) -> RunPlan:
    # The base is read before the state: if they differ, the table moved on and the commit will be refused.
    base = base_snapshot(spark, location, table_name)
    plan = plan_run(config, table, trigger, listed, read_state(spark, location, table_name))
    return replace(plan, base_snapshot_id=base)


def _base(plan: RunPlan) -> int:
    assert plan.base_snapshot_id is not None, "plans made by _plan carry their base snapshot"
    return plan.base_snapshot_id


def _only(changes: DataFrame, chosen: list[DmsFile], read: list[DmsFile]) -> DataFrame:
    if len(chosen) == len(read):
        return changes
    return changes.filter(F.col(FILE).isin([f.key for f in chosen]))


def _run_properties(plan: RunPlan, changes: dict[str, int] | None) -> dict[str, str]:
    applied = [{"key": f.key, "etag": plan.objects[f.key].etag, "size": plan.objects[f.key].size} for f in plan.pending]
    properties = {
        STATE: plan.next_state.to_json(),
        APPLIED: json.dumps(applied, separators=(",", ":")),
        TRIGGER: plan.trigger.key,
    }
    if changes is not None:
        properties[CHANGES] = json.dumps(changes, separators=(",", ":"))
    return properties


def _is_commit_conflict(error: BaseException) -> bool:
    text = str(error)
    return any(marker in text for marker in _CONFLICTS)
