"""How long the oldest landed file that no table applied has waited (a refused table's files included), which the
stack alarms on long before the lifecycle's catch-all could expire it; 0 once every file is applied. The scheduled
maintenance run looks at every table's folder; every replay run tells it for the tables it saw, from the listings
it made anyway, and says the same as maintenance's look; a table it cannot tell puts nothing at all."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from cdc_lake.core.config import PipelineConfig, parse_config
from cdc_lake.core.dms_files import parse_key
from cdc_lake.core.exceptions import AccessDeniedError, CdcLakeError, TableFailuresError
from cdc_lake.core.names import OLDEST_WAITING_METRIC, TABLE_FAILURES_METRIC
from cdc_lake.core.storage import LocalFolderStore, ObjectStore, ReadAsListed, StoredObject
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.metrics import CloudWatchPublisher
from cdc_lake.engine.replay import replay
from cdc_lake.engine.runs.coalesced import Budget, drain
from cdc_lake.engine.runs.listings import ListingLog
from cdc_lake.engine.runs.waiting import still_waiting, waiting_in
from cdc_lake.jobs.entry import JobClients, job_context
from cdc_lake.jobs.maintenance import publish_oldest_waiting
from cdc_lake.jobs.replay import ReplayOptions, run, run_job
from cdc_lake.local.aws_endpoint import served_requests
from tests.support.configs import items_config, items_config_data, table_data
from tests.support.lake import Lake, write_file

pytestmark = pytest.mark.spark

T = "dms/shop/items/"
TAGS = "dms/shop/tags/"
on_s3 = pytest.mark.parametrize("lake", ["glue"], indirect=True)


class Recorded:
    """A CloudWatch client that keeps what is put."""

    def __init__(self) -> None:
        self.data: list[dict[str, Any]] = []

    def put_metric_data(self, Namespace: str, MetricData: list[dict[str, Any]]) -> None:
        self.data += MetricData


def landed_days_ago(landing: Path, key: str, days: float) -> None:
    moment = (dt.datetime.now(dt.UTC) - dt.timedelta(days=days)).timestamp()
    os.utime(landing / key, (moment, moment))


def waited(lake: Lake, config: Any, landing: Path) -> float | None:
    client = Recorded()
    context = ReplayContext(spark=lake.spark, location=lake.location, config=config, store=LocalFolderStore(landing))
    seconds = publish_oldest_waiting(context, CloudWatchPublisher(client, lake.database))
    assert [d["MetricName"] for d in client.data] == [OLDEST_WAITING_METRIC]
    assert client.data[0]["Value"] == seconds
    return seconds


def test_the_oldest_file_no_table_applied_is_measured_until_it_is_applied(lake: Lake, landing: Path) -> None:
    config = items_config()
    load = write_file(landing, T + "LOAD00000001.csv", "1,one\n")
    landed_days_ago(landing, load, 30)
    assert waited(lake, config, landing) == pytest.approx(30 * 86400, abs=600)  # no lake table yet: it waits

    lake.apply(config, load)
    assert waited(lake, config, landing) == 0

    bad = write_file(landing, T + "20250301-120000000.csv", "X,2,two\n")  # an unknown op: the table is refused
    later = write_file(landing, T + "20250301-120100000.csv", "I,3,three\n")
    landed_days_ago(landing, bad, 16)
    landed_days_ago(landing, later, 2)
    with pytest.raises(CdcLakeError):
        lake.apply(config, later)
    assert waited(lake, config, landing) == pytest.approx(16 * 86400, abs=600)

    (landing / bad).write_text("I,2,two\n")
    landed_days_ago(landing, bad, 16)
    lake.apply(config, later)
    assert waited(lake, config, landing) == 0


# --- what a replay run tells ---------------------------------------------------------------------------------


def two_tables() -> PipelineConfig:
    tables = [table_data(name, ["id"], id="bigint", label="string") for name in ("shop.items", "shop.tags")]
    return parse_config({"dms": {"bucket_folder": "dms"}, "tables": tables})


TOLD_FROM_LISTINGS = (
    "landed files waiting after the run, in 2 table(s): told from the run's listings, 0 request(s) more"
)


def land(landing: Path, key: str, text: str, days: float) -> str:
    write_file(landing, key, text)
    landed_days_ago(landing, key, days)
    return key


def landed_at(landing: Path, key: str) -> dt.datetime:
    return dt.datetime.fromtimestamp((landing / key).stat().st_mtime_ns / 1e9, tz=dt.UTC)


def replay_options(lake: Lake, key: str) -> ReplayOptions:
    """A replay run's options for ``key``, on ``lake``, as the Lambda would start it."""
    table = ".".join(key.split("/")[1:3])
    arguments = {"config_uri": "(local)", "bucket": "b", "key": key, "table": table, "catalog": lake.catalog}
    return ReplayOptions.from_options({**arguments, "database": lake.database, "idle_seconds": "0"})


def test_a_coalesced_run_tells_what_maintenance_would_without_listing_again(
    lake: Lake, landing: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every table a run saw: none waiting once applied, a refused table's oldest unapplied file (its LOAD files,
    applied long ago and listed by every run, not counted); the same as the maintenance's look, from the run's own
    listings and heads."""
    config = two_tables()
    context = lake.context(config)
    land(landing, T + "LOAD00000001.csv", "1,one\n", 30)
    land(landing, TAGS + "LOAD00000001.csv", "1,red\n", 20)
    budget = Budget.of(config, idle_seconds=0)

    first = drain(context, budget)
    assert not first.failures
    assert first.waiting.landed == {"shop.items": None, "shop.tags": None} == waiting_in(context).landed
    assert first.waiting.seconds(dt.datetime.now(dt.UTC)) == 0

    bad = land(landing, T + "20250301-120000000.csv", "X,2,two\n", 16)  # an unknown op: the table is refused
    land(landing, T + "20250301-120100000.csv", "I,3,three\n", 2)
    land(landing, TAGS + "20250301-120000000.csv", "I,2,blue\n", 1)
    caplog.set_level(logging.INFO, logger="cdc_lake.engine.runs.waiting")
    second = drain(context, budget)
    assert list(second.failures) == ["shop.items"]
    assert second.waiting.landed == {"shop.items": landed_at(landing, bad), "shop.tags": None}
    assert second.waiting.landed == waiting_in(context).landed  # what the maintenance's full look finds
    assert second.waiting.seconds(dt.datetime.now(dt.UTC)) == pytest.approx(16 * 86400, abs=600)
    told = [r.getMessage() for r in caplog.records if "landed files waiting after the run" in r.getMessage()]
    assert told == [TOLD_FROM_LISTINGS]

    (landing / bad).write_text("I,2,two\n")
    third = drain(context, budget)
    assert not third.failures
    assert third.waiting.landed == {"shop.items": None, "shop.tags": None} == waiting_in(context).landed


def test_a_per_file_run_tells_the_files_after_its_own_and_nothing_when_it_applied_nothing(
    lake: Lake, landing: Path
) -> None:
    config = parse_config(items_config_data(runs={"mode": "per_file"}))
    land(landing, T + "LOAD00000001.csv", "1,one\n", 10)
    first = land(landing, T + "20250301-120000000.csv", "U,1,uno\n", 5)
    later = land(landing, T + "20250301-120100000.csv", "I,2,two\n", 3)

    def run_for(key: str) -> Any:
        options = replay_options(lake, key)
        return run_job("cdc_replay", options, job_context(options, lake.spark, config=config, store=lake.store()))

    assert run_for(first).waiting.landed == {"shop.items": landed_at(landing, later)}
    again = run_for(first)  # a late event: its file is applied, and the run cannot tell what follows it
    assert again.already_applied and again.waiting.seconds(dt.datetime.now(dt.UTC)) is None
    assert run_for(later).waiting.landed == {"shop.items": None}


class DeniedFolder:
    """The landed files' store refusing to list one table's folder, as S3 refuses a role without s3:ListBucket."""

    def __init__(self, inner: ObjectStore, prefix: str) -> None:
        self.inner = inner
        self.prefix = prefix

    def list(self, prefix: str, start_after: str | None = None) -> list[StoredObject]:
        if prefix == self.prefix:
            raise AccessDeniedError(self.inner.uri(prefix), "s3:ListBucket")
        return self.inner.list(prefix, start_after)

    def uri(self, key: str) -> str:
        return self.inner.uri(key)

    def read_head(self, key: str, size: int) -> bytes:
        return self.inner.read_head(key, size)

    def read_listed(self, item: StoredObject) -> ReadAsListed | None:
        return self.inner.read_listed(item)

    def folders(self, prefix: str) -> list[str]:
        return self.inner.folders(prefix)


def replay_run(lake: Lake, config: PipelineConfig, store: ObjectStore) -> tuple[Recorded, BaseException | None]:
    """The replay job's run (``jobs.replay.run``) for the first items file, as Glue starts it: what it put to
    CloudWatch, and what it raised."""
    options = replay_options(lake, T + "LOAD00000001.csv")
    client = Recorded()
    clients = JobClients(s3=None, secrets=None, metrics=CloudWatchPublisher(client, lake.database))
    try:
        run("full_load", options, job_context(options, lake.spark, config=config, store=store), clients)
    except TableFailuresError as error:
        return client, error
    return client, None


def test_the_replay_job_puts_a_refused_tables_wait_and_nothing_when_a_table_cannot_be_told(
    lake: Lake, landing: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = two_tables()
    land(landing, T + "LOAD00000001.csv", "1,one\n", 20)
    land(landing, TAGS + "LOAD00000001.csv", "not-a-number,red\n", 9)  # an id that is no number: refused

    put, failed = replay_run(lake, config, lake.store())
    assert failed is not None and list(failed.failures) == ["shop.tags"]
    waited = {d["MetricName"]: d["Value"] for d in put.data}
    assert waited[TABLE_FAILURES_METRIC] == 1
    assert waited[OLDEST_WAITING_METRIC] == pytest.approx(9 * 86400, abs=600)

    # The run cannot list the tags folder: it cannot tell that table's files, and puts no figure that could hide
    # them (the stack's alarm reads the missing datum as breaching); the error says why.
    put, failed = replay_run(lake, config, DeniedFolder(lake.store(), TAGS))
    assert failed is not None and list(failed.failures) == ["shop.tags"]
    assert [d["MetricName"] for d in put.data] == [TABLE_FAILURES_METRIC]
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    cause = "shop.tags: could not tell which of its landed files wait unapplied: AccessDeniedError"
    assert any(m.startswith(cause) for m in errors)
    assert f"{OLDEST_WAITING_METRIC} not put: could not tell which landed files wait unapplied in shop.tags" in errors


@on_s3
def test_telling_a_refused_tables_wait_costs_no_s3_listing(lake: Lake, landing: Path) -> None:
    """On the local AWS endpoint: the run's listings serve, so telling costs only the refused table's record read
    again through the catalog, and no listing of the bucket."""
    config = two_tables()
    write_file(landing, T + "LOAD00000001.csv", "1,one\n")
    write_file(landing, T + "20250301-120000000.csv", "X,2,two\n")
    write_file(landing, TAGS + "LOAD00000001.csv", "1,red\n")
    context = lake.context(config)
    listings = ListingLog(context.store)
    listed = dataclasses.replace(context, store=listings)
    replay(listed, parse_key(T + "LOAD00000001.csv", config))
    with pytest.raises(CdcLakeError):
        replay(listed, parse_key(T + "20250301-120000000.csv", config))
    tags = replay(listed, config.table("shop.tags"))

    served_requests(lake.endpoint, reset=True)
    waiting = still_waiting(context, listings, {"shop.items": None, "shop.tags": tags})
    served = served_requests(lake.endpoint)

    assert waiting.landed["shop.tags"] is None and waiting.landed["shop.items"] is not None
    assert waiting.landed == waiting_in(context).landed
    assert {kind for kind in served if kind.startswith("s3:")} <= {"s3:GET metadata.json"}, served
    assert served["s3:GET metadata.json"] <= 1 and sum(served.values()) <= 4, served
