"""The source check: a Glue job in the source's VPC comparing the configuration with the source's catalog on a
schedule, with a role that reads the source secret and nothing of the lake, and an alarm on a difference."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Annotations, Match

from cdc_lake.core.names import DRIFTED_KEYS_METRIC, METRICS_NAMESPACE, PIPELINE_DIMENSION, SOURCE_DIFFERENCES_METRIC
from infra.settings import DEFAULT_SOURCE_CHECK_SCHEDULE
from infra.wheels import job_wheels
from tests.infra.conftest import SECRET_ARN, SOURCE_KEY_ARN, Synthesized, only, render, resources_of_type, synthesize

DRIFT_SECRET = SECRET_ARN.replace("cdc-lake/source", "cdc-lake/drift")


@pytest.fixture(scope="module")
def own_secret(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize(tmp_path_factory.mktemp("drift-secret"), {"driftSecretArn": DRIFT_SECRET})


@pytest.fixture(scope="module")
def unscheduled(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize(tmp_path_factory.mktemp("no-source-check"), {"sourceCheckEnabled": "false"})


def wheel_names(arguments: dict[str, Any]) -> list[str]:
    return [url.rsplit("/", 1)[1] for url in arguments["--additional-python-modules"].split(",")]


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
    assert wheel_names(arguments) == [w.name for w in job_wheels("5.1", "mysql")]  # as requirements.txt pins them
    assert "pymysql-1.2.4-py3-none-any.whl" in wheel_names(arguments)
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
        "WorkerSubnets", "WorkerNetworkInterfaceTags", "JobLogs", "EncryptLogs", "SourceCheckMetric",
    }  # fmt: skip
    # Network interfaces only in the stack's VPC and its subnets, never anywhere in the account.
    vpc = f"arn:${{AWS::Partition}}:ec2:${{AWS::Region}}:${{AWS::AccountId}}:vpc/{demo.stack.settings.vpc_id}"
    assert render(statements["WorkerNetworkInterfaces"]["Condition"]) == {"ArnEquals": {"ec2:Vpc": vpc}}
    assert render(statements["WorkerSubnets"]["Resource"]) == [
        f"arn:${{AWS::Partition}}:ec2:${{AWS::Region}}:${{AWS::AccountId}}:subnet/{subnet}"
        for subnet in demo.stack.settings.subnet_ids
    ]
    assert statements["WorkerNetworkInterfaceTags"]["Action"] == ["ec2:CreateTags", "ec2:DeleteTags"]
    assert "subnet/*" not in str(render(list(statements.values())))
    assert statements["ReadSourceSecret"]["Action"] == "secretsmanager:GetSecretValue"
    assert statements["ReadSourceSecret"]["Resource"] == SECRET_ARN
    assert statements["SourceCheckMetric"]["Condition"] == {"StringEquals": {"cloudwatch:namespace": METRICS_NAMESPACE}}
    assert statements["ReadJobAssets"]["Action"] == "s3:GetObject"
    raw, lake = demo.logical_id(demo.stack.storage.raw), demo.logical_id(demo.stack.storage.lake)
    text = str(statements)
    assert raw not in text and lake not in text and "glue:GetTable" not in text


def test_the_jobs_tag_only_the_network_interfaces_glue_marks(demo: Synthesized) -> None:
    """Every grant of ec2:CreateTags and DeleteTags (the source check's, the drift and the repair job's) is held to
    the one tag key Glue marks its workers' interfaces with, as AWS's AWSGlueServiceRole grants it."""
    tagging = [
        statement
        for policy in resources_of_type(demo, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if {"ec2:CreateTags", "ec2:DeleteTags"} & set(statement["Action"])
    ]
    assert len(tagging) == 3
    for statement in tagging:
        assert statement["Action"] == ["ec2:CreateTags", "ec2:DeleteTags"]
        assert statement["Condition"] == {"ForAllValues:StringEquals": {"aws:TagKeys": ["aws-glue-service-resource"]}}
        assert render(statement["Resource"]).endswith(":network-interface/*")


def test_postgres_sources_get_their_driver_database_and_key(parquet: Synthesized) -> None:
    arguments = render(properties(parquet, parquet.stack.source_check.job)["DefaultArguments"])
    assert (arguments["--source_engine"], arguments["--source_database"]) == ("postgres", "sales")
    assert wheel_names(arguments) == [w.name for w in job_wheels("5.1", "postgres")]
    assert "psycopg-3.3.9-py3-none-any.whl" in wheel_names(arguments)
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


def role_policies(synth: Synthesized, job: Any) -> list[dict[str, Any]]:
    """Every statement of the policies attached to ``job``'s role."""
    role = {"Ref": properties(synth, job)["Role"]["Fn::GetAtt"][0]}
    return [
        statement
        for policy in resources_of_type(synth, "AWS::IAM::Policy").values()
        if role in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def granted(statements: list[dict[str, Any]]) -> set[str]:
    found = set()
    for statement in statements:
        action = statement["Action"]
        found |= set(action if isinstance(action, list) else [action])
    return found


WRITES = {"s3:PutObject", "s3:DeleteObject", "glue:CreateTable", "glue:UpdateTable"}


def test_the_drift_job_verifies_weekly_in_the_source_network_with_read_only_access(demo: Synthesized) -> None:
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
    assert wheel_names(arguments) == [w.name for w in job_wheels("5.1", "mysql")]
    assert arguments["--warehouse"] == f"s3://${{{demo.logical_id(demo.stack.storage.lake)}}}/warehouse/"
    # Its role reads the lake, its tables and the DMS files, and writes nothing but Glue's scratch files.
    statements = role_policies(demo, check.drift_job)
    assert not granted(statements) & {"glue:CreateTable", "glue:UpdateTable"}
    lake = demo.logical_id(demo.stack.storage.lake)
    for statement in statements:
        if {"s3:PutObject", "s3:DeleteObject"} & set(
            statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        ):
            assert render(statement["Resource"]) in ([f"${{{lake}.Arn}}/tmp/glue/*"], f"${{{lake}.Arn}}/tmp/glue/*")
    assert {"glue:GetTable", "s3:GetObject", "secretsmanager:GetSecretValue"} <= granted(statements)
    assert check.drift_trigger is not None
    trigger = properties(demo, check.drift_trigger)
    assert (trigger["Schedule"], trigger["Actions"][0]["Arguments"]) == ("cron(0 4 ? * SUN *)", {"--action": "verify"})
    alarm = properties(demo, demo.stack.monitoring.drifted_keys_alarm)
    assert (alarm["MetricName"], alarm["Threshold"]) == (DRIFTED_KEYS_METRIC, 1)


def test_repairs_run_as_a_job_of_their_own_with_the_lake_jobs_access(demo: Synthesized) -> None:
    check, glue = demo.stack.source_check, demo.stack.glue
    job = properties(demo, check.repair_job)
    assert job["Name"] == "cdclake-repair"
    assert render(job["DefaultArguments"])["--action"] == "repair"
    assert job["Command"]["ScriptLocation"] == demo.stack.resolve(glue.scripts["drift"].s3_object_url)
    role = {"Ref": job["Role"]["Fn::GetAtt"][0]}
    assert role in properties(demo, glue.policy)["Roles"]  # the lake jobs' one policy
    assert granted(role_policies(demo, check.repair_job)) >= WRITES
    triggers = resources_of_type(demo, "AWS::Glue::Trigger").values()
    assert not [
        t for t in triggers if t["Properties"]["Actions"][0]["JobName"] == {"Ref": demo.logical_id(check.repair_job)}
    ]


def test_the_drift_jobs_read_a_secret_of_their_own_when_given(demo: Synthesized, own_secret: Synthesized) -> None:
    """Without driftSecretArn they read DMS's, and the synth says so; with it, only it."""
    warnings = Annotations.from_stack(demo.stack).find_warning("*", Match.string_like_regexp("driftSecretArn"))
    assert warnings
    synth = own_secret
    check = synth.stack.source_check
    for job in (check.drift_job, check.repair_job):
        assert render(properties(synth, job)["DefaultArguments"])["--source_secret"] == DRIFT_SECRET
        reads = [s for s in role_policies(synth, job) if "secretsmanager:GetSecretValue" in str(s["Action"])]
        assert [s["Resource"] for s in reads] == [DRIFT_SECRET]
    assert render(properties(synth, check.job)["DefaultArguments"])["--source_secret"] == SECRET_ARN
    assert not Annotations.from_stack(synth.stack).find_warning("*", Match.string_like_regexp("driftSecretArn"))
