"""The live status follows Spark's running tasks, so a long full load visibly moves."""

from __future__ import annotations

import io
import threading
import time

import pytest
from rich.console import Console

from cdc_lake.local.progress import live_status, spark_tasks

pytestmark = [pytest.mark.spark, pytest.mark.each_runtime]


def test_the_status_shows_the_running_stage_tasks(spark) -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=200)
    assert spark_tasks(spark) == ""  # nothing running
    slow = spark.range(0, 4, 1, 4).selectExpr("reflect('java.lang.Thread', 'sleep', cast(1500 as bigint)) AS slept")
    job = threading.Thread(target=slow.collect)
    with live_status("loading", console, spark=spark):
        job.start()
        seen = ""
        deadline = time.monotonic() + 20
        while not seen and time.monotonic() < deadline:
            seen = spark_tasks(spark)
            time.sleep(0.1)
        job.join()
        time.sleep(0.6)  # one refresh after the job
    assert seen.startswith("Spark tasks ") and seen.endswith("/4")
    assert "Spark tasks" in out.getvalue()
