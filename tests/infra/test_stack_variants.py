"""The other deployment shape: Parquet + gzip + date folders + AR_H_CHANGE_SEQ, a PostgreSQL source,
DMS Serverless, an existing source security group, an alarm e-mail, DMS roles that already exist, and a weekly
maintenance schedule."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Annotations, Capture, Match

from tests.infra.conftest import (
    NON_WARM_JOBS,
    PARQUET_S3_SETTINGS,
    SECRET_ARN,
    SOURCE_KEY_ARN,
    SOURCE_SECURITY_GROUP,
    Synthesized,
    allows,
    job_role_statements,
    only,
    render,
)
from tests.infra.conftest import resources_of_type as of_type


@pytest.fixture(scope="module")
def names(parquet: Synthesized) -> dict[str, str]:
    stack = parquet.stack
    return {
        "raw": parquet.logical_id(stack.storage.raw),
        "target_role": parquet.logical_id(stack.dms.target_role),
        "dms_sg": parquet.logical_id(stack.dms.security_group),
        "subnet_group": parquet.logical_id(stack.dms.subnet_group),
    }


def test_no_unacknowledged_cdk_nag_findings(parquet: Synthesized) -> None:
    annotations = Annotations.from_stack(parquet.stack)
    assert annotations.find_error("*", Match.string_like_regexp("AwsSolutions-.*")) == []
    assert annotations.find_warning("*", Match.string_like_regexp("AwsSolutions-.*")) == []


def test_parquet_s3_settings(parquet: Synthesized, names: dict[str, str]) -> None:
    settings = Capture()
    parquet.template.has_resource_properties("AWS::DMS::Endpoint", {"EngineName": "s3", "S3Settings": settings})
    assert settings.as_object() == {
        "BucketName": {"Ref": names["raw"]},
        "ServiceAccessRoleArn": {"Fn::GetAtt": [names["target_role"], "Arn"]},
        "ExpectedBucketOwner": {"Ref": "AWS::AccountId"},
        **PARQUET_S3_SETTINGS,
    }


def test_serverless_replication_config_carries_the_generated_mappings(
    parquet: Synthesized, names: dict[str, str]
) -> None:
    assert of_type(parquet, "AWS::DMS::ReplicationTask") == {}
    assert of_type(parquet, "AWS::DMS::ReplicationInstance") == {}
    _id, replication = only(of_type(parquet, "AWS::DMS::ReplicationConfig"))
    props = replication["Properties"]
    assert props["ReplicationType"] == "full-load-and-cdc"
    assert props["ComputeConfig"] == {
        "MaxCapacityUnits": 8,
        "MultiAZ": False,
        "ReplicationSubnetGroupId": {"Ref": names["subnet_group"]},
        "VpcSecurityGroupIds": [{"Fn::GetAtt": [names["dms_sg"], "GroupId"]}],
    }
    locators = {"invoices": "invoices", "invoice_lines": "invoice[_]lines"}
    assert props["TableMappings"] == {
        "rules": [
            *(
                {
                    "rule-type": "selection",
                    "rule-id": str(number),
                    "rule-name": f"include-sales.{table}",
                    "object-locator": {"schema-name": "sales", "table-name": locators[table]},
                    "rule-action": "include",
                }
                for number, table in enumerate(locators, start=1)
            ),
            *(
                {
                    "rule-type": "transformation",
                    "rule-id": str(number),
                    "rule-name": f"change-sequence-sales.{table}",
                    "rule-target": "column",
                    "object-locator": {"schema-name": "sales", "table-name": locators[table]},
                    "rule-action": "add-column",
                    "value": "change_seq",
                    "expression": "$AR_H_CHANGE_SEQ",
                    "data-type": {"type": "string", "length": 50},
                }
                for number, table in enumerate(locators, start=3)
            ),
            *(
                {
                    "rule-type": "transformation",
                    "rule-id": str(number),
                    "rule-name": f"before-image-sales.{table}",
                    "rule-target": "column",
                    "object-locator": {"schema-name": "sales", "table-name": locators[table]},
                    "rule-action": "add-before-image-columns",
                    "before-image-def": {"column-prefix": "before_", "column-suffix": "", "column-filter": "pk-only"},
                }
                for number, table in enumerate(locators, start=5)
            ),
        ]
    }


def test_postgres_source_with_database_name_and_secret(parquet: Synthesized) -> None:
    parquet.template.has_resource_properties(
        "AWS::DMS::Endpoint",
        {
            "EndpointType": "source",
            "EngineName": "postgres",
            "DatabaseName": "sales",
            "SslMode": "verify-full",
            "CertificateArn": {"Fn::GetAtt": [Match.string_like_regexp("SourceCa"), "CertificateArn"]},
            "PostgreSqlSettings": Match.object_like({"SecretsManagerSecretId": SECRET_ARN}),
            "MySqlSettings": Match.absent(),
        },
    )
    parquet.template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [{"Action": "kms:Decrypt", "Effect": "Allow", "Resource": SOURCE_KEY_ARN}]
                )
            }
        },
    )


def test_source_security_group_admits_dms_only_on_the_database_port(
    parquet: Synthesized, names: dict[str, str]
) -> None:
    into_source = {
        r["Properties"]["SourceSecurityGroupId"]["Fn::GetAtt"][0]: r["Properties"]
        for r in of_type(parquet, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == SOURCE_SECURITY_GROUP
    }
    check_group = parquet.logical_id(parquet.stack.source_check.security_group)
    assert set(into_source) == {names["dms_sg"], check_group}  # DMS, and the source check's catalog reads
    assert into_source[names["dms_sg"]] == {
        "GroupId": SOURCE_SECURITY_GROUP,
        "IpProtocol": "tcp",
        "FromPort": 5432,
        "ToPort": 5432,
        "SourceSecurityGroupId": {"Fn::GetAtt": [names["dms_sg"], "GroupId"]},
        "Description": "cdc-lake DMS replication reads the source database",
    }
    assert (into_source[check_group]["FromPort"], into_source[check_group]["ToPort"]) == (5432, 5432)
    group = of_type(parquet, "AWS::EC2::SecurityGroup")[names["dms_sg"]]
    assert [rule["FromPort"] for rule in group["Properties"]["SecurityGroupEgress"]] == [443]
    parquet.template.has_resource_properties(
        "AWS::EC2::SecurityGroupEgress",
        {"DestinationSecurityGroupId": SOURCE_SECURITY_GROUP, "FromPort": 5432, "ToPort": 5432},
    )


def test_existing_dms_service_roles_are_not_recreated(parquet: Synthesized) -> None:
    role_names = [role["Properties"].get("RoleName") for role in of_type(parquet, "AWS::IAM::Role").values()]
    assert "dms-vpc-role" not in role_names
    assert "dms-cloudwatch-logs-role" not in role_names


def test_notification_glue_read_access_and_maintenance_deletes_follow_the_bucket_folder(
    parquet: Synthesized, names: dict[str, str]
) -> None:
    parquet.template.has_resource_properties(
        "Custom::S3BucketNotifications",
        {
            "NotificationConfiguration": {
                "LambdaFunctionConfigurations": [
                    Match.object_like(
                        {"Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "cdc/landing/"}]}}}
                    )
                ]
            }
        },
    )
    _id, glue_policy = only(
        parquet.template.find_resources(
            "AWS::IAM::Policy", {"Properties": {"PolicyName": Match.string_like_regexp("GlueJobPolicy")}}
        )
    )
    by_sid = {s["Sid"]: s for s in glue_policy["Properties"]["PolicyDocument"]["Statement"]}
    assert render(by_sid["ReadDmsFiles"]["Resource"]) == f"${{{names['raw']}.Arn}}/cdc/landing/*"
    # The maintenance removes applied files in the folder only (its cdk-nag acknowledgment follows the folder too).
    landed = f"${{{names['raw']}.Arn}}/cdc/landing/public/orders/2025-03-01-11/20250301-110000000.parquet"
    deleting = [
        job for job, statements in job_role_statements(parquet).items() if allows(statements, "s3:DeleteObject", landed)
    ]
    assert deleting == ["saleslake-maintenance"]
    assert not allows(
        job_role_statements(parquet)["saleslake-maintenance"], "s3:DeleteObject", f"${{{names['raw']}.Arn}}/dms/x"
    )
    assert "arn:${AWS::Partition}:glue:${AWS::Region}:${AWS::AccountId}:table/sales_lake/*" in render(
        by_sid["LakeCatalog"]["Resource"]
    )


def test_alarm_email_subscribes_to_the_topic(parquet: Synthesized) -> None:
    parquet.template.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "data-ops@example.com"}
    )


def test_names_follow_the_stack_name(parquet: Synthesized) -> None:
    jobs = sorted(job["Properties"]["Name"] for job in of_type(parquet, "AWS::Glue::Job").values())
    assert jobs == sorted(f"saleslake-{name}" for job in NON_WARM_JOBS for name in job.resource_names)
    assert "ReplicationConfigArn" in parquet.json["Outputs"]
