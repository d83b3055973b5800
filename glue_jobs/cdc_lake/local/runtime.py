"""The deployed pipeline, on a laptop: files land in a folder, each becomes the S3 event the Lambda would
receive, the Lambda's own handler routes it, and a local stand-in for the Glue client runs the job in
this process's Spark session. Locally each Glue job is named after its kind (``full_load``, ``cdc_replay``).
"""

from __future__ import annotations

import itertools
import logging
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, Unpack

from pyspark.sql import SparkSession

from cdc_lake.core.config import PipelineConfig
from cdc_lake.core.dms_files import parse_key
from cdc_lake.core.exceptions import CdcLakeError, TableFailuresError
from cdc_lake.core.names import TRIGGERED_JOBS, WARM_JOB
from cdc_lake.core.shards import shard_count
from cdc_lake.core.storage import LocalFolderStore, ObjectStore, holds
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.metrics import CloudWatchPublisher
from cdc_lake.engine.replay import RunResult
from cdc_lake.engine.runs.outcome import DrainResult
from cdc_lake.engine.runs.shift import DrainHooks
from cdc_lake.engine.tables import LakeLocation
from cdc_lake.jobs.entry import JobClients, reported
from cdc_lake.jobs.replay import ReplayOptions, run_job
from cdc_lake.jobs.warm import WarmOptions, metric_hooks, run_warm
from cdc_lake.local.session import LOCAL_CATALOG

log = logging.getLogger(__name__)

LOCAL_BUCKET = "local-landing"


@dataclass
class LocalJobRun:
    """A job run as Glue reports it: WAITING until the local Glue runs it, then SUCCEEDED with its result, or
    FAILED with the error message (a run that left tables unapplied has both)."""

    run_id: str
    job: str
    arguments: dict[str, str]
    result: DrainResult | None = None
    error: str | None = None
    seconds: float = 0.0
    started: bool = False

    @property
    def state(self) -> str:
        if not self.started:
            return "WAITING"
        if self.result is None and self.error is None:
            return "RUNNING"
        return "SUCCEEDED" if self.error is None else "FAILED"


class LocalGlueClient:
    """Implements the Glue calls the Lambda and the warm runs make, ``start_job_run``, ``get_job_runs`` and
    ``get_job_run``, and runs the jobs here.

    As on Glue, a started run waits (WAITING) until it can run: ``run_waiting`` runs the waiting runs one
    after another (each job allows one run at a time here), including runs started while it works; a run a warm
    run starts (a handover) runs at once. Starting a run succeeds even when the run then fails: the failure is on
    the run.
    """

    def __init__(
        self,
        context: ReplayContext,
        on_run: Callable[[LocalJobRun], None] | None = None,
        on_round: Callable[[LocalJobRun, int, int], None] | None = None,
        on_batch: Callable[[LocalJobRun, RunResult], None] | None = None,
        on_refusal: Callable[[LocalJobRun, str, str], None] | None = None,
    ) -> None:
        self._context = context
        # Where runs put their metrics as the Glue jobs do (None: nowhere; a benchmark counts the requests).
        self.metrics: CloudWatchPublisher | None = None
        self._on_run = on_run
        self._on_round = on_round
        self._on_batch = on_batch
        self._on_refusal = on_refusal
        # Whether a warm run waits out runs.warm.quiet_seconds, as deployed (a benchmark landing files on a clock).
        self.keep_quiet = False
        # The shards' event queues (comma-joined URLs) and the SQS client to read them, as a deployed stack has them;
        # empty: none, every round of a warm run lists every table.
        self.events_queues = ""
        self.sqs: Any = None
        self._ids = itertools.count(1)
        self.runs: list[LocalJobRun] = []
        self.calls: Counter[str] = Counter()

    def start_job_run(self, JobName: str, Arguments: dict[str, str], **_: Any) -> dict[str, str]:
        self.calls["start_job_run"] += 1
        if JobName not in (*TRIGGERED_JOBS, WARM_JOB):
            raise ValueError(f"unknown job {JobName!r}")
        run = LocalJobRun(run_id=f"jr_local_{next(self._ids):06d}", job=JobName, arguments=dict(Arguments))
        self.runs.append(run)
        if JobName != WARM_JOB and any(r.job == WARM_JOB and r.state == "RUNNING" for r in self.runs):
            # A warm run handed a table over, and waits for that run before it stops: on Glue the two run side by
            # side; here the handed run runs now, inside the warm run's batch.
            self._execute(run)
        return {"JobRunId": run.run_id}

    def get_job_runs(self, JobName: str, MaxResults: int = 100, **_: Any) -> dict[str, Any]:
        self.calls["get_job_runs"] += 1
        runs = [r for r in reversed(self.runs) if r.job == JobName][:MaxResults]
        return {
            "JobRuns": [
                {"Id": r.run_id, "JobName": r.job, "JobRunState": r.state, "Arguments": r.arguments} for r in runs
            ]
        }

    def get_job_run(self, JobName: str, RunId: str, **_: Any) -> dict[str, Any]:
        self.calls["get_job_run"] += 1
        run = next(r for r in self.runs if r.run_id == RunId and r.job == JobName)
        return {"JobRun": {"Id": run.run_id, "JobName": run.job, "JobRunState": run.state, "Arguments": run.arguments}}

    def run_waiting(self) -> list[LocalJobRun]:
        """Run every waiting run, oldest first, until none waits; return them."""
        done: list[LocalJobRun] = []
        while waiting := next((r for r in self.runs if not r.started), None):
            self._execute(waiting)
            done.append(waiting)
        return done

    def _execute(self, run: LocalJobRun) -> None:
        run.started = True
        hook, batch_hook = self._on_round, self._on_batch
        on_round = (lambda number, batches: hook(run, number, batches)) if hook else None
        on_batch = (lambda batch: batch_hook(run, batch)) if batch_hook else None
        refusal_hook = self._on_refusal
        on_refusal = (lambda table, error: refusal_hook(run, table, error)) if refusal_hook else None
        started = time.monotonic()
        try:
            run.result = self._run(run, DrainHooks(on_batch, on_round, on_refusal=on_refusal))
            if self.metrics is not None:  # its end told as the Glue job tells it
                reported(run.result, JobClients(None, None, self.metrics), refusals_told=run.job == WARM_JOB)
            if run.result.failures:
                run.error = str(TableFailuresError(run.result.failures))
        except CdcLakeError as error:
            run.error = str(error)
        except Exception as error:  # a Glue run fails on any error; the event that started it is kept
            run.error = f"{type(error).__name__}: {error}"
            log.debug("job run failed:\n%s", traceback.format_exc())
        run.seconds = time.monotonic() - started
        if self._on_run:
            self._on_run(run)

    def _run(self, run: LocalJobRun, hooks: DrainHooks) -> DrainResult:
        lake = {
            "config_uri": "(local)",
            "catalog": self._context.location.catalog,
            "database": self._context.location.database,
        }
        if run.job == WARM_JOB:
            stack = {"full_load_job": "full_load", "cdc_replay_job": "cdc_replay"}
            if not self.keep_quiet:  # locally no file lands while a run works unless a test lands it
                stack["quiet_seconds"] = "0"
            if self.events_queues:
                stack["events_queues"] = self.events_queues
            glue = {"JOB_NAME": WARM_JOB, "JOB_RUN_ID": run.run_id}
            warm = WarmOptions.from_options({**lake, **stack, **glue, **run.arguments})
            if self.metrics is not None:
                hooks = hooks.also(metric_hooks(self.metrics))
            return run_warm(warm, self._context, self, hooks, sqs=self.sqs)
        kind = next(k for k in TRIGGERED_JOBS if k == run.job)
        # Locally no file lands while a run works unless a test lands it: no waiting for more.
        options = ReplayOptions.from_options({**lake, "idle_seconds": "0", **run.arguments})
        if self.metrics is not None:
            hooks = hooks.also(DrainHooks(self.metrics.batch, self.metrics.round_end))
        return run_job(kind, options, self._context, on_batch=hooks.on_batch, on_round=hooks.on_round)


class PipelineOptions(TypedDict, total=False):
    """A local pipeline's options: the lake ``database`` (default: the configuration's) in ``catalog`` (default:
    the Hadoop one), the ``store`` runs read (default: the landing folder), and hooks told of each finished run,
    each round of a run, each batch a run commits and each batch it refuses (``(run, table, error)``)."""

    database: str | None
    catalog: str
    store: ObjectStore | None
    on_run: Callable[[LocalJobRun], None] | None
    on_round: Callable[[LocalJobRun, int, int], None] | None
    on_batch: Callable[[LocalJobRun, RunResult], None] | None
    on_refusal: Callable[[LocalJobRun, str, str], None] | None
    metrics: CloudWatchPublisher | None  # where runs put their metrics (``LocalGlueClient.metrics``)
    events_queues: str  # the shards' event queues, comma-joined (``LocalGlueClient.events_queues``)
    sqs: Any  # the SQS client that reads and writes them


class LocalPipeline:
    """A landing folder, a lake and the routing between them.

    Runs read the landing folder and write the Hadoop catalog's warehouse, unless given another ``store`` (a
    bucket the folder is copied to) and ``catalog`` (the Glue catalog on an AWS endpoint).
    """

    def __init__(
        self, config: PipelineConfig, landing: str | Path, spark: SparkSession, **options: Unpack[PipelineOptions]
    ) -> None:
        self.config = config
        self.spark = spark
        self.landing = Path(landing)
        self._landed = LocalFolderStore(self.landing)
        self.store = options.get("store") or self._landed
        catalog = options.get("catalog", LOCAL_CATALOG)
        self.location = LakeLocation(catalog, options.get("database") or config.lake.database)
        self.context = ReplayContext(spark=spark, location=self.location, config=config, store=self.store)
        self.glue = LocalGlueClient(
            self.context, options.get("on_run"), options.get("on_round"), options.get("on_batch"),
            options.get("on_refusal"),
        )  # fmt: skip
        self.glue.metrics = options.get("metrics")
        self.glue.events_queues, self.glue.sqs = options.get("events_queues", ""), options.get("sqs")

    def deliver(self, keys: Iterable[str]) -> list[LocalJobRun]:
        """Deliver one S3 ObjectCreated event per key, in the given order (duplicates allowed), then run the
        job runs they started; return those runs."""
        first = len(self.glue.runs)
        for key in keys:
            self.notify(key)
        self.glue.run_waiting()
        return self.glue.runs[first:]

    def notify(self, key: str) -> list[str]:
        """Deliver the ObjectCreated event of one landed file to the Lambda's handler; the runs it starts wait."""
        from cdc_lake.local.events import s3_object_created_event
        from dms_trigger.handler import GlueJobStarter, handle, tell_queues

        path = self.landing / key
        if not path.is_file():
            raise CdcLakeError(f"{key}: no such file under {self.landing}")
        stored = self._landed.stat(key)
        event = s3_object_created_event(LOCAL_BUCKET, [(key, stored.size, stored.etag or "")])
        names = {kind: kind for kind in (*TRIGGERED_JOBS, WARM_JOB)}
        queues, sqs = self.glue.events_queues, self.glue.sqs
        tell = tell_queues(sqs, queues, shard_count(self.config)) if queues else None
        starter = GlueJobStarter(self.glue, names, exists=lambda _bucket, key: holds(self.store, key), tell=tell)
        return handle(event, config=self.config, starter=starter)

    def landed_keys(self) -> list[str]:
        """Every file in the landing folder, DMS data files in DMS order first, then the rest by name."""
        keys = [o.key for o in self._landed.list("")]
        return sorted(keys, key=lambda key: landing_order(key, self.config))

    def run_all(self) -> list[LocalJobRun]:
        return self.deliver(self.landed_keys())


def landing_order(key: str, config: PipelineConfig) -> tuple[int, int, str, str]:
    """As DMS writes: every table's LOAD files first, then CDC files of all tables by time."""
    try:
        dms_file = parse_key(key, config)
    except CdcLakeError:
        return (1, 0, "", key)
    phase, position, _name = dms_file.order_key
    return (0, phase, position, key)


def failed_runs(runs: Sequence[LocalJobRun]) -> list[LocalJobRun]:
    return [r for r in runs if r.error is not None]
