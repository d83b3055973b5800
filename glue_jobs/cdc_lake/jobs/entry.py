"""The one entry of the Glue scripts: logging, the job's options, the AWS clients, the configuration, the
job's context and the metrics publisher, made here once, then the job's ``run(options, context, clients)``.

The replay jobs and the warm job end alike: ``reported`` tells a run's end and fails it when a table was refused."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pyspark.sql import SparkSession

from cdc_lake.core.config import PipelineConfig, load_config_uri
from cdc_lake.core.exceptions import TableFailuresError
from cdc_lake.core.glue_jobs import GLUE_JOBS
from cdc_lake.core.job_arguments import JobArguments, LakeArguments
from cdc_lake.core.storage import ObjectStore, S3Store
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.metrics import CloudWatchPublisher
from cdc_lake.engine.runs.outcome import DrainResult
from cdc_lake.engine.tables import LakeLocation
from cdc_lake.jobs.logs import structure_job_logs

Options = TypeVar("Options", bound=JobArguments)
Context = TypeVar("Context")
Result = TypeVar("Result")


@dataclass(frozen=True)
class JobClients:
    """What a job's Python side reaches AWS with: S3 (the configuration and the landed files), Secrets Manager (the
    source's secret) and the metrics publisher. Spark's Glue catalog and its S3 reads have clients of their own,
    set by the job's --conf."""

    s3: Any
    secrets: Any
    metrics: CloudWatchPublisher
    glue: Any = None  # the Glue client: the warm job starts and reads job runs


@dataclass(frozen=True)
class GlueJob(Generic[Options, Context, Result]):
    """One Glue job: its row in ``core.glue_jobs.GLUE_JOBS``, its options, the context it runs in (made from the
    options, the configuration and the S3 client), and its run."""

    name: str
    options: type[Options]
    context: Callable[[Options, PipelineConfig, Any], Context]
    run: Callable[[Options, Context, JobClients], Result]


def glue_entry(
    job: GlueJob[Options, Context, Result],
    argv: Sequence[str] | None = None,
    client: Callable[[str], Any] | None = None,
) -> Result:
    """Run ``job`` as its Glue script: ``argv`` defaults to what Glue hands the script, ``client`` (an AWS client
    by service name) to boto3's."""
    arguments = list(sys.argv if argv is None else argv)
    structure_job_logs(job.name, arguments)
    options = job.options.from_sys_argv(arguments)
    aws_client = client or _boto3_client
    s3 = aws_client("s3")
    config = load_config_uri(options.config_uri, s3_client=s3)
    context = job.context(options, config, s3)
    metrics = CloudWatchPublisher(aws_client("cloudwatch"), options.lake_database(config))
    glue = aws_client("glue") if GLUE_JOBS[job.name].warm else None
    return job.run(options, context, JobClients(s3, aws_client("secretsmanager"), metrics, glue))


def reported(outcome: DrainResult, clients: JobClients, *, refusals_told: bool = False) -> DrainResult:
    """A replay run's end, told: how long the landed files it saw have waited, what it announced, and the tables it
    refused, which fail the run (counted in ``TableFailures`` unless ``refusals_told``: a warm run counts each as
    it happens)."""
    clients.metrics.flush()
    clients.metrics.oldest_waiting(outcome.waiting)
    if outcome.notices:
        clients.metrics.notices(len(outcome.notices))
    if outcome.failures:
        if not refusals_told:
            clients.metrics.table_failures(len(outcome.failures))
        raise TableFailuresError(outcome.failures)
    return outcome


def lake_context(options: LakeArguments, config: PipelineConfig, s3: Any) -> ReplayContext:
    """The context of a job on the lake: Glue's Spark session, the landed files in --bucket read with ``s3``."""
    from cdc_lake.engine.session import glue_spark_session

    store = S3Store(options.bucket, client=s3)
    return job_context(options, glue_spark_session(options.catalog), config=config, store=store)


def configuration(options: JobArguments, config: PipelineConfig, s3: Any) -> PipelineConfig:
    """The context of a job that reads no lake: the configuration alone."""
    return config


def job_context(
    options: LakeArguments,
    spark: SparkSession,
    *,
    config: PipelineConfig | None = None,
    store: ObjectStore | None = None,
) -> ReplayContext:
    """A run's context from its options: the configuration read from --config_uri unless given, the lake at
    --catalog/--database (default: the configuration's), the landed files in --bucket unless a store is given."""
    config = config or load_config_uri(options.config_uri)
    location = LakeLocation(options.catalog, options.lake_database(config))
    return ReplayContext(spark=spark, location=location, config=config, store=store or S3Store(options.bucket))


def _boto3_client(service: str) -> Any:
    import boto3

    return boto3.client(service)
