"""The scheduled maintenance run's look at the raw bucket: how long the oldest landed file that no table applied
has waited (a refused table's files included), which the stack alarms on long before the lifecycle's catch-all
could expire it; 0 once every file is applied."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

import pytest

from cdc_lake.core.exceptions import CdcLakeError
from cdc_lake.core.names import OLDEST_WAITING_METRIC
from cdc_lake.core.storage import LocalFolderStore
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.metrics import CloudWatchPublisher
from cdc_lake.jobs.maintenance import publish_oldest_waiting
from tests.support.configs import items_config
from tests.support.lake import Lake, write_file

pytestmark = pytest.mark.spark

T = "dms/shop/items/"


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
