"""The warm job (``runs.mode: warm``): one shard's tables, replayed as their files land, until quiet.

The run first yields to a live run of its shard that is not stopping (the Lambda may start a run just as another
goes on), then runs ``engine.runs.warm.warm``, putting each round's metrics as the round ends and each refusal as it
happens, and at its end how long the landed files it saw have waited. It fails, after the others, when a table's
batch was refused.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

import boto3

from cdc_lake.core.exceptions import JobArgumentError
from cdc_lake.core.job_arguments import WarmArguments
from cdc_lake.core.names import WARM_JOB
from cdc_lake.core.shards import shard_count, shard_queue
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.metrics import CloudWatchPublisher
from cdc_lake.engine.runs.events import QueueLandings
from cdc_lake.engine.runs.outcome import DrainResult
from cdc_lake.engine.runs.shift import NO_HOOKS, DrainHooks
from cdc_lake.engine.runs.warm import JobRuns, WarmShift, warm, warm_budget
from cdc_lake.jobs.entry import GlueJob, JobClients, lake_context, reported

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class WarmOptions(WarmArguments):
    """A warm run's options: its arguments as declared (``WarmArguments``)."""


def run_warm(
    options: WarmOptions,
    context: ReplayContext,
    glue: JobRuns,
    hooks: DrainHooks = NO_HOOKS,
    sqs: Any = None,
) -> DrainResult:
    """One warm run of ``--shard``: the shard's tables until quiet; nothing when a live run of the shard takes it.
    With ``--events_queues``, the shard's queue (read with ``sqs``, boto3's by default) tells it where files
    landed (``engine.runs.events``)."""
    shards = shard_count(context.config)
    if options.shard >= shards:
        raise JobArgumentError(
            f"--shard {options.shard}: the configuration's tables make {shards} shard(s), 0 to {shards - 1}"
        )
    jobs = {
        "full_load": options.full_load_job,
        "cdc_replay": options.cdc_replay_job,
        WARM_JOB: options.JOB_NAME or WARM_JOB,
    }
    if options.config_version and options.config_version != context.config.version:
        # The stack was deployed between the Lambda's start and this run's: the run holds the shard with the
        # configuration it read, and a Lambda of the other counts on it for no file.
        log.warning("shard %d: started for configuration %s, running %s (a deployment in between)",
                    options.shard, options.config_version, context.config.version)  # fmt: skip
    run_id = options.JOB_RUN_ID or f"local-{uuid.uuid4().hex[:12]}"
    shift = WarmShift(context, glue, options.shard, run_id, jobs, options.bucket)
    queue = shard_queue(options.events_queues, options.shard, shards)
    if queue is not None:
        shift.landings = QueueLandings(sqs if sqs is not None else boto3.client("sqs"), queue)
    peer = shift.peer()
    if peer is not None:
        log.info("shard %d: run %s is live and not stopping; it takes the landed files", options.shard, peer)
        return DrainResult()
    outcome = warm(context, shift, warm_budget(context, options.quiet_seconds), hooks)
    log.info(
        "warm run of shard %d: %d commit(s), %d file(s), %d round(s), %.1fs, %d table(s) handed over%s",
        options.shard,
        outcome.commit_count,
        outcome.applied_count,
        outcome.rounds,
        outcome.seconds,
        len(shift.handed) + len(shift.left),
        f", {len(outcome.failures)} table(s) failed" if outcome.failures else "",
    )
    return outcome


def run(options: WarmOptions, context: ReplayContext, clients: JobClients) -> DrainResult:
    """The warm job's Glue run: as ``run_warm``, with its metrics (``metric_hooks``), then the end told as a replay
    run's (``jobs.entry.reported``)."""
    outcome = run_warm(options, context, clients.glue, metric_hooks(clients.metrics))
    return reported(outcome, clients, refusals_told=True)


def metric_hooks(metrics: CloudWatchPublisher) -> DrainHooks:
    """A warm run's metrics: the round's batches in one request as each round ends, and each refusal as it happens
    (the TableFailures alarm within a minute, not when the run ends up to a day later)."""
    return DrainHooks(
        on_batch=metrics.batch,
        on_round=metrics.round_end,
        on_refusal=lambda _table, _error: metrics.table_failures(1),
    )


CDC_WARM = GlueJob(WARM_JOB, WarmOptions, lake_context, run)
