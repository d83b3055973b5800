"""CloudWatch metrics of the Glue jobs: each commit's freshness and batch, the tables a run left, the oldest
landed file waiting, and what the source check and the drift job found.

The stack alarms on them (lag above ``runs.lag_alarm_seconds``, any table failure, any difference or drifted key, a
landed file waiting too long, or no run telling how long files wait). The only dimension is the pipeline (the lake
database): see ``cdc_lake.core.names``.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from cdc_lake.core.names import (
    BATCH_METRICS,
    DRIFTED_KEYS_METRIC,
    INPUT_NOTICES_METRIC,
    METRICS_NAMESPACE,
    OLDEST_WAITING_METRIC,
    PIPELINE_DIMENSION,
    SOURCE_DIFFERENCES_METRIC,
    TABLE_FAILURES_METRIC,
)
from cdc_lake.engine.replay import RunResult
from cdc_lake.engine.runs.waiting import Waiting

log = logging.getLogger(__name__)


# PutMetricData takes at most 1,000 values a request.
MOST_VALUES_PER_PUT = 1000
# A round's end puts what waits at most this often: a warm run told of landings ends a round every batch or two, and
# the alarms read these metrics by the minute.
PUT_EVERY_SECONDS = 60.0


class CloudWatchPublisher:
    """Puts the metrics with a CloudWatch client. A failed put of a replay or maintenance metric is logged, never
    fails the run (the data is committed, and each commit's snapshot summary keeps the same figures); the source
    check's and the drift job's count is all their run leaves, so a failed put of it fails the run.

    A batch's values wait for ``flush``, which a run calls at a round's end (at most every ``PUT_EVERY_SECONDS``)
    and before its end: CloudWatch charges by request, not by value, so a minute of a warm run's batches is one
    request, not one a batch, and each value keeps its own time. A run ended between its commit and the put loses
    those values, not its data."""

    def __init__(self, client: Any, pipeline: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._client = client
        self._dimensions = [{"Name": PIPELINE_DIMENSION, "Value": pipeline}]
        self._pending: list[dict[str, Any]] = []
        self._clock = clock
        self._put_at = -math.inf

    def batch(self, result: RunResult) -> None:
        facts = result.freshness or {}
        now = dt.datetime.now(dt.UTC)
        self._pending += [
            {"MetricName": name, "Dimensions": self._dimensions, "Timestamp": now, "Value": float(value), "Unit": unit}
            for field, (name, unit) in BATCH_METRICS.items()
            if (value := facts.get(field)) is not None
        ]
        while len(self._pending) >= MOST_VALUES_PER_PUT:  # a full request now: the rest wait for the round's end
            full, self._pending = self._pending[:MOST_VALUES_PER_PUT], self._pending[MOST_VALUES_PER_PUT:]
            self._put(full)

    def round_end(self, _round: int, _commits: int) -> None:
        """A run's ``on_round`` hook: ``flush``, unless it did less than ``PUT_EVERY_SECONDS`` ago."""
        if self._pending and self._clock() - self._put_at >= PUT_EVERY_SECONDS:
            self.flush()

    def flush(self) -> None:
        """Put the batches' values that wait, in as few requests as CloudWatch takes them."""
        pending, self._pending = self._pending, []
        self._put_at = self._clock()
        for start in range(0, len(pending), MOST_VALUES_PER_PUT):
            self._put(pending[start : start + MOST_VALUES_PER_PUT])

    def oldest_waiting(self, waiting: Waiting) -> float | None:
        """Put how long the oldest landed file no table applied has waited (0: none waits), over the tables a run saw;
        returns it. Nothing is put when the run saw no table, or could not tell one's files (an error logged): a
        figure over the others could hide them, and the stack's alarm reads a missing datum as breaching where a
        scheduled run is due to put one. A failed put is logged as an error too, for the same alarm."""
        now = dt.datetime.now(dt.UTC)
        seconds = waiting.seconds(now)
        if seconds is None:
            if waiting.unmeasured:
                log.error(
                    "%s not put: could not tell which landed files wait unapplied in %s",
                    OLDEST_WAITING_METRIC,
                    ", ".join(sorted(waiting.unmeasured)),
                )
            return None
        oldest = f"waiting {seconds:.0f} s" if waiting.oldest is not None else "none"
        log.info("oldest landed file no table applied, over %d table(s): %s", len(waiting.landed), oldest)
        self._put([{"MetricName": OLDEST_WAITING_METRIC, "Dimensions": self._dimensions, "Timestamp": now,
                    "Value": seconds, "Unit": "Seconds"}], level=logging.ERROR)  # fmt: skip
        return seconds

    def table_failures(self, count: int) -> None:
        self._count(TABLE_FAILURES_METRIC, count)

    def notices(self, count: int) -> None:
        self._count(INPUT_NOTICES_METRIC, count)

    def source_differences(self, count: int) -> None:
        self._count(SOURCE_DIFFERENCES_METRIC, count, required=True)

    def drifted_keys(self, count: int) -> None:
        self._count(DRIFTED_KEYS_METRIC, count, required=True)

    def _count(self, name: str, count: int, *, required: bool = False) -> None:
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
            ],
            required=required,
        )

    def _put(self, data: list[dict[str, Any]], *, required: bool = False, level: int = logging.WARNING) -> None:
        if not data:
            return
        try:
            self._client.put_metric_data(Namespace=METRICS_NAMESPACE, MetricData=data)
        except Exception as error:  # metrics must not fail a committed run, unless they are all the run leaves
            if required:
                raise
            log.log(level, "could not put %d metric(s) to CloudWatch: %s", len(data), error)
