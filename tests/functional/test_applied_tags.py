"""A run tags exactly the landed files it applied (``cdc-lake:applied``), keeping their other tags, so that the raw
bucket's lifecycle can expire them and nothing else: files pending, refused or applied only by the table and not
yet by its history stay untagged (tests/infra/test_stack.py checks the rules that read the tag). A tag S3 refuses
to write fails nothing: the batch is committed, the files stay untagged (kept until the lifecycle's catch-all) and
are not taken for waiting ones. On the local AWS endpoint's S3, as the deployed path reads the bucket."""

from __future__ import annotations

import datetime as dt
import json
import logging
from typing import Any
from urllib.parse import unquote

import pytest
from botocore.awsrequest import AWSResponse

from cdc_lake.core.exceptions import CdcLakeError
from cdc_lake.core.names import APPLIED_TAG
from cdc_lake.core.storage import S3Store
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.record import APPLIED, snapshot_summaries
from cdc_lake.engine.runs.coalesced import Budget, drain
from cdc_lake.engine.runs.waiting import waiting_in
from cdc_lake.ops.status import table_status
from tests.support.aws import aws_client
from tests.support.configs import items_config
from tests.support.lake import Lake, write_file

pytestmark = pytest.mark.spark

T = "dms/shop/items/"
on_s3 = pytest.mark.parametrize("lake", ["glue"], indirect=True)


def tags(lake: Lake) -> dict[str, dict[str, str]]:
    s3 = aws_client(lake.endpoint, "s3")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=lake.bucket).get("Contents", [])]
    return {k: {t["Key"]: t["Value"] for t in s3.get_object_tagging(Bucket=lake.bucket, Key=k)["TagSet"]} for k in keys}


def applied(lake: Lake) -> set[str]:
    name, value = APPLIED_TAG
    return {key for key, tagged in tags(lake).items() if tagged.get(name) == value}


@on_s3
def test_a_run_tags_exactly_the_files_it_applied(lake: Lake, landing) -> None:
    config = items_config()
    load = write_file(landing, T + "LOAD00000001.csv", "1,one\n2,two\n")
    first = write_file(landing, T + "20250301-120000000.csv", "U,1,uno\n")
    second = write_file(landing, T + "20250301-120100000.csv", "I,3,three\n")
    lake.store()
    s3 = aws_client(lake.endpoint, "s3")
    s3.put_object_tagging(Bucket=lake.bucket, Key=second, Tagging={"TagSet": [{"Key": "team", "Value": "shop"}]})

    assert lake.apply(config, first).applied_files == [load, first]
    assert applied(lake) == {load, first}  # the pending one is not

    bad = write_file(landing, T + "20250301-120200000.csv", "X,4,four\n")  # an unknown op: refused
    with pytest.raises(CdcLakeError):
        lake.apply(config, bad)
    assert applied(lake) == {load, first}  # a refused batch tags nothing, not even its good files

    (landing / bad).write_text("I,4,four\n")  # fixed, as DMS would write it again
    assert lake.apply(config, bad).applied_files == [second, bad]
    assert applied(lake) == {load, first, second, bad}
    assert tags(lake)[second] == {"team": "shop", APPLIED_TAG[0]: APPLIED_TAG[1]}  # its own tags kept


@on_s3
def test_a_file_is_tagged_once_the_history_table_holds_it_too(lake: Lake, landing) -> None:
    config = items_config(history=True)
    load = write_file(landing, T + "LOAD00000001.csv", "1,one\n")
    change = write_file(landing, T + "20250301-120000000.csv", "U,1,uno\n")
    result = lake.apply(config, change)
    assert result.applied_files == [load, change] and result.history_files == [load, change]
    assert applied(lake) == {load, change}


def refusing_tag_writes(lake: Lake) -> tuple[Any, list[str]]:
    """An S3 client of the lake's endpoint that S3 refuses s3:PutObjectTagging, as AWS answers a role without it
    (403 AccessDenied; every other request goes through), and the keys it refused."""
    s3 = aws_client(lake.endpoint, "s3")
    refused: list[str] = []

    def denied(params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        path = unquote(params["url_path"].split("?")[0]).lstrip("/")
        refused.append(path.removeprefix(f"{lake.bucket}/"))
        error = {"Code": "AccessDenied", "Message": "Access Denied"}
        return AWSResponse(params["url"], 403, {}, None), {"Error": error, "ResponseMetadata": {"HTTPStatusCode": 403}}

    s3.meta.events.register("before-call.s3.PutObjectTagging", denied)
    return s3, refused


def applied_records(lake: Lake, config: Any) -> list[str]:
    """Every file the table's commits record as applied, once per commit that applied it."""
    summaries = snapshot_summaries(lake, config.tables[0])
    return [f["key"] for s in summaries for f in json.loads((s["summary"] or {}).get(APPLIED) or "[]")]


@on_s3
def test_a_tag_write_s3_refuses_keeps_the_commit_and_leaves_the_files_kept_and_not_waiting(
    lake: Lake, landing, caplog: pytest.LogCaptureFixture
) -> None:
    config = items_config()
    load = write_file(landing, T + "LOAD00000001.csv", "1,one\n2,two\n")
    first = write_file(landing, T + "20250301-120000000.csv", "U,1,uno\n")
    lake.store()
    s3, refused = refusing_tag_writes(lake)
    context = ReplayContext(spark=lake.spark, location=lake.location, config=config, store=S3Store(lake.bucket, s3))
    caplog.set_level(logging.WARNING, logger="cdc_lake.engine.replay")

    outcome = drain(context, Budget.of(config, idle_seconds=0))

    # The batch is committed, exactly once and whole: the refusal came after the commit.
    assert not outcome.failures
    [result] = outcome.commits
    assert result.applied_files == [load, first]
    assert applied_records(lake, config) == [load, first]
    assert lake.rows() == [(1, "uno"), (2, "two")]
    # S3 was asked to tag both, refused, and the run said so, naming the table, the count and the permission.
    assert sorted(refused) == [first, load]
    [warning] = [r for r in caplog.records if "left untagged" in r.getMessage()]
    assert warning.levelno == logging.WARNING
    assert warning.getMessage().startswith("shop.items: 2 applied file(s) left untagged, kept until the catch-all ")
    assert "s3:PutObjectTagging" in warning.getMessage()
    # Untagged, so the lifecycle's early expiry (which reads the tag) skips them until rawUnappliedRetentionDays.
    assert applied(lake) == set()
    # Applied all the same: no run, maintenance or status takes them for files waiting.
    assert outcome.waiting.landed == {"shop.items": None}
    assert waiting_in(context).landed == {"shop.items": None}
    status = table_status(context, config.tables[0], dt.datetime.now(dt.UTC))
    assert (status.waiting_files, status.waiting_lag_s) == (0, None)

    # A later run tags what it applies; the files left untagged stay so (the catch-all expires them).
    second = write_file(landing, T + "20250301-120100000.csv", "I,3,three\n")
    assert lake.apply(config, second).applied_files == [second]
    assert applied(lake) == {second}
