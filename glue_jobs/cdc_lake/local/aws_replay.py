"""``cdc-lake aws-replay``: a landing folder through the deployed path, on an AWS endpoint.

The stack is synthesized for the configuration; what ``cdk deploy`` creates is created on the endpoint
(buckets, file assets such as the configuration object and the scripts, the Glue database and jobs); the
folder's DMS files are put to the raw bucket in landing order and each one's S3 event is handed to the real
Lambda handler, with the template's environment; every Glue run the Lambda started is then run with
``glue-run``, with that run's arguments, until none is left. The tables stay in the endpoint's Glue catalog.

With ``AWS_ENDPOINT_URL`` set, that endpoint is used (another program can then read the result); otherwise a
local one (``cdc_lake.local.aws_endpoint``) serves for the duration of the call.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cdc_lake.core.catalogs import AWS_ENDPOINT_ENV
from cdc_lake.core.config import PipelineConfig, load_config
from cdc_lake.core.dms_files import parse_key
from cdc_lake.core.exceptions import CdcLakeError
from cdc_lake.core.names import GLUE_CATALOG, WARM_JOB
from cdc_lake.core.plan import ReplayState
from cdc_lake.local.deployed import DeployedStack, TriggerFunction, provision

if TYPE_CHECKING:
    from cdc_lake.engine.tables import LakeLocation

# Glue's run states in which a run has not run its script yet; on the local endpoint a started run stays so.
NOT_RUN_STATES = frozenset({"STARTING", "WAITING"})


@dataclass(frozen=True)
class ReplayedRun:
    job: str
    run_id: str
    key: str
    seconds: float
    error: str | None = None


@dataclass
class ReplayOutcome:
    """What a replay did: files landed, Lambda invocations, Glue runs, and the files no commit recorded."""

    landed: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    runs: list[ReplayedRun] = field(default_factory=list)
    unapplied: dict[str, list[str]] = field(default_factory=dict)

    @property
    def failed_runs(self) -> list[ReplayedRun]:
        return [run for run in self.runs if run.error is not None]

    @property
    def ok(self) -> bool:
        return not self.failed_runs and not any(self.unapplied.values())


def synthesize(config_path: Path, outdir: Path) -> DeployedStack:
    """``cdk synth`` of the stack for this configuration (placeholders for the deployment values), read back."""
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
    from infra.app import cdk_json_context, create_app
    from infra.settings import EXAMPLE_VALUES, TABLE_CONFIG

    context = {**cdk_json_context(), TABLE_CONFIG: str(config_path.resolve()), EXAMPLE_VALUES: "true"}
    assembly = outdir / "cdk.out"
    # The placeholders are the replay's own choice and its stack goes to a stand-in for AWS, never to a deploy: the
    # warnings that tell a deployer which values to set are nothing to act on here.
    app, stack = create_app(context, asset_dir=outdir / "assets", outdir=str(assembly), deployment_warnings=False)
    app.synth()
    # The stack the app made: its name may also come from CDK_CONTEXT_JSON (how `cdk synth -c` passes context).
    return DeployedStack.load(assembly, stack.stack_name)


@contextlib.contextmanager
def aws_endpoint() -> Iterator[str]:
    """``AWS_ENDPOINT_URL`` when set; otherwise a local endpoint, with the process's AWS environment pointed at it
    for the duration (and restored after)."""
    from cdc_lake.local.aws_endpoint import endpoint_environment, local_aws_endpoint

    given = os.environ.get(AWS_ENDPOINT_ENV)
    if given:
        yield given
        return
    with local_aws_endpoint() as url, _environment(endpoint_environment(url)):
        yield url


@contextlib.contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class DeployedPipeline:
    """The stack as created on the endpoint: files land in its raw bucket, each event goes to its Lambda handler,
    and the Glue runs the Lambda started run here, each with its own arguments."""

    def __init__(self, stack: DeployedStack, config: PipelineConfig, report: Callable[[str], None] = print) -> None:
        import boto3

        self.stack = stack
        self.config = config
        self.report = report
        self._s3 = boto3.client("s3")
        self._glue = boto3.client("glue")
        self._done: set[str] = set()

    @classmethod
    def create(cls, config_path: Path, workdir: Path, report: Callable[[str], None] = print) -> DeployedPipeline:
        """Synthesize the stack for ``config_path`` and create it on the endpoint ``AWS_ENDPOINT_URL`` names."""
        if not os.environ.get(AWS_ENDPOINT_ENV):
            raise CdcLakeError(f"{AWS_ENDPOINT_ENV} is not set: this creates buckets and jobs, never on AWS itself")
        started = time.monotonic()
        stack = synthesize(config_path, workdir)
        provision(stack)
        report(f"synthesized {stack.stack_name} and created it on {os.environ[AWS_ENDPOINT_ENV]} "
               f"({time.monotonic() - started:.1f}s)")  # fmt: skip
        return cls(stack, load_config(config_path), report)

    def land(self, folder: Path, keys: Sequence[str]) -> None:
        """Put each file (``folder``/key) to the raw bucket and hand its S3 event to the Lambda, one by one."""
        with _lambda_environment(self.stack.lambda_function):
            for key in keys:
                body = (folder / key).read_bytes()
                etag = self._s3.put_object(Bucket=self.stack.raw_bucket, Key=key, Body=body)["ETag"]
                _invoke(self.stack, key, len(body), etag.strip('"'))

    def run_started(self) -> list[ReplayedRun]:
        """Run every started run that has not run yet, oldest first, including runs started while others ran."""
        from cdc_lake.local.glue_run import glue_run

        names = sorted(job.name for job in self.stack.jobs.values())
        runs: list[ReplayedRun] = []
        while waiting := [
            run
            for name in names
            for run in self._glue.get_job_runs(JobName=name)["JobRuns"]
            if run["JobRunState"] in NOT_RUN_STATES and run["Id"] not in self._done
        ]:
            run = min(waiting, key=lambda r: r["StartedOn"])
            arguments = dict(run.get("Arguments") or {})
            key = arguments.get("--key", "")
            started_for = key or f"shard {arguments.get('--shard')}"  # a warm run is its shard's
            self.report(f"glue-run {run['JobName']} {run['Id'][:12]}… (started for {started_for})")
            started = time.monotonic()
            error = None
            try:
                # Every file landed before this run: no round would find more, so the run does not wait.
                overrides = {**arguments, "--JOB_RUN_ID": run["Id"], "--idle_seconds": "0"}
                if self.stack.job(run["JobName"]).kind == WARM_JOB:
                    # Likewise, no quiet time to wait out.
                    overrides = {**arguments, "--JOB_RUN_ID": run["Id"], "--quiet_seconds": "0"}
                glue_run(self.stack, run["JobName"], overrides)
            except Exception as failure:  # a Glue run fails on any error; the replay reports it and goes on
                error = f"{type(failure).__name__}: {failure}"
                self.report(f"    FAILED: {error}")
            self._glue.batch_stop_job_run(JobName=run["JobName"], JobRunIds=[run["Id"]])
            self._done.add(run["Id"])
            runs.append(ReplayedRun(run["JobName"], run["Id"], key, time.monotonic() - started, error))
        return runs

    @property
    def location(self) -> LakeLocation:
        from cdc_lake.engine.tables import LakeLocation

        job = self.stack.job("cdc_replay")
        return LakeLocation(job.default_arguments.get("--catalog", GLUE_CATALOG), self.stack.database.name)

    def unapplied(self, keys: Sequence[str]) -> tuple[dict[str, list[str]], list[str]]:
        """Per table, the landed DMS files its lake table's record does not hold; and the keys of no table."""
        from pyspark.sql import SparkSession

        from cdc_lake.core.plan import applied
        from cdc_lake.engine.record import read_state
        from cdc_lake.engine.tables import Lake, table_exists

        by_table: dict[str, list[str]] = {}
        ignored: list[str] = []
        for key in keys:
            try:
                by_table.setdefault(parse_key(key, self.config).table, []).append(key)
            except CdcLakeError:
                ignored.append(key)
        spark = SparkSession.getActiveSession()
        if spark is None:  # no run ran, so nothing was applied
            return by_table, ignored
        lake = Lake(spark, self.location)
        missing: dict[str, list[str]] = {}
        for name, table_keys in by_table.items():
            table = self.config.table(name)
            state = read_state(lake, table.lake_table) if table_exists(lake, table) else ReplayState()
            missing[name] = [key for key in table_keys if not applied(parse_key(key, self.config), state, self.config)]
        return missing, ignored


def aws_replay(
    config_path: Path, landing: Path, workdir: Path, *, report: Callable[[str], None] = print
) -> ReplayOutcome:
    """Replay every file of ``landing`` through the deployed path on the current AWS endpoint (see module doc)."""
    from cdc_lake.local.runtime import landing_order

    pipeline = DeployedPipeline.create(config_path, workdir, report)
    keys = sorted(
        # A name starting with a dot is the local store's own (its applied marks), never DMS's.
        (key.as_posix() for p in landing.rglob("*") if p.is_file() and not _hidden(key := p.relative_to(landing))),
        key=lambda key: landing_order(key, pipeline.config),
    )
    pipeline.land(landing, keys)
    report(f"landed {len(keys)} file(s) in s3://{pipeline.stack.raw_bucket}, one Lambda invocation each")
    runs = pipeline.run_started()
    unapplied, ignored = pipeline.unapplied(keys)
    return ReplayOutcome(landed=keys, ignored=ignored, runs=runs, unapplied=unapplied)


@contextlib.contextmanager
def _lambda_environment(function: TriggerFunction) -> Iterator[None]:
    """The function's environment, its relative paths taken inside its code folder (Lambda runs from there)."""
    # The handler's Powertools logger writes one JSON line per file; keep the warnings only, unless asked.
    # Set before the handler is imported: its logger takes the level when the module loads.
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    from dms_trigger.handler import CONFIG_ENV, clear_container_settings

    values = dict(function.environment)
    values[CONFIG_ENV] = str(function.config_path)
    clear_container_settings()
    with _environment(values):
        try:
            yield
        finally:
            clear_container_settings()


@dataclass(frozen=True)
class _Context:
    """The Lambda context the handler's Powertools decorators read."""

    function_name: str
    invoked_function_arn: str
    memory_limit_in_mb: int = 256
    aws_request_id: str = field(default_factory=lambda: f"local-{time.monotonic_ns()}")


def _invoke(stack: DeployedStack, key: str, size: int, etag: str) -> None:
    from cdc_lake.local.events import s3_object_created_event
    from dms_trigger.handler import lambda_handler

    event = s3_object_created_event(stack.raw_bucket, [(key, size, etag)], region=stack.region)
    function = stack.lambda_function
    # Powertools prints its metrics (EMF) to stdout, as CloudWatch collects them; here they are not shown.
    with contextlib.redirect_stdout(io.StringIO()), _library_logs_kept():
        lambda_handler(event, _Context(function.name, function.arn))


@contextlib.contextmanager
def _library_logs_kept() -> Iterator[None]:
    """The deployed handler makes cdc_lake's loggers write its JSON lines (for the function's own log); in this
    process they are the CLI's too, whose later warnings (a Trino retry) must stay plain lines for people."""
    library = logging.getLogger("cdc_lake")
    handlers, propagate, level = library.handlers[:], library.propagate, library.level
    try:
        yield
    finally:
        library.handlers, library.propagate, library.level = handlers, propagate, level


def _hidden(key: Path) -> bool:
    return any(part.startswith(".") for part in key.parts)
