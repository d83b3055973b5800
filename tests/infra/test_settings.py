"""Context values: defaults, both spellings of lists and booleans, and one error listing every problem."""

from __future__ import annotations

import re
from typing import Any

import pytest

from cdc_lake.core.exceptions import SettingsError
from infra.settings import EXAMPLE_CONTEXT, DeploySettings, example_values_message
from tests.infra.conftest import DEPLOY_CONTEXT, SECRET_ARN


class FakeNode:
    def __init__(self, context: dict[str, Any]) -> None:
        self.context = context

    def try_get_context(self, key: str) -> Any:
        return self.context.get(key)


def settings(**overrides: Any) -> DeploySettings:
    return DeploySettings.from_context(FakeNode({**DEPLOY_CONTEXT, **overrides}))


def test_minimal_context_gets_documented_defaults() -> None:
    result = settings()
    assert result.subnet_ids == ("subnet-0123456789abcdef0", "subnet-0fedcba9876543210")
    assert result.source_engine == "mysql"
    assert result.source_port == 3306
    assert result.dms_mode == "instance"
    assert result.create_dms_service_roles is True
    assert result.table_config == "glue_jobs/cdc_lake/demo.yaml"
    assert result.stack_name == "CdcLake"
    assert result.resource_prefix == "cdclake"
    assert result.alarm_email is None
    assert result.maintenance_schedule == "cron(30 3 * * ? *)"
    assert result.maintenance_enabled is True
    assert (result.raw_retention_days, result.raw_unapplied_retention_days, result.lake_noncurrent_days) == (
        30,
        365,
        10,
    )
    assert result.trigger_reserved_concurrency == 10
    assert result.warm_maintenance_window == "Sun:03"


def test_warm_maintenance_window_is_a_day_and_an_hour() -> None:
    assert settings(warmMaintenanceWindow="Mon:22").warm_maintenance_window == "Mon:22"
    assert settings(warmMaintenanceWindow="Sat:7").warm_maintenance_window == "Sat:7"


def test_cdk_json_types_are_accepted_too() -> None:
    result = settings(
        subnetIds=["subnet-0123456789abcdef0", "subnet-0fedcba9876543210", "subnet-00000000000000000"],
        createDmsServiceRoles=False,
        rawRetentionDays=7,
        sourcePort=13306,
        maintenanceEnabled=False,
        maintenanceSchedule="cron(0/30 1-4 ? * MON-FRI *)",
    )
    assert len(result.subnet_ids) == 3
    assert result.maintenance_enabled is False
    assert result.maintenance_schedule == "cron(0/30 1-4 ? * MON-FRI *)"
    assert result.create_dms_service_roles is False
    assert result.raw_retention_days == 7
    assert result.source_port == 13306


def test_postgres_defaults_to_5432_and_needs_a_database() -> None:
    with pytest.raises(SettingsError, match="sourceDatabase is required when sourceEngine is postgres"):
        settings(sourceEngine="postgres")
    assert settings(sourceEngine="postgres", sourceDatabase="app").source_port == 5432


def test_missing_required_values_are_all_reported_at_once() -> None:
    with pytest.raises(SettingsError) as error:
        DeploySettings.from_context(FakeNode({}))
    message = str(error.value)
    for key in ("vpcId", "subnetIds", "sourceEngine", "sourceSecretArn"):
        assert key in message
    assert "docs/deploy.md" in message


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"dmsMode": "cluster"}, "dmsMode='cluster' must be one of instance, serverless"),
        ({"subnetIds": "subnet-0123456789abcdef0"}, "at least two subnets"),
        ({"subnetIds": "subnet-1,subnet-2"}, "invalid subnet id"),
        ({"sourceSecretArn": SECRET_ARN.removesuffix("-AbCdEf")}, "sourceSecretArn="),
        ({"rawRetentionDays": "a month"}, "not a whole number"),
        ({"dmsServerlessMaxCapacityUnits": "3"}, "dmsServerlessMaxCapacityUnits must be one of"),
        ({"createDmsServiceRoles": "maybe"}, "must be true or false"),
        ({"alarmEmail": "ops"}, "alarmEmail="),
        ({"stackName": "1stack"}, "stackName="),
        ({"maintenanceSchedule": "rate(1 day)"}, "maintenanceSchedule='rate(1 day)' is not valid"),
        ({"maintenanceSchedule": "cron(30 3 * * ?)"}, "maintenanceSchedule="),  # five fields
        ({"maintenanceSchedule": "cron(30 3 * * * *)"}, "maintenanceSchedule="),  # needs one "?" day field
        ({"maintenanceEnabled": "off"}, "maintenanceEnabled='off' must be true or false"),
        ({"rawRetentionDays": "60", "rawUnappliedRetentionDays": "90"}, "must be at least twice rawRetentionDays"),
        ({"lakeNoncurrentDays": "0"}, "lakeNoncurrentDays"),
        ({"triggerReservedConcurrency": "-1"}, "triggerReservedConcurrency"),
        ({"warmMaintenanceWindow": "Sunday:03"}, "warmMaintenanceWindow='Sunday:03' is not valid"),
        ({"warmMaintenanceWindow": "Sun:24"}, "warmMaintenanceWindow='Sun:24' is not valid"),
    ],
)
def test_invalid_values_are_refused(overrides: dict[str, str], problem: str) -> None:
    with pytest.raises(SettingsError, match=re.escape(problem)):
        settings(**overrides)


def test_example_values_fill_every_missing_required_value_and_name_them() -> None:
    result = DeploySettings.from_context(FakeNode({"exampleValues": "true"}))
    assert result.example_values == ("vpcId", "subnetIds", "sourceEngine", "sourceSecretArn")
    assert result.vpc_id == EXAMPLE_CONTEXT["vpcId"]
    assert result.subnet_ids == ("subnet-0000000000000000a", "subnet-0000000000000000b")
    assert result.source_engine == "mysql"
    assert ":000000000000:secret:cdc-lake/example-" in result.source_secret_arn
    message = example_values_message(result)
    assert message is not None
    assert "-c vpcId=... -c subnetIds=... -c sourceEngine=... -c sourceSecretArn=..." in message
    assert "cdk.json" in message


def test_example_values_keep_the_values_given() -> None:
    result = DeploySettings.from_context(FakeNode({"exampleValues": True, "vpcId": "vpc-0123456789abcdef0"}))
    assert result.vpc_id == "vpc-0123456789abcdef0"
    assert result.example_values == ("subnetIds", "sourceEngine", "sourceSecretArn")
    postgres = DeploySettings.from_context(FakeNode({"exampleValues": "true", "sourceEngine": "postgres"}))
    assert postgres.example_values == ("vpcId", "subnetIds", "sourceSecretArn", "sourceDatabase")
    assert postgres.source_database == "example"
    complete = settings(exampleValues="true")
    assert complete.example_values == ()
    assert example_values_message(complete) is None


@pytest.mark.parametrize("context", [{}, {"exampleValues": "false"}, {"exampleValues": False}])
def test_without_example_values_missing_values_are_refused(context: dict[str, Any]) -> None:
    with pytest.raises(SettingsError, match="vpcId is required"):
        DeploySettings.from_context(FakeNode(context))


def test_example_values_must_be_a_boolean_and_do_not_hide_invalid_values() -> None:
    with pytest.raises(SettingsError, match=re.escape("exampleValues='sure' must be true or false")):
        DeploySettings.from_context(FakeNode({"exampleValues": "sure"}))
    with pytest.raises(SettingsError, match=re.escape("vpcId='vpc-1' is not valid")):
        DeploySettings.from_context(FakeNode({"exampleValues": "true", "vpcId": "vpc-1"}))


def test_snapshots_kept_as_long_as_the_raw_files_are_refused_at_synth() -> None:
    from cdc_lake.core.config import parse_config
    from infra.app import refuse_rollback_past_landing
    from tests.support.configs import items_config_data

    config = parse_config({**items_config_data(), "lake": {"upkeep": {"keep_days": 30}}})
    with pytest.raises(SettingsError, match=r"lake.upkeep.keep_days \(30\) .* must be below rawRetentionDays \(30\)"):
        refuse_rollback_past_landing(settings(), config)
    refuse_rollback_past_landing(settings(rawRetentionDays=31), config)


def test_a_configuration_typed_for_another_engine_is_refused_at_synth() -> None:
    from cdc_lake.core.config import parse_config
    from infra.app import refuse_another_engine
    from tests.support.configs import items_config_data

    data = items_config_data()
    oracle = parse_config({**data, "dms": {**data.get("dms", {}), "source_engine": "oracle"}})
    with pytest.raises(SettingsError, match=r"dms.source_engine in .* is oracle, but sourceEngine is mysql"):
        refuse_another_engine(settings(), oracle)
    refuse_another_engine(settings(sourceEngine="oracle", sourceDatabase="ORCL", sourceWithoutTls="true"), oracle)
    refuse_another_engine(settings(), parse_config(data))  # no engine named: nothing to compare
