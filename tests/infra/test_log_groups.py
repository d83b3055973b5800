"""Every log group of the pipeline is made by the stack, with logRetentionDays and the pipeline key, under the
name its service writes to: the Glue jobs' --custom-logGroup-prefix, DMS's task group, the trigger's."""

from __future__ import annotations

from typing import Any

import pytest

from cdc_lake.core.exceptions import SettingsError
from tests.infra.conftest import Synthesized, only, render, resources_of_type, synthesize


def _groups(synth: Synthesized) -> dict[str, dict[str, Any]]:
    return {
        render(g["Properties"]["LogGroupName"]): g for g in resources_of_type(synth, "AWS::Logs::LogGroup").values()
    }


def _key_arn(synth: Synthesized) -> dict[str, Any]:
    return {"Fn::GetAtt": [synth.logical_id(synth.stack.key), "Arn"]}


def _encrypted_groups(synth: Synthesized) -> list[str]:
    [statement] = [
        s
        for s in synth.json["Resources"][synth.logical_id(synth.stack.key)]["Properties"]["KeyPolicy"]["Statement"]
        if s.get("Sid") == "PipelineLogGroups"
    ]
    return [
        arn.split(":log-group:", 1)[1]
        for arn in render(statement["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"])
    ]


def test_each_service_logs_to_a_group_the_stack_made_with_retention_and_the_key(demo: Synthesized) -> None:
    groups = _groups(demo)
    assert sorted(groups) == [
        "/aws-glue/cdclake/error",
        "/aws-glue/cdclake/output",
        "/aws/lambda/cdclake-trigger",
        "dms-tasks-cdclake-instance",
    ]
    for group in groups.values():
        assert group["Properties"]["RetentionInDays"] == 90
        assert group["Properties"]["KmsKeyId"] == _key_arn(demo)
    for job in resources_of_type(demo, "AWS::Glue::Job").values():
        assert job["Properties"]["DefaultArguments"]["--custom-logGroup-prefix"] == "/aws-glue/cdclake"
    _, instance = only(resources_of_type(demo, "AWS::DMS::ReplicationInstance"))
    assert f"dms-tasks-{instance['Properties']['ReplicationInstanceIdentifier']}" in groups
    function = demo.json["Resources"][demo.logical_id(demo.stack.trigger.function)]
    assert function["Properties"]["LoggingConfig"]["LogGroup"] == {"Ref": demo.logical_id(demo.stack.trigger.log_group)}
    # The key serves CloudWatch Logs for these groups only.
    assert _encrypted_groups(demo) == ["/aws-glue/*", "dms-tasks-cdclake-instance", "/aws/lambda/cdclake-trigger"]


def test_dms_serverless_logs_to_the_group_named_after_its_replication_config(parquet: Synthesized) -> None:
    [dms] = [g for name, g in _groups(parquet).items() if "dms" in str(name)]
    config = parquet.logical_id(parquet.stack.dms.replication)
    arn = {"Fn::GetAtt": [config, "ReplicationConfigArn"]}
    resource_id = {"Fn::Select": [6, {"Fn::Split": [":", arn]}]}
    assert dms["Properties"]["LogGroupName"] == {"Fn::Join": ["", ["dms-serverless-replication-", resource_id]]}
    assert "dms-serverless-replication-*" in _encrypted_groups(parquet)


def test_the_retention_is_a_setting_cloudwatch_accepts(tmp_path_factory: pytest.TempPathFactory) -> None:
    year = synthesize(tmp_path_factory.mktemp("year"), {"logRetentionDays": "365"})
    assert {g["Properties"]["RetentionInDays"] for g in _groups(year).values()} == {365}
    with pytest.raises(SettingsError, match=r"logRetentionDays must be one of \[1, 3, 5"):
        synthesize(tmp_path_factory.mktemp("odd"), {"logRetentionDays": "100"})
