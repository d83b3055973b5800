"""The jobs' one metrics publisher: what each put carries, and which failed puts fail the run."""

from __future__ import annotations

from typing import Any

import pytest

from cdc_lake.core.names import DRIFTED_KEYS_METRIC, METRICS_NAMESPACE, SOURCE_DIFFERENCES_METRIC
from cdc_lake.engine.metrics import CloudWatchPublisher


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
