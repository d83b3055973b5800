"""A warm run's shift, without Spark: what it hands over and to which job, how it leaves a handed table to its run,
and the bound on a batch that keeps dead runs' branches removable."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from cdc_lake.core.config import parse_config
from cdc_lake.core.dms_files import LandedFiles, list_landed
from cdc_lake.core.exceptions import HandOver
from cdc_lake.core.names import WARM_BATCH_MINUTES, WARM_JOB
from cdc_lake.core.plan import ReplayState, plan_run
from cdc_lake.core.storage import StoredObject
from cdc_lake.engine.context import Batch, ReplayContext
from cdc_lake.engine.runs.warm import WarmShift, admit_small, warm_budget
from cdc_lake.engine.tables import LakeLocation

CONFIG = parse_config(
    {
        "runs": {"mode": "warm"},
        "tables": [{"name": "app.orders", "primary_key": ["id"], "columns": [{"name": "id", "type": "bigint"}]}],
    }
)
JOBS = {"full_load": "lake-full-load", "cdc_replay": "lake-cdc-replay", WARM_JOB: "lake-cdc-warm"}


class Bucket:
    def __init__(self, sizes: dict[str, int]) -> None:
        self.sizes = sizes

    def list(self, prefix: str, start_after: str | None = None) -> list[StoredObject]:
        return [StoredObject(k, n, "e") for k, n in sorted(self.sizes.items()) if k.startswith(prefix)]

    def read_head(self, key: str, size: int) -> bytes:
        return b"I,1\n"  # a small object is looked at: it holds a row


class Glue:
    def __init__(self) -> None:
        self.runs: dict[str, list[dict[str, Any]]] = {}

    def get_job_runs(self, JobName: str, MaxResults: int = 50, **_: Any) -> dict[str, Any]:
        return {"JobRuns": list(reversed(self.runs.get(JobName, [])))[:MaxResults]}

    def get_job_run(self, JobName: str, RunId: str, **_: Any) -> dict[str, Any]:
        return {"JobRun": next(r for r in self.runs[JobName] if r["Id"] == RunId)}

    def start_job_run(self, JobName: str, Arguments: dict[str, str], **_: Any) -> dict[str, str]:
        run = {"Id": f"jr_{sum(map(len, self.runs.values())) + 1}", "JobRunState": "WAITING", "Arguments": Arguments}
        self.runs.setdefault(JobName, []).append(run)
        return {"JobRunId": run["Id"]}


def batch_of(sizes: dict[str, int]) -> Batch:
    table = CONFIG.table("app.orders")
    landed: LandedFiles = list_landed(Bucket(sizes), CONFIG, table)  # type: ignore[arg-type]
    assert landed.newest is not None
    plan = plan_run(CONFIG, landed.newest, landed.listed, ReplayState(), 0)
    return Batch(landed.newest, landed, plan, None, ReplayState(), None, 0.0, (), {})


def shift(glue: Glue, clock: list[float] | None = None) -> WarmShift:
    context = ReplayContext(spark=None, location=LakeLocation("c", "db"), config=CONFIG, store=None)  # type: ignore[arg-type]
    now = clock if clock is not None else [0.0]
    overruns: list[str] = []
    made = WarmShift(context, glue, 0, "jr_warm", JOBS, "raw", clock=lambda: now[0], overrun=overruns.append)
    made.overruns = overruns  # type: ignore[attr-defined]
    return made


def test_small_cdc_batches_are_taken_load_files_and_backlogs_are_handed_over() -> None:
    admit = admit_small(limit_bytes=10_000)
    admit(batch_of({"app/orders/20250301-120000000.csv": 4_000, "app/orders/20250301-120100000.csv": 6_000}))
    with pytest.raises(HandOver) as backlog:
        admit(batch_of({"app/orders/20250301-120000000.csv": 6_000, "app/orders/20250301-120100000.csv": 6_000}))
    assert (backlog.value.job, backlog.value.key) == ("cdc_replay", "app/orders/20250301-120100000.csv")
    assert "12,000 bytes pending in 2 file(s)" in str(backlog.value)
    with pytest.raises(HandOver) as load:
        admit(batch_of({"app/orders/LOAD00000001.csv": 10, "app/orders/20250301-120000000.csv": 10}))
    assert (load.value.job, load.value.key) == ("full_load", "app/orders/LOAD00000001.csv")  # the CDC stays warm


def test_a_handed_table_is_left_to_its_run_while_it_lives_and_taken_back_after() -> None:
    glue = Glue()
    warm = shift(glue)
    warm.hand_over(HandOver("app.orders", "cdc_replay", "app/orders/20250301-120100000.csv", "big"))
    (run,) = glue.runs["lake-cdc-replay"]
    assert run["Arguments"] == {
        "--bucket": "raw",
        "--key": "app/orders/20250301-120100000.csv",
        "--table": "app.orders",
        "--one_table": "true",
    }
    assert warm.busy("app.orders")
    run["JobRunState"] = "RUNNING"
    assert warm.busy("app.orders")
    run["JobRunState"] = "SUCCEEDED"
    assert not warm.busy("app.orders")


def test_a_table_already_taken_by_a_run_of_the_job_is_not_handed_twice() -> None:
    glue = Glue()
    glue.runs["lake-full-load"] = [
        {"Id": "jr_lambda", "JobRunState": "RUNNING", "Arguments": {"--table": "app.orders", "--key": "k"}}
    ]
    warm = shift(glue)
    warm.hand_over(HandOver("app.orders", "full_load", "app/orders/LOAD00000002.csv", "LOAD"))
    assert len(glue.runs["lake-full-load"]) == 1
    assert warm.handed["app.orders"] == ("full_load", "jr_lambda")


def test_a_table_whose_handed_run_failed_is_left_for_the_rest_of_the_warm_run() -> None:
    glue = Glue()
    warm = shift(glue)
    warm.hand_over(HandOver("app.orders", "cdc_replay", "k", "big"))
    glue.runs["lake-cdc-replay"][0]["JobRunState"] = "FAILED"
    assert warm.busy("app.orders") and warm.busy("app.orders")
    assert glue.runs["lake-cdc-replay"][0]["JobRunState"] == "FAILED" and len(glue.runs["lake-cdc-replay"]) == 1


def test_a_batch_past_the_bound_ends_the_run_and_the_bound_is_what_longest_run_counts() -> None:
    now = [0.0]
    warm = shift(Glue(), now)
    with warm.watch("app.orders"):
        now[0] = WARM_BATCH_MINUTES * 60 - 1
        assert warm.overdue() is None
        now[0] = WARM_BATCH_MINUTES * 60 + 1
        assert warm.overdue() == "app.orders"
    assert warm.overdue() is None  # the batch ended
    # The warm run lives for days, yet dead branches wait no longer than every other job's bound.
    assert CONFIG.runs.longest_run.total_seconds() < 24 * 3600
    assert CONFIG.runs.longest_run.total_seconds() >= WARM_BATCH_MINUTES * 60


def test_the_watch_ends_the_run_when_a_batch_outlives_the_bound() -> None:
    now = [0.0]
    warm = shift(Glue(), now)
    warm.batch_limit_seconds = 0.05  # the watchdog looks every 0.005 s
    with warm.watch("app.orders"):
        now[0] = 1.0
        for _ in range(200):
            if warm.overruns:  # type: ignore[attr-defined]
                break
            time.sleep(0.01)
    assert len(warm.overruns) == 1  # type: ignore[attr-defined]
    assert "app.orders: a batch has run longer than 0s; ending the warm run" in warm.overruns[0]  # type: ignore[attr-defined]


def test_the_watch_stops_with_its_run() -> None:
    warm = shift(Glue())
    warm.batch_limit_seconds = 0.05
    with warm.watch("app.orders"):
        pass
    watchdog = warm._watchdog
    assert watchdog is not None and watchdog.is_alive()
    warm.end()
    watchdog.join(timeout=2)
    assert not watchdog.is_alive()


def test_a_warm_run_applies_its_own_number_of_tables_at_once() -> None:
    context = ReplayContext(spark=None, location=LakeLocation("c", "db"), config=CONFIG, store=None)  # type: ignore[arg-type]
    budget = warm_budget(context)
    assert budget.parallel_tables == CONFIG.runs.warm.parallel_tables == 8 != CONFIG.runs.parallel_tables
    quick = CONFIG.model_copy(
        update={
            "runs": CONFIG.runs.model_copy(update={"warm": CONFIG.runs.warm.model_copy(update={"parallel_tables": 3})})
        }
    )
    assert warm_budget(dataclasses.replace(context, config=quick)).parallel_tables == 3
