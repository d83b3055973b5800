"""The maintenance job (compaction, snapshot expiry, orphan removal, removal of the applied DMS files), its role and
its scheduled Glue trigger."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Annotations, Match

from cdc_lake.core.job_arguments import MaintenanceArguments
from cdc_lake.core.names import EXPIRED_MARK_PREFIX
from infra.settings import DEFAULT_MAINTENANCE_SCHEDULE
from tests.infra.conftest import (
    Synthesized,
    allows,
    cdk_json_context,
    job_role_statements,
    only,
    render,
    resources_of_type,
    synthesize,
)

MAINTENANCE_DEFAULTS = {"--action": "all", "--retain_last": "20", "--orphan_days": "3", "--raw_retention_days": "30"}
# Not the defaults (30 and 365): the template's values are the context's.
RETENTION_CONTEXT = {"rawRetentionDays": "45", "rawUnappliedRetentionDays": "400"}


@pytest.fixture(scope="module")
def disabled(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The default deployment with ``-c maintenanceEnabled=false``."""
    return synthesize(tmp_path_factory.mktemp("no-maintenance"), {"maintenanceEnabled": "false"})


@pytest.fixture(scope="module")
def retention(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The default deployment with rawRetentionDays and rawUnappliedRetentionDays of its own."""
    return synthesize(tmp_path_factory.mktemp("retention"), RETENTION_CONTEXT)


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
    # The security configuration of all jobs; a role of its own (test_only_the_maintenance_role_deletes_landed_files).
    replay = job_properties(demo, glue.cdc_replay)
    assert props["Role"] == {"Fn::GetAtt": [demo.logical_id(glue.maintenance_role), "Arn"]} != replay["Role"]
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
    assert " --conf spark.sql.catalog.glue_catalog.io-impl=cdclake.iceberg.WrittenMetadataFileIO" in conf
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
    """Snapshot expiry and orphan removal delete data and metadata files; the lake jobs' policy deletes nothing else
    (the maintenance job's own policy deletes the applied DMS files: test_only_the_maintenance_role_deletes_...)."""
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


# --- removing the applied DMS files --------------------------------------------------------------------------------


def raw_object(synth: Synthesized, key: str) -> str:
    """The rendered ARN of ``key`` in the raw bucket."""
    return f"${{{synth.logical_id(synth.stack.storage.raw)}.Arn}}/{key}"


LANDED_FILE = "dms/shop/orders/20250301-110000000.csv"
# As the maintenance names a mark: the prefix, then the table's folder in the landing.
EXPIRY_MARK = f"{EXPIRED_MARK_PREFIX}dms/shop/orders/expired.json"


def maintenance_policy_statements(synth: Synthesized) -> dict[str, dict[str, Any]]:
    _id, policy = only(
        synth.template.find_resources(
            "AWS::IAM::Policy", {"Properties": {"PolicyName": Match.string_like_regexp("GlueMaintenancePolicy")}}
        )
    )
    assert policy["Properties"]["Roles"] == [{"Ref": synth.logical_id(synth.stack.glue.maintenance_role)}]
    return {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}


def test_only_the_maintenance_role_deletes_landed_files(demo: Synthesized) -> None:
    """Replay and full-load runs (and every other job) only read the landed files; the maintenance job's role alone
    may delete them (each key of a DeleteObjects asks s3:DeleteObject), and only in DMS's folder."""
    landed = raw_object(demo, LANDED_FILE)
    by_job = job_role_statements(demo)
    deleting = sorted(job for job, statements in by_job.items() if allows(statements, "s3:DeleteObject", landed))
    assert deleting == ["cdclake-maintenance"]
    reading = {job for job, statements in by_job.items() if allows(statements, "s3:GetObject", landed)}
    assert {"cdclake-full-load", "cdclake-cdc-replay", "cdclake-maintenance"} <= reading
    glue = demo.stack.glue
    assert job_properties(demo, glue.full_load)["Role"] == job_properties(demo, glue.cdc_replay)["Role"]
    by_sid = maintenance_policy_statements(demo)
    assert as_list(by_sid["DeleteAppliedDmsFiles"]["Action"]) == ["s3:DeleteObject"]
    assert render(as_list(by_sid["DeleteAppliedDmsFiles"]["Resource"])) == [raw_object(demo, "dms/*")]
    # Nothing outside DMS's folder: not the marks, not the warm runs' markers.
    maintenance = by_job["cdclake-maintenance"]
    for key in (EXPIRY_MARK, "cdc-lake-warm/shard-0.json", "elsewhere/file.csv"):
        assert not allows(maintenance, "s3:DeleteObject", raw_object(demo, key)), key


def test_maintenance_role_holds_the_lake_jobs_policy_too(demo: Synthesized) -> None:
    """It compacts, expires and removes orphans as before: the lake jobs' one policy is attached to it."""
    glue = demo.stack.glue
    lake_policy = demo.json["Resources"][demo.logical_id(glue.policy)]["Properties"]
    assert {"Ref": demo.logical_id(glue.maintenance_role)} in lake_policy["Roles"]
    assert {"Ref": demo.logical_id(glue.role)} in lake_policy["Roles"]
    # Glue validates a job's role when the job is created: the job waits for both policies.
    depends = demo.json["Resources"][demo.logical_id(glue.maintenance)]["DependsOn"]
    own_id, _own = only(
        demo.template.find_resources(
            "AWS::IAM::Policy", {"Properties": {"PolicyName": Match.string_like_regexp("GlueMaintenancePolicy")}}
        )
    )
    assert {demo.logical_id(glue.policy), own_id} <= set(depends)


def test_expiry_marks_are_read_by_the_replay_jobs_and_written_only_by_the_maintenance(demo: Synthesized) -> None:
    """The maintenance leaves a mark per table of what it removed; a lake table's first batch reads it (one GET)."""
    mark = raw_object(demo, EXPIRY_MARK)
    by_job = job_role_statements(demo)
    reading = {job for job, statements in by_job.items() if allows(statements, "s3:GetObject", mark)}
    assert {"cdclake-full-load", "cdclake-cdc-replay", "cdclake-maintenance"} <= reading
    writing = sorted(job for job, statements in by_job.items() if allows(statements, "s3:PutObject", mark))
    assert writing == ["cdclake-maintenance"]
    # Of every role in the stack (the trigger's, DMS's, ...): only the maintenance job's writes a mark.
    writers = [
        policy["Properties"]["Roles"]
        for policy in resources_of_type(demo, "AWS::IAM::Policy").values()
        if allows(policy["Properties"]["PolicyDocument"]["Statement"], "s3:PutObject", mark)
    ]
    assert writers == [[{"Ref": demo.logical_id(demo.stack.glue.maintenance_role)}]]
    by_sid = maintenance_policy_statements(demo)
    assert as_list(by_sid["WriteExpiryMarks"]["Action"]) == ["s3:PutObject"]
    assert render(as_list(by_sid["WriteExpiryMarks"]["Resource"])) == [raw_object(demo, f"{EXPIRED_MARK_PREFIX}*")]
    assert EXPIRED_MARK_PREFIX == "cdc-lake-expired/"


def test_the_schedule_removes_applied_files_after_raw_retention_days(demo: Synthesized, retention: Synthesized) -> None:
    """The job's own --raw_retention_days is the stack's rawRetentionDays, so the schedule's --action all removes the
    applied files; the raw bucket's one rule follows rawUnappliedRetentionDays."""
    for synth, days, unapplied in ((demo, 30, 365), (retention, 45, 400)):
        glue = synth.stack.glue
        arguments = render(job_properties(synth, glue.maintenance)["DefaultArguments"])
        assert arguments["--raw_retention_days"] == str(days) == str(synth.stack.settings.raw_retention_days)
        _id, trigger = only(maintenance_triggers(synth))
        scheduled = trigger["Properties"]["Actions"][0]["Arguments"]
        assert "--raw_retention_days" not in scheduled
        # What the scheduled run reads, as the script parses it: the job's defaults under the trigger's arguments.
        run = MaintenanceArguments.from_options({**arguments, **scheduled})
        assert (run.action, run.raw_retention_days, run.bucket) == (
            "all",
            days,
            f"${{{synth.logical_id(synth.stack.storage.raw)}}}",
        )
        raw = synth.json["Resources"][synth.logical_id(synth.stack.storage.raw)]["Properties"]
        assert [(r["Id"], r["ExpirationInDays"]) for r in raw["LifecycleConfiguration"]["Rules"]] == [
            ("expire-any-dms-file", unapplied)
        ]
