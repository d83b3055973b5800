"""CloudWatch metrics of the replay jobs: each commit's freshness and batch, and the tables a run left.

The stack alarms on them (lag above ``runs.lag_alarm_seconds``, any table failure). The only dimension is
the pipeline (the lake database): see ``cdc_lake.core.names``.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from cdc_lake.core.names import (
    BATCH_METRICS,
    INPUT_NOTICES_METRIC,
    METRICS_NAMESPACE,
    OLDEST_WAITING_METRIC,
    PIPELINE_DIMENSION,
    TABLE_FAILURES_METRIC,
)
from cdc_lake.engine.replay import RunResult

log = logging.getLogger(__name__)


class CloudWatchPublisher:
    """Puts the metrics with a CloudWatch client; a failed put is logged, never fails the run (the data is
    committed, and each commit's snapshot summary keeps the same figures)."""

    def __init__(self, client: Any, pipeline: str) -> None:
        self._client = client
        self._dimensions = [{"Name": PIPELINE_DIMENSION, "Value": pipeline}]

    def batch(self, result: RunResult) -> None:
        facts = result.freshness or {}
        now = dt.datetime.now(dt.UTC)
        data = [
            {"MetricName": name, "Dimensions": self._dimensions, "Timestamp": now, "Value": float(value), "Unit": unit}
            for field, (name, unit) in BATCH_METRICS.items()
            if (value := facts.get(field)) is not None
        ]
        self._put(data)

    def oldest_waiting(self, seconds: float) -> None:
        self._put([{"MetricName": OLDEST_WAITING_METRIC, "Dimensions": self._dimensions,
                    "Timestamp": dt.datetime.now(dt.UTC), "Value": float(seconds), "Unit": "Seconds"}])  # fmt: skip

    def table_failures(self, count: int) -> None:
        self._count(TABLE_FAILURES_METRIC, count)

    def notices(self, count: int) -> None:
        self._count(INPUT_NOTICES_METRIC, count)

    def _count(self, name: str, count: int) -> None:
        now = dt.datetime.now(dt.UTC)
        self._put(
            [
                {
                    "MetricName": name,
                    "Dimensions": self._dimensions,
                    "Timestamp": now,
                    "Value": float(count),
                    "Unit": "Count",
                }
            ]
        )

    def _put(self, data: list[dict[str, Any]]) -> None:
        if not data:
            return
        try:
            self._client.put_metric_data(Namespace=METRICS_NAMESPACE, MetricData=data)
        except Exception as error:  # metrics must not fail a committed run
            log.warning("could not put %d metric(s) to CloudWatch: %s", len(data), error)
