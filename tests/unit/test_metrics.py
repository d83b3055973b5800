"""The jobs' one metrics publisher: what each put carries, and which failed puts fail the run; a round's batches
in one request; how long landed files have waited, put only when every table a run saw was told."""

from __future__ import annotations

import datetime as dt
import logging
from types import SimpleNamespace
from typing import Any

import pytest

from cdc_lake.core.names import (
    BATCH_METRICS,
    DRIFTED_KEYS_METRIC,
    LANDED_LAG_METRIC,
    METRICS_NAMESPACE,
    OLDEST_WAITING_METRIC,
    SOURCE_DIFFERENCES_METRIC,
    TABLE_FAILURES_METRIC,
)
from cdc_lake.engine.metrics import MOST_VALUES_PER_PUT, PUT_EVERY_SECONDS, CloudWatchPublisher
from cdc_lake.engine.runs.waiting import Waiting
from cdc_lake.jobs.warm import metric_hooks


class FakeCloudWatch:
    def __init__(self, error: Exception | None = None) -> None:
        self.puts: list[dict[str, Any]] = []
        self.error = error

    def put_metric_data(self, **request: Any) -> None:
        if self.error:
            raise self.error
        self.puts.append(request)


@pytest.mark.parametrize(
    ("put", "name"), [("drifted_keys", DRIFTED_KEYS_METRIC), ("source_differences", SOURCE_DIFFERENCES_METRIC)]
)
def test_the_source_jobs_counts_are_put_as_counts_of_the_pipeline(put: str, name: str) -> None:
    client = FakeCloudWatch()
    getattr(CloudWatchPublisher(client, "shop_lake"), put)(0)
    [request] = client.puts
    [datum] = request["MetricData"]
    assert request["Namespace"] == METRICS_NAMESPACE
    assert (datum["MetricName"], datum["Value"], datum["Unit"]) == (name, 0.0, "Count")
    assert datum["Dimensions"] == [{"Name": "Pipeline", "Value": "shop_lake"}]


def test_a_failed_put_fails_a_source_job_but_not_a_committed_run(caplog: pytest.LogCaptureFixture) -> None:
    publisher = CloudWatchPublisher(FakeCloudWatch(RuntimeError("throttled")), "shop_lake")
    publisher.table_failures(1)  # the data is committed: logged only
    assert "could not put 1 metric(s) to CloudWatch: throttled" in caplog.text
    for put in (publisher.drifted_keys, publisher.source_differences):
        with pytest.raises(RuntimeError, match="throttled"):
            put(2)


NOW = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)


def test_how_long_files_waited_is_told_only_over_tables_seen_and_all_told() -> None:
    days_ago = NOW - dt.timedelta(days=3)
    assert Waiting().seconds(NOW) is None  # no table seen: nothing to tell
    assert Waiting({"shop.items": None, "shop.tags": None}).seconds(NOW) == 0.0
    assert Waiting({"shop.items": None, "shop.tags": days_ago}).seconds(NOW) == 3 * 86400
    # One table that could not be told: a figure over the others could hide its files.
    assert Waiting({"shop.items": None}, {"shop.tags": "AccessDeniedError: ..."}).seconds(NOW) is None


def test_the_oldest_waiting_file_is_put_in_seconds_or_not_at_all(caplog: pytest.LogCaptureFixture) -> None:
    client = FakeCloudWatch()
    publisher = CloudWatchPublisher(client, "shop_lake")
    waited = publisher.oldest_waiting(Waiting({"shop.items": dt.datetime.now(dt.UTC) - dt.timedelta(days=2)}))
    [request] = client.puts
    [datum] = request["MetricData"]
    assert (datum["MetricName"], datum["Unit"], datum["Value"]) == (OLDEST_WAITING_METRIC, "Seconds", waited)
    assert waited == pytest.approx(2 * 86400, abs=60)
    caplog.clear()  # the put's own line is logged at INFO, captured when another test left cdc_lake's level there

    assert publisher.oldest_waiting(Waiting()) is None  # a run that saw no table says nothing
    assert len(client.puts) == 1 and not caplog.records

    told = Waiting({"shop.items": None}, {"shop.tags": "AccessDeniedError: s3:ListBucket"})
    assert publisher.oldest_waiting(told) is None
    assert len(client.puts) == 1
    [record] = caplog.records
    assert record.levelno == logging.ERROR
    assert record.getMessage() == (
        f"{OLDEST_WAITING_METRIC} not put: could not tell which landed files wait unapplied in shop.tags"
    )


def test_a_failed_put_of_the_oldest_waiting_file_is_an_error(caplog: pytest.LogCaptureFixture) -> None:
    publisher = CloudWatchPublisher(FakeCloudWatch(RuntimeError("throttled")), "shop_lake")
    assert publisher.oldest_waiting(Waiting({"shop.items": None})) == 0.0  # told, but not put: the alarm's missing data
    [record] = [r for r in caplog.records if "could not put" in r.getMessage()]
    assert record.levelno == logging.ERROR


def batch(seconds: float) -> Any:
    """What ``CloudWatchPublisher.batch`` reads of a committed batch: its freshness."""
    return SimpleNamespace(freshness=dict.fromkeys(BATCH_METRICS, seconds))


def test_a_rounds_batches_are_put_in_one_request_as_the_round_ends_each_value_at_its_own_time() -> None:
    """CloudWatch charges PutMetricData by request: a warm round of 100 tables is one request, not 100."""
    client = FakeCloudWatch()
    now = [0.0]
    publisher = CloudWatchPublisher(client, "shop_lake", clock=lambda: now[0])
    for number in range(100):
        publisher.batch(batch(number))
    assert client.puts == []  # held until the round ends
    publisher.round_end(1, 100)
    [request] = client.puts
    values = request["MetricData"]
    assert len(values) == 100 * len(BATCH_METRICS)
    lags = sorted(v["Value"] for v in values if v["MetricName"] == LANDED_LAG_METRIC)
    assert lags == [float(n) for n in range(100)]
    assert len({v["Timestamp"] for v in values}) > 1  # each batch's own time, not the put's
    publisher.round_end(2, 0)
    assert len(client.puts) == 1  # a round with nothing: no request
    now[0] = PUT_EVERY_SECONDS - 1
    publisher.batch(batch(7))
    publisher.round_end(3, 1)
    assert len(client.puts) == 1, "a round's end puts at most once a minute: a warm run ends one every batch or two"
    now[0] = PUT_EVERY_SECONDS
    publisher.round_end(4, 0)
    assert len(client.puts) == 2 and len(client.puts[1]["MetricData"]) == len(BATCH_METRICS)


def test_values_past_what_one_request_takes_go_in_as_many_as_needed() -> None:
    client = FakeCloudWatch()
    publisher = CloudWatchPublisher(client, "shop_lake")
    per_batch = len(BATCH_METRICS)
    batches = MOST_VALUES_PER_PUT // per_batch + 2  # one past the limit: put as soon as it is reached
    for number in range(batches):
        publisher.batch(batch(number))
    publisher.flush()
    sizes = [len(request["MetricData"]) for request in client.puts]
    assert max(sizes) <= MOST_VALUES_PER_PUT and sum(sizes) == batches * per_batch
    assert len(sizes) == 2


def test_a_warm_runs_hooks_put_a_round_at_its_end_and_a_refusal_at_once() -> None:
    client = FakeCloudWatch()
    hooks = metric_hooks(CloudWatchPublisher(client, "shop_lake"))
    assert hooks.on_batch and hooks.on_round and hooks.on_refusal
    hooks.on_batch(batch(1.0))
    hooks.on_refusal("shop.items", "RefusedInputError: ...")
    [refusal] = client.puts
    assert [v["MetricName"] for v in refusal["MetricData"]] == [TABLE_FAILURES_METRIC]
    hooks.on_round(1, 1)
    assert len(client.puts) == 2 and len(client.puts[1]["MetricData"]) == len(BATCH_METRICS)
