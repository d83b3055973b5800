"""The S3-triggered Lambda: route each DMS file to its Glue job and start the run.

``handle`` is the whole behaviour with its Glue starter injected; the local runtime calls it with a starter
around a local stand-in for Glue, the tests with one around moto or a fake client. ``lambda_handler`` only adds
what the deployed function needs: Powertools logging and metrics, and the configuration and the starter built
from environment variables on the first invocation of a container and then reused.

Nothing is dropped silently: every object that starts no run is logged with its reason, and when Glue still
refuses a run after the retries the invocation fails, so Lambda's asynchronous retries and then the on-failure
destination keep the event. The starter's retries (``cdc_lake.core.retry``) are the only ones: Glue's capacity
refusals (ConcurrentRunsExceededException…) are not among botocore's retryable errors, so botocore cannot do
them alone, and the deployed client is built with its own retries off rather than retrying inside each attempt.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from cdc_lake.core.config import PipelineConfig, load_config_uri
from cdc_lake.core.exceptions import ConfigError, JobStartError
from cdc_lake.core.names import (
    TRIGGER_SERVICE_NAME,
    TRIGGERED_JOBS,
    UNKNOWN_TABLE_OBJECTS_METRIC,
    WARM_JOB,
    WARM_QUEUES_ENV,
    StartedJob,
    TriggeredJob,
)
from cdc_lake.core.retry import RetryPolicy, retried
from cdc_lake.core.run_modes import Starts
from cdc_lake.core.shards import (
    SQS_MOST_PER_REQUEST,
    VERSION_ARGUMENT,
    hold_key,
    landing_hint,
    marker_key,
    runs_of_shard,
    runs_since,
    shard_count,
    shard_of,
    shard_queue,
)
from dms_trigger.routing import UNKNOWN_TABLE, IgnoredObject, JobRunRequest, read_event, route

# Environment of the deployed function (explicit arguments to handle() win; it reads no environment).
CONFIG_ENV = "CDC_LAKE_CONFIG"
FULL_LOAD_JOB_ENV = "FULL_LOAD_JOB_NAME"
CDC_REPLAY_JOB_ENV = "CDC_REPLAY_JOB_NAME"
# runs.mode warm only: the warm job the function starts for CDC files, one run per shard (core.shards).
WARM_JOB_ENV = "CDC_WARM_JOB_NAME"
JOB_NAME_ENV: Mapping[StartedJob, str] = {
    "full_load": FULL_LOAD_JOB_ENV,
    "cdc_replay": CDC_REPLAY_JOB_ENV,
    WARM_JOB: WARM_JOB_ENV,
}
SERVICE_NAME_ENV = "POWERTOOLS_SERVICE_NAME"
METRICS_NAMESPACE_ENV = "POWERTOOLS_METRICS_NAMESPACE"
DEFAULT_SERVICE_NAME = TRIGGER_SERVICE_NAME
DEFAULT_METRICS_NAMESPACE = "CdcLake"

# Metric names (Count).
JOB_RUNS_STARTED = "JobRunsStarted"
RUNS_COALESCED = "RunsCoalesced"
JOB_START_FAILURES = "JobStartFailures"
IGNORED_OBJECTS = "IgnoredObjects"
UNKNOWN_TABLE_OBJECTS = UNKNOWN_TABLE_OBJECTS_METRIC

# Glue refusals worth waiting out: too many runs of the job or in the account, throttling, Glue-side faults.
RETRYABLE_ERROR_CODES = frozenset(
    {
        "ConcurrentRunsExceededException",
        "ResourceNumberLimitExceededException",
        "ThrottlingException",
        "Throttling",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "InternalServiceException",
        "InternalFailure",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "OperationTimeoutException",
    }
)
MAX_RETRY_DELAY = 20.0

# A run in these states has not yet run its script, so it lists the bucket after any file whose event
# finds it there: it covers that file. A RUNNING run may already have listed for the last time, so it
# covers nothing. (Glue reports RUNNING once the script starts; a run's first listing comes after.)
NOT_YET_LISTED_STATES = frozenset({"WAITING", "STARTING"})
# A warm run lists the landing until it stops, and says so before its last look (engine.runs.warm): a RUNNING one covers
# every file unless it has said so.
WARM_LIVE_STATES = frozenset({"WAITING", "STARTING", "RUNNING"})
# GetJobRuns returns the newest runs first; a coalesced or per-file run that has not started yet is among the newest
# (a warm shard's runs are read further back: core.shards.runs_since).
RECENT_RUNS = 50

_log = logging.getLogger(__name__)


class LogSink(Protocol):
    """What handle() needs of a logger: a Powertools Logger or a standard logging.Logger."""

    def info(self, msg: object, *args: object, extra: Mapping[str, object] | None = None) -> None: ...

    def warning(self, msg: object, *args: object, extra: Mapping[str, object] | None = None) -> None: ...

    def error(self, msg: object, *args: object, extra: Mapping[str, object] | None = None) -> None: ...


class MetricSink(Protocol):
    """What handle() needs of a metrics recorder: Powertools Metrics has it."""

    def add_metric(self, name: str, unit: MetricUnit, value: float) -> None: ...


def is_retryable(error: ClientError) -> bool:
    """True when Glue's refusal is temporary: retryable error code or an HTTP 5xx."""
    code = error.response.get("Error", {}).get("Code", "")
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    return code in RETRYABLE_ERROR_CODES or int(status or 0) >= 500


def _is_temporary_refusal(error: Exception) -> bool:
    return isinstance(error, ClientError) and is_retryable(error)


class GlueJobStarter:
    """The one place that calls Glue: start_job_run with retries on temporary refusals. ``exists`` tells whether a
    bucket holds a key (S3's HeadObject): a warm run's stop marker or hold, read in ``runs.mode: warm`` only; ``tell``
    tells a shard's warm runs of its landed CDC files (its event queue, ``engine.runs.events``), where the stack
    has queues."""

    def __init__(  # noqa: PLR0913  # the deployed function and the local runtime each give all of them
        self,
        glue_client: Any,
        job_names: Mapping[StartedJob, str],
        *,
        max_attempts: int = 5,
        base_delay: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
        exists: Callable[[str, str], bool] | None = None,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        tell: Callable[[int, Sequence[JobRunRequest]], None] | None = None,
    ) -> None:
        missing = [kind for kind in TRIGGERED_JOBS if not job_names.get(kind)]
        if missing:
            raise ConfigError(f"no Glue job name for {missing}; set {[JOB_NAME_ENV[k] for k in missing]}")
        self.glue_client = glue_client
        self.job_names = dict(job_names)
        self.retries = RetryPolicy(attempts=max_attempts, first_delay=base_delay, max_delay=MAX_RETRY_DELAY)
        self.sleep = sleep
        self.exists = exists
        self.now = now
        self.tell = tell

    def start(self, request: JobRunRequest) -> str:
        """Start the job run and return its JobRunId.

        Retryable refusals are retried with exponential backoff and jitter; the last one is raised after
        ``max_attempts``. Other errors (EntityNotFoundException, InvalidInputException, AccessDenied…) are
        raised at once: waiting would not fix them.
        """
        job_name = self.job_names[request.job]

        def start_run() -> str:
            response = self.glue_client.start_job_run(
                JobName=job_name,
                Arguments=request.arguments(),
                # Without it a run is refused, not queued, when the job is at MaxConcurrentRuns.
                JobRunQueuingEnabled=True,
            )
            return str(response["JobRunId"])

        what = f"Glue refused {job_name} for {request.key}"
        run_id, _attempts = retried(start_run, self.retries, _is_temporary_refusal, what=what, sleep=self.sleep)
        return run_id

    def waiting_run(self, kind: TriggeredJob) -> str | None:
        """The id of a run of the job that is waiting or starting (it will list the bucket after now), or None.

        Any error reading the runs is logged and answered with None: the caller then starts a run, which is
        never wrong (a needless run finds nothing to do), whereas skipping one could leave a file unapplied.
        """
        try:
            response = self.glue_client.get_job_runs(JobName=self.job_names[kind], MaxResults=RECENT_RUNS)
        except (ClientError, BotoCoreError) as error:
            _log.warning("could not read the runs of %s (%s); starting a run", self.job_names[kind], error)
            return None
        for run in response.get("JobRuns", []):
            if run.get("JobRunState") in NOT_YET_LISTED_STATES:
                return str(run["Id"])
        return None

    def warm_run(self, bucket: str, shard: int, live_span: dt.timedelta, version: str) -> str | None:
        """The id of the shard's warm run that will see a file landed now, of this configuration (``version``,
        ``PipelineConfig.version``): one waiting or starting that was started for it, or one running that holds the
        shard with it and has not said it is stopping; None: start one. A run of another configuration (a deployment
        since) may not own the file's table: it never counts. Runs are read back to ``live_span`` ago
        (``core.shards.runs_since``). Any error reading runs or markers answers None: a needless run yields to a live
        one at its start.

        A RUNNING run's state is two HEADs, not a listing of ``core.shards.state_prefix`` (a sixth of its price):
        its stop marker, then its hold. In that order they answer what one listing would: a marker absent at the
        first read means the run was not stopping then, so a hold still there at the second means it lists the
        landing again after the first, after this file landed (a stopping run's marker stays until its hold is gone,
        ``ShardState.keys_of``). Read the other way round, a run could end in between and be counted on."""
        name = self.job_names[WARM_JOB]
        try:
            runs = runs_since(self.glue_client, name, self.now() - live_span)
            ours = runs_of_shard(runs, shard, WARM_LIVE_STATES)
            starting = (r for r in ours if r["JobRunState"] != "RUNNING")
            ready = next((r for r in starting if (r.get("Arguments") or {}).get(VERSION_ARGUMENT) == version), None)
            if ready is not None:
                return str(ready["Id"])
            if not any(r["JobRunState"] == "RUNNING" for r in ours):
                return None
            exists = self.exists
            if exists is None:
                raise ConfigError("runs.mode warm: the starter cannot read the warm runs' stop markers")
            for run in (r for r in ours if r["JobRunState"] == "RUNNING"):
                run_id = str(run["Id"])
                if not exists(bucket, marker_key(shard, run_id)) and exists(bucket, hold_key(shard, run_id, version)):
                    return run_id
        except (ClientError, BotoCoreError) as error:
            _log.warning("could not tell whether shard %d's warm run is live (%s); starting a run", shard, error)
        return None

    def backoff(self, attempt: int) -> float:
        """Delay after the given failed attempt: exponential, capped, with equal jitter (between half and all)."""
        return self.retries.delay(attempt)


def handle(
    event: Mapping[str, Any],
    *,
    config: PipelineConfig,
    starter: GlueJobStarter,
    logger: LogSink | None = None,
    metrics: MetricSink | None = None,
) -> list[str]:
    """Start the Glue job runs the event's DMS data files need with ``starter``; return the JobRunIds started.

    ``runs.mode: coalesced`` (the default): per job, no run is started when one is already waiting or
    starting, since that run lists the bucket after these files landed and every run applies everything
    landed for every table; otherwise one run is started for all of the event's files of that job. No
    wake-up is lost: a file is either covered by a run that has not listed yet, or it starts one.
    ``runs.mode: per_file``: one run per file, applying its table's files up to it.
    ``runs.mode: warm``: per shard of the CDC files' tables, the shard's warm run unless one is live and has not
    said it is stopping (``GlueJobStarter.warm_run``); a LOAD file starts a run for its table, as per file.

    Each ignored object gets one structured log line (a warning and the UnknownTableObjects metric for
    files of tables not in the configuration). If any run is still refused after the retries, the others
    are started anyway and JobStartError is raised, so the invocation fails and Lambda keeps the event.

    A duplicated or re-delivered event is harmless, and so is the re-run of the requests that succeeded
    when Lambda retries a failed invocation: a run records the files it applied in the same Iceberg commit
    as their changes, so a second run for an applied file finds nothing left to apply.
    """
    log: LogSink = logger if logger is not None else _log
    created, ignored = read_event(event)
    requests, not_routed = route(created, config)
    ignored.extend(not_routed)
    for item in ignored:
        _log_ignored(log, item)

    coalesced = 0
    starts = config.runs.run_mode.starts
    if starts is Starts.PER_SHARD:
        requests, covered = _warm(requests, starter, config)
        for request, run_id in covered:
            log.info(
                "s3://%s/%s is covered by warm run %s of shard %s",
                request.bucket,
                request.key,
                run_id,
                request.shard,
                extra={**_request_fields(request), "covered_by": run_id},
            )
        coalesced = len(covered)
    elif starts is Starts.UNLESS_WAITING:
        requests, covered = _coalesce(requests, starter)
        for request, run_id in covered:
            log.info(
                "s3://%s/%s is covered by %s run %s, which has not listed the bucket yet",
                request.bucket,
                request.key,
                request.job,
                run_id,
                extra={**_request_fields(request), "covered_by": run_id},
            )
        coalesced = len(covered)

    run_ids: list[str] = []
    failures: list[tuple[JobRunRequest, Exception]] = []
    for request in requests:
        try:
            run_id = starter.start(request)
        except (ClientError, BotoCoreError) as error:
            failures.append((request, error))
            log.error(
                "Glue refused %s for s3://%s/%s: %s",
                request.job,
                request.bucket,
                request.key,
                error,
                extra={**_request_fields(request), "error": str(error)},
            )
            continue
        run_ids.append(run_id)
        log.info(
            "Started %s run %s for s3://%s/%s",
            request.job,
            run_id,
            request.bucket,
            request.key,
            extra={**_request_fields(request), "job_name": starter.job_names[request.job], "run_id": run_id},
        )

    if metrics is not None:
        unknown = sum(1 for item in ignored if item.category == UNKNOWN_TABLE)
        metrics.add_metric(name=JOB_RUNS_STARTED, unit=MetricUnit.Count, value=len(run_ids))
        metrics.add_metric(name=RUNS_COALESCED, unit=MetricUnit.Count, value=coalesced)
        metrics.add_metric(name=IGNORED_OBJECTS, unit=MetricUnit.Count, value=len(ignored))
        metrics.add_metric(name=UNKNOWN_TABLE_OBJECTS, unit=MetricUnit.Count, value=unknown)
        metrics.add_metric(name=JOB_START_FAILURES, unit=MetricUnit.Count, value=len(failures))
    if failures:
        raise JobStartError(failures) from failures[0][1]
    return run_ids


def _coalesce(
    requests: list[JobRunRequest], starter: GlueJobStarter
) -> tuple[list[JobRunRequest], list[tuple[JobRunRequest, str]]]:
    """The requests that still need a run of their own (at most one per job), and the covered ones with the
    run that covers them: a waiting or starting run of the job, or the one run started for the event."""
    to_start: list[JobRunRequest] = []
    covered: list[tuple[JobRunRequest, str]] = []
    for kind in TRIGGERED_JOBS:
        of_kind = [r for r in requests if r.job == kind]
        if not of_kind:
            continue
        _cover(of_kind, starter.waiting_run(kind), to_start, covered)
    return to_start, covered


def _warm(
    requests: list[JobRunRequest], starter: GlueJobStarter, config: PipelineConfig
) -> tuple[list[JobRunRequest], list[tuple[JobRunRequest, str]]]:
    """LOAD files' requests as they are; CDC files' as one warm run per shard, unless the shard's run covers them
    (then each with that run)."""
    if not starter.job_names.get(WARM_JOB):
        raise ConfigError(f"runs.mode warm: no Glue job name for {WARM_JOB}; set {WARM_JOB_ENV}")
    to_start = [r for r in requests if r.job != "cdc_replay"]
    covered: list[tuple[JobRunRequest, str]] = []
    shards = shard_count(config)
    by_shard: dict[tuple[str, int], list[JobRunRequest]] = {}
    for request in requests:
        if request.job == "cdc_replay":
            shard = shard_of(request.table, shards)
            warm = dataclasses.replace(request, job=WARM_JOB, shard=shard, config_version=config.version)
            by_shard.setdefault((request.bucket, shard), []).append(warm)
    for (bucket, shard), of_shard in by_shard.items():
        if starter.tell is not None:
            # Before the runs are read: a run counted on below lists the file's table once told, a run started
            # below lists every table first, and a run that resumes after its last look is told too.
            starter.tell(shard, of_shard)
        live = starter.warm_run(bucket, shard, config.runs.warm.live_span, config.version)
        _cover(of_shard, live, to_start, covered)
    return to_start, covered


def _cover(
    group: list[JobRunRequest],
    live: str | None,
    to_start: list[JobRunRequest],
    covered: list[tuple[JobRunRequest, str]],
) -> None:
    """One run for ``group``: the ``live`` run covers all of it, else its first request starts one for the rest."""
    if live is None:
        first, *rest = group
        to_start.append(first)
        covered.extend((r, f"started for {first.key}") for r in rest)
    else:
        covered.extend((r, live) for r in group)


def _request_fields(request: JobRunRequest) -> dict[str, object]:
    fields: dict[str, object] = {
        "job": request.job,
        "bucket": request.bucket,
        "key": request.key,
        "table": request.table,
    }
    return fields if request.shard is None else {**fields, "shard": request.shard}


def _log_ignored(log: LogSink, item: IgnoredObject) -> None:
    fields = {"bucket": item.bucket, "key": item.key, "category": item.category, "reason": item.reason}
    if item.category == UNKNOWN_TABLE:
        log.warning("Ignored a file of a table not in the configuration: %s", item.reason, extra=fields)
    else:
        log.info("Ignored s3://%s/%s (%s): %s", item.bucket, item.key, item.category, item.reason, extra=fields)


@dataclass(frozen=True)
class ContainerSettings:
    """What the deployed function builds once per container: the configuration and the Glue starter."""

    config: PipelineConfig
    starter: GlueJobStarter


def container_settings(environ: Mapping[str, str] | None = None) -> ContainerSettings:
    """Configuration and Glue starter (job names, Glue client; the warm job's name and an S3 client for its runs'
    markers when the stack runs warm) from the environment, built on the first call and then reused."""
    env = os.environ if environ is None else environ
    names = (CONFIG_ENV, FULL_LOAD_JOB_ENV, CDC_REPLAY_JOB_ENV)
    missing = [name for name in names if not env.get(name)]
    if missing:
        raise ConfigError(f"environment variable(s) {', '.join(missing)} must be set")
    return _settings_for(
        env[CONFIG_ENV],
        env[FULL_LOAD_JOB_ENV],
        env[CDC_REPLAY_JOB_ENV],
        env.get(WARM_JOB_ENV, ""),
        env.get(WARM_QUEUES_ENV, ""),
    )


@functools.lru_cache(maxsize=1)
def _settings_for(
    config_location: str, full_load_job: str, cdc_replay_job: str, warm_job: str, queues: str
) -> ContainerSettings:
    names: dict[StartedJob, str] = {"full_load": full_load_job, "cdc_replay": cdc_replay_job}
    if warm_job:
        names[WARM_JOB] = warm_job
    config = load_config_uri(config_location, label=CONFIG_ENV)
    return ContainerSettings(
        config=config,
        starter=GlueJobStarter(
            # The starter retries start_job_run; botocore retrying inside each of its attempts would multiply them.
            boto3.client("glue", config=Config(retries={"mode": "standard", "total_max_attempts": 1})),
            names,
            exists=_s3_exists(boto3.client("s3")) if warm_job else None,
            tell=tell_queues(boto3.client("sqs"), queues, shard_count(config)) if warm_job and queues else None,
        ),
    )


def tell_queues(sqs: Any, queues: str, shards: int) -> Callable[[int, Sequence[JobRunRequest]], None]:
    """Tell a shard's queue of its requests' files, ten to a request (SQS's most). A file not told is still
    applied: its run lists every table every ``runs.warm.sweep_seconds``; so a failure is logged, not raised."""

    def tell(shard: int, requests: Sequence[JobRunRequest]) -> None:
        url = shard_queue(queues, shard, shards)
        if url is None:
            return
        for start in range(0, len(requests), SQS_MOST_PER_REQUEST):
            chunk = requests[start : start + SQS_MOST_PER_REQUEST]
            entries = [{"Id": str(i), "MessageBody": landing_hint(r.table, r.key)} for i, r in enumerate(chunk)]
            try:
                failed = sqs.send_message_batch(QueueUrl=url, Entries=entries).get("Failed", [])
            except (ClientError, BotoCoreError) as error:
                failed = [{"Id": e["Id"], "Message": str(error)} for e in entries]
            for failure in failed:
                request = chunk[int(failure["Id"])]
                _log.warning(
                    "could not tell shard %d's warm run of s3://%s/%s (%s): it is applied after the run's next "
                    "listing of every table (runs.warm.sweep_seconds)",
                    shard, request.bucket, request.key, failure.get("Message", ""),
                )  # fmt: skip

    return tell


# HeadObject's answers for a key that is not there: 404, or 403 to a role without s3:ListBucket (the function's role
# has none; it may read the markers' objects only, ``infra.trigger``).
_ABSENT = frozenset({"404", "403", "NoSuchKey", "NotFound", "Forbidden"})


def _s3_exists(s3: Any) -> Callable[[str, str], bool]:
    def exists(bucket: str, key: str) -> bool:
        try:
            s3.head_object(Bucket=bucket, Key=key)
        except ClientError as error:
            if str(error.response.get("Error", {}).get("Code")) in _ABSENT:
                return False
            raise
        return True

    return exists


def clear_container_settings() -> None:
    """Forget the cached configuration and clients (tests; a real container never needs it)."""
    _settings_for.cache_clear()


logger = Logger(service=os.environ.get(SERVICE_NAME_ENV) or DEFAULT_SERVICE_NAME)
metrics = Metrics(namespace=os.environ.get(METRICS_NAMESPACE_ENV) or DEFAULT_METRICS_NAMESPACE)


@functools.cache
def _structure_library_logs() -> None:
    """In the deployed function only: retry warnings from this module and cdc_lake's logs become structured lines
    with the request context (done on the first invocation, so importing handle() elsewhere changes no logging)."""
    copy_config_to_registered_loggers(source_logger=logger, include={__name__, "cdc_lake"})


@metrics.log_metrics
@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Entry point of the deployed function (S3 notification or EventBridge rule, invoked asynchronously)."""
    _structure_library_logs()
    settings = container_settings()
    run_ids = handle(event, config=settings.config, starter=settings.starter, logger=logger, metrics=metrics)
    return {"job_run_ids": run_ids}
