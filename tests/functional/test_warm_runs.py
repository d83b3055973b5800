"""Warm runs (``runs.mode: warm``) with real Spark and Iceberg, through the Lambda's handler and the local Glue: one
run per shard applies its tables as files land, LOAD files and a large backlog are handed to the G.1X jobs (a run for
that table alone), a compaction by someone else and files landing while a run works are taken in its stride, a run
that ends (quiet, or restarted for maintenance) is followed by the next, and each lake equals the oracle with every
file recorded once."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from cdc_lake.core.config import PipelineConfig, parse_config
from cdc_lake.core.jsonl import read_jsonl
from cdc_lake.core.names import FILES_APPLIED_METRIC, GLUE_CATALOG, WARM_JOB, WARM_MARKER_PREFIX
from cdc_lake.core.shards import marker_key, shard_of
from cdc_lake.engine.record import applied_files, snapshot_summaries
from cdc_lake.engine.reload import reload_table
from cdc_lake.jobs.entry import glue_entry
from cdc_lake.jobs.replay import FULL_LOAD
from cdc_lake.jobs.warm import CDC_WARM
from cdc_lake.local.aws_endpoint import served_requests
from cdc_lake.local.generator import GeneratorSpec, generate, land_order
from cdc_lake.local.runtime import LocalJobRun, LocalPipeline, failed_runs
from cdc_lake.ops.export import export_tables
from tests.support.configs import app_config, items_config_data
from tests.support.glue_run import GlueRun
from tests.support.lake import Lake, assert_lake_equals_oracle, on_both_paths, write_file

pytestmark = pytest.mark.spark

START = dt.datetime(2025, 3, 1, 12, 0)


def warm_config(**warm: Any) -> PipelineConfig:
    # Three app tables, two per run: app.orders and app.events in shard 0, app.accounts in shard 1.
    return app_config(mode="warm", warm={"tables_per_job": 2, **warm})


def recorded(pipeline: LocalPipeline) -> list[str]:
    """Every file named in any commit's applied-files record, over all tables (duplicates kept)."""
    keys: list[str] = []
    for table in pipeline.config.tables:
        for snapshot in snapshot_summaries(pipeline.context, table):
            keys.extend(applied_files(snapshot["summary"] or {}).keys)
    return keys


@on_both_paths
def test_warm_runs_hand_over_large_work_ride_out_a_foreign_compaction_and_end_exact(lake: Lake, tmp_path: Path) -> None:
    config = warm_config()
    spec = GeneratorSpec(seed=58, initial_rows=40, cdc_files=5, changes_per_file=12, cached_changes=0)
    generated = generate(config, tmp_path / "source", spec)
    keys = land_order(generated)
    assert {t.name: shard_of(t.name, 2) for t in config.tables} == {"app.accounts": 1, "app.orders": 0, "app.events": 0}
    loads = [k for k in keys if "/LOAD" in k]
    cdc = {t.name: [k for k in keys if k.startswith(config.table_prefix(t)) and k not in loads] for t in config.tables}
    orders, events, accounts = cdc["app.orders"], cdc["app.events"], cdc["app.accounts"]
    first = [orders[0], events[0], accounts[0]]
    during = [orders[1], events[1]]  # shard 0's own tables, landing while its run works
    backlog = events[2:]
    landed_while_running: list[str] = []

    def on_round(run: LocalJobRun, number: int, commits: int) -> None:
        if run.job == WARM_JOB and run.arguments["--shard"] == "0" and not landed_while_running:
            # Someone else compacts a table the run owns, and DMS lands more, while the run works.
            lake.spark.sql(f"CALL {lake.catalog}.system.rewrite_data_files(table => '{lake.database}.app_orders')")
            lake.land_from(generated.landing, during)
            lake.store()
            landed_while_running.extend(during)
            # The run is RUNNING and has not said it stops: it covers them.
            assert [pipeline.notify(key) for key in during] == [[], []]

    # The LOAD files land, but their events are lost: the warm runs find them and hand them to the full-load job.
    lake.land_from(generated.landing, [*loads, *first])
    pipeline = LocalPipeline(
        config, lake.landing, lake.spark, database=lake.database, catalog=lake.catalog, store=lake.store(),
        on_round=on_round,
    )  # fmt: skip
    runs = pipeline.deliver(first)
    assert not failed_runs(runs), [r.error for r in failed_runs(runs)]
    assert sorted(r.arguments["--shard"] for r in runs if r.job == WARM_JOB) == ["0", "1"]
    handed = [r for r in runs if r.job == "full_load"]
    assert sorted(r.arguments["--table"] for r in handed) == sorted(t.name for t in config.tables)
    assert all(r.arguments["--one_table"] == "true" for r in handed)
    # The files that landed while shard 0's run worked were its own: a later round took them.
    shard0 = next(r for r in runs if r.job == WARM_JOB and r.arguments["--shard"] == "0")
    assert shard0.result is not None and set(during) <= set(shard0.result.applied_files)

    # A backlog over handover_bytes goes to the cdc_replay job, for that table alone; small batches stay warm.
    lake.land_from(generated.landing, [*backlog, orders[2], accounts[1]])
    limit = sum((generated.landing / k).stat().st_size for k in backlog) - 1
    small = LocalPipeline(
        warm_config(handover_bytes=limit), lake.landing, lake.spark, database=lake.database, catalog=lake.catalog,
        store=lake.store(),
    )  # fmt: skip
    later = small.deliver([*backlog, orders[2], accounts[1]])
    assert not failed_runs(later), [r.error for r in failed_runs(later)]
    replays = [r for r in later if r.job == "cdc_replay"]
    assert [(r.arguments["--table"], r.arguments["--one_table"]) for r in replays] == [("app.events", "true")]
    assert replays[0].result is not None and sorted(replays[0].result.applied_files) == sorted(backlog)

    # The runs ended (quiet); the next files start the shards' next runs, which take up where they stopped.
    rest = [k for k in keys if not (lake.landing / k).exists()]
    lake.land_from(generated.landing, rest)
    lake.store()
    final = pipeline.deliver(rest)
    assert not failed_runs(final), [r.error for r in failed_runs(final)]
    assert {r.job for r in final} == {WARM_JOB}

    assert sorted(recorded(pipeline)) == sorted(keys), "every landed file recorded exactly once"
    assert_lake_equals_oracle(pipeline, generated.expected, tmp_path / "export")
    # Each run that stopped said so first, under the markers' prefix, and no table or notice saw them.
    markers = [o.key for o in lake.store().list(WARM_MARKER_PREFIX)]
    assert markers and {m.split("/")[1] for m in markers} <= {"0", "1"}


def test_the_warm_jobs_glue_entry_with_glues_arguments_applies_its_shard_and_says_it_stopped(
    spark: Any, aws_endpoint: str, database: str, tmp_path: Path
) -> None:
    """The script's entry, as Glue starts it (its own --JOB_NAME and --JOB_RUN_ID among the arguments), on the Glue
    catalog and S3 of the local endpoint: the shard's tables applied, each commit's metrics put, the stop marker
    written before its last look."""
    run = GlueRun(aws_endpoint, database, tmp_path)
    loads = [k for k in run.keys if "/LOAD" in k]
    for key in loads:
        run.land(key)
    glue_entry(FULL_LOAD, run.argv(loads[0]), run.client)
    for key in run.keys:
        run.land(key)
    glue = run.client("glue")
    for name in ("lake-cdc-warm", "lake-full-load", "lake-cdc-replay"):
        glue.create_job(Name=name, Role="arn:aws:iam::123456789012:role/lake", Command={"Name": "glueetl"})
    argv = ["cdc_warm.py", "--JOB_ID", "j_1", "--JOB_RUN_ID", "jr_warm_1", "--JOB_NAME", "lake-cdc-warm",
            "--config_uri", f"s3://{run.bucket}/config/tables.json", "--bucket", run.bucket, "--shard", "0",
            "--full_load_job", "lake-full-load", "--cdc_replay_job", "lake-cdc-replay", "--catalog", GLUE_CATALOG,
            "--database", database, "--quiet_seconds", "0"]  # fmt: skip

    served_requests(aws_endpoint, reset=True)
    outcome = glue_entry(CDC_WARM, argv, run.client)
    puts = served_requests(aws_endpoint)["cloudwatch:PutMetricData"]

    assert not outcome.failures
    cdc = [k for k in run.keys if k not in loads]
    assert sorted(outcome.applied_files) == sorted(cdc)  # one shard: the whole configuration
    assert sum(point["Sum"] for point in run.metric(FILES_APPLIED_METRIC)) >= len(cdc)
    # Each round's batches in one request (CloudWatch charges by request), and one for the end's look at what waits:
    # fewer requests than batches (the tables' batches share a round), at most one a round.
    told = (puts, outcome.commit_count, outcome.rounds)
    assert puts - 1 < outcome.commit_count and puts <= outcome.rounds + 1, told
    listed = run.s3.list_objects_v2(Bucket=run.bucket, Prefix=WARM_MARKER_PREFIX).get("Contents", [])
    assert [item["Key"] for item in listed] == [marker_key(0, "jr_warm_1")]  # its stop marker; its hold is gone
    export_tables(run.lake(), tmp_path / "export")
    for table in run.config.tables:
        expected = run.generated.expected / f"{table.name}.jsonl"
        assert read_jsonl(tmp_path / "export" / f"{table.name}.jsonl") == read_jsonl(expected)


def test_a_refusal_in_a_warm_run_is_told_as_it_happens_and_a_reload_takes_effect_in_the_next_round(
    lake: Lake,
) -> None:
    """Scenario 3 of issue 69: a warm run lives for a day; its refusals cannot wait for its end, nor can the fix."""
    config = parse_config(items_config_data(runs={"mode": "warm", "warm": {"quiet_seconds": 3, "round_seconds": 0}}))
    table = config.table("shop.items")
    prefix = config.table_prefix(table)

    def land(name: str, text: str, minute: int) -> str:
        return write_file(lake.landing, prefix + name, text, START + dt.timedelta(minutes=minute))

    load = land("LOAD00000001.csv", "1,one\n2,two\n", 0)
    first = land("20250301-120100000.csv", "U,1,uno\n", 1)
    bad = land("20250301-120200000.csv", "I,three,3\n", 2)  # `three` is no bigint id
    after = land("20250301-120300000.csv", "I,4,four\n", 3)
    refusals: list[tuple[str, str, int]] = []
    fixed: list[int] = []
    rounds = [0]

    def on_refusal(run: LocalJobRun, name: str, error: str) -> None:
        refusals.append((run.job, name, rounds[0]))

    def on_round(run: LocalJobRun, number: int, commits: int) -> None:
        if run.job != WARM_JOB:
            return
        rounds[0] = number
        if refusals and not fixed:
            # What the refusal says to do, while the run lives: DMS reloads the table, then `cdc-lake reload`
            # rebuilds it from the new LOAD file and the CDC files from the one after the bad one.
            land("LOAD00000001.csv", "1,uno\n2,two\n", 10)
            reload_table(lake.context(config), table, since=after)
            land("20250301-120400000.csv", "D,2,two\n", 11)
            fixed.append(number)

    pipeline = LocalPipeline(
        config, lake.landing, lake.spark, database=lake.database, store=lake.store(), on_round=on_round,
        on_refusal=on_refusal,
    )  # fmt: skip
    pipeline.glue.keep_quiet = True
    runs = pipeline.deliver([load, first, bad, after])
    warm = [r for r in runs if r.job == WARM_JOB]
    assert [r.error for r in warm] == [None], "the refused table was taken again once reloaded; the run ends well"
    assert refusals == [(WARM_JOB, "shop.items", fixed[0] - 1)], "told in its own round, not at the run's end"
    assert lake.rows() == [(1, "uno"), (4, "four")]
    assert warm[0].result is not None and prefix + "20250301-120400000.csv" in warm[0].result.applied_files


class StartedRuns:
    """The Glue a watch starts the shard's next run with; nothing else is asked of it here."""

    def __init__(self) -> None:
        self.started: list[dict[str, str]] = []

    def start_job_run(self, JobName: str, Arguments: dict[str, str], **_: Any) -> dict[str, str]:
        self.started.append(Arguments)
        return {"JobRunId": f"jr_next_{len(self.started)}"}


def test_a_warm_batch_that_outlives_its_bound_has_its_spark_jobs_cancelled_and_the_run_ends_by_its_stop_path(
    spark: Any, tmp_path: Path
) -> None:
    """Scenario 8 of issue 69, on a real Spark session: the watch, in its own thread, cancels the overdue batch's
    jobs (the job group the batch's thread set), so the batch fails at once instead of the process ending."""
    import threading
    import time

    from cdc_lake.core.shards import overrun_key
    from cdc_lake.core.storage import LocalFolderStore
    from cdc_lake.engine.context import ReplayContext
    from cdc_lake.engine.runs.warm import WarmShift
    from cdc_lake.engine.tables import LakeLocation

    config = warm_config()
    store = LocalFolderStore(tmp_path)
    context = ReplayContext(spark=spark, location=LakeLocation("c", "db"), config=config, store=store)
    glue, ended_process = StartedRuns(), threading.Event()
    jobs = {"full_load": "lake-full-load", "cdc_replay": "lake-cdc-replay", WARM_JOB: "lake-cdc-warm"}
    shift = WarmShift(context, glue, 0, "jr_warm", jobs, "raw", batch_limit_seconds=2.0,  # type: ignore[arg-type]
                      end_grace_seconds=120.0, overrun=lambda _why: ended_process.set())  # fmt: skip
    began = time.monotonic()
    with pytest.raises(Exception, match="cancel"), shift.watch("app.orders"):
        # A batch far longer than its bound: about a trillion rows summed.
        spark.range(0, 10**12, 1, 2).selectExpr("sum(id)").collect()
    took = time.monotonic() - began
    shift.end()
    assert took < 60, f"the batch was cancelled after {took:.0f}s"
    assert shift.ending is not None and shift.must_end()
    assert not ended_process.is_set(), "the run ended through its stop path, not by ending its process"
    assert (tmp_path / overrun_key("app.orders")).exists() and (tmp_path / marker_key(0, "jr_warm")).exists()
    assert [a["--shard"] for a in glue.started] == ["0"], "the shard's next run is started once"
