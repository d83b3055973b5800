"""The source check: a Glue job in the source's VPC comparing the configuration with the source's catalog on a
schedule, with a role that reads the source secret and nothing of the lake, and an alarm on a difference."""

from __future__ import annotations

from typing import Any

import pytest

from cdc_lake.core.names import DRIFTED_KEYS_METRIC, METRICS_NAMESPACE, PIPELINE_DIMENSION, SOURCE_DIFFERENCES_METRIC
from infra.settings import DEFAULT_SOURCE_CHECK_SCHEDULE
from tests.infra.conftest import SECRET_ARN, SOURCE_KEY_ARN, Synthesized, only, render, resources_of_type, synthesize


@pytest.fixture(scope="module")
def unscheduled(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize(tmp_path_factory.mktemp("no-source-check"), {"sourceCheckEnabled": "false"})


def properties(synth: Synthesized, construct: Any) -> dict[str, Any]:
    return synth.json["Resources"][synth.logical_id(construct)]["Properties"]


def role_statements(synth: Synthesized) -> dict[str, dict[str, Any]]:
    policy = properties(synth, synth.stack.source_check.policy)
    assert policy["Roles"] == [{"Ref": synth.logical_id(synth.stack.source_check.role)}]
    return {s["Sid"]: s for s in policy["PolicyDocument"]["Statement"]}


def test_the_job_runs_the_check_script_in_the_source_network(demo: Synthesized) -> None:
    check = demo.stack.source_check
    job = properties(demo, check.job)
    assert job["Name"] == "cdclake-source-check"
    assert job["Connections"] == {"Connections": [{"Ref": demo.logical_id(check.connection)}]}
    assert job["Command"]["ScriptLocation"] == demo.stack.resolve(demo.stack.glue.scripts["source_check"].s3_object_url)
    assert job["Role"] == {"Fn::GetAtt": [demo.logical_id(check.role), "Arn"]}
    arguments = render(job["DefaultArguments"])
    assert arguments["--source_secret"] == SECRET_ARN
    assert arguments["--source_engine"] == "mysql"
    assert "--source_database" not in arguments  # MySQL: every schema the configuration names
    pydantic, driver = arguments["--additional-python-modules"].split(",")
    assert pydantic.startswith("pydantic==2.") and driver == "PyMySQL==1.2.4"  # as requirements.txt pins it
    assert arguments["--config_uri"] == render(demo.stack.resolve(demo.stack.glue.config_asset.s3_object_url))
    connection = properties(demo, check.connection)["ConnectionInput"]
    assert connection["ConnectionType"] == "NETWORK"
    assert connection["PhysicalConnectionRequirements"] == {
        "SubnetId": "subnet-0123456789abcdef0",
        "SecurityGroupIdList": [{"Fn::GetAtt": [demo.logical_id(check.security_group), "GroupId"]}],
    }


def test_the_role_reads_the_secret_and_nothing_of_the_lake(demo: Synthesized) -> None:
    statements = role_statements(demo)
    assert set(statements) == {
        "ReadJobAssets", "ReadSourceSecret", "NetworkConnection", "DescribeNetwork", "WorkerNetworkInterfaces",
        "JobLogs", "EncryptLogs", "SourceCheckMetric",
    }  # fmt: skip
    assert statements["ReadSourceSecret"]["Action"] == "secretsmanager:GetSecretValue"
    assert statements["ReadSourceSecret"]["Resource"] == SECRET_ARN
    assert statements["SourceCheckMetric"]["Condition"] == {"StringEquals": {"cloudwatch:namespace": METRICS_NAMESPACE}}
    assert statements["ReadJobAssets"]["Action"] == "s3:GetObject"
    raw, lake = demo.logical_id(demo.stack.storage.raw), demo.logical_id(demo.stack.storage.lake)
    text = str(statements)
    assert raw not in text and lake not in text and "glue:GetTable" not in text


def test_postgres_sources_get_their_driver_database_and_key(parquet: Synthesized) -> None:
    arguments = render(properties(parquet, parquet.stack.source_check.job)["DefaultArguments"])
    assert (arguments["--source_engine"], arguments["--source_database"]) == ("postgres", "sales")
    assert arguments["--additional-python-modules"].split(",")[1] == "psycopg[binary]==3.3.9"
    assert role_statements(parquet)["DecryptSourceSecret"]["Resource"] == SOURCE_KEY_ARN


def test_a_daily_schedule_and_an_alarm_on_any_difference(demo: Synthesized) -> None:
    check = demo.stack.source_check
    assert check.trigger is not None
    trigger = properties(demo, check.trigger)
    assert (trigger["Schedule"], trigger["Type"], trigger["StartOnCreation"]) == (
        DEFAULT_SOURCE_CHECK_SCHEDULE,
        "SCHEDULED",
        True,
    )
    assert trigger["Actions"] == [{"JobName": {"Ref": demo.logical_id(check.job)}, "Arguments": {}}]
    alarm = properties(demo, demo.stack.monitoring.source_differences_alarm)
    assert (alarm["Namespace"], alarm["MetricName"]) == (METRICS_NAMESPACE, SOURCE_DIFFERENCES_METRIC)
    assert alarm["Dimensions"] == [{"Name": PIPELINE_DIMENSION, "Value": "shop_lake"}]
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
    assert alarm["AlarmActions"] == [{"Ref": demo.logical_id(demo.stack.monitoring.topic)}]
    assert "config-check-source" in alarm["AlarmDescription"]


def test_disabled_check_keeps_the_job_without_a_schedule(unscheduled: Synthesized) -> None:
    assert unscheduled.stack.source_check.trigger is None
    triggers = resources_of_type(unscheduled, "AWS::Glue::Trigger")
    job = {"Ref": unscheduled.logical_id(unscheduled.stack.source_check.job)}
    assert not [t for t in triggers.values() if t["Properties"]["Actions"][0]["JobName"] == job]
    _id, _job = only(
        {k: v for k, v in resources_of_type(unscheduled, "AWS::Glue::Job").items() if "SourceCheckJob" in k}
    )


def test_the_drift_job_verifies_weekly_in_the_source_network_with_the_lake_jobs_access(demo: Synthesized) -> None:
    check, glue = demo.stack.source_check, demo.stack.glue
    job = properties(demo, check.drift_job)
    assert job["Name"] == "cdclake-drift"
    assert job["Connections"] == {"Connections": [{"Ref": demo.logical_id(check.connection)}]}
    assert job["Command"]["ScriptLocation"] == demo.stack.resolve(glue.scripts["drift"].s3_object_url)
    arguments = render(job["DefaultArguments"])
    assert (arguments["--action"], arguments["--source_secret"], arguments["--source_engine"]) == (
        "verify",
        SECRET_ARN,
        "mysql",
    )
    assert arguments["--bucket"] == f"${{{demo.logical_id(demo.stack.storage.raw)}}}"
    assert arguments["--additional-python-modules"].split(",")[1] == "PyMySQL==1.2.4"
    assert arguments["--warehouse"] == f"s3://${{{demo.logical_id(demo.stack.storage.lake)}}}/warehouse/"
    # The lake jobs' one policy serves the drift job's role too; the source's secret comes in a policy of its own.
    role = {"Ref": job["Role"]["Fn::GetAtt"][0]}
    lake_policy = properties(demo, glue.policy)
    assert role in lake_policy["Roles"] and {"Ref": demo.logical_id(glue.role)} in lake_policy["Roles"]
    drift_policies = [
        p for p in resources_of_type(demo, "AWS::IAM::Policy").values() if p["Properties"]["Roles"] == [role]
    ]
    [access] = drift_policies
    sids = {s["Sid"]: s for s in access["Properties"]["PolicyDocument"]["Statement"]}
    assert sids["ReadSourceSecret"]["Resource"] == SECRET_ARN
    assert check.drift_trigger is not None
    trigger = properties(demo, check.drift_trigger)
    assert (trigger["Schedule"], trigger["Actions"][0]["Arguments"]) == ("cron(0 4 ? * SUN *)", {"--action": "verify"})
    alarm = properties(demo, demo.stack.monitoring.drifted_keys_alarm)
    assert (alarm["MetricName"], alarm["Threshold"]) == (DRIFTED_KEYS_METRIC, 1)
