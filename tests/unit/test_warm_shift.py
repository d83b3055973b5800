"""A warm run's shift, without Spark: what it hands over and to which job, how it leaves a handed table to its run,
and the bound on a batch that keeps dead runs' branches removable."""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from typing import Any

import pytest

from cdc_lake.core.config import parse_config
from cdc_lake.core.dms_files import LandedFiles, list_landed
from cdc_lake.core.exceptions import HandOver
from cdc_lake.core.names import WARM_BATCH_MINUTES, WARM_JOB
from cdc_lake.core.plan import ReplayState, plan_run
from cdc_lake.core.shards import VERSION_ARGUMENT, ShardState, hold_key, marker_key, overrun_key, version_key
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
NOW = dt.datetime(2026, 12, 2, 12, tzinfo=dt.UTC)
JOBS = {"full_load": "lake-full-load", "cdc_replay": "lake-cdc-replay", WARM_JOB: "lake-cdc-warm"}


class Bucket:
    def __init__(self, sizes: dict[str, int]) -> None:
        self.sizes = sizes
        self.data: dict[str, bytes] = {}

    def list(self, prefix: str, start_after: str | None = None) -> list[StoredObject]:
        return [StoredObject(k, n, "e") for k, n in sorted(self.sizes.items()) if k.startswith(prefix)]

    def read_head(self, key: str, size: int) -> bytes:
        if key not in self.sizes:
            raise FileNotFoundError(key)
        return self.data.get(key, b"I,1\n")[:size]  # a small landed object is looked at: it holds a row

    def put(self, key: str, data: bytes) -> None:
        self.sizes[key] = len(data)
        self.data[key] = data

    def delete(self, key: str) -> None:
        self.sizes.pop(key, None)


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


def shift(
    glue: Glue, clock: list[float] | None = None, bucket: Bucket | None = None, run_id: str = "jr_warm"
) -> WarmShift:
    store = bucket if bucket is not None else Bucket({})
    context = ReplayContext(spark=None, location=LakeLocation("c", "db"), config=CONFIG, store=store)  # type: ignore[arg-type]
    now = clock if clock is not None else [0.0]
    overruns: list[str] = []
    made = WarmShift(
        context, glue, 0, run_id, JOBS, "raw", clock=lambda: now[0], overrun=overruns.append, now=lambda: NOW
    )
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


def outlive_the_bound(warm: WarmShift, now: list[float]) -> None:
    """A batch of app.orders outlives a bound of 0.05 s (the watchdog looks every 0.005 s); back once the watch said
    the run ends, or after 2 s."""
    warm.batch_limit_seconds = 0.05
    with warm.watch("app.orders"):
        now[0] = 1.0
        for _ in range(200):
            if warm.ending is not None:
                break
            time.sleep(0.01)


def test_the_watch_ends_the_run_through_its_stop_path_when_a_batch_outlives_the_bound() -> None:
    """Scenario 8 of issue 69: not ``os._exit``, wherever the batch is a Spark job: its job group is cancelled, the
    batch fails, and the run ends after its last look (``must_end``)."""
    now = [0.0]
    warm = shift(Glue(), now)
    outlive_the_bound(warm, now)
    assert warm.ending is not None and "app.orders: a batch has run longer than 0s" in warm.ending
    assert warm.must_end()
    warm.end()  # the round ended with the cancelled batch failed; then the last look and the end
    assert warm._watchdog is not None
    warm._watchdog.join(timeout=2)
    assert not warm._watchdog.is_alive() and warm.overruns == []  # type: ignore[attr-defined]


def test_a_run_that_does_not_end_within_the_grace_ends_its_process() -> None:
    now = [0.0]
    warm = shift(Glue(), now)
    warm.end_grace_seconds = 0.05  # a batch stuck outside Spark: cancelling its jobs does not end it
    outlive_the_bound(warm, now)
    assert warm._watchdog is not None
    warm._watchdog.join(timeout=2)
    assert len(warm.overruns) == 1  # type: ignore[attr-defined]
    assert "app.orders: a batch has run longer than 0s" in warm.overruns[0]  # type: ignore[attr-defined]


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


class PagedGlue(Glue):
    """GetJobRuns as Glue pages it: newest first, at most ``MaxResults`` a page, then a ``NextToken``."""

    def __init__(self) -> None:
        super().__init__()
        self.pages = 0

    def get_job_runs(
        self, JobName: str, MaxResults: int = 100, NextToken: str | None = None, **_: Any
    ) -> dict[str, Any]:
        self.pages += 1
        runs = list(reversed(self.runs.get(JobName, [])))
        start = int(NextToken or 0)
        more = {"NextToken": str(start + MaxResults)} if start + MaxResults < len(runs) else {}
        return {"JobRuns": runs[start : start + MaxResults], **more}


def a_day_old_run_behind_other_shards_runs() -> PagedGlue:
    """Shard 0's run, 20 hours old, holding its shard, behind 300 runs of shard 1 since; 2,000 runs over the month
    before it."""
    glue = PagedGlue()

    def run(run_id: str, shard: int, state: str, hours_ago: float) -> dict[str, Any]:
        started = NOW - dt.timedelta(hours=hours_ago)
        return {"Id": run_id, "JobRunState": state, "Arguments": {"--shard": str(shard)}, "StartedOn": started}

    old = [run(f"jr_old_{i}", i % 2, "SUCCEEDED", 720 - i * 0.34) for i in range(2_000)]
    since = [run(f"jr_other_{i}", 1, "SUCCEEDED", 19 - i * 0.06) for i in range(300)]
    glue.runs["lake-cdc-warm"] = [*old, run("jr_day", 0, "RUNNING", 20), *since, run("jr_new", 0, "RUNNING", 0)]
    return glue


def test_a_shards_run_of_a_day_is_found_behind_other_shards_runs_and_the_pages_stop_at_its_lifetime() -> None:
    """Scenario 6 of issue 69: GetJobRuns' newest 50 no longer hold a run that has lived for a day."""
    from dms_trigger.handler import GlueJobStarter

    glue = a_day_old_run_behind_other_shards_runs()
    holds = [hold_key(0, run, CONFIG.version) for run in ("jr_day", "jr_new")]
    starter = GlueJobStarter(glue, JOBS, exists=lambda _bucket, key: key in holds, now=lambda: NOW)
    assert starter.warm_run("raw", 0, CONFIG.runs.warm.live_span, CONFIG.version) in {"jr_day", "jr_new"}
    # Two pages hold the runs of the last 26 hours; the month before them is not read.
    assert glue.pages == 2
    glue.runs["lake-cdc-warm"].pop()  # jr_new: the Lambda's answer must be the day-old run
    assert starter.warm_run("raw", 0, CONFIG.runs.warm.live_span, CONFIG.version) == "jr_day"


def test_a_new_run_yields_to_the_shards_run_of_a_day_behind_other_shards_runs() -> None:
    glue = a_day_old_run_behind_other_shards_runs()
    bucket = Bucket({hold_key(0, "jr_day", CONFIG.version): 6})
    new = shift(glue, bucket=bucket, run_id="jr_new")
    assert new.peer() == "jr_day"
    assert marker_key(0, "jr_new") in bucket.sizes, "a run that yields is marked stopping: nobody counts on it"
    assert hold_key(0, "jr_new", CONFIG.version) not in bucket.sizes


def test_of_two_runs_that_see_each_other_the_older_takes_the_shard_and_the_younger_waits_until_it_holds() -> None:
    """Scenario 1 of issue 69: neither yields to the other for good."""
    glue = Glue()
    glue.runs["lake-cdc-warm"] = [warm_run("jr_b1", 2), warm_run("jr_b2", 1)]
    bucket = Bucket({})
    waits: list[str] = []
    younger = shift(glue, bucket=bucket, run_id="jr_b2")
    older = shift(glue, bucket=bucket, run_id="jr_b1")

    def older_decides(_seconds: float) -> None:
        waits.append(f"b2 waits; b1 holds: {hold_key(0, 'jr_b1', CONFIG.version) in bucket.sizes}")
        if len(waits) == 1:
            assert marker_key(0, "jr_b2") in bucket.sizes, "an undecided run is marked: the Lambda counts on none"
            assert older.peer() is None  # the older takes it, whatever the younger does

    younger.sleep = older_decides
    assert younger.peer() == "jr_b1"
    assert waits == ["b2 waits; b1 holds: False"]
    assert hold_key(0, "jr_b1", CONFIG.version) in bucket.sizes and marker_key(0, "jr_b1") not in bucket.sizes
    assert marker_key(0, "jr_b2") in bucket.sizes and hold_key(0, "jr_b2", CONFIG.version) not in bucket.sizes


def test_a_run_whose_lifetime_ends_while_a_handed_run_lives_starts_the_shards_next_run(monkeypatch) -> None:
    """Scenario 7 of issue 69: the last look left the handed table out; the next run takes it, not the next landing."""
    from cdc_lake.engine.runs import warm as warm_module
    from cdc_lake.engine.runs.outcome import DrainResult

    glue = Glue()
    bucket = Bucket({})
    run = shift(glue, bucket=bucket)

    def lifetime_spent_during_a_handover(context: Any, budget: Any, hooks: Any, tables: Any) -> DrainResult:
        hooks.shift.hand_over(HandOver("app.orders", "cdc_replay", "app/orders/20250301-120100000.csv", "big"))
        return DrainResult()

    monkeypatch.setattr(warm_module, "drain", lifetime_spent_during_a_handover)
    warm_module.warm(run.context, run, warm_budget(run.context))
    assert glue.runs["lake-cdc-warm"] == [
        {
            "Id": "jr_2",
            "JobRunState": "WAITING",
            "Arguments": {"--bucket": "raw", "--shard": "0", VERSION_ARGUMENT: CONFIG.version},
        }
    ]
    assert marker_key(0, "jr_warm") in bucket.sizes, "the ending run is marked: the next one waits for it"

    glue.runs["lake-cdc-replay"][0]["JobRunState"] = "SUCCEEDED"
    again = shift(glue, bucket=bucket)
    monkeypatch.setattr(warm_module, "drain", lambda context, budget, hooks, tables: DrainResult())
    warm_module.warm(again.context, again, warm_budget(again.context))
    assert len(glue.runs["lake-cdc-warm"]) == 1, "a run that ends with no handed run alive starts none"


def test_a_batch_that_outlives_the_bound_marks_its_table_for_the_g1x_job_and_starts_the_next_run() -> None:
    """Scenario 8 of issue 69: a batch that always outlives the watch must not fail every run of the shard."""
    glue, bucket, now = Glue(), Bucket({}), [0.0]
    warm = shift(glue, now, bucket=bucket)
    outlive_the_bound(warm, now)
    assert overrun_key("app.orders") in bucket.sizes and marker_key(0, "jr_warm") in bucket.sizes
    assert glue.runs["lake-cdc-warm"] == [
        {
            "Id": "jr_1",
            "JobRunState": "WAITING",
            "Arguments": {"--bucket": "raw", "--shard": "0", VERSION_ARGUMENT: CONFIG.version},
        }
    ], "the next run starts now, not at the shard's next landing"

    # The next run hands the table's batches to the G.1X job until one of its runs applied them.
    glue.runs["lake-cdc-warm"][0]["JobRunState"] = "RUNNING"
    following = shift(glue, bucket=bucket, run_id="jr_1")
    assert following.overran_tables() == {"app.orders"}
    admit = admit_small(limit_bytes=10_000, overran=following.overran)
    with pytest.raises(HandOver) as handed:
        admit(batch_of({"app/orders/20250301-120000000.csv": 10}))
    assert handed.value.job == "cdc_replay" and "outlived 30 minutes" in str(handed.value)
    following.hand_over(handed.value)
    glue.runs["lake-cdc-replay"][0]["JobRunState"] = "SUCCEEDED"
    assert not following.busy("app.orders")
    assert overrun_key("app.orders") not in bucket.sizes and following.overran == set()
    admit(batch_of({"app/orders/20250301-120100000.csv": 10}))  # small batches are the warm run's again


# Scenario 2 of issue 69: a deployment adds a table while a run of the shard lives with the configuration before it.
DEPLOYED = parse_config(
    {
        "runs": {"mode": "warm"},
        "tables": [
            {"name": name, "primary_key": ["id"], "columns": [{"name": "id", "type": "bigint"}]}
            for name in ("app.orders", "app.users")
        ],
    }
)


def warm_run(run_id: str, minutes_ago: int, state: str = "RUNNING", **arguments: str) -> dict[str, Any]:
    started = NOW - dt.timedelta(minutes=minutes_ago)
    return {"Id": run_id, "JobRunState": state, "Arguments": {"--shard": "0", **arguments}, "StartedOn": started}


def test_the_lambda_counts_on_no_run_of_another_configuration() -> None:
    from dms_trigger.handler import GlueJobStarter

    assert CONFIG.version != DEPLOYED.version
    glue = Glue()
    glue.runs["lake-cdc-warm"] = [warm_run("jr_old", 60)]
    bucket = Bucket({hold_key(0, "jr_old", CONFIG.version): 6})
    starter = GlueJobStarter(glue, JOBS, exists=lambda _b, key: key in bucket.sizes, now=lambda: NOW)
    span = CONFIG.runs.warm.live_span
    assert starter.warm_run("raw", 0, span, CONFIG.version) == "jr_old"
    assert starter.warm_run("raw", 0, span, DEPLOYED.version) is None, "it does not list app.users: start a run"

    # A run not yet running counts only when it was started for this configuration.
    glue.runs["lake-cdc-warm"].append(warm_run("jr_queued", 0, "WAITING"))
    assert starter.warm_run("raw", 0, span, DEPLOYED.version) is None
    glue.runs["lake-cdc-warm"].append(warm_run("jr_new", 0, "WAITING", **{VERSION_ARGUMENT: DEPLOYED.version}))
    assert starter.warm_run("raw", 0, span, DEPLOYED.version) == "jr_new"


def test_a_run_of_a_new_configuration_asks_the_old_holder_to_end_and_takes_the_shard_once_it_has() -> None:
    glue = Glue()
    glue.runs["lake-cdc-warm"] = [warm_run("jr_old", 60), warm_run("jr_new", 0)]
    bucket = Bucket({})
    old = shift(glue, bucket=bucket, run_id="jr_old")
    assert old.peer() is None and not old.superseded()
    new = shift(glue, bucket=bucket, run_id="jr_new")
    new.context = dataclasses.replace(new.context, config=DEPLOYED)
    seen: list[str] = []

    def meanwhile(_seconds: float) -> None:
        if not seen:
            assert bucket.data[version_key(0)] == DEPLOYED.version.encode()
            assert old.superseded(), "the old run reads, once a round, that another configuration asks for its shard"
            old.end()
            seen.append("old ended; Glue shows it RUNNING a while")
        else:
            glue.runs["lake-cdc-warm"][0]["JobRunState"] = "SUCCEEDED"
            seen.append("old SUCCEEDED")

    new.sleep = meanwhile
    assert new.peer() is None
    assert seen == ["old ended; Glue shows it RUNNING a while", "old SUCCEEDED"]
    assert (
        hold_key(0, "jr_new", DEPLOYED.version) in bucket.sizes
        and hold_key(0, "jr_old", CONFIG.version) not in bucket.sizes
    )
    assert not new.superseded()


def test_a_run_of_the_same_configuration_yields_to_the_holder_and_asks_nothing() -> None:
    glue = Glue()
    glue.runs["lake-cdc-warm"] = [warm_run("jr_old", 60), warm_run("jr_new", 0)]
    bucket = Bucket({})
    assert shift(glue, bucket=bucket, run_id="jr_old").peer() is None
    assert shift(glue, bucket=bucket, run_id="jr_new").peer() == "jr_old"
    assert version_key(0) not in bucket.sizes


def test_a_request_left_by_a_run_that_died_or_a_rolled_back_deployment_does_not_end_the_run_that_takes_the_shard():
    glue = Glue()
    glue.runs["lake-cdc-warm"] = [warm_run("jr_back", 0)]
    bucket = Bucket({})
    bucket.put(version_key(0), DEPLOYED.version.encode())  # asked by a run of another configuration, now gone
    back = shift(glue, bucket=bucket, run_id="jr_back")
    assert back.peer() is None
    assert bucket.data[version_key(0)] == CONFIG.version.encode()
    assert not back.superseded()


def test_a_configuration_copied_with_a_change_has_a_version_of_its_own() -> None:
    version = CONFIG.version
    warm = CONFIG.runs.warm.model_copy(update={"tables_per_job": 7})
    changed = CONFIG.model_copy(update={"runs": CONFIG.runs.model_copy(update={"warm": warm})})
    assert changed.version != version and CONFIG.version == version
    assert parse_config(CONFIG.model_dump()).version == version  # the same settings, read again: the same version


# A warm run's life as the bucket sees it: its stop marker and hold put and removed, its listings of the landing
# ("list"), the moment it has said it stops ("stopping", once its marker is put) and, for a dead run, another run's
# removal of what it left ("cleanup": ``ShardState.keys_of``'s deletes, in their order). "killed": no more from it.
MARKER, HOLD = marker_key(0, "jr_1"), hold_key(0, "jr_1", CONFIG.version)
TAKES = [("put", MARKER), ("put", HOLD), ("delete", MARKER), ("list", ""), ("list", "")]
LIVES = {
    "ends": [*TAKES, ("put", MARKER), ("stopping", ""), ("list", ""), ("delete", HOLD), ("cleanup", "")],
    "resumes": [
        *TAKES,
        ("put", MARKER),
        ("stopping", ""),
        ("list", ""),
        ("delete", MARKER),
        ("list", ""),
        ("put", MARKER),
        ("stopping", ""),
        ("list", ""),
        ("delete", HOLD),
        ("cleanup", ""),
    ],
    "yields": [("put", MARKER), ("cleanup", "")],
    "killed holding": [*TAKES, ("killed", ""), ("cleanup", "")],
    "killed stopping": [*TAKES, ("put", MARKER), ("stopping", ""), ("killed", ""), ("cleanup", "")],
    "killed taking": [("put", MARKER), ("put", HOLD), ("killed", ""), ("cleanup", "")],
}


def _moments(life: list[tuple[str, str]]) -> tuple[list[set[str]], list[str]]:
    """The state objects at each moment of ``life``, and the event that ends each moment; a cleanup's deletes are
    events of their own, as another reader may come between two of them."""
    objects: set[str] = set()
    states, events = [set(objects)], []
    for event, key in life:
        if event == "cleanup":
            for left in ShardState.of(0, objects).keys_of(0, "jr_1"):
                objects.discard(left)
                states.append(set(objects))
                events.append("cleanup")
            continue
        if event == "put":
            objects.add(key)
        elif event == "delete":
            objects.discard(key)
        states.append(set(objects))
        events.append(event)
    return states, events


def _lost_counts(life: list[tuple[str, str]]) -> tuple[list[tuple[int, int]], int]:
    """Every pair of moments (first read, later read) at which the Lambda reads the RUNNING run's objects: those at
    which it counts on the run though the run will not list the landing after the first read (for a run that is
    killed, only if it had said it stops by then: a run killed in its rounds is counted on until Glue shows it
    FAILED, the loss a kill always risked until the shard's next landing), and how many pairs count on it."""
    from dms_trigger.handler import GlueJobStarter

    states, events = _moments(life)
    glue = Glue()
    glue.runs["lake-cdc-warm"] = [warm_run("jr_1", 1)]
    lost, counted = [], 0
    for first in range(len(states)):
        for later in range(first, len(states)):
            reads = iter((first, later))

            def exists(_bucket: str, key: str, reads=reads, later=later) -> bool:
                return key in states[next(reads, later)]

            starter = GlueJobStarter(glue, JOBS, exists=exists, now=lambda: NOW)
            if starter.warm_run("raw", 0, CONFIG.runs.warm.live_span, CONFIG.version) != "jr_1":
                continue
            counted += 1
            after = events[first:]
            began = "stopping" in events[:first]
            if "list" not in after and ("killed" not in events or began):
                lost.append((first, later))
    return lost, counted


@pytest.mark.parametrize("life", sorted(LIVES))
def test_the_lambdas_two_reads_count_on_a_run_only_if_it_lists_after_them_at_every_moment_of_its_life(life):
    """The Lambda reads a RUNNING run's stop marker and then its hold (two HEADs where it listed the shard's state):
    at every pair of moments of every life, it counts on the run only if the run lists the landing after the first
    read. A run in its rounds is counted on."""
    lost, counted = _lost_counts(LIVES[life])
    assert not lost, f"{life}: counted on at (first read, later read) {lost} with no listing after"
    assert counted or life in {"yields", "killed taking"}, f"{life}: never counted on"


def test_the_check_finds_the_run_that_ends_between_two_reads_taken_hold_first(monkeypatch):
    """The check can fail: read hold first and marker second, and a run that stops, ends and is cleaned up between
    the two reads is counted on though it never lists again."""
    from dms_trigger.handler import GlueJobStarter

    def hold_first(self, bucket, shard, live_span, version):
        assert self.exists is not None
        holds = self.exists(bucket, hold_key(shard, "jr_1", version))
        return "jr_1" if holds and not self.exists(bucket, marker_key(shard, "jr_1")) else None

    monkeypatch.setattr(GlueJobStarter, "warm_run", hold_first)
    assert _lost_counts(LIVES["ends"])[0]


def test_the_check_finds_a_killed_stopping_run_counted_on_when_its_marker_is_removed_before_its_hold(monkeypatch):
    """The check can fail: a dead run's stop marker removed before its hold leaves a moment with a hold and no
    marker, which the Lambda (two reads or one listing alike) counts on."""

    def marker_first(self, shard, run_id):
        keys = [marker_key(shard, run_id)] if run_id in self.stopping else []
        return keys + ([hold_key(shard, run_id, self.holding[run_id])] if run_id in self.holding else [])

    monkeypatch.setattr(ShardState, "keys_of", marker_first)
    assert _lost_counts(LIVES["killed stopping"])[0]
