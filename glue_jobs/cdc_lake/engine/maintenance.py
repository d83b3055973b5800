"""Table maintenance: compaction, snapshot expiry that keeps what rollback and replay need, orphan removal.

Run locally through ``cdc-lake maintain`` or on AWS as the maintenance Glue job (``--action``).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pyspark.sql import SparkSession

from cdc_lake.core.names import ORPHAN_DAYS, RETAIN_DAYS, RETAIN_LAST
from cdc_lake.core.sql import quote, sql_string
from cdc_lake.engine.commit import remove_dead_run_branches
from cdc_lake.engine.context import LakeContext
from cdc_lake.engine.history import lake_tables
from cdc_lake.engine.iceberg_java import has_write_order
from cdc_lake.engine.record import STATE
from cdc_lake.engine.tables import LakeLocation, table_exists

log = logging.getLogger(__name__)

Action = Literal["compact", "expire", "orphans", "all"]
ACTIONS: tuple[Action, ...] = ("compact", "expire", "orphans", "all")


@dataclass(frozen=True)
class Retention:
    """How much history expiry keeps: snapshots younger than ``days``, and at least the last ``last``; orphan
    files younger than ``orphan_days``. Ages count back from ``now`` (UTC; None: when maintenance runs)."""

    days: int = RETAIN_DAYS
    last: int = RETAIN_LAST
    orphan_days: int = ORPHAN_DAYS
    now: dt.datetime | None = None

    def cutoff(self, days: int) -> dt.datetime:
        now = self.now or dt.datetime.now(dt.UTC).replace(tzinfo=None)
        return now - dt.timedelta(days=days)


@dataclass(frozen=True)
class MaintenanceResult:
    table: str
    action: str
    detail: dict[str, int]


def compact(spark: SparkSession, location: LakeLocation, name: str) -> dict[str, int]:
    """Rewrite small data files and apply position deletes, then drop delete files no longer needed.

    Files are rewritten in the table's write order (its key), so each keeps a narrow key range and a MERGE
    can skip it; a table made before tables had one is rewritten as it is (binpack).
    """
    target = sql_string(f"{location.database}.{name}")
    catalog = quote(location.catalog)
    strategy = "sort" if has_write_order(spark, location.dotted(name)) else "binpack"
    data = spark.sql(
        f"CALL {catalog}.system.rewrite_data_files(table => {target}, strategy => {sql_string(strategy)}, "
        "options => map('min-input-files', '2', 'delete-file-threshold', '1'))"
    ).first()
    deletes = spark.sql(f"CALL {catalog}.system.rewrite_position_delete_files(table => {target})").first()
    return {
        "rewritten_data_files": int(data["rewritten_data_files_count"]) if data else 0,
        "added_data_files": int(data["added_data_files_count"]) if data else 0,
        "rewritten_delete_files": int(deletes["rewritten_delete_files_count"]) if deletes else 0,
    }


def expire(spark: SparkSession, location: LakeLocation, name: str, retention: Retention) -> dict[str, int]:
    """Expire old snapshots, never the newest one that records applied files (replay reads it)."""
    cutoff = retention.cutoff(retention.days)
    newest_state = _newest_state_commit(spark, location, name)
    if newest_state is not None and newest_state < cutoff:
        cutoff = newest_state
    target = sql_string(f"{location.database}.{name}")
    row = spark.sql(
        f"CALL {quote(location.catalog)}.system.expire_snapshots(table => {target}, "
        f"older_than => TIMESTAMP {sql_string(cutoff.strftime('%Y-%m-%d %H:%M:%S.%f'))}, "
        f"retain_last => {int(retention.last)})"
    ).first()
    return {"deleted_data_files": int(row["deleted_data_files_count"]) if row else 0,
            "deleted_manifest_files": int(row["deleted_manifest_files_count"]) if row else 0}  # fmt: skip


def remove_orphans(spark: SparkSession, location: LakeLocation, name: str, retention: Retention) -> dict[str, int]:
    """Delete files no snapshot references, older than ``orphan_days`` so running writes are never hit."""
    cutoff = retention.cutoff(retention.orphan_days)
    target = sql_string(f"{location.database}.{name}")
    rows = spark.sql(
        f"CALL {quote(location.catalog)}.system.remove_orphan_files(table => {target}, "
        f"older_than => TIMESTAMP {sql_string(cutoff.strftime('%Y-%m-%d %H:%M:%S.%f'))})"
    ).collect()
    return {"orphan_files_removed": len(rows)}


def _newest_state_commit(spark: SparkSession, location: LakeLocation, name: str) -> dt.datetime | None:
    # Snapshot times are compared in UTC (the session time zone).
    snapshots = location.metadata(name, "snapshots")
    row = spark.sql(
        f"SELECT max(committed_at) AS at FROM {snapshots} WHERE summary[{sql_string(STATE)}] IS NOT NULL"
    ).first()
    return row["at"] if row and row["at"] is not None else None


def maintain(
    context: LakeContext,
    action: Action,
    *,
    tables: Sequence[str] | None = None,
    retention: Retention | None = None,
) -> list[MaintenanceResult]:
    """Run ``action`` (or all three, in a safe order) on the chosen tables (default: all configured)."""
    if action not in ACTIONS:
        raise ValueError(f"unknown maintenance action {action!r}; use one of {', '.join(ACTIONS)}")
    spark, config, location = context.spark, context.config, context.location
    retention = retention or Retention()
    chosen = [config.table(name) for name in tables] if tables else list(config.tables)
    steps: list[Action] = ["compact", "expire", "orphans"] if action == "all" else [action]
    results = []
    for table in chosen:
        if not table_exists(spark, location, table):
            log.info("%s: no lake table yet; nothing to maintain", table.name)
            continue
        for name in lake_tables(table):
            for step in steps:
                if step == "compact":
                    detail = compact(spark, location, name)
                elif step == "expire":
                    # A dead run's branch pins its snapshots: removed first, expiry can free their files.
                    dead = remove_dead_run_branches(spark, location, name, config.runs.longest_run)
                    detail = {"dead_run_branches_removed": len(dead), **expire(spark, location, name, retention)}
                else:
                    detail = remove_orphans(spark, location, name, retention)
                log.info("%s.%s: %s %s", location.database, name, step, detail)
                results.append(MaintenanceResult(f"{location.database}.{name}", step, detail))
    return results
