"""Table maintenance: compaction, snapshot expiry by age and by count, orphan removal.

Run locally through ``cdc-lake maintain`` or on AWS as the maintenance Glue job (``--action``), and by the replay
itself after a commit when the table's own state calls for it (``upkeep``): a table's cost then follows its
recent commits, not its age. The record of applied files is kept in a table property (``record.RECORD``), so
no expiry, ours or another tool's, can lose it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from cdc_lake.core.config import UpkeepSettings, WriteMode
from cdc_lake.core.job_arguments import UPKEEP_ACTIONS, UpkeepAction
from cdc_lake.core.names import KEEP_SNAPSHOTS, ORPHAN_DAYS, RETAIN_DAYS, RETAIN_LAST
from cdc_lake.core.retry import RetryPolicy, retried
from cdc_lake.core.sql import quote, sql_string
from cdc_lake.engine.commit import remove_dead_run_branches
from cdc_lake.engine.context import LakeContext
from cdc_lake.engine.iceberg_errors import is_expiry_beaten_by_a_branch
from cdc_lake.engine.iceberg_java import (
    Metadata,
    forget_commit,
    has_write_order,
    set_table_properties,
    set_table_property,
)
from cdc_lake.engine.record import RECORD, STATE, keep_record
from cdc_lake.engine.tables import (
    PINNED_WRITE_MODE,
    REJECTS_OF,
    WRITE_MODE_PROPERTIES,
    Lake,
    lake_tables,
    table_exists,
    write_mode_properties,
)

log = logging.getLogger(__name__)

# An expiry refused because a run branched from a snapshot it was expiring is made again from the new refs.
EXPIRY_RETRIES = RetryPolicy(attempts=5, first_delay=0.2, max_delay=2.0)
# What upkeep takes for a small data file: one a batch wrote (a few hundred KB for 10k changes), not a large full
# load's (a 128 MB read split of CSV makes 12 MB or more of Parquet; Spark splits finer only a load under 128 MB
# per core, small itself). Iceberg's own bound, three quarters of the 512 MB target, would rewrite a whole large
# table at its first compaction: 135 s for 100M rows here.
UPKEEP_SMALL_FILE_BYTES = 8 * 1024 * 1024
TARGET_FILE_SIZE = "write.target-file-size-bytes"
ICEBERG_TARGET_FILE_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True)
class Retention:
    """How much history expiry keeps: snapshots younger than ``days`` but no more than the newest ``most`` (None:
    the configuration's ``lake.upkeep.keep_days`` and ``keep_snapshots``), and at least the last ``last``; orphan
    files younger than ``orphan_days``. Ages count back from ``now`` (UTC; None: when maintenance runs)."""

    days: int | None = None
    last: int = RETAIN_LAST
    orphan_days: int = ORPHAN_DAYS
    now: dt.datetime | None = None
    most: int | None = None

    def cutoff(self, days: int | None) -> dt.datetime:
        now = self.now or dt.datetime.now(dt.UTC).replace(tzinfo=None)
        return now - dt.timedelta(days=RETAIN_DAYS if days is None else days)


@dataclass(frozen=True)
class MaintenanceResult:
    table: str
    action: str
    detail: dict[str, int]


def compact(lake: Lake, name: str, *, thorough: bool = True) -> dict[str, int]:
    """Rewrite small data files (applying their deletes), merge position-delete files, and rewrite manifests.

    Files are rewritten in the table's write order (its key), so each keeps a narrow key range and a MERGE
    can skip it; a table made before tables had one is rewritten as it is (binpack). ``thorough`` also rewrites
    every data file that any delete touches (the maintenance job); otherwise (``upkeep``, after replay commits)
    only the files batches wrote (under ``UPKEEP_SMALL_FILE_BYTES``) and those a third deleted, so its cost
    follows recent changes, not the table's size; the maintenance job merges the rest to Iceberg's target size.
    """
    target = sql_string(f"{lake.location.database}.{name}")
    catalog = quote(lake.location.catalog)
    strategy = "sort" if has_write_order(lake.spark, lake.location.dotted(name)) else "binpack"
    options = "'min-input-files', '2'"
    if thorough:
        options += ", 'delete-file-threshold', '1'"
    else:
        properties = Metadata(lake.spark, lake.location.dotted(name)).properties()
        target_bytes = int(properties.get(TARGET_FILE_SIZE, ICEBERG_TARGET_FILE_BYTES))
        small = min(UPKEEP_SMALL_FILE_BYTES, target_bytes * 3 // 4)  # Iceberg wants it below the target
        options += f", 'min-file-size-bytes', '{small}'"
    statements = [
        f"CALL {catalog}.system.rewrite_data_files(table => {target}, strategy => {sql_string(strategy)}, "
        f"options => map({options}))",
        f"CALL {catalog}.system.rewrite_position_delete_files(table => {target}, "
        "options => map('min-input-files', '2'))",
        f"CALL {catalog}.system.rewrite_manifests(table => {target})",
    ]
    rows = []
    for statement in statements:
        try:
            rows.append(lake.spark.sql(statement).first())
        finally:
            # Each procedure is a commit of its own: the record follows main after each, so that a step beaten by
            # a replay commit (or a job ended) after an earlier one landed never leaves main two snapshots past
            # it, which another tool's compaction and expiry would then make unreadable.
            keep_record(lake, name)
    data, deletes, manifests = rows
    return {
        "rewritten_data_files": int(data["rewritten_data_files_count"]) if data else 0,
        "added_data_files": int(data["added_data_files_count"]) if data else 0,
        "rewritten_delete_files": int(deletes["rewritten_delete_files_count"]) if deletes else 0,
        "rewritten_manifests": int(manifests["rewritten_manifests_count"]) if manifests else 0,
    }


def expire(lake: Lake, name: str, retention: Retention, most: int = KEEP_SNAPSHOTS) -> dict[str, int]:
    """Expire snapshots older than ``retention.days`` or beyond the newest ``retention.most`` (``most`` when None),
    keeping the last ``retention.last`` (at most as many as it keeps)."""
    dotted = lake.location.dotted(name)
    metadata = Metadata(lake.spark, dotted)
    cutoff = retention.cutoff(retention.days)
    kept = max(retention.most if retention.most is not None else most, 1)
    last = min(retention.last, kept)
    times = metadata.snapshot_times()
    if len(times) > kept:  # by count: everything older than the newest ``kept``
        cutoff = max(cutoff, dt.datetime.fromtimestamp(times[kept - 1] / 1000, dt.UTC).replace(tzinfo=None))
    if RECORD not in metadata.properties():  # a table last written before the property: its newest record stays
        newest_state = _newest_state_commit(lake, name)
        if newest_state is not None and newest_state < cutoff:
            cutoff = newest_state
    target = sql_string(f"{lake.location.database}.{name}")
    statement = (
        f"CALL {quote(lake.location.catalog)}.system.expire_snapshots(table => {target}, "
        f"older_than => TIMESTAMP {sql_string(cutoff.strftime('%Y-%m-%d %H:%M:%S.%f'))}, "
        f"retain_last => {int(last)})"
    )
    row, _ = retried(
        lambda: lake.spark.sql(statement).first(),
        EXPIRY_RETRIES,
        is_expiry_beaten_by_a_branch,
        what=f"{lake.location.dotted(name)}: a run branched from a snapshot being expired",
    )
    return {"deleted_data_files": int(row["deleted_data_files_count"]) if row else 0,
            "deleted_manifest_files": int(row["deleted_manifest_files_count"]) if row else 0}  # fmt: skip


def remove_orphans(lake: Lake, name: str, retention: Retention) -> dict[str, int]:
    """Delete files no snapshot references, older than ``orphan_days`` so running writes are never hit."""
    cutoff = retention.cutoff(retention.orphan_days)
    target = sql_string(f"{lake.location.database}.{name}")
    rows = lake.spark.sql(
        f"CALL {quote(lake.location.catalog)}.system.remove_orphan_files(table => {target}, "
        f"older_than => TIMESTAMP {sql_string(cutoff.strftime('%Y-%m-%d %H:%M:%S.%f'))})"
    ).collect()
    return {"orphan_files_removed": len(rows)}


def _newest_state_commit(lake: Lake, name: str) -> dt.datetime | None:
    # Snapshot times are compared in UTC (the session time zone).
    snapshots = lake.location.metadata(name, "snapshots")
    row = lake.spark.sql(
        f"SELECT max(committed_at) AS at FROM {snapshots} WHERE summary[{sql_string(STATE)}] IS NOT NULL"
    ).first()
    return row["at"] if row and row["at"] is not None else None


def maintain(
    context: LakeContext,
    action: UpkeepAction,
    *,
    tables: Sequence[str] | None = None,
    retention: Retention | None = None,
) -> list[MaintenanceResult]:
    """Run ``action`` (or all three, in a safe order) on the chosen tables (default: all configured)."""
    if action not in UPKEEP_ACTIONS:
        raise ValueError(f"unknown maintenance action {action!r}; use one of {', '.join(UPKEEP_ACTIONS)}")
    config, location = context.config, context.location
    upkept = config.lake.upkeep
    retention = retention or Retention()
    retention = dataclasses.replace(
        retention,
        days=upkept.keep_days if retention.days is None else retention.days,
        most=upkept.keep_snapshots if retention.most is None else retention.most,
    )
    chosen = [config.table(name) for name in tables] if tables else list(config.tables)
    steps: list[UpkeepAction] = ["compact", "expire", "orphans"] if action == "all" else [action]
    results: list[MaintenanceResult] = []
    for table in chosen:
        if not table_exists(context, table):
            log.info("%s: no lake table yet; nothing to maintain", table.name)
            continue
        for name in lake_tables(table):
            for step in steps:
                if step == "compact":
                    detail = compact(context, name)
                elif step == "expire":
                    # A dead run's branch pins its snapshots: removed first, expiry can free their files.
                    dead = remove_dead_run_branches(context, name, config.runs.longest_run)
                    detail = {"dead_run_branches_removed": len(dead), **expire(context, name, retention)}
                else:
                    detail = remove_orphans(context, name, retention)
                log.info("%s.%s: %s %s", location.database, name, step, detail)
                results.append(MaintenanceResult(f"{location.database}.{name}", step, detail))
    return results


# A table property: main's sequence number right after the replay's last compaction (``upkeep``).
COMPACTED = "cdc-lake.compacted"


@dataclass(frozen=True)
class TableShape:
    """What decides a table's upkeep, read from its metadata with no Spark job: its snapshots, its delete files, and
    the commits since the replay last compacted it (sequence numbers since; all of them before its first)."""

    snapshots: int
    delete_files: int
    commits_since_compaction: int
    oldest_ms: int | None
    files_bytes: int = 0
    write_mode: str = "merge-on-read"
    pinned_mode: str | None = None  # PINNED_WRITE_MODE: what upkeep keeps whatever the configuration says


def table_shape(lake: Lake, name: str, *, own_commit: bool = False) -> TableShape:
    metadata = Metadata(lake.spark, lake.location.dotted(name), own_commit=own_commit)
    head = metadata.head_summary()
    properties = metadata.properties()
    compacted = properties.get(COMPACTED, "0")
    return TableShape(
        snapshots=metadata.snapshot_count(),
        delete_files=int(head.get("total-delete-files", "0")),
        commits_since_compaction=metadata.head_sequence() - int(compacted if compacted.isdigit() else 0),
        oldest_ms=metadata.oldest_ms(),
        files_bytes=int(head.get("total-files-size", "0")),
        write_mode=properties.get(WRITE_MODE_PROPERTIES[0], "copy-on-write"),  # Iceberg's default
        # Rejects tables made before the pin existed are pinned merge-on-read all the same.
        pinned_mode=properties.get(PINNED_WRITE_MODE) or ("merge-on-read" if REJECTS_OF in properties else None),
    )


def fitting_write_mode(shape: TableShape, mode: WriteMode, up_to_mb: float) -> str:
    """The write mode ``mode`` asks of a table of ``shape``. ``auto``: copy-on-write while its files hold at most
    ``up_to_mb``, where rewriting the files a batch touches costs less than the delete files readers would apply
    and upkeep compact; merge-on-read above, where it would rewrite most of a large table at every batch. A table
    goes back to copy-on-write only under 90% of the size, so one whose size hovers at it does not switch back and
    forth at every commit. An ``up_to_mb`` of 0 keeps every table merge-on-read. A table's pinned mode wins."""
    if shape.pinned_mode:
        return shape.pinned_mode
    if mode != "auto":
        return mode
    limit = up_to_mb * 1024 * 1024
    if not limit or shape.files_bytes > limit:
        return "merge-on-read"
    if shape.write_mode == "copy-on-write" or shape.files_bytes <= limit * 0.9:
        return "copy-on-write"
    return "merge-on-read"


def due(shape: TableShape, settings: UpkeepSettings, now: dt.datetime) -> list[UpkeepAction]:
    """The upkeep a table's shape calls for: compaction once its delete files or its commits since the last one
    reach their thresholds; expiry once it holds a tenth more snapshots than it keeps (at least 10 more), or its
    oldest is an hour past the rollback window. The margins keep either from running at every commit: a table whose
    compaction cannot bring its delete files under the threshold (one per partition a batch touches) waits a
    quarter of the threshold in commits before the next."""
    steps: list[UpkeepAction] = []
    gap = max(1, settings.compact_at_delete_files // 4)
    deletes = (
        settings.compact_at_delete_files
        and shape.delete_files >= settings.compact_at_delete_files
        and shape.commits_since_compaction >= gap
    )
    commits = settings.compact_every_commits and shape.commits_since_compaction >= settings.compact_every_commits
    if deletes or commits:
        steps.append("compact")
    margin = max(10, settings.keep_snapshots // 10)
    window = dt.timedelta(days=settings.keep_days, hours=1)
    aged = shape.oldest_ms is not None and now - dt.datetime.fromtimestamp(shape.oldest_ms / 1000, dt.UTC) > window
    least = min(RETAIN_LAST, settings.keep_snapshots) + 10  # what expiry by age keeps, and a margin
    if shape.snapshots > settings.keep_snapshots + margin or (aged and shape.snapshots > least):
        steps.append("expire")
    return steps


def upkeep(context: LakeContext, name: str, mode: WriteMode) -> list[MaintenanceResult]:
    """The upkeep ``due`` for lake table ``name``, run now: after a replay commit; first, the write mode that
    ``mode`` asks of its size, so that the next batch writes in it. A step beaten by a concurrent commit is left for
    the next commit to start again (main is never at risk: each step is one Iceberg commit)."""
    spark, location, lake = context.spark, context.location, context.config.lake
    settings = lake.upkeep
    now = dt.datetime.now(dt.UTC)
    shape = table_shape(context, name, own_commit=True)  # right after the commit: as it left the table
    results: list[MaintenanceResult] = []
    fitting = fitting_write_mode(shape, mode, lake.copy_on_write_up_to_mb)
    if fitting != shape.write_mode:
        set_table_properties(spark, location.dotted(name), write_mode_properties(fitting))
        detail = {"copy_on_write": int(fitting == "copy-on-write"), "files_bytes": shape.files_bytes}
        log.info("%s.%s: upkeep write mode %s %s", location.database, name, fitting, detail)
        results.append(MaintenanceResult(f"{location.database}.{name}", "write-mode", detail))
    steps = due(shape, settings, now)
    for step in ("compact", "expire"):
        if step == "expire" and "compact" in steps:  # compaction added snapshots: expiry is judged after it
            steps = due(table_shape(context, name), settings, now)
        if step not in steps:
            continue
        started = time.monotonic()
        forget_commit(spark, location.dotted(name))  # written now by Spark's procedures, not the row delta
        if step == "compact":
            detail = compact(context, name, thorough=False)
            dotted = location.dotted(name)
            set_table_property(spark, dotted, COMPACTED, str(Metadata(spark, dotted).head_sequence()))
        else:
            retention = Retention(days=settings.keep_days, most=settings.keep_snapshots)
            detail = expire(context, name, retention, settings.keep_snapshots)
        detail["milliseconds"] = int((time.monotonic() - started) * 1000)
        log.info("%s.%s: upkeep %s %s", location.database, name, step, detail)
        results.append(MaintenanceResult(f"{location.database}.{name}", step, detail))
    return results
