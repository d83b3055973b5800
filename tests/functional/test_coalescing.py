"""Coalesced runs with real Spark and Iceberg: one run drains every table, files landing while a run works or
finishes are applied exactly once, a refused table does not hold the others back, overlapping runs agree,
a manual rerun with --key works, and the metrics reach CloudWatch (the local endpoint, through the Glue entry
point)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from cdc_lake.core.config import PipelineConfig
from cdc_lake.core.exceptions import TableFailuresError
from cdc_lake.core.jsonl import read_jsonl
from cdc_lake.core.names import (
    CHANGE_LAG_METRIC,
    LANDED_LAG_METRIC,
    TABLE_FAILURES_METRIC,
)
from cdc_lake.core.storage import LocalFolderStore
from cdc_lake.engine.record import FRESHNESS, applied_files, snapshot_summaries
from cdc_lake.engine.runs.coalesced import Budget, drain
from cdc_lake.engine.runs.shift import DrainHooks
from cdc_lake.jobs.entry import glue_entry, job_context
from cdc_lake.jobs.replay import FULL_LOAD, ReplayOptions, run_job
from cdc_lake.local.generator import GeneratorSpec, generate, land, land_order
from cdc_lake.local.runtime import LocalJobRun, LocalPipeline, failed_runs
from cdc_lake.ops.export import export_tables
from tests.support.configs import app_config
from tests.support.glue_run import GlueRun
from tests.support.lake import assert_lake_equals_oracle

pytestmark = pytest.mark.spark


def generated_source(config: PipelineConfig, tmp_path: Path, cdc_files: int = 3):  # type: ignore[no-untyped-def]
    spec = GeneratorSpec(seed=21, initial_rows=40, cdc_files=cdc_files, changes_per_file=15, cached_changes=0)
    return generate(config, tmp_path / "source", spec)


def landed_source(config: PipelineConfig, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A generated source whose every file has landed: (generation, keys in DMS order, landing folder)."""
    generated = generated_source(config, tmp_path)
    keys = land_order(generated)
    landing = tmp_path / "landing"
    land(generated.landing, landing, keys)
    return generated, keys, landing


def applied_records(spark: SparkSession, pipeline: LocalPipeline) -> list[str]:
    """Every file named in any commit's applied-files record, over all tables (duplicates kept)."""

    keys: list[str] = []
    for table in pipeline.config.tables:
        for snapshot in snapshot_summaries(pipeline.context, table):
            keys.extend(applied_files(snapshot["summary"] or {}).keys)
    return keys


def test_one_run_drains_every_table_and_the_lake_equals_the_oracle(spark, database, tmp_path):
    config = app_config()
    generated, keys, landing = landed_source(config, tmp_path)
    pipeline = LocalPipeline(config, landing, spark, database=database)

    runs = pipeline.deliver(keys)

    assert not failed_runs(runs), [r.error for r in failed_runs(runs)]
    # One run per job (the full-load run drains the CDC files too; the CDC run then finds nothing).
    assert [r.job for r in runs] == ["full_load", "cdc_replay"]
    assert sorted(runs[0].result.applied_files) == sorted(keys)  # type: ignore[union-attr]
    assert runs[1].result is not None and runs[1].result.already_applied
    assert pipeline.glue.calls["start_job_run"] == 2
    assert sorted(applied_records(spark, pipeline)) == sorted(keys)  # each file once
    assert_lake_equals_oracle(pipeline, generated.expected, tmp_path / "export")


def test_files_landing_while_a_run_works_and_while_it_finishes_are_applied_once(spark, database, tmp_path):
    """Round 1 lands a file (the run's next round takes it); the last round lands another, after the run's
    final listing: its event sees the run RUNNING, starts a new run, and that run applies it."""
    config = app_config()
    generated = generated_source(config, tmp_path, cdc_files=3)
    keys = land_order(generated)
    held = [k for k in keys if "/LOAD" not in k][-2:]
    first_keys = [k for k in keys if k not in held]
    landing = tmp_path / "landing"
    land(generated.landing, landing, first_keys)
    seen_states: list[str] = []

    def on_round(run: LocalJobRun, number: int, batches: int) -> None:
        if held and (number == 1 or batches == 0):
            key = held.pop(0)
            land(generated.landing, landing, [key])
            seen_states.append(run.state)
            pipeline.notify(key)

    pipeline = LocalPipeline(config, landing, spark, database=database, on_round=on_round)
    runs = pipeline.deliver(first_keys)

    assert not failed_runs(runs), [r.error for r in failed_runs(runs)]
    assert seen_states == ["RUNNING", "RUNNING"]
    assert sorted(applied_records(spark, pipeline)) == sorted(keys)
    assert_lake_equals_oracle(pipeline, generated.expected, tmp_path / "export")
    # The file landed after the final listing was applied by a run started for it.
    last = runs[-1].result
    assert last is not None and last.applied_files == [keys[-1]]


def test_a_refused_table_does_not_block_the_others(spark, database, tmp_path):
    config = app_config()
    generated, keys, landing = landed_source(config, tmp_path)
    bad = "app/orders/20250301-000000000.csv"  # sorts first among the CDC files
    (landing / bad).write_text("I,2025-03-01 00:00:00.000000,not-a-number,x,1.00\n")
    pipeline = LocalPipeline(config, landing, spark, database=database)

    runs = pipeline.deliver([*keys, bad])

    failed = failed_runs(runs)
    assert failed and all("app.orders" in (r.error or "") and bad in (r.error or "") for r in failed)
    assert (landing / bad).exists()
    export_tables(pipeline.context, tmp_path / "export")
    for name in ("app.accounts", "app.events"):
        assert read_jsonl(tmp_path / "export" / f"{name}.jsonl") == read_jsonl(generated.expected / f"{name}.jsonl")
    # The batch held every landed file of the table (LOAD files too): none of it was applied.
    assert [k for k in applied_records(spark, pipeline) if k.startswith("app/orders/")] == []


def test_overlapping_runs_apply_every_file_exactly_once(spark, database, tmp_path):
    config = app_config(parallel_tables=2)
    generated, keys, landing = landed_source(config, tmp_path)
    pipeline = LocalPipeline(config, landing, spark, database=database)
    budget = Budget.of(config, idle_seconds=0)
    outcomes: list[Any] = []

    def one_run() -> None:
        outcomes.append(drain(pipeline.context, budget))

    threads = [threading.Thread(target=one_run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(outcomes) == 2 and not any(o.failures for o in outcomes), [o.failures for o in outcomes]
    assert sorted(k for o in outcomes for k in o.applied_files) == sorted(keys)
    assert sorted(applied_records(spark, pipeline)) == sorted(keys)
    assert_lake_equals_oracle(pipeline, generated.expected, tmp_path / "export")


def test_a_manual_rerun_with_key_applies_what_is_pending_and_then_nothing(spark, database, tmp_path):
    config = app_config()
    _generated, keys, landing = landed_source(config, tmp_path)
    cdc_key = next(k for k in keys if "/LOAD" not in k)
    table = cdc_key.split("/")[0] + "." + cdc_key.split("/")[1]
    options = ReplayOptions.from_options(
        {
            "config_uri": "(local)",
            "bucket": "b",
            "key": cdc_key,
            "table": table,
            "catalog": "lake",
            "database": database,
            "idle_seconds": "0",
        }
    )
    context = job_context(options, spark, config=config, store=LocalFolderStore(landing))

    first = run_job("cdc_replay", options, context)
    again = run_job("cdc_replay", options, context)

    assert sorted(first.applied_files) == sorted(keys) and first.results[0].table == table
    assert again.already_applied and again.rounds == 1


def test_a_zero_time_budget_runs_one_round(spark, database, tmp_path):
    config = app_config(time_budget_seconds=0)
    generated = generated_source(config, tmp_path)
    keys = land_order(generated)
    landing = tmp_path / "landing"
    land(generated.landing, landing, keys[:-1])
    rounds: list[int] = []

    def land_last(number: int, batches: int) -> None:
        rounds.append(number)
        land(generated.landing, landing, keys[-1:])

    context = LocalPipeline(config, landing, spark, database=database).context
    outcome = drain(context, Budget.of(config, idle_seconds=60), hooks=DrainHooks(on_round=land_last))
    assert rounds == [1] and sorted(outcome.applied_files) == sorted(keys[:-1])


def test_each_commit_publishes_its_freshness_and_a_refused_table_its_failure_to_cloudwatch(
    spark, aws_endpoint, database, tmp_path
):
    """Through the Glue entry point, as deployed: CloudWatch (the local endpoint) gets what each commit recorded,
    and the run, failed for the refused table, says so in the TableFailures metric."""
    run = GlueRun(aws_endpoint, database, tmp_path)
    for key in run.keys:
        run.land(key)
    run.land("app/orders/20250301-000000000.csv", b"I,2025-03-01 00:00:00.000000,not-a-number,x,1.00\n")

    with pytest.raises(TableFailuresError) as failed:
        glue_entry(FULL_LOAD, run.argv(run.keys[0]), run.client)

    assert list(failed.value.failures) == ["app.orders"]
    assert [point["Sum"] for point in run.metric(TABLE_FAILURES_METRIC)] == [1.0]
    lake = run.lake()
    recorded = [
        json.loads(snapshot["summary"][FRESHNESS])
        for table in lake.config.tables
        for snapshot in snapshot_summaries(lake, table)
        if FRESHNESS in (snapshot["summary"] or {})
    ]
    assert len(recorded) == len(lake.config.tables) - 1  # one commit for each table but the refused one
    landed_lag = run.metric(LANDED_LAG_METRIC)
    assert sum(point["SampleCount"] for point in landed_lag) == len(recorded)
    assert max(point["Maximum"] for point in landed_lag) == pytest.approx(max(r["landed_lag_s"] for r in recorded))
    change_lag = run.metric(CHANGE_LAG_METRIC)
    assert max(point["Maximum"] for point in change_lag) == pytest.approx(max(r["change_lag_s"] for r in recorded))
