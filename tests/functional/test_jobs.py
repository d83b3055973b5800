"""The Glue job layer: arguments as Glue passes them, and refusals before anything is read."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_lake.core.config import parse_config
from cdc_lake.core.exceptions import JobArgumentError
from cdc_lake.core.jsonl import read_jsonl
from cdc_lake.core.names import (
    FILES_APPLIED_METRIC,
    ORPHAN_DAYS,
    RETAIN_DAYS,
    RETAIN_LAST,
)
from cdc_lake.core.storage import LocalFolderStore
from cdc_lake.engine.jobs import JobOptions, MaintenanceOptions, glue_main, job_context, run_job
from cdc_lake.engine.maintenance import Retention
from cdc_lake.ops.export import export_tables
from tests.conftest import write_file
from tests.functional.test_coalescing import GlueRun

CONFIG = parse_config(
    {
        "dms": {"bucket_folder": "dms"},
        "lake": {"database": "jobs_test"},
        "tables": [{"name": "shop.items", "primary_key": ["id"], "columns": [{"name": "id", "type": "bigint"}]}],
    }
)


def test_options_from_glue_argv_like_a_console_rerun():
    argv = ["script.py", "--JOB_ID", "j_1", "--config_uri", "s3://assets/tables.json", "--catalog", "glue_catalog",
            "--bucket", "raw-bucket", "--key", "dms/shop/items/LOAD00000001.csv", "--table", "shop.items",
            "--warehouse", "s3://lake/warehouse/"]  # fmt: skip
    options = JobOptions.from_sys_argv(argv)
    assert options == JobOptions(
        config_uri="s3://assets/tables.json",
        bucket="raw-bucket",
        key="dms/shop/items/LOAD00000001.csv",
        table="shop.items",
        catalog="glue_catalog",
        database="",
    )


def test_the_stack_conf_argument_is_not_taken_for_config_uri():
    # argparse reads an unknown --conf as an abbreviation of --config_uri; the stack passes --conf after it.
    conf = "spark.sql.extensions=x --conf spark.sql.catalog.glue_catalog=y"
    argv = ["script.py", "--config_uri", "s3://assets/tables.json", "--conf", conf, "--bucket", "raw-bucket",
            "--key", "dms/shop/items/LOAD00000001.csv", "--table", "shop.items", "--con", "z"]  # fmt: skip
    assert JobOptions.from_sys_argv(argv).config_uri == "s3://assets/tables.json"
    maintenance = ["script.py", "--config_uri", "s3://assets/tables.json", "--conf", conf, "--action", "all"]
    assert MaintenanceOptions.from_sys_argv(maintenance).config_uri == "s3://assets/tables.json"


def test_idle_seconds_is_an_optional_whole_number():
    base = {"--config_uri": "c.yaml", "--bucket": "b", "--key": "k", "--table": "t"}
    assert JobOptions.from_options(base).idle_seconds is None
    assert JobOptions.from_options({**base, "--idle_seconds": "0"}).idle_seconds == 0
    with pytest.raises(JobArgumentError, match="--idle_seconds 'soon'"):
        JobOptions.from_options({**base, "--idle_seconds": "soon"})


def test_missing_arguments_are_named():
    with pytest.raises(JobArgumentError, match=r"missing job argument\(s\): --key, --table"):
        JobOptions.from_options({"--config_uri": "c.yaml", "--bucket": "b"})


def test_maintenance_options_from_glue_argv_like_the_scheduled_trigger():
    argv = ["script.py", "--JOB_ID", "j_2", "--config_uri", "s3://assets/tables.json", "--action", "expire",
            "--retain_days", "3", "--table", "shop.items"]  # fmt: skip
    assert MaintenanceOptions.from_sys_argv(argv) == MaintenanceOptions(
        config_uri="s3://assets/tables.json",
        action="expire",
        table="shop.items",
        retention=Retention(days=3, last=RETAIN_LAST, orphan_days=ORPHAN_DAYS),
    )
    defaults = MaintenanceOptions.from_options({"--config_uri": "c.yaml", "--action": "all"})
    assert defaults.table is None
    assert defaults.retention == Retention(days=RETAIN_DAYS, last=RETAIN_LAST, orphan_days=ORPHAN_DAYS)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"--config_uri": "c.yaml"}, r"missing job argument\(s\): --action"),
        ({"--config_uri": "c.yaml", "--action": "vacuum"}, r"--action 'vacuum': use one of compact, expire"),
        ({"--config_uri": "c.yaml", "--action": "all", "--retain_last": "-1"}, r"--retain_last '-1': expected a whole"),
    ],
)
def test_bad_maintenance_arguments_are_named(options, message):
    with pytest.raises(JobArgumentError, match=message):
        MaintenanceOptions.from_options(options)


@pytest.mark.spark
@pytest.mark.parametrize(
    ("job", "key", "table", "message"),
    [
        ("full_load", "dms/shop/items/20250301-120000000.csv", "shop.items", "a cdc file was routed to the full_load"),
        (
            "cdc_replay",
            "dms/shop/items/LOAD00000001.csv",
            "shop.items",
            "a full_load file was routed to the cdc_replay",
        ),
        ("cdc_replay", "dms/shop/items/20250301-120000000.csv", "shop.other", "belongs to table shop.items"),
    ],
)
def test_runs_that_contradict_their_arguments_are_refused(spark, landing: Path, database, job, key, table, message):
    write_file(landing, key, "I,1\n" if "2025" in key else "1\n")
    options = JobOptions.from_options(
        {"config_uri": "(inline)", "bucket": "b", "key": key, "table": table, "catalog": "lake", "database": database}
    )
    with pytest.raises(JobArgumentError, match=message):
        run_job(job, options, job_context(options, spark, config=CONFIG, store=LocalFolderStore(landing)))
    assert not spark.catalog.tableExists(f"lake.{database}.shop_items")


# --- the Glue entry point, with the clients of the local AWS endpoint ---------------------------------------


@pytest.mark.spark
def test_the_glue_entry_point_applies_every_landed_file_with_the_clients_it_is_given(
    spark, aws_endpoint, database, tmp_path
):
    run = GlueRun(aws_endpoint, database, tmp_path)
    for key in run.keys:
        run.land(key)

    outcome = glue_main("full_load", run.clients, run.argv(run.keys[0]))

    assert not outcome.failures and sorted(outcome.applied_files) == sorted(run.keys)
    export_tables(run.lake(), tmp_path / "export")
    for table in run.config.tables:
        expected = read_jsonl(run.generated.expected / f"{table.name}.jsonl")
        assert read_jsonl(tmp_path / "export" / f"{table.name}.jsonl") == expected, table.name
    # Each commit's freshness went to CloudWatch through the client the run was given.
    files_applied = run.metric(FILES_APPLIED_METRIC)
    assert sum(p["SampleCount"] for p in files_applied) == len(outcome.commits) == len(run.config.tables)
    assert sum(p["Sum"] for p in files_applied) == len(run.keys)
