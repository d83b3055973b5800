"""The maintenance job: compaction, snapshot expiry and orphan-file removal on one or every table, rebuilding one
table after DMS reloaded it (``--action reload``, ``cdc_lake.engine.reload``), or applying a quarantining table's
rejects."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from cdc_lake.core.job_arguments import MaintenanceArguments
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.landed_expiry import expire_landed
from cdc_lake.engine.maintenance import MaintenanceResult, Retention, maintain
from cdc_lake.engine.metrics import CloudWatchPublisher
from cdc_lake.engine.rejects_replay import replay_rejects
from cdc_lake.engine.reload import ReloadResult, reload_table
from cdc_lake.engine.runs.waiting import waiting_in
from cdc_lake.jobs.entry import GlueJob, JobClients, lake_context

log = logging.getLogger(__name__)

RELOAD: Literal["reload"] = "reload"
REJECTS = {"rejects-replay": False, "rejects-accept": True}  # action: whether it accepts the bad rows' loss


@dataclass(frozen=True, kw_only=True)
class MaintenanceOptions(MaintenanceArguments):
    """A maintenance run's options: its arguments as declared (``MaintenanceArguments``), and the retention
    they set."""

    @property
    def retention(self) -> Retention:
        return Retention(days=self.retain_days, last=self.retain_last, orphan_days=self.orphan_days)


def run_maintenance(options: MaintenanceOptions, context: ReplayContext) -> list[MaintenanceResult]:
    """Run one maintenance action on one table or on every configured table, or reload one table."""
    if options.action == RELOAD:
        assert options.table is not None  # checked by from_options
        result = reload_table(context, context.config.table(options.table), since=options.since)
        log.info("%s", describe_reload(result))
        return [MaintenanceResult(result.table, RELOAD, reload_detail(result))]
    if options.action == "rejects-replay" or options.action == "rejects-accept":  # noqa: PLR1714 (narrows the type)
        assert options.table is not None  # checked by from_options
        table = context.config.table(options.table)
        replayed = replay_rejects(context, table, accept=REJECTS[options.action])
        detail = {"applied": replayed.applied, "dropped": replayed.dropped, "keys": replayed.keys}
        log.info("%s: %s: %s", table.name, options.action, detail)
        return [MaintenanceResult(table.name, options.action, {**detail, "snapshot_id": replayed.snapshot_id or 0})]
    tables = [options.table] if options.table else None
    return maintain(context, options.action, tables=tables, retention=options.retention)


def reload_detail(result: ReloadResult) -> dict[str, int]:
    counts = result.counts
    return {
        "load_files": len(result.load_files),
        "cdc_files": len(result.cdc_files),
        "skipped_cdc_files": len(result.skipped_cdc_files),
        "stale_load_files": len(result.stale_load_files),
        "rows": result.rows,
        "inserted": counts.inserts,
        "updated": counts.updates,
        "deleted": counts.deletes,
        "snapshot_id": result.snapshot_id,
        "previous_snapshot_id": result.previous_snapshot_id,
    }


def describe_reload(result: ReloadResult) -> str:
    """The reload's outcome in a few lines, as the CLI prints it and the Glue job logs it."""
    counts = result.counts
    lines = [
        f"{result.table}: reloaded from {len(result.load_files)} LOAD file(s) and {len(result.cdc_files)} CDC "
        f"file(s) from {result.boundary} on ({result.boundary_source}): {result.rows} row(s); "
        f"{counts.inserts} inserted, {counts.updates} updated, {counts.deletes} deleted "
        f"in change {result.snapshot_id}",
        f"  the table before the reload stays readable as change {result.previous_snapshot_id} "
        "(export/reconcile --as-of, rollback --to)",
    ]
    if result.skipped_cdc_files:
        lines.append(
            f"  {len(result.skipped_cdc_files)} earlier CDC file(s) left out as older than the reload, the last "
            f"{result.skipped_cdc_files[-1]}; if that is wrong, reload again with --since"
        )
    if result.stale_load_files:
        lines.append(
            f"  {len(result.stale_load_files)} LOAD file(s) older than the reload's first one left out: "
            + ", ".join(result.stale_load_files)
        )
    return "\n".join(lines)


def publish_oldest_waiting(context: ReplayContext, publisher: CloudWatchPublisher) -> float | None:
    """Put the seconds the oldest unapplied landed file of any configured table has waited (0: none waits), from
    each table's record and one listing of it (every table, those no replay run reached too); returns it. None,
    nothing put and an error logged, when a table's files cannot be told (the maintenance itself is done): the
    stack's alarm then reads the missing datum as breaching once none comes for its period."""
    return publisher.oldest_waiting(waiting_in(context))


def run(options: MaintenanceOptions, context: ReplayContext, clients: JobClients) -> list[MaintenanceResult]:
    """The maintenance job's Glue run. The scheduled run (``--action all``) also removes the landed files each
    table applied once ``--raw_retention_days`` old (``engine.landed_expiry``), and puts how long the oldest landed
    file no table applied has waited (``OLDEST_WAITING_METRIC``; 0 when none waits), which the stack alarms on
    long before the raw bucket's catch-all rule could expire it, and expects once per schedule; every replay run
    puts it too, for the tables it saw."""
    results = run_maintenance(options, context)
    if options.action == "all" and options.bucket:
        if options.raw_retention_days is not None:
            tables = [context.config.table(options.table)] if options.table else None
            expired = expire_landed(context, options.raw_retention_days, tables)
            results += [MaintenanceResult(e.table, "expire-landed", {"removed": e.removed}) for e in expired]
        publish_oldest_waiting(context, clients.metrics)
    return results


MAINTENANCE = GlueJob("maintenance", MaintenanceOptions, lake_context, run)
