"""The trigger against Glue: moto for S3 and Glue, small fake Glue clients for refusals."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import boto3
import pytest
import yaml
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.moto_api import state_manager

from cdc_lake.core.config import PipelineConfig, load_config_uri, parse_config
from cdc_lake.core.exceptions import ConfigError, JobStartError
from cdc_lake.local.events import eventbridge_object_created_event, s3_object_created_event
from dms_trigger import handler as trigger
from dms_trigger.handler import GlueJobStarter, handle, lambda_handler
from dms_trigger.routing import JobRunRequest

BUCKET = "cdc-lake-landing"
FULL_LOAD_JOB = "cdc-lake-full-load"
CDC_REPLAY_JOB = "cdc-lake-cdc-replay"
JOB_NAMES = {"full_load": FULL_LOAD_JOB, "cdc_replay": CDC_REPLAY_JOB}

# One run per file: what these tests check (coalesced runs: test_coalescing.py).
CONFIG_DATA: dict[str, Any] = {
    "dms": {"bucket_folder": "dms", "date_partition_enabled": True},
    "runs": {"mode": "per_file"},
    "tables": [
        {
            "name": name,
            "primary_key": ["id"],
            "columns": [{"name": "id", "type": "bigint"}, {"name": "status", "type": "string"}],
        }
        for name in ("shop.orders", "shop.customers")
    ],
}
CONFIG: PipelineConfig = parse_config(CONFIG_DATA)

ORDERS_LOAD = "dms/shop/orders/LOAD00000001.csv"
ORDERS_CDC = "dms/shop/orders/2025/03/01/20250301-120500123.csv"
CUSTOMERS_CDC = "dms/shop/customers/2025/03/01/20250301-120501000.csv.gz"


@pytest.fixture(autouse=True)
def fake_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No real credentials, no network: fake keys, a fixed region, and fresh container state per test."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    trigger.clear_container_settings()
    yield
    trigger.clear_container_settings()


@pytest.fixture
def aws() -> Iterator[dict[str, Any]]:
    """Moto S3 with the landing bucket and Glue with both jobs (several concurrent runs allowed)."""
    with mock_aws():
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket=BUCKET)
        glue = boto3.client("glue")
        for job in (FULL_LOAD_JOB, CDC_REPLAY_JOB):
            create_job(glue, job, max_concurrent_runs=10)
        yield {"s3": s3, "glue": glue}


def create_job(glue: Any, name: str, *, max_concurrent_runs: int) -> None:
    glue.create_job(
        Name=name,
        Role="arn:aws:iam::123456789012:role/cdc-lake-glue",
        Command={"Name": "glueetl", "ScriptLocation": f"s3://cdc-lake-code/{name}.py", "PythonVersion": "3"},
        GlueVersion="5.0",
        DefaultArguments={"--datalake-formats": "iceberg"},
        ExecutionProperty={"MaxConcurrentRuns": max_concurrent_runs},
    )


def put_landed(s3: Any, key: str, body: bytes = b"I,1,new\n") -> tuple[str, int, str]:
    """Put an object and return (key, size, etag) as S3 reports them."""
    s3.put_object(Bucket=BUCKET, Key=key, Body=body)
    head = s3.head_object(Bucket=BUCKET, Key=key)
    return key, head["ContentLength"], head["ETag"].strip('"')


def runs_of(glue: Any, job: str) -> list[dict[str, Any]]:
    return glue.get_job_runs(JobName=job)["JobRuns"]


def our_arguments(run: dict[str, Any]) -> dict[str, str]:
    return {k: v for k, v in run["Arguments"].items() if k in {"--bucket", "--key", "--table"}}


def client_error(code: str, status: int = 400, operation: str = "StartJobRun") -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": f"{code} (fake)"}, "ResponseMetadata": {"HTTPStatusCode": status}},
        operation,
    )


class RefusingGlue:
    """A Glue client that refuses ``refusals`` times with the given error, then accepts (never, if None)."""

    def __init__(self, code: str = "ConcurrentRunsExceededException", refusals: int | None = None, status: int = 400):
        self.code = code
        self.refusals = refusals
        self.status = status
        self.calls: list[dict[str, Any]] = []

    def start_job_run(self, *, JobName: str, Arguments: dict[str, str], **options: object) -> dict[str, str]:
        self.calls.append({"JobName": JobName, "Arguments": Arguments, **options})
        if self.refusals is None or len(self.calls) <= self.refusals:
            raise client_error(self.code, self.status)
        return {"JobRunId": f"jr_{len(self.calls):04d}"}


class SplitGlue:
    """Refuses every run of one job and accepts the other's."""

    def __init__(self, refused_job: str):
        self.refused_job = refused_job
        self.started: list[tuple[str, dict[str, str]]] = []

    def start_job_run(self, *, JobName: str, Arguments: dict[str, str], **options: object) -> dict[str, str]:
        if JobName == self.refused_job:
            raise client_error("ConcurrentRunsExceededException")
        self.started.append((JobName, Arguments))
        return {"JobRunId": f"jr_{len(self.started)}"}


@pytest.fixture
def sleeps() -> list[float]:
    """Backoff delays a starter made with ``sleep=sleeps.append`` would have slept, recorded instead of waited."""
    return []


# --- handle() against moto Glue ---


def test_a_mixed_event_starts_the_right_runs_with_the_right_arguments(aws):
    s3, glue = aws["s3"], aws["glue"]
    landed = [
        put_landed(s3, ORDERS_LOAD),
        put_landed(s3, "dms/shop/orders/_SUCCESS", b""),
        put_landed(s3, ORDERS_CDC),
        put_landed(s3, "dms/hr/employees/LOAD00000001.csv"),
        put_landed(s3, CUSTOMERS_CDC),
        put_landed(s3, "dms/shop/orders/", b""),
    ]
    event = s3_object_created_event(BUCKET, landed)

    run_ids = handle(event, config=CONFIG, starter=GlueJobStarter(glue, JOB_NAMES))

    full_load_runs = runs_of(glue, FULL_LOAD_JOB)
    cdc_runs = runs_of(glue, CDC_REPLAY_JOB)
    assert [our_arguments(r) for r in full_load_runs] == [
        {"--bucket": BUCKET, "--key": ORDERS_LOAD, "--table": "shop.orders"}
    ]
    assert sorted((our_arguments(r) for r in cdc_runs), key=lambda a: a["--key"]) == [
        {"--bucket": BUCKET, "--key": CUSTOMERS_CDC, "--table": "shop.customers"},
        {"--bucket": BUCKET, "--key": ORDERS_CDC, "--table": "shop.orders"},
    ]
    assert sorted(run_ids) == sorted(r["Id"] for r in full_load_runs + cdc_runs)
    # The job's default arguments stay; the run's arguments are added to them.
    assert full_load_runs[0]["Arguments"]["--datalake-formats"] == "iceberg"


def test_an_eventbridge_event_starts_the_cdc_job(aws):
    key, size, etag = put_landed(aws["s3"], ORDERS_CDC)

    run_ids = handle(
        eventbridge_object_created_event(BUCKET, key, size, etag),
        config=CONFIG,
        starter=GlueJobStarter(aws["glue"], JOB_NAMES),
    )

    runs = runs_of(aws["glue"], CDC_REPLAY_JOB)
    assert [r["Id"] for r in runs] == run_ids
    assert our_arguments(runs[0]) == {"--bucket": BUCKET, "--key": ORDERS_CDC, "--table": "shop.orders"}
    assert runs_of(aws["glue"], FULL_LOAD_JOB) == []


def test_an_event_of_ignored_objects_starts_nothing(aws):
    event = s3_object_created_event(BUCKET, [("dms/shop/orders/_SUCCESS", 0, "d41d8cd98f00b204e9800998ecf8427e")])

    assert handle(event, config=CONFIG, starter=GlueJobStarter(aws["glue"], JOB_NAMES)) == []
    assert runs_of(aws["glue"], FULL_LOAD_JOB) == runs_of(aws["glue"], CDC_REPLAY_JOB) == []


def test_glue_refusing_while_a_run_is_in_progress_fails_the_invocation(aws, sleeps):
    """Moto enforces MaxConcurrentRuns: with runs held in RUNNING, the second start is refused every time."""
    glue = aws["glue"]
    create_job(glue, "single-run", max_concurrent_runs=1)
    state_manager.set_transition(model_name="glue::job_run", transition={"progression": "manual", "times": 1000})
    try:
        job_names = {"full_load": FULL_LOAD_JOB, "cdc_replay": "single-run"}
        starter = GlueJobStarter(glue, job_names, sleep=sleeps.append)
        first = s3_object_created_event(BUCKET, [(ORDERS_CDC, 10, "e1")])
        second = s3_object_created_event(BUCKET, [(CUSTOMERS_CDC, 10, "e2")])
        assert len(handle(first, config=CONFIG, starter=starter)) == 1

        with pytest.raises(JobStartError) as refused:
            handle(second, config=CONFIG, starter=starter)
    finally:
        state_manager.unset_transition("glue::job_run")

    assert isinstance(refused.value.__cause__, ClientError)
    assert refused.value.__cause__.response["Error"]["Code"] == "ConcurrentRunsExceededException"
    assert [r.key for r, _ in refused.value.failures] == [CUSTOMERS_CDC]
    assert len(sleeps) == 4  # five attempts, four waits
    assert len(runs_of(glue, "single-run")) == 1


# --- GlueJobStarter and handle() with fake Glue clients ---


@pytest.mark.parametrize("refusals", [1, 4])
def test_refusals_are_retried_with_backoff_until_glue_accepts(refusals):
    glue = RefusingGlue(refusals=refusals)
    delays: list[float] = []
    starter = GlueJobStarter(glue, JOB_NAMES, max_attempts=5, base_delay=0.5, sleep=delays.append)

    run_id = starter.start(JobRunRequest("cdc_replay", BUCKET, ORDERS_CDC, "shop.orders"))

    assert run_id == f"jr_{refusals + 1:04d}"
    assert len(glue.calls) == refusals + 1
    assert {c["JobName"] for c in glue.calls} == {CDC_REPLAY_JOB}
    assert glue.calls[-1]["Arguments"] == {"--bucket": BUCKET, "--key": ORDERS_CDC, "--table": "shop.orders"}
    assert glue.calls[-1]["JobRunQueuingEnabled"] is True
    assert len(delays) == refusals
    for attempt, delay in enumerate(delays, start=1):
        ceiling = 0.5 * 2 ** (attempt - 1)
        assert ceiling / 2 <= delay <= ceiling


def test_handle_retries_through_refusals(sleeps):
    glue = RefusingGlue(refusals=3)
    event = s3_object_created_event(BUCKET, [(ORDERS_LOAD, 10, "e")])

    run_ids = handle(event, config=CONFIG, starter=GlueJobStarter(glue, JOB_NAMES, sleep=sleeps.append))

    assert run_ids == ["jr_0004"]
    assert len(sleeps) == 3
    assert {c["JobName"] for c in glue.calls} == {FULL_LOAD_JOB}


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("ConcurrentRunsExceededException", 400),
        ("ThrottlingException", 400),
        ("InternalServiceException", 500),
        ("OperationTimeoutException", 400),
        ("ResourceNumberLimitExceededException", 400),
        ("SomethingNew", 503),
    ],
)
def test_glue_that_always_refuses_fails_the_invocation_after_every_attempt(sleeps, code, status):
    glue = RefusingGlue(code=code, status=status)
    event = s3_object_created_event(BUCKET, [(ORDERS_CDC, 10, "e")])

    with pytest.raises(JobStartError) as refused:
        handle(event, config=CONFIG, starter=GlueJobStarter(glue, JOB_NAMES, sleep=sleeps.append))

    assert len(glue.calls) == 5
    assert len(sleeps) == 4
    assert refused.value.__cause__.response["Error"]["Code"] == code
    assert ORDERS_CDC in str(refused.value)


@pytest.mark.parametrize("code", ["EntityNotFoundException", "InvalidInputException", "AccessDeniedException"])
def test_errors_that_waiting_cannot_fix_are_raised_at_once(code):
    glue = RefusingGlue(code=code, refusals=1)
    delays: list[float] = []
    starter = GlueJobStarter(glue, JOB_NAMES, sleep=delays.append)

    with pytest.raises(ClientError) as error:
        starter.start(JobRunRequest("full_load", BUCKET, ORDERS_LOAD, "shop.orders"))

    assert error.value.response["Error"]["Code"] == code
    assert len(glue.calls) == 1
    assert delays == []


def test_one_refused_job_does_not_stop_the_others_but_still_fails_the_invocation(sleeps):
    glue = SplitGlue(refused_job=FULL_LOAD_JOB)
    event = s3_object_created_event(BUCKET, [(ORDERS_LOAD, 10, "e1"), (ORDERS_CDC, 10, "e2")])

    with pytest.raises(JobStartError) as refused:
        handle(event, config=CONFIG, starter=GlueJobStarter(glue, JOB_NAMES, sleep=sleeps.append))

    assert [(job, args["--key"]) for job, args in glue.started] == [(CDC_REPLAY_JOB, ORDERS_CDC)]
    assert [(r.job, r.key) for r, _ in refused.value.failures] == [("full_load", ORDERS_LOAD)]


def test_a_starter_needs_both_job_names():
    with pytest.raises(ConfigError, match="CDC_REPLAY_JOB_NAME"):
        GlueJobStarter(RefusingGlue(), {"full_load": FULL_LOAD_JOB})


def test_backoff_is_capped():
    starter = GlueJobStarter(RefusingGlue(), JOB_NAMES, base_delay=1.0)

    assert all(trigger.MAX_RETRY_DELAY / 2 <= starter.backoff(30) <= trigger.MAX_RETRY_DELAY for _ in range(20))


class ThrottlingGlue(BaseHTTPRequestHandler):
    """A Glue endpoint that answers every request with a ThrottlingException, which botocore retries by default."""

    targets: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.targets.append(self.headers.get("X-Amz-Target", ""))
        body = json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"}).encode()
        self.send_response(400)
        self.send_header("Content-Type", "application/x-amz-json-1.1")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_the_deployed_glue_client_leaves_every_retry_to_the_starter(monkeypatch, tmp_path, sleeps):
    """One retry policy: botocore must not retry start_job_run inside each of the starter's attempts."""
    ThrottlingGlue.targets = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), ThrottlingGlue)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{server.server_address[1]}")
        set_function_env(monkeypatch, str(write_config(tmp_path, "json")))
        deployed = trigger.container_settings().starter
        starter = GlueJobStarter(deployed.glue_client, JOB_NAMES, sleep=sleeps.append)
        with pytest.raises(ClientError, match="ThrottlingException"):
            starter.start(JobRunRequest("cdc_replay", BUCKET, ORDERS_CDC, "shop.orders"))
    finally:
        server.shutdown()
        server.server_close()

    assert ThrottlingGlue.targets == ["AWSGlue.StartJobRun"] * 5  # the starter's five attempts, one request each
    assert len(sleeps) == 4


class RecordingLog:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, object]]] = []

    def _record(self, level: str, msg: object, args: tuple[object, ...], extra: Any) -> None:
        self.lines.append((level, str(msg) % args, dict(extra or {})))

    def info(self, msg: object, *args: object, extra: Any = None) -> None:
        self._record("info", msg, args, extra)

    def warning(self, msg: object, *args: object, extra: Any = None) -> None:
        self._record("warning", msg, args, extra)

    def error(self, msg: object, *args: object, extra: Any = None) -> None:
        self._record("error", msg, args, extra)


class RecordingMetrics:
    def __init__(self) -> None:
        self.values: dict[str, float] = {}

    def add_metric(self, name: str, unit: Any, value: float) -> None:
        self.values[name] = self.values.get(name, 0) + value


def test_each_ignored_object_is_logged_once_and_unknown_tables_are_counted():
    log, metrics = RecordingLog(), RecordingMetrics()
    event = s3_object_created_event(
        BUCKET,
        [
            ("dms/hr/employees/LOAD00000001.csv", 10, "e1"),
            ("dms/hr/payroll/20250301-120500123.csv", 10, "e2"),
            ("dms/shop/orders/_SUCCESS", 0, "e3"),
            (ORDERS_LOAD, 10, "e4"),
        ],
    )

    run_ids = handle(
        event, config=CONFIG, starter=GlueJobStarter(RefusingGlue(refusals=0), JOB_NAMES), logger=log, metrics=metrics
    )

    assert run_ids == ["jr_0001"]
    ignored_lines = [(level, extra["key"], extra["category"]) for level, _, extra in log.lines if "category" in extra]
    assert ignored_lines == [
        ("warning", "dms/hr/employees/LOAD00000001.csv", "unknown_table"),
        ("warning", "dms/hr/payroll/20250301-120500123.csv", "unknown_table"),
        ("info", "dms/shop/orders/_SUCCESS", "empty_object"),
    ]
    started = [extra for level, _, extra in log.lines if "run_id" in extra]
    assert started == [
        {
            "job": "full_load",
            "bucket": BUCKET,
            "key": ORDERS_LOAD,
            "table": "shop.orders",
            "job_name": FULL_LOAD_JOB,
            "run_id": "jr_0001",
        }
    ]
    assert metrics.values == {
        "JobRunsStarted": 1,
        "RunsCoalesced": 0,
        "IgnoredObjects": 3,
        "UnknownTableObjects": 2,
        "JobStartFailures": 0,
    }


# --- lambda_handler end to end: environment, configuration loaded once per container, Powertools ---


@dataclass
class FakeLambdaContext:
    function_name: str = "cdc-lake-dms-trigger"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:cdc-lake-dms-trigger"
    aws_request_id: str = "7f3c9a52-1e4b-4d2a-9c61-0b8e5d2f4a13"


@pytest.fixture
def log_stream(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    """The Powertools logger's JSON lines, captured."""
    stream = io.StringIO()
    monkeypatch.setattr(trigger.logger.registered_handler, "stream", stream)
    return stream


def write_config(tmp_path: Path, form: str) -> Path:
    path = tmp_path / f"tables.{form}"
    text = json.dumps(CONFIG_DATA) if form == "json" else yaml.safe_dump(CONFIG_DATA, allow_unicode=True)
    path.write_text(text, encoding="utf-8")
    return path


def set_function_env(monkeypatch: pytest.MonkeyPatch, config_location: str) -> None:
    monkeypatch.setenv(trigger.CONFIG_ENV, config_location)
    monkeypatch.setenv(trigger.FULL_LOAD_JOB_ENV, FULL_LOAD_JOB)
    monkeypatch.setenv(trigger.CDC_REPLAY_JOB_ENV, CDC_REPLAY_JOB)


def emf_metrics(stdout: str) -> dict[str, Any]:
    """Metric values from the Embedded Metric Format line Powertools prints at the end of an invocation."""
    blobs = [json.loads(line) for line in stdout.splitlines() if line.startswith("{") and '"_aws"' in line]
    assert len(blobs) == 1, stdout
    blob = blobs[0]
    names = [m["Name"] for m in blob["_aws"]["CloudWatchMetrics"][0]["Metrics"]]
    values = {n: sum(blob[n]) if isinstance(blob[n], list) else blob[n] for n in names}
    return {"namespace": blob["_aws"]["CloudWatchMetrics"][0]["Namespace"], **values}


@pytest.fixture(params=["json", "yaml"])
def bundled_config(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """The table configuration as a file bundled with the function, in either form."""
    return write_config(tmp_path, request.param)


def test_lambda_handler_end_to_end(aws, monkeypatch, capsys, log_stream, bundled_config):
    set_function_env(monkeypatch, str(bundled_config))
    event = s3_object_created_event(
        BUCKET, [put_landed(aws["s3"], ORDERS_CDC), put_landed(aws["s3"], "dms/hr/employees/LOAD00000001.csv")]
    )

    result = lambda_handler(event, FakeLambdaContext())

    runs = runs_of(aws["glue"], CDC_REPLAY_JOB)
    assert result == {"job_run_ids": [runs[0]["Id"]]}
    assert our_arguments(runs[0]) == {"--bucket": BUCKET, "--key": ORDERS_CDC, "--table": "shop.orders"}
    lines = [json.loads(line) for line in log_stream.getvalue().splitlines()]
    unknown = [line for line in lines if line.get("category") == "unknown_table"]
    assert len(unknown) == 1
    assert unknown[0]["level"] == "WARNING"
    assert unknown[0]["key"] == "dms/hr/employees/LOAD00000001.csv"
    assert unknown[0]["function_request_id"] == FakeLambdaContext.aws_request_id
    metrics = emf_metrics(capsys.readouterr().out)
    assert metrics["namespace"] == trigger.DEFAULT_METRICS_NAMESPACE
    assert metrics["JobRunsStarted"] == 1
    assert metrics["UnknownTableObjects"] == 1


def test_lambda_handler_reads_the_configuration_from_s3_once_per_container(aws, monkeypatch, capsys, log_stream):
    aws["s3"].create_bucket(Bucket="cdc-lake-code")
    aws["s3"].put_object(Bucket="cdc-lake-code", Key="config/tables.json", Body=json.dumps(CONFIG_DATA).encode())
    set_function_env(monkeypatch, "s3://cdc-lake-code/config/tables.json")

    lambda_handler(s3_object_created_event(BUCKET, [(ORDERS_LOAD, 10, "e1")]), FakeLambdaContext())
    aws["s3"].delete_object(Bucket="cdc-lake-code", Key="config/tables.json")
    lambda_handler(s3_object_created_event(BUCKET, [(ORDERS_CDC, 10, "e2")]), FakeLambdaContext())

    assert [our_arguments(r)["--key"] for r in runs_of(aws["glue"], FULL_LOAD_JOB)] == [ORDERS_LOAD]
    assert [our_arguments(r)["--key"] for r in runs_of(aws["glue"], CDC_REPLAY_JOB)] == [ORDERS_CDC]


def test_lambda_handler_fails_when_glue_refuses_so_lambda_keeps_the_event(
    aws, monkeypatch, tmp_path, capsys, log_stream
):
    set_function_env(monkeypatch, str(write_config(tmp_path, "json")))
    monkeypatch.setenv(trigger.CDC_REPLAY_JOB_ENV, "no-such-job")

    with pytest.raises(JobStartError) as refused:
        lambda_handler(s3_object_created_event(BUCKET, [(ORDERS_CDC, 10, "e")]), FakeLambdaContext())

    assert refused.value.__cause__.response["Error"]["Code"] == "EntityNotFoundException"
    assert emf_metrics(capsys.readouterr().out)["JobStartFailures"] == 1
    errors = [json.loads(line) for line in log_stream.getvalue().splitlines()]
    assert [(e["level"], e["key"]) for e in errors if e["level"] == "ERROR"] == [("ERROR", ORDERS_CDC)]


@pytest.mark.parametrize("missing", ["CDC_LAKE_CONFIG", "FULL_LOAD_JOB_NAME", "CDC_REPLAY_JOB_NAME"])
def test_lambda_handler_names_a_missing_environment_variable(aws, monkeypatch, tmp_path, log_stream, missing):
    set_function_env(monkeypatch, str(write_config(tmp_path, "json")))
    monkeypatch.delenv(missing)

    with pytest.raises(ConfigError, match=missing), pytest.warns(UserWarning, match="No application metrics"):
        lambda_handler(s3_object_created_event(BUCKET, [(ORDERS_CDC, 10, "e")]), FakeLambdaContext())


def test_an_unreadable_s3_configuration_is_a_config_error(aws):
    with pytest.raises(ConfigError, match=r"s3://cdc-lake-landing/missing\.yaml"):
        load_config_uri("s3://cdc-lake-landing/missing.yaml")
