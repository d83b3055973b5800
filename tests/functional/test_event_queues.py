"""The warm runs' event queues on SQS (the local endpoint's): the Lambda's handler tells each shard's queue of its
landed CDC files (``handler.tell_queues``), a warm run reads its own (``events.QueueLandings``); a message is read
once, a duplicate names its table once, a foreign message is ignored and announced, and a queue that cannot be
reached is announced, never fails the Lambda or the run."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from cdc_lake.core.config import parse_config
from cdc_lake.core.names import WARM_JOB
from cdc_lake.core.shards import landing_hint, shard_count, shard_of
from cdc_lake.engine.runs.events import QueueLandings
from cdc_lake.local.events import s3_object_created_event
from dms_trigger.handler import GlueJobStarter, handle, tell_queues
from dms_trigger.routing import JobRunRequest
from tests.support.aws import aws_client

TABLES = [f"app.t{n}" for n in range(6)]
CONFIG = parse_config(
    {
        "runs": {"mode": "warm", "warm": {"tables_per_job": 3}},
        "tables": [{"name": n, "primary_key": ["id"], "columns": [{"name": "id", "type": "bigint"}]} for n in TABLES],
    }
)
BUCKET = "raw"


@pytest.fixture
def sqs(aws_endpoint: str) -> Any:
    return aws_client(aws_endpoint, "sqs")


@pytest.fixture
def queues(sqs: Any) -> Iterator[list[str]]:
    """One queue per shard, named for this test alone."""
    tag = uuid.uuid4().hex[:8]
    urls = [sqs.create_queue(QueueName=f"warm-{tag}-{shard}")["QueueUrl"] for shard in range(shard_count(CONFIG))]
    yield urls
    for url in urls:
        sqs.delete_queue(QueueUrl=url)


@pytest.fixture
def starter(aws_endpoint: str, sqs: Any, queues: list[str]) -> GlueJobStarter:
    glue = aws_client(aws_endpoint, "glue")
    names = {"full_load": f"fl-{uuid.uuid4().hex[:8]}", "cdc_replay": "cr", WARM_JOB: f"warm-{uuid.uuid4().hex[:8]}"}
    glue.create_job(
        Name=names[WARM_JOB],
        Role="arn:aws:iam::123456789012:role/cdc-lake-warm",
        Command={"Name": "gluestreaming", "ScriptLocation": "s3://code/cdc_warm.py", "PythonVersion": "3"},
        GlueVersion="5.0",
        ExecutionProperty={"MaxConcurrentRuns": 4},
    )
    return GlueJobStarter(
        glue,
        names,
        sleep=lambda _: None,
        exists=lambda _bucket, _key: False,
        tell=tell_queues(sqs, ",".join(queues), shard_count(CONFIG)),
    )


def keys(*tables: str) -> list[str]:
    return [f"{t.replace('.', '/')}/20250301-12000{n}000.csv" for n, t in enumerate(tables)]


def test_the_lambda_tells_each_shard_of_its_files_and_a_run_reads_its_own_once(
    starter: GlueJobStarter, queues: list[str], sqs: Any
) -> None:
    files = keys(*TABLES, "app.t1")  # app.t1 twice: two files, one table
    event = s3_object_created_event(BUCKET, [(key, 10, "etag") for key in files])
    started = handle(event, config=CONFIG, starter=starter)
    assert len(started) == shard_count(CONFIG)  # no run lives yet: one started per shard, told all the same
    for shard, url in enumerate(queues):
        landings = QueueLandings(sqs, url)
        assert landings.tables(1) == {t for t in TABLES if shard_of(t, len(queues)) == shard}
        assert landings.tables(0) == set(), "a message is read once: deleted as it is received"


def test_more_than_one_receive_of_messages_and_a_duplicate_name_each_table_once(
    starter: GlueJobStarter, queues: list[str], sqs: Any
) -> None:
    shard0 = [t for t in TABLES if shard_of(t, len(queues)) == 0]
    tell = starter.tell
    assert tell is not None
    requests = [JobRunRequest(WARM_JOB, BUCKET, f"{n}.csv", shard0[n % len(shard0)], shard=0) for n in range(25)]
    tell(0, requests)  # 25 messages: three sends, and more than one receive takes them
    assert QueueLandings(sqs, queues[0]).tables(0) == set(shard0)
    assert int(sqs.get_queue_attributes(QueueUrl=queues[0], AttributeNames=["ApproximateNumberOfMessages"])[
        "Attributes"]["ApproximateNumberOfMessages"]) == 0  # fmt: skip


def test_a_foreign_message_is_ignored_and_announced(
    queues: list[str], sqs: Any, caplog: pytest.LogCaptureFixture
) -> None:
    sqs.send_message(QueueUrl=queues[0], MessageBody="hello")
    sqs.send_message(QueueUrl=queues[0], MessageBody=landing_hint("app.t0", "app/t0/20250301-120000000.csv"))
    with caplog.at_level(logging.WARNING):
        assert QueueLandings(sqs, queues[0]).tables(0) == {"app.t0"}
    assert "a message naming no table, ignored: 'hello'" in caplog.text


def test_a_queue_that_cannot_be_reached_is_announced_and_fails_neither_the_lambda_nor_the_run(
    aws_endpoint: str, starter: GlueJobStarter, sqs: Any, caplog: pytest.LogCaptureFixture
) -> None:
    gone = f"{aws_endpoint}/123456789012/no-such-queue"
    starter.tell = tell_queues(sqs, ",".join([gone] * shard_count(CONFIG)), shard_count(CONFIG))
    [key] = keys("app.t0")
    with caplog.at_level(logging.WARNING):
        started = handle(s3_object_created_event(BUCKET, [(key, 10, "etag")]), config=CONFIG, starter=starter)
        assert QueueLandings(sqs, gone).tables(0) is None  # the run then lists every table
    assert len(started) == 1, "the file's run is started as without a queue"
    assert f"could not tell shard {shard_of('app.t0', 2)}'s warm run of s3://{BUCKET}/{key}" in caplog.text
    assert "runs.warm.sweep_seconds" in caplog.text
    assert f"{gone} did not answer" in caplog.text
