"""The Glue job layer: arguments as Glue passes them, and refusals before anything is read."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_lake.core.config import parse_config
from cdc_lake.core.exceptions import JobArgumentError
from cdc_lake.core.jsonl import read_jsonl
from cdc_lake.core.names import FILES_APPLIED_METRIC, INPUT_NOTICES_METRIC
from cdc_lake.core.storage import LocalFolderStore
from cdc_lake.jobs.entry import glue_entry, job_context
from cdc_lake.jobs.replay import FULL_LOAD, ReplayOptions, run_job
from cdc_lake.ops.export import export_tables
from tests.support.glue_run import GlueRun
from tests.support.lake import write_file

CONFIG = parse_config(
    {
        "dms": {"bucket_folder": "dms"},
        "lake": {"database": "jobs_test"},
        "tables": [{"name": "shop.items", "primary_key": ["id"], "columns": [{"name": "id", "type": "bigint"}]}],
    }
)


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
    options = ReplayOptions.from_options(
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
    # Announced, not applied: an empty object, and a table the configuration lacks.
    run.land("app/accounts/20991231-000000000.csv", b"")
    run.land("app/unlisted/LOAD00000001.csv", b"1,a,1.00\n")

    outcome = glue_entry(FULL_LOAD, run.argv(run.keys[0]), run.client)

    assert not outcome.failures and sorted(outcome.applied_files) == sorted(run.keys)
    assert sorted((n.kind, n.subject) for n in outcome.notices) == [
        ("empty-object", "app/accounts/20991231-000000000.csv"),
        ("unknown-table", "app/unlisted/"),
    ]
    assert sum(p["Sum"] for p in run.metric(INPUT_NOTICES_METRIC)) == 2
    export_tables(run.lake(), tmp_path / "export")
    for table in run.config.tables:
        expected = read_jsonl(run.generated.expected / f"{table.name}.jsonl")
        assert read_jsonl(tmp_path / "export" / f"{table.name}.jsonl") == expected, table.name
    # Each commit's freshness went to CloudWatch through the client the run was given.
    files_applied = run.metric(FILES_APPLIED_METRIC)
    assert sum(p["SampleCount"] for p in files_applied) == len(outcome.commits) == len(run.config.tables)
    assert sum(p["Sum"] for p in files_applied) == len(run.keys)
