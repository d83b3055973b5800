"""The default deployment (demo configuration: CSV, MySQL source, replication instance), asserted on the
synthesized CloudFormation template."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk.assertions import Annotations, Capture, Match

from cdc_lake.core.glue_jobs import GLUE_JOBS
from cdc_lake.core.names import (
    BATCH_SECONDS_METRIC,
    BYTES_APPLIED_METRIC,
    CHANGE_LAG_METRIC,
    EXPIRED_MARK_PREFIX,
    FILES_APPLIED_METRIC,
    INPUT_NOTICES_METRIC,
    LANDED_LAG_METRIC,
    METRICS_NAMESPACE,
    PIPELINE_DIMENSION,
    ROWS_APPLIED_METRIC,
    TABLE_FAILURES_METRIC,
    UNKNOWN_TABLE_OBJECTS_METRIC,
)
from infra.wheels import job_wheels
from tests.infra.conftest import (
    NON_WARM_JOBS,
    SECRET_ARN,
    Synthesized,
    allows,
    job_role_statements,
    only,
    render,
    resources_of_type,
)

DEMO_S3_SETTINGS_STATIC = {
    "BucketFolder": "dms",
    "DataFormat": "csv",
    "CompressionType": "NONE",
    "EncryptionMode": "SSE_S3",
    "TimestampColumnName": "dms_timestamp",
    "IncludeOpForFullLoad": False,
    "CsvDelimiter": ",",
    "CsvRowDelimiter": "\n",
    "AddColumnName": False,
    "Rfc4180": True,
    "DatePartitionEnabled": False,
    "CdcMaxBatchInterval": 60,
    "CdcMinFileSize": 32000,
    "CdcInsertsOnly": False,
    "CdcInsertsAndUpdates": False,
    "PreserveTransactions": False,
}


def ids(demo: Synthesized) -> dict[str, str]:
    stack = demo.stack
    return {
        "raw": demo.logical_id(stack.storage.raw),
        "lake": demo.logical_id(stack.storage.lake),
        "logs": demo.logical_id(stack.storage.access_logs),
        "full_load": demo.logical_id(stack.glue.full_load),
        "cdc_replay": demo.logical_id(stack.glue.cdc_replay),
        "maintenance": demo.logical_id(stack.glue.maintenance),
        "function": demo.logical_id(stack.trigger.function),
        "queue": demo.logical_id(stack.trigger.failure_queue),
        "topic": demo.logical_id(stack.monitoring.topic),
        "key": demo.logical_id(stack.key),
        "target_role": demo.logical_id(stack.dms.target_role),
        "dms_sg": demo.logical_id(stack.dms.security_group),
        "source_check": demo.logical_id(stack.source_check.job),
        "drift": demo.logical_id(stack.source_check.drift_job),
        "source_check_sg": demo.logical_id(stack.source_check.security_group),
        "security_configuration": demo.logical_id(stack.glue.security_configuration),
    }


def statements(demo: Synthesized) -> list[dict[str, Any]]:
    found = []
    for policy in resources_of_type(demo, "AWS::IAM::Policy").values():
        found.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    for role in resources_of_type(demo, "AWS::IAM::Role").values():
        for inline in role["Properties"].get("Policies", []):
            found.extend(inline["PolicyDocument"]["Statement"])
    return found


def actions(statement: dict[str, Any]) -> list[str]:
    value = statement["Action"]
    return value if isinstance(value, list) else [value]


def resources(statement: dict[str, Any]) -> list[str]:
    value = statement["Resource"]
    return render(value if isinstance(value, list) else [value])


# --- cdk-nag -------------------------------------------------------------------------------------------


def test_no_unacknowledged_cdk_nag_findings(demo: Synthesized) -> None:
    annotations = Annotations.from_stack(demo.stack)
    assert annotations.find_error("*", Match.string_like_regexp("AwsSolutions-.*")) == []
    assert annotations.find_warning("*", Match.string_like_regexp("AwsSolutions-.*")) == []


# --- storage -------------------------------------------------------------------------------------------


def test_three_private_encrypted_buckets(demo: Synthesized) -> None:
    buckets = resources_of_type(demo, "AWS::S3::Bucket")
    assert len(buckets) == 3
    for bucket in buckets.values():
        props = bucket["Properties"]
        assert props["BucketEncryption"] == {
            "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
        }
        assert props["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True,
            "BlockPublicPolicy": True,
            "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True,
        }
        assert props["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
        assert bucket["DeletionPolicy"] == "Retain"
    names = ids(demo)
    # DMS advises against versioning its target; the lake's files can be restored after a wrong deletion.
    assert "VersioningConfiguration" not in buckets[names["raw"]]["Properties"]
    assert buckets[names["lake"]]["Properties"]["VersioningConfiguration"] == {"Status": "Enabled"}
    assert "VersioningConfiguration" not in buckets[names["logs"]]["Properties"]


def test_every_bucket_policy_denies_plain_http(demo: Synthesized) -> None:
    policies = resources_of_type(demo, "AWS::S3::BucketPolicy")
    assert len(policies) == 3
    for policy in policies.values():
        assert {
            "Action": "s3:*",
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            "Effect": "Deny",
            "Principal": {"AWS": "*"},
        }.items() <= next(
            s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"
        ).items()


def test_raw_and_lake_log_to_the_access_log_bucket_and_raw_files_expire(demo: Synthesized) -> None:
    names = ids(demo)
    raw = resources_of_type(demo, "AWS::S3::Bucket")[names["raw"]]["Properties"]
    assert raw["LoggingConfiguration"] == {"DestinationBucketName": {"Ref": names["logs"]}, "LogFilePrefix": "raw/"}
    # The scheduled maintenance removes applied files by the record (tests/infra/test_maintenance.py); the bucket
    # only expires what no table applied, long after (test_raw_bucket_expires_nothing_early_and_reads_no_tag).
    assert [r["Id"] for r in raw["LifecycleConfiguration"]["Rules"]] == ["expire-any-dms-file"]
    demo.template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "LoggingConfiguration": {"DestinationBucketName": {"Ref": names["logs"]}, "LogFilePrefix": "lake/"},
            "LifecycleConfiguration": {
                "Rules": Match.array_with(
                    [
                        Match.object_like({"Id": "expire-glue-temp", "Prefix": "tmp/glue/", "ExpirationInDays": 7}),
                        Match.object_like(
                            {
                                "Id": "expire-deleted-files",
                                "NoncurrentVersionExpiration": {"NoncurrentDays": 10},
                                "ExpiredObjectDeleteMarker": True,
                                "Status": "Enabled",
                            }
                        ),
                    ]
                )
            },
        },
    )


def test_raw_bucket_expires_nothing_early_and_reads_no_tag(demo: Synthesized) -> None:
    """One rule on the raw bucket, the catch-all: every landed file, applied or not, after rawUnappliedRetentionDays
    (365), whatever its tags, anywhere in the bucket; incomplete uploads after a day. No tag-filtered rule: an applied
    file is removed by the maintenance, by its table's record, after rawRetentionDays (30)."""
    raw = resources_of_type(demo, "AWS::S3::Bucket")[ids(demo)["raw"]]["Properties"]
    assert raw["LifecycleConfiguration"]["Rules"] == [
        {
            "Id": "expire-any-dms-file",
            "Status": "Enabled",
            "ExpirationInDays": 365,
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
        }
    ]
    assert "TagFilters" not in json.dumps(raw)


# --- DMS -----------------------------------------------------------------------------------------------


def test_s3_target_endpoint_matches_the_reader_configuration(demo: Synthesized) -> None:
    names = ids(demo)
    settings = Capture()
    demo.template.has_resource_properties(
        "AWS::DMS::Endpoint", {"EndpointType": "target", "EngineName": "s3", "S3Settings": settings}
    )
    assert settings.as_object() == {
        **DEMO_S3_SETTINGS_STATIC,
        "BucketName": {"Ref": names["raw"]},
        "ServiceAccessRoleArn": {"Fn::GetAtt": [names["target_role"], "Arn"]},
        "ExpectedBucketOwner": {"Ref": "AWS::AccountId"},
    }


def test_table_mappings_are_generated_from_the_table_configuration(demo: Synthesized) -> None:
    _id, task = only(resources_of_type(demo, "AWS::DMS::ReplicationTask"))
    props = task["Properties"]
    assert props["MigrationType"] == "full-load-and-cdc"
    assert json.loads(props["TableMappings"]) == {
        "rules": [
            {
                "rule-type": "selection",
                "rule-id": str(number),
                "rule-name": f"include-shop.{table}",
                "object-locator": {"schema-name": "shop", "table-name": locator},
                "rule-action": "include",
            }
            for number, (table, locator) in enumerate(
                [("customers", "customers"), ("orders", "orders"), ("order_items", "order[_]items")], start=1
            )
        ]
    }
    task_settings = json.loads(props["ReplicationTaskSettings"])
    assert task_settings["FullLoadSettings"]["TargetTablePrepMode"] == "DO_NOTHING"
    assert task_settings["TargetMetadata"]["BatchApplyEnabled"] is False
    assert task_settings["Logging"]["EnableLogging"] is True


def test_source_endpoint_uses_the_secret_and_checks_the_certificate(demo: Synthesized) -> None:
    demo.template.has_resource_properties(
        "AWS::DMS::Endpoint",
        {
            "EndpointType": "source",
            "EngineName": "mysql",
            "SslMode": "verify-full",
            "CertificateArn": {"Fn::GetAtt": [Match.string_like_regexp("SourceCa"), "CertificateArn"]},
            "MySqlSettings": {
                "SecretsManagerSecretId": SECRET_ARN,
                "SecretsManagerAccessRoleArn": {"Fn::GetAtt": [Match.string_like_regexp("SecretAccessRole"), "Arn"]},
            },
            "ServerName": Match.absent(),
            "Port": Match.absent(),
            "Username": Match.absent(),
            "Password": Match.absent(),
        },
    )
    # DMS's endpoint role and the source check's job role read the secret, and only it.
    secret_reads = [s for s in statements(demo) if "secretsmanager:GetSecretValue" in actions(s)]
    assert len(secret_reads) == 4  # and the drift and repair jobs' roles (no driftSecretArn in this context)
    assert [s["Resource"] for s in secret_reads] == [SECRET_ARN] * 4


def test_replication_instance_is_private_in_the_subnet_group(demo: Synthesized) -> None:
    demo.template.has_resource_properties(
        "AWS::DMS::ReplicationInstance",
        {
            "PubliclyAccessible": False,
            "ReplicationInstanceClass": "dms.t3.medium",
            "ReplicationSubnetGroupIdentifier": {"Ref": Match.string_like_regexp("DmsSubnetGroup")},
            "VpcSecurityGroupIds": [{"Fn::GetAtt": [ids(demo)["dms_sg"], "GroupId"]}],
        },
    )
    demo.template.has_resource_properties(
        "AWS::DMS::ReplicationSubnetGroup",
        {"SubnetIds": ["subnet-0123456789abcdef0", "subnet-0fedcba9876543210"]},
    )


def test_dms_service_roles_have_exact_names_and_come_first(demo: Synthesized) -> None:
    roles = resources_of_type(demo, "AWS::IAM::Role")
    by_name = {r["Properties"].get("RoleName"): (logical_id, r) for logical_id, r in roles.items()}
    vpc_id, vpc_role = by_name["dms-vpc-role"]
    logs_id, logs_role = by_name["dms-cloudwatch-logs-role"]
    this_account = {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}
    for role, policy, condition in (
        (vpc_role, "AmazonDMSVPCManagementRole", {"Condition": this_account}),
        (logs_role, "AmazonDMSCloudWatchLogsRole", {}),
    ):
        assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"] == [
            {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "dms.amazonaws.com"}, **condition}
        ]
        assert render(role["Properties"]["ManagedPolicyArns"]) == [
            f"arn:${{AWS::Partition}}:iam::aws:policy/service-role/{policy}"
        ]
    _id, subnet_group = only(resources_of_type(demo, "AWS::DMS::ReplicationSubnetGroup"))
    assert vpc_id in subnet_group["DependsOn"]
    _id, task = only(resources_of_type(demo, "AWS::DMS::ReplicationTask"))
    assert logs_id in task["DependsOn"]


def test_dms_target_role_is_limited_to_the_raw_bucket_folder(demo: Synthesized) -> None:
    names = ids(demo)
    role_statements = []
    for policy in resources_of_type(demo, "AWS::IAM::Policy").values():
        if {"Ref": names["target_role"]} in policy["Properties"]["Roles"]:
            role_statements.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    assert [(sorted(actions(s)), resources(s)) for s in role_statements] == [
        (["s3:DeleteObject", "s3:PutObject", "s3:PutObjectTagging"], [f"${{{names['raw']}.Arn}}/dms/*"]),
        (["s3:GetBucketLocation", "s3:ListBucket"], [f"${{{names['raw']}.Arn}}"]),
    ]


def test_dms_security_group_has_no_ingress_and_nothing_is_open_to_the_world(demo: Synthesized) -> None:
    names = ids(demo)
    groups = resources_of_type(demo, "AWS::EC2::SecurityGroup")
    assert set(groups) == {names["dms_sg"], names["source_check_sg"]}
    group = groups[names["dms_sg"]]
    assert "SecurityGroupIngress" not in group["Properties"]
    assert [(rule["FromPort"], rule["ToPort"]) for rule in group["Properties"]["SecurityGroupEgress"]] == [
        (443, 443),
        (3306, 3306),
    ]
    # The one ingress rule: the source check's Glue workers reach each other (Glue requires it), nobody else.
    _id, ingress = only(resources_of_type(demo, "AWS::EC2::SecurityGroupIngress"))
    own = {"Fn::GetAtt": [names["source_check_sg"], "GroupId"]}
    assert (ingress["Properties"]["GroupId"], ingress["Properties"]["SourceSecurityGroupId"]) == (own, own)
    assert "0.0.0.0/0" not in json.dumps(
        [
            g["Properties"].get("SecurityGroupIngress", [])
            for g in resources_of_type(demo, "AWS::EC2::SecurityGroup").values()
        ]
    )


# --- Glue ----------------------------------------------------------------------------------------------


def test_glue_jobs_run_glue_5_1_with_iceberg_on_the_glue_catalog(demo: Synthesized) -> None:
    names = ids(demo)
    lake = names["lake"]
    jobs = resources_of_type(demo, "AWS::Glue::Job")
    deployed = sorted(job["Properties"]["Name"] for job in jobs.values())
    assert deployed == sorted(f"cdclake-{name}" for job in NON_WARM_JOBS for name in job.resource_names)
    assert {"cdclake-full-load", "cdclake-cdc-replay", "cdclake-repair"} <= set(deployed)  # repair: drift's twin
    for job in jobs.values():
        props = job["Properties"]
        assert props["GlueVersion"] == "5.1"
        assert props["WorkerType"] == "G.1X"
        assert props["Command"]["Name"] == "glueetl"
        assert props["MaxRetries"] == 0
        # Runs beyond the cap wait in Glue's queue, but for the Flex jobs' (tests/infra/test_warm_stack.py).
        assert props["JobRunQueuingEnabled"] is (props.get("ExecutionClass") != "FLEX")
        assert props["SecurityConfiguration"] == {"Ref": names["security_configuration"]}
        arguments = render(props["DefaultArguments"])
        if props["Name"] == "cdclake-source-check":  # reads the source's catalog, never the lake
            assert "--conf" not in arguments and "--datalake-formats" not in arguments
            continue
        assert arguments["--datalake-formats"] == "iceberg"
        assert arguments["--conf"] == (
            "spark.sql.extensions=org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
            " --conf spark.sql.catalog.glue_catalog=org.apache.iceberg.spark.SparkCatalog"
            f" --conf spark.sql.catalog.glue_catalog.warehouse=s3://${{{lake}}}/warehouse/"
            " --conf spark.sql.catalog.glue_catalog.catalog-impl=org.apache.iceberg.aws.glue.GlueCatalog"
            " --conf spark.sql.catalog.glue_catalog.io-impl=cdclake.iceberg.WrittenMetadataFileIO"
            " --conf spark.sql.catalog.glue_catalog.cache-enabled=false"
            " --conf spark.sql.session.timeZone=UTC"
        )
        assert arguments["--catalog"] == "glue_catalog"
        assert arguments["--warehouse"] == f"s3://${{{lake}}}/warehouse/"
        assert arguments["--database"] == "shop_lake"
        assert arguments["--TempDir"] == f"s3://${{{lake}}}/tmp/glue/"
        assert arguments["--config_uri"].startswith("s3://cdk-") and arguments["--config_uri"].endswith(".json")
        assert arguments["--extra-py-files"].startswith("s3://cdk-") and arguments["--extra-py-files"].endswith(".zip")
        assert arguments["--extra-jars"].startswith("s3://cdk-") and arguments["--extra-jars"].endswith(".jar")
        wheels = [url.rsplit("/", 1)[1] for url in arguments["--additional-python-modules"].split(",")]
        group = "mysql" if props["Name"] in ("cdclake-drift", "cdclake-repair") else "lake"  # the source's driver too
        assert wheels == [w.name for w in job_wheels("5.1", group)]  # tests/infra/test_job_wheels.py
        assert arguments["--python-modules-installer-option"] == "--no-index"
        for flag in ("--enable-metrics", "--enable-glue-datacatalog"):
            assert arguments[flag] == "true"
        assert "--enable-continuous-cloudwatch-log" not in arguments  # Glue 4.0's, deprecated since 5.0
        assert arguments["--job-language"] == "python"
        # Per-run arguments are the Lambda's (or an operator's) to pass; a default would hide a missing one
        # (and a default --table would limit maintenance to one table). The jobs the Lambda does not start may
        # default the raw bucket (maintenance reads it to reload, drift to re-check), as there is only one.
        [facts] = [job for job in GLUE_JOBS.values() if props["Name"].removeprefix("cdclake-") in job.resource_names]
        per_run = {"--bucket", "--key", "--table"} if facts.triggered else {"--key", "--table"}
        assert not per_run & arguments.keys()
    full_load = jobs[names["full_load"]]["Properties"]
    cdc_replay = jobs[names["cdc_replay"]]["Properties"]
    assert (full_load["NumberOfWorkers"], full_load["Timeout"]) == (10, 480)
    # runs.mode coalesced (the default): one run at a time, a timeout beyond the 900 s budget (test_runs.py).
    assert (cdc_replay["NumberOfWorkers"], cdc_replay["Timeout"]) == (2, 75)
    for props in (full_load, cdc_replay):
        assert props["ExecutionProperty"] == {"MaxConcurrentRuns": 1}
    scripts = [job["Properties"]["Command"]["ScriptLocation"] for job in jobs.values()]
    assert len(set(map(str, scripts))) == len(NON_WARM_JOBS)


def test_glue_security_configuration_encrypts_logs_and_bookmarks(demo: Synthesized) -> None:
    key = {"Fn::GetAtt": [ids(demo)["key"], "Arn"]}
    demo.template.has_resource_properties(
        "AWS::Glue::SecurityConfiguration",
        {
            "EncryptionConfiguration": {
                "CloudWatchEncryption": {"CloudWatchEncryptionMode": "SSE-KMS", "KmsKeyArn": key},
                "JobBookmarksEncryption": {"JobBookmarksEncryptionMode": "CSE-KMS", "KmsKeyArn": key},
                "S3Encryptions": [{"S3EncryptionMode": "SSE-S3"}],
            }
        },
    )
    demo.template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})


def test_glue_database_is_the_configured_one(demo: Synthesized) -> None:
    _id, database = only(resources_of_type(demo, "AWS::Glue::Database"))
    assert database["DeletionPolicy"] == "Retain"
    assert database["Properties"]["DatabaseInput"]["Name"] == "shop_lake"
    assert render(database["Properties"]["DatabaseInput"]["LocationUri"]) == (
        f"s3://${{{ids(demo)['lake']}}}/warehouse/shop_lake.db"
    )


def test_glue_role_is_limited_to_the_buckets_database_and_tables(demo: Synthesized) -> None:
    names = ids(demo)
    policy = demo.template.find_resources(
        "AWS::IAM::Policy", {"Properties": {"PolicyName": Match.string_like_regexp("GlueJobPolicy")}}
    )
    _id, glue_policy = only(policy)
    by_sid = {s["Sid"]: s for s in glue_policy["Properties"]["PolicyDocument"]["Statement"]}
    assert resources(by_sid["ReadDmsFiles"]) == [f"${{{names['raw']}.Arn}}/dms/*"]
    # The jobs never change, tag or delete a landed file: only the maintenance job's own role deletes those applied
    # (tests/infra/test_maintenance.py).
    assert actions(by_sid["ReadDmsFiles"]) == ["s3:GetObject"]
    # What the maintenance removed of a lake table's landed files, read on the table's first batch.
    assert actions(by_sid["ReadExpiryMarks"]) == ["s3:GetObject"]
    assert resources(by_sid["ReadExpiryMarks"]) == [f"${{{names['raw']}.Arn}}/{EXPIRED_MARK_PREFIX}*"]
    assert sorted(resources(by_sid["WriteWarehouseAndTemp"])) == [
        f"${{{names['lake']}.Arn}}/tmp/glue/*",
        f"${{{names['lake']}.Arn}}/warehouse/*",
    ]
    assert sorted(resources(by_sid["LakeCatalog"])) == [
        "arn:${AWS::Partition}:glue:${AWS::Region}:${AWS::AccountId}:catalog",
        "arn:${AWS::Partition}:glue:${AWS::Region}:${AWS::AccountId}:database/shop_lake",
        "arn:${AWS::Partition}:glue:${AWS::Region}:${AWS::AccountId}:table/shop_lake/*",
    ]
    assert sorted(actions(by_sid["LakeCatalog"])) == [
        "glue:CreateTable",
        "glue:GetDatabase",
        "glue:GetTable",
        "glue:GetTables",
        "glue:UpdateTable",
    ]
    assert all(not resource.endswith(":*") for resource in resources(by_sid["ReadJobAssets"]))
    jars = {
        render(job["Properties"]["DefaultArguments"]).get("--extra-jars")
        for job in resources_of_type(demo, "AWS::Glue::Job").values()
    }
    (jar,) = jars - {None}  # the lake's FileIO, one asset for every lake job, which Glue fetches as the job's role
    assert any(resource.endswith("/" + jar.rsplit("/", 1)[1]) for resource in resources(by_sid["ReadJobAssets"]))
    assert by_sid["JobMetrics"]["Condition"] == {"StringEquals": {"cloudwatch:namespace": "Glue"}}


def test_no_glue_job_reads_or_writes_object_tags(demo: Synthesized) -> None:
    """Landed files are removed by the record, not by a tag: no job's role may tag an object or read its tags, and
    the one grant of object tagging left is DMS's own on its target folder (AWS asks it of an S3 target)."""
    raw = ids(demo)["raw"]
    objects = (
        f"${{{raw}.Arn}}/dms/shop/orders/LOAD00000001.csv",
        f"${{{raw}.Arn}}/{EXPIRED_MARK_PREFIX}dms/shop/orders/expired.json",
    )
    for job, job_statements in job_role_statements(demo).items():
        for action in ("s3:PutObjectTagging", "s3:GetObjectTagging", "s3:DeleteObjectTagging"):
            for stored in objects:
                assert not allows(job_statements, action, stored), (job, action, stored)
    tagging = [s for s in statements(demo) if any("Tagging" in action for action in actions(s))]
    assert [(sorted(actions(s)), resources(s)) for s in tagging] == [
        (["s3:DeleteObject", "s3:PutObject", "s3:PutObjectTagging"], [f"${{{raw}.Arn}}/dms/*"])
    ]


def test_no_policy_grants_a_service_wide_action(demo: Synthesized) -> None:
    for statement in statements(demo):
        for action in actions(statement):
            assert not action.endswith(":*") and action != "*", statement


# --- trigger -------------------------------------------------------------------------------------------


def test_raw_bucket_notifies_the_trigger_for_new_objects_under_the_dms_folder(demo: Synthesized) -> None:
    names = ids(demo)
    demo.template.has_resource_properties(
        "Custom::S3BucketNotifications",
        {
            "BucketName": {"Ref": names["raw"]},
            "NotificationConfiguration": {
                "LambdaFunctionConfigurations": [
                    {
                        "Events": ["s3:ObjectCreated:*"],
                        "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "dms/"}]}},
                        "LambdaFunctionArn": {"Fn::GetAtt": [names["function"], "Arn"]},
                    }
                ]
            },
        },
    )


def test_trigger_function_runtime_layer_and_environment(demo: Synthesized) -> None:
    names = ids(demo)
    _id, function = only(
        demo.template.find_resources(
            "AWS::Lambda::Function", {"Properties": {"Handler": "dms_trigger.handler.lambda_handler"}}
        )
    )
    props = function["Properties"]
    assert props["Runtime"] == "python3.14"
    assert props["Architectures"] == ["arm64"]
    assert props["ReservedConcurrentExecutions"] == 10  # a burst of files cannot starve the account's others
    assert render(props["Layers"]) == [
        "arn:${AWS::Partition}:lambda:${AWS::Region}:017000801446:layer:AWSLambdaPowertoolsPythonV3-python314-arm64:38"
    ]
    assert props["Environment"]["Variables"] == {
        "CDC_LAKE_CONFIG": "tables.json",
        "FULL_LOAD_JOB_NAME": {"Ref": names["full_load"]},
        "CDC_REPLAY_JOB_NAME": {"Ref": names["cdc_replay"]},
        "POWERTOOLS_SERVICE_NAME": "cdc-lake-trigger",
        "POWERTOOLS_METRICS_NAMESPACE": "CdcLake",
    }
    demo.template.has_resource_properties(
        "AWS::Lambda::EventInvokeConfig",
        {
            "FunctionName": {"Ref": names["function"]},
            "MaximumRetryAttempts": 2,
            "MaximumEventAgeInSeconds": 7200,
            "DestinationConfig": {"OnFailure": {"Destination": {"Fn::GetAtt": [names["queue"], "Arn"]}}},
        },
    )


def test_start_job_run_is_granted_on_exactly_the_two_jobs(demo: Synthesized) -> None:
    names = ids(demo)
    grants = [s for s in statements(demo) if any(a.startswith("glue:StartJobRun") for a in actions(s))]
    assert len(grants) == 1
    assert sorted(actions(grants[0])) == ["glue:GetJobRuns", "glue:StartJobRun"]  # coalesced: see test_runs.py
    assert sorted(resources(grants[0])) == sorted(
        f"arn:${{AWS::Partition}}:glue:${{AWS::Region}}:${{AWS::AccountId}}:job/${{{names[job]}}}"
        for job in ("full_load", "cdc_replay")
    )


def test_failure_queue_is_encrypted_and_tls_only(demo: Synthesized) -> None:
    names = ids(demo)
    demo.template.has_resource_properties(
        "AWS::SQS::Queue", {"SqsManagedSseEnabled": True, "MessageRetentionPeriod": 1209600}
    )
    demo.template.has_resource_properties(
        "AWS::SQS::QueuePolicy",
        {
            "Queues": [{"Ref": names["queue"]}],
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})]
                )
            },
        },
    )


# --- monitoring ----------------------------------------------------------------------------------------


def test_alarms_on_failure_queue_depth_and_lambda_errors_notify_the_topic(demo: Synthesized) -> None:
    names = ids(demo)
    alarms = resources_of_type(demo, "AWS::CloudWatch::Alarm")
    assert len(alarms) == 9  # and seven on the pipeline's own metrics (test_runs.py, test_source_check.py)
    by_metric = {a["Properties"]["MetricName"]: a["Properties"] for a in alarms.values()}
    queue_alarm = by_metric["ApproximateNumberOfMessagesVisible"]
    assert queue_alarm["Namespace"] == "AWS/SQS"
    assert queue_alarm["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [names["queue"], "QueueName"]}}]
    errors_alarm = by_metric["Errors"]
    assert errors_alarm["Namespace"] == "AWS/Lambda"
    assert errors_alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": names["function"]}}]
    for alarm in (queue_alarm, errors_alarm):
        assert alarm["Threshold"] == 1
        assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
        assert alarm["AlarmActions"] == [{"Ref": names["topic"]}]


def test_failed_glue_runs_of_every_job_go_to_the_encrypted_topic(demo: Synthesized) -> None:
    names = ids(demo)
    watched = Capture()
    demo.template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": {
                "source": ["aws.glue"],
                "detail-type": ["Glue Job State Change"],
                "detail": {
                    "jobName": watched,
                    "state": ["FAILED", "TIMEOUT", "ERROR"],
                },
            },
            "Targets": [Match.object_like({"Arn": {"Ref": names["topic"]}})],
        },
    )
    # Every job of the table; not the twins (repair), which run only when an operator starts them.
    twins = {f"cdclake-{twin}" for job in GLUE_JOBS.values() for twin in job.twins}
    jobs = resources_of_type(demo, "AWS::Glue::Job")
    assert sorted(ref["Ref"] for ref in watched.as_array()) == sorted(
        logical_id for logical_id, job in jobs.items() if job["Properties"]["Name"] not in twins
    )
    assert {names[job] for job in ("full_load", "cdc_replay", "maintenance", "source_check", "drift")} <= {
        ref["Ref"] for ref in watched.as_array()
    }
    demo.template.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": {"Fn::GetAtt": [names["key"], "Arn"]}})
    demo.template.has_resource_properties(
        "AWS::SNS::TopicPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})]
                )
            }
        },
    )
    assert resources_of_type(demo, "AWS::SNS::Subscription") == {}  # no alarmEmail given


def test_outputs_name_what_operators_need(demo: Synthesized) -> None:
    names = ids(demo)
    outputs = demo.json["Outputs"]
    assert {
        "RawBucketName",
        "LakeBucketName",
        "AccessLogBucketName",
        "FullLoadJobName",
        "CdcReplayJobName",
        "MaintenanceJobName",
        "DatabaseName",
        "FailureQueueArn",
        "AlarmTopicArn",
        "DashboardName",
        "ReplicationTaskArn",
        "TableConfigUri",
    } <= outputs.keys()
    assert outputs["RawBucketName"]["Value"] == {"Ref": names["raw"]}
    assert outputs["FullLoadJobName"]["Value"] == {"Ref": names["full_load"]}
    assert outputs["MaintenanceJobName"]["Value"] == {"Ref": names["maintenance"]}
    assert outputs["DatabaseName"]["Value"] == "shop_lake"
    assert outputs["FailureQueueArn"]["Value"] == {"Fn::GetAtt": [names["queue"], "Arn"]}
    assert outputs["AlarmTopicArn"]["Value"] == {"Ref": names["topic"]}


def test_dashboard_draws_the_pipeline_from_the_metrics_it_alarms_on(demo: Synthesized) -> None:
    _, dashboard = only(resources_of_type(demo, "AWS::CloudWatch::Dashboard"))
    assert dashboard["Properties"]["DashboardName"] == "cdc-lake-shop_lake"
    body = json.loads(render(dashboard["Properties"]["DashboardBody"]))
    widgets = {w["properties"]["title"]: w["properties"] for w in body["widgets"]}
    assert list(widgets) == [
        "Lag (seconds)",
        "Applied",
        "Batch seconds (plan to commit)",
        "Refused and announced",
        "Job runs and trigger",
        "Alarms",
    ]

    def metric_names(title: str) -> list[str]:
        return [m[1] for m in widgets[title]["metrics"]]

    assert metric_names("Lag (seconds)") == [LANDED_LAG_METRIC, CHANGE_LAG_METRIC]
    assert all(m[:4] == [METRICS_NAMESPACE, LANDED_LAG_METRIC, PIPELINE_DIMENSION, "shop_lake"]
               for m in widgets["Lag (seconds)"]["metrics"][:1])  # fmt: skip
    assert widgets["Lag (seconds)"]["annotations"]["horizontal"][0]["value"] == 900  # runs.lag_alarm_seconds
    assert metric_names("Applied") == [FILES_APPLIED_METRIC, ROWS_APPLIED_METRIC, BYTES_APPLIED_METRIC]
    assert metric_names("Batch seconds (plan to commit)") == [BATCH_SECONDS_METRIC, BATCH_SECONDS_METRIC]
    assert metric_names("Refused and announced") == [
        TABLE_FAILURES_METRIC,
        INPUT_NOTICES_METRIC,
        UNKNOWN_TABLE_OBJECTS_METRIC,
    ]
    assert metric_names("Job runs and trigger") == ["TriggeredRules", "Errors", "ApproximateNumberOfMessagesVisible"]
    alarms = resources_of_type(demo, "AWS::CloudWatch::Alarm")
    assert len(widgets["Alarms"]["alarms"]) == len(alarms) == 9


def test_service_principals_act_for_this_account_only(demo: Synthesized) -> None:
    """Every service trusted by a role or the key is held to this account (and CloudWatch to its alarms), except
    where AWS documents that the service's requests carry no source (EventBridge to KMS) or a condition has broken
    the service (DMS's CloudWatch logs role)."""
    exempt = {("events.amazonaws.com", "kms"), ("dms.amazonaws.com", "dms-cloudwatch-logs-role")}
    trusted: list[tuple[str, str, dict[str, Any]]] = []
    for logical_id, role in resources_of_type(demo, "AWS::IAM::Role").items():
        name = str(role["Properties"].get("RoleName", logical_id))
        for statement in role["Properties"]["AssumeRolePolicyDocument"]["Statement"]:
            for service in _services(statement):
                trusted.append((service, name, statement.get("Condition", {})))
    for key in resources_of_type(demo, "AWS::KMS::Key").values():
        for statement in key["Properties"]["KeyPolicy"]["Statement"]:
            for service in _services(statement):
                trusted.append((service, "kms", statement.get("Condition", {})))
    unconditioned = [
        (service, where)
        for service, where, condition in trusted
        if service.split(".")[0] in ("dms", "cloudwatch", "events")
        and (service, where) not in exempt
        and render(condition.get("StringEquals", {}).get("aws:SourceAccount")) != "${AWS::AccountId}"
        and not service.startswith("logs.")
    ]
    assert not unconditioned, unconditioned
    assert any(s == "cloudwatch.amazonaws.com" for s, _, _ in trusted)
    kms_cloudwatch = next(c for s, w, c in trusted if s == "cloudwatch.amazonaws.com" and w == "kms")
    assert render(kms_cloudwatch["ArnLike"]["aws:SourceArn"]) == (
        "arn:${AWS::Partition}:cloudwatch:${AWS::Region}:${AWS::AccountId}:alarm:*"
    )


def _services(statement: dict[str, Any]) -> list[str]:
    principal = statement.get("Principal", {})
    service = principal.get("Service", []) if isinstance(principal, dict) else []
    return [render(s) for s in (service if isinstance(service, list) else [service])]
