"""The local AWS endpoint: a real moto server subprocess, reached by boto3 over HTTP, with its Glue extensions."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
from botocore.exceptions import ClientError

from cdc_lake.core.exceptions import EndpointStartError
from cdc_lake.local import aws_endpoint
from cdc_lake.local.aws_endpoint import endpoint_environment, local_aws_endpoint
from tests.support.aws import aws_client

REGION = "us-east-1"


@pytest.fixture
def endpoint(aws_endpoint: str) -> str:
    return aws_endpoint


@pytest.fixture
def glue(endpoint: str) -> Iterator[Any]:
    glue = aws_client(endpoint, "glue")
    yield glue
    glue.close()


def table_input(name: str, metadata_location: str) -> dict[str, Any]:
    return {"Name": name, "Parameters": {"table_type": "ICEBERG", "metadata_location": metadata_location}}


@pytest.fixture
def table(glue: Any) -> tuple[str, str]:
    database = f"db_{uuid.uuid4().hex[:8]}"
    glue.create_database(DatabaseInput={"Name": database})
    glue.create_table(DatabaseName=database, TableInput=table_input("orders", "v1"))
    return database, "orders"


def current(glue: Any, table: tuple[str, str]) -> tuple[str, str]:
    """The table's (VersionId, metadata_location)."""
    found = glue.get_table(DatabaseName=table[0], Name=table[1])["Table"]
    return found["VersionId"], found["Parameters"]["metadata_location"]


def test_update_table_honours_version_id(glue: Any, table: tuple[str, str]) -> None:
    database, name = table
    first, _ = current(glue, table)

    glue.update_table(DatabaseName=database, TableInput=table_input(name, "v2"), VersionId=first)
    second, location = current(glue, table)
    assert (int(second), location) == (int(first) + 1, "v2")

    with pytest.raises(ClientError) as refused:
        glue.update_table(DatabaseName=database, TableInput=table_input(name, "v3"), VersionId=first)
    assert refused.value.response["Error"]["Code"] == "ConcurrentModificationException"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert current(glue, table) == (second, "v2")

    glue.update_table(DatabaseName=database, TableInput=table_input(name, "v3"))
    assert current(glue, table) == (str(int(second) + 1), "v3")


def race_updates(racers: list[Any], table: tuple[str, str], version: str) -> dict[str, str]:
    """Each racer updates the table at ``version`` at once, to its own metadata location; outcome per location."""
    start = threading.Barrier(len(racers))
    outcomes: dict[str, str] = {}

    def update(racer: Any, location: str) -> None:
        start.wait()
        try:
            racer.update_table(DatabaseName=table[0], TableInput=table_input(table[1], location), VersionId=version)
            outcomes[location] = "won"
        except ClientError as error:
            outcomes[location] = error.response["Error"]["Code"]

    threads = [threading.Thread(target=update, args=(racer, f"{version}-{n}")) for n, racer in enumerate(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def test_racing_updates_at_one_version_have_one_winner(endpoint: str, glue: Any, table: tuple[str, str]) -> None:
    racers = [aws_client(endpoint, "glue") for _ in range(4)]
    try:
        for _ in range(8):
            version, _ = current(glue, table)
            outcomes = race_updates(racers, table, version)
            winners = [location for location, outcome in outcomes.items() if outcome == "won"]
            assert len(winners) == 1, outcomes
            assert set(outcomes.values()) == {"won", "ConcurrentModificationException"}
            assert current(glue, table) == (str(int(version) + 1), winners[0])
    finally:
        for racer in racers:
            racer.close()


def test_job_run_stays_starting_until_stopped(glue: Any) -> None:
    job = f"job-{uuid.uuid4().hex[:8]}"
    glue.create_job(
        Name=job,
        Role="arn:aws:iam::123456789012:role/cdc-lake-glue",
        Command={"Name": "glueetl", "ScriptLocation": "s3://cdc-lake-code/cdc_replay.py"},
    )
    run_id = glue.start_job_run(JobName=job)["JobRunId"]

    for _ in range(5):
        assert [(run["Id"], run["JobRunState"]) for run in glue.get_job_runs(JobName=job)["JobRuns"]] == [
            (run_id, "STARTING")
        ]
        assert glue.get_job_run(JobName=job, RunId=run_id)["JobRun"]["JobRunState"] == "STARTING"

    stopped = glue.batch_stop_job_run(JobName=job, JobRunIds=[run_id, "jr_unknown"])
    assert stopped["SuccessfulSubmissions"] == [{"JobName": job, "JobRunId": run_id}]
    assert [(error["JobRunId"], error["ErrorDetail"]["ErrorCode"]) for error in stopped["Errors"]] == [
        ("jr_unknown", "EntityNotFoundException")
    ]
    assert glue.get_job_run(JobName=job, RunId=run_id)["JobRun"]["JobRunState"] == "STOPPED"
    assert [run["JobRunState"] for run in glue.get_job_runs(JobName=job)["JobRuns"]] == ["STOPPED"]


def test_s3_and_cloudwatch_on_loopback_only(endpoint: str) -> None:
    s3, cloudwatch = aws_client(endpoint, "s3"), aws_client(endpoint, "cloudwatch")
    try:
        bucket = f"landing-{uuid.uuid4().hex[:8]}"
        s3.create_bucket(Bucket=bucket)
        s3.put_object(Bucket=bucket, Key="dms/public/orders/LOAD00000001.csv", Body=b"I,1,open\n")
        listed = s3.list_objects_v2(Bucket=bucket)["Contents"]
        assert [(item["Key"], item["Size"]) for item in listed] == [("dms/public/orders/LOAD00000001.csv", 9)]

        namespace = f"CdcLakeTest{uuid.uuid4().hex[:8]}"
        cloudwatch.put_metric_data(Namespace=namespace, MetricData=[{"MetricName": "RowsApplied", "Value": 3.0}])
        metrics = cloudwatch.list_metrics(Namespace=namespace)["Metrics"]
        assert [metric["MetricName"] for metric in metrics] == ["RowsApplied"]
    finally:
        s3.close()
        cloudwatch.close()

    address = urlsplit(endpoint)
    assert address.hostname == "127.0.0.1"
    assert address.port is not None
    # Another loopback address on the same port finds nothing: the server is bound to 127.0.0.1, not 0.0.0.0.
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.2", address.port), timeout=1).close()


def test_port_refuses_connections_after_exit() -> None:
    with local_aws_endpoint() as url:
        port = urlsplit(url).port
        assert port is not None
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_endpoint_environment_reaches_the_server(endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    environment = endpoint_environment(endpoint, region="eu-west-1")
    assert environment[aws_endpoint.AWS_ENDPOINT_ENV] == environment["AWS_ENDPOINT_URL"] == endpoint
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)  # a default session made earlier keeps its settings

    s3 = boto3.client("s3")
    try:
        assert (s3.meta.endpoint_url, s3.meta.region_name) == (endpoint, "eu-west-1")
        bucket = f"env-{uuid.uuid4().hex[:8]}"
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    finally:
        s3.close()
    explicit = aws_client(endpoint, "s3")
    try:
        assert bucket in [found["Name"] for found in explicit.list_buckets()["Buckets"]]
    finally:
        explicit.close()


def test_endpoint_environment_defaults_to_us_east_1() -> None:
    assert endpoint_environment("http://127.0.0.1:1") == {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
    }


@pytest.mark.parametrize("inherited", ["default", "ignored"])
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_server_exits_cleanly_on_signal(stop: signal.Signals, inherited: str) -> None:
    # "ignored": started as a shell's background job (`make test &`, nohup) starts it, with SIGINT ignored.
    trap = 'trap "" INT; ' if inherited == "ignored" else ""
    command = ["sh", "-c", f'{trap}exec "$0" -m cdc_lake.local.aws_endpoint', sys.executable]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as server:
        try:
            assert server.stdout is not None
            assert server.stdout.readline().decode().startswith("ready http://127.0.0.1:")
            server.send_signal(stop)
            _, stderr = server.communicate(timeout=10)
        finally:  # a server that kept serving is killed, or Popen's exit would wait for it for good
            if server.poll() is None:
                server.kill()
    assert (server.returncode, stderr) == (0, b"")


def test_start_failure_reports_the_child_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aws_endpoint, "_MODULE", "cdc_lake.local.no_such_module")
    refused = r"(?s)exited with code 1 before ready:.*No module named cdc_lake\.local\.no_such_module"
    with pytest.raises(EndpointStartError, match=refused), local_aws_endpoint():
        pytest.fail("the endpoint started")


def test_a_delay_profile_holds_glue_and_s3_requests_as_aws_would_and_reports_it() -> None:
    """The in-Region profile holds each Glue and S3 request about as long as AWS answers (median 40 ms for a GetTable,
    25 ms for an S3 GET); other services are not delayed; the held seconds are reported beside the counts."""
    import time

    with local_aws_endpoint(delay="in-region") as url:
        s3, glue, sts = aws_client(url, "s3"), aws_client(url, "glue"), aws_client(url, "sts")
        s3.create_bucket(Bucket="delayed")
        s3.put_object(Bucket="delayed", Key="a/LOAD00000001.csv", Body=b"1,x\n")
        glue.create_database(DatabaseInput={"Name": "delayed"})
        glue.create_table(DatabaseName="delayed", TableInput=table_input("t", "v1"))
        aws_endpoint.served_requests(url, reset=True)
        started = time.perf_counter()
        for _ in range(20):
            glue.get_table(DatabaseName="delayed", Name="t")
            s3.get_object(Bucket="delayed", Key="a/LOAD00000001.csv")["Body"].read()
        held = time.perf_counter() - started
        delayed = aws_endpoint.served_delay(url)
        served = aws_endpoint.served_requests(url)
        assert served["glue:GetTable"] == 20 and served["s3:GET csv"] == 20
        # 20 x (40 + 25) ms at the medians; the long tail's draws average above the median.
        assert 20 * 0.065 * 0.7 <= delayed <= 20 * 0.065 * 3, delayed
        assert held >= delayed * 0.9, (held, delayed)
        aws_endpoint.served_requests(url, reset=True)
        sts.get_caller_identity()
        assert aws_endpoint.served_delay(url) == 0.0
        aws_endpoint.set_delay(url, "0")  # and back to none, on the same endpoint
        glue.get_table(DatabaseName="delayed", Name="t")
        assert aws_endpoint.served_delay(url) == 0.0
        aws_endpoint.set_delay(url, "pessimistic")
        glue.get_table(DatabaseName="delayed", Name="t")
        assert aws_endpoint.served_delay(url) > 0.0


def test_no_delay_is_the_default_and_an_unknown_profile_is_refused() -> None:
    with local_aws_endpoint() as url:
        glue = aws_client(url, "glue")
        glue.create_database(DatabaseInput={"Name": "prompt"})
        glue.get_database(Name="prompt")
        assert aws_endpoint.served_delay(url) == 0.0 and aws_endpoint.served_requests(url)["glue:GetDatabase"] == 1
    refused = "CDC_LAKE_AWS_DELAY='slow': use one of 0, in-region, pessimistic"
    with pytest.raises(EndpointStartError, match=refused), local_aws_endpoint(delay="slow"):
        pass
