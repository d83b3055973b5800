"""The replay jobs: ``full_load``, started for LOAD files, and ``cdc_replay``, started for CDC files.

Which run the configuration's mode makes of them (``core.run_modes``): in a mode whose runs admit every table
(coalesced, the default), every landed file of every table (``engine.runs.coalesced``); else, or given
``--one_table``, the table's pending files up to the triggering one (``engine.runs.per_file``). Either way each job
recovers from the other's lost events, and puts how long the landed files it saw have waited unapplied
(``OLDEST_WAITING_METRIC``), which the stack alarms on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from cdc_lake.core.dms_files import JOB_FOR_FILE_KIND, parse_key
from cdc_lake.core.exceptions import JobArgumentError
from cdc_lake.core.job_arguments import ReplayArguments
from cdc_lake.core.names import TriggeredJob
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.replay import RunResult
from cdc_lake.engine.runs.coalesced import Budget, drain
from cdc_lake.engine.runs.outcome import DrainResult
from cdc_lake.engine.runs.per_file import per_file
from cdc_lake.engine.runs.shift import DrainHooks
from cdc_lake.jobs.entry import GlueJob, JobClients, lake_context, reported

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class ReplayOptions(ReplayArguments):
    """A replay run's options: its arguments as declared (``ReplayArguments``)."""


def run_job(
    kind: TriggeredJob,
    options: ReplayOptions,
    context: ReplayContext,
    *,
    on_batch: Callable[[RunResult], None] | None = None,
    on_round: Callable[[int, int], None] | None = None,
) -> DrainResult:
    """Run one job: check the file suits this job, then apply.

    A mode whose runs admit every table (``runs.mode: coalesced``): every table's landed files, the file's table
    first, round after round up to the time budget (``drain``). ``per_file`` and ``warm``, or ``--one_table``: the
    file's table's pending files up to the file (``per_file``). A table whose batch is refused is reported in the
    result's ``failures``; the caller fails the run. The result's ``waiting`` tells what the run saw still waiting:
    every table a coalesced run, the file's table a per-file run that committed (one that found its file applied
    tells nothing: later files may be applied or not).
    """
    config = context.config
    dms_file = parse_key(options.key, config)
    if dms_file.table != options.table:
        raise JobArgumentError(f"{options.key}: belongs to table {dms_file.table}, not {options.table}")
    if JOB_FOR_FILE_KIND[dms_file.kind] != kind:
        raise JobArgumentError(f"{options.key}: a {dms_file.kind.value} file was routed to the {kind} job")
    if config.runs.run_mode.every_table and not options.one_table:
        budget = Budget.of(config, idle_seconds=options.idle_seconds)
        outcome = drain(context, budget, first=dms_file.table, hooks=DrainHooks(on_batch, on_round))
    else:
        outcome = per_file(context, dms_file, on_batch)
    for result in outcome.results:
        if not result.already_applied:
            log.info(
                "%s: applied %d file(s) up to %s in snapshot %s: %s, %d key(s) changed",
                result.table,
                len(result.applied_files),
                result.trigger.key if result.trigger else None,
                result.snapshot_id,
                result.counts.as_dict() if result.counts else {},
                result.keys_changed,
                # The table and batch as keys of their own in the job's JSON lines (jobs.logs).
                extra={
                    "table": result.table,
                    "batch": {
                        "files": len(result.applied_files),
                        "up_to": result.trigger.key if result.trigger else None,
                        "snapshot_id": result.snapshot_id,
                    },
                },
            )
    log.info(
        "run for %s: %d commit(s), %d file(s), %d round(s), %.1fs%s",
        options.key,
        len(outcome.commits),
        len(outcome.applied_files),
        outcome.rounds,
        outcome.seconds,
        f", {len(outcome.failures)} table(s) failed" if outcome.failures else "",
    )
    return outcome


def run(kind: TriggeredJob, options: ReplayOptions, context: ReplayContext, clients: JobClients) -> DrainResult:
    """The replay job's Glue run: apply, putting each commit's metrics and then how long the landed files the run
    saw have waited unapplied (a refused table's too); fails the run (after every other table was applied) when a
    table's batch was refused, so the Glue run's state and the TableFailures metric both say so."""
    outcome = run_job(kind, options, context, on_batch=clients.metrics.batch, on_round=clients.metrics.round_end)
    return reported(outcome, clients)


FULL_LOAD = GlueJob("full_load", ReplayOptions, lake_context, partial(run, "full_load"))
CDC_REPLAY = GlueJob("cdc_replay", ReplayOptions, lake_context, partial(run, "cdc_replay"))
