"""The maintenance job (compaction, snapshot expiry, orphan removal) and its scheduled Glue trigger."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Annotations, Match

from infra.settings import DEFAULT_MAINTENANCE_SCHEDULE
from tests.infra.conftest import Synthesized, cdk_json_context, only, render, resources_of_type, synthesize

MAINTENANCE_DEFAULTS = {"--action": "all", "--retain_last": "20", "--orphan_days": "3"}


@pytest.fixture(scope="module")
def disabled(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The default deployment with ``-c maintenanceEnabled=false``."""
    return synthesize(tmp_path_factory.mktemp("no-maintenance"), {"maintenanceEnabled": "false"})


def job_properties(synth: Synthesized, job: Any) -> dict[str, Any]:
    return synth.json["Resources"][synth.logical_id(job)]["Properties"]


def glue_policy_statements(synth: Synthesized) -> dict[str, dict[str, Any]]:
    _id, policy = only(
        synth.template.find_resources(
            "AWS::IAM::Policy", {"Properties": {"PolicyName": Match.string_like_regexp("GlueJobPolicy")}}
        )
    )
    return {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}


def maintenance_triggers(synth: Synthesized) -> dict[str, Any]:
    maintenance = {"Ref": synth.logical_id(synth.stack.glue.maintenance)}
    triggers = resources_of_type(synth, "AWS::Glue::Trigger")
    return {k: t for k, t in triggers.items() if t["Properties"]["Actions"][0]["JobName"] == maintenance}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_maintenance_job_runs_one_at_a_time_on_glue_5_1(demo: Synthesized) -> None:
    glue = demo.stack.glue
    props = job_properties(demo, glue.maintenance)
    assert props["Name"] == "cdclake-maintenance"
    assert props["GlueVersion"] == "5.1"
    assert props["WorkerType"] == "G.1X"
    assert props["NumberOfWorkers"] == 2
    assert props["Timeout"] == 120
    assert props["MaxRetries"] == 0
    assert props["ExecutionProperty"] == {"MaxConcurrentRuns": 1}
    # Flex: nobody waits for it. Flex runs are not queued, so a run by hand during the scheduled one fails at once.
    assert props["ExecutionClass"] == "FLEX"
    assert props["JobRunQueuingEnabled"] is False
    assert props["Command"] == {
        "Name": "glueetl",
        "PythonVersion": "3",
        "ScriptLocation": demo.stack.resolve(glue.scripts["maintenance"].s3_object_url),
    }
    # One shared role and security configuration for all jobs.
    replay = job_properties(demo, glue.cdc_replay)
    assert props["Role"] == replay["Role"]
    assert props["SecurityConfiguration"] == replay["SecurityConfiguration"]


def test_maintenance_defaults_are_the_stack_defaults_plus_action_and_retention(demo: Synthesized) -> None:
    glue = demo.stack.glue
    arguments = job_properties(demo, glue.maintenance)["DefaultArguments"]
    replay_arguments = job_properties(demo, glue.cdc_replay)["DefaultArguments"]
    raw = demo.logical_id(demo.stack.storage.raw)
    assert arguments == {**replay_arguments, **MAINTENANCE_DEFAULTS, "--bucket": {"Ref": raw}}
    lake = demo.logical_id(demo.stack.storage.lake)
    conf = render(arguments["--conf"])
    assert conf.startswith("spark.sql.extensions=org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
    assert f" --conf spark.sql.catalog.glue_catalog.warehouse=s3://${{{lake}}}/warehouse/" in conf
    assert " --conf spark.sql.catalog.glue_catalog.io-impl=org.apache.iceberg.aws.s3.S3FileIO" in conf
    assert arguments["--datalake-formats"] == "iceberg"
    assert "--table" not in arguments  # absent = every configured table


def test_scheduled_trigger_runs_all_actions_daily(demo: Synthesized) -> None:
    maintenance = demo.logical_id(demo.stack.glue.maintenance)
    _id, trigger = only(maintenance_triggers(demo))
    assert trigger["Properties"] == {
        "Name": "cdclake-maintenance-schedule",
        "Description": "Scheduled maintenance of every configured lake table (UTC)",
        "Type": "SCHEDULED",
        "Schedule": "cron(30 3 * * ? *)",
        "StartOnCreation": True,
        "Actions": [{"JobName": {"Ref": maintenance}, "Arguments": {"--action": "all"}}],
    }
    assert cdk_json_context()["maintenanceSchedule"] == DEFAULT_MAINTENANCE_SCHEDULE == "cron(30 3 * * ? *)"


def test_schedule_comes_from_context(parquet: Synthesized) -> None:
    maintenance = parquet.logical_id(parquet.stack.glue.maintenance)
    parquet.template.has_resource_properties(
        "AWS::Glue::Trigger",
        {
            "Name": "saleslake-maintenance-schedule",
            "Type": "SCHEDULED",
            "Schedule": "cron(0 2 ? * SUN *)",
            "StartOnCreation": True,
            "Actions": [{"JobName": {"Ref": maintenance}, "Arguments": {"--action": "all"}}],
        },
    )


def test_disabled_maintenance_keeps_the_job_but_has_no_trigger(disabled: Synthesized) -> None:
    assert maintenance_triggers(disabled) == {}
    assert disabled.stack.glue.maintenance_trigger is None
    maintenance = disabled.logical_id(disabled.stack.glue.maintenance)
    assert job_properties(disabled, disabled.stack.glue.maintenance)["Name"] == "cdclake-maintenance"
    assert disabled.json["Outputs"]["MaintenanceJobName"]["Value"] == {"Ref": maintenance}
    _id, rule = only(resources_of_type(disabled, "AWS::Events::Rule"))
    assert {"Ref": maintenance} in rule["Properties"]["EventPattern"]["detail"]["jobName"]
    annotations = Annotations.from_stack(disabled.stack)
    assert annotations.find_error("*", Match.string_like_regexp("AwsSolutions-.*")) == []
    assert annotations.find_warning("*", Match.string_like_regexp("AwsSolutions-.*")) == []


def test_job_role_deletes_only_under_the_warehouse_and_glue_temp_prefixes(demo: Synthesized) -> None:
    """Snapshot expiry and orphan removal delete data and metadata files; nothing else may be deleted."""
    lake = demo.logical_id(demo.stack.storage.lake)
    by_sid = glue_policy_statements(demo)
    deleting = [s for s in by_sid.values() if "s3:DeleteObject" in as_list(s["Action"])]
    assert [s["Sid"] for s in deleting] == ["WriteWarehouseAndTemp"]
    assert sorted(render(as_list(deleting[0]["Resource"]))) == [
        f"${{{lake}.Arn}}/tmp/glue/*",
        f"${{{lake}.Arn}}/warehouse/*",
    ]
    assert sorted(as_list(deleting[0]["Action"])) == [
        "s3:AbortMultipartUpload",
        "s3:DeleteObject",
        "s3:GetObject",
        "s3:PutObject",
    ]
    # Orphan removal lists the table folders; expiry commits new metadata through the catalog.
    assert f"${{{lake}.Arn}}" in render(as_list(by_sid["ListBuckets"]["Resource"]))
    assert "glue:UpdateTable" in as_list(by_sid["LakeCatalog"]["Action"])


def test_trigger_lambda_cannot_start_maintenance(demo: Synthesized) -> None:
    maintenance = demo.logical_id(demo.stack.glue.maintenance)
    policies = resources_of_type(demo, "AWS::IAM::Policy").values()
    granted = [
        render(s["Resource"])
        for p in policies
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if "glue:StartJobRun" in as_list(s["Action"])
    ]
    assert granted
    assert all(f"job/${{{maintenance}}}" not in str(resource) for resource in granted)
