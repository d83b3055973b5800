"""The whole pipeline in one stack: storage, DMS, Glue, the trigger and monitoring, wired together."""

from __future__ import annotations

from typing import Any

from aws_cdk import Aws, CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from cdk_nag import NagSuppressions
from constructs import Construct

from cdc_lake.core.config import PipelineConfig
from infra.dms import DmsReplication
from infra.glue import GlueJobs
from infra.monitoring import Monitoring
from infra.packaging import PipelineAssets
from infra.settings import DeploySettings
from infra.storage import Storage
from infra.trigger import DmsTrigger


class PipelineStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: DeploySettings,
        config: PipelineConfig,
        assets: PipelineAssets,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            description="cdc-lake: DMS full load + CDC into S3, replayed by Glue into Iceberg tables",
            **kwargs,
        )
        self.settings = settings
        self.config = config
        prefix = settings.resource_prefix

        self.key = self._key()
        self.storage = Storage(self, "Storage", raw_retention_days=settings.raw_retention_days)
        self.dms = DmsReplication(self, "Dms", settings=settings, config=config, raw_bucket=self.storage.raw)
        self.glue = GlueJobs(
            self,
            "Glue",
            config=config,
            storage=self.storage,
            assets=assets,
            key=self.key,
            name_prefix=prefix,
            maintenance_schedule=settings.maintenance_schedule if settings.maintenance_enabled else None,
        )
        folder = config.dms.bucket_folder
        self.trigger = DmsTrigger(
            self,
            "Trigger",
            code_dir=str(assets.lambda_dir),
            raw_bucket=self.storage.raw,
            key_prefix=f"{folder}/" if folder else "",
            full_load_job=self.glue.full_load.ref,
            cdc_replay_job=self.glue.cdc_replay.ref,
            powertools_layer_version=settings.powertools_layer_version,
            coalesced=config.runs.coalesced,
        )
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            key=self.key,
            job_names=[job.ref for job in self.glue.jobs],
            failure_queue=self.trigger.failure_queue,
            function=self.trigger.function,
            alarm_email=settings.alarm_email,
            config=config,
        )
        self._outputs()
        self._acknowledge_cdk_internals()

    def _key(self) -> kms.Key:
        """One customer-managed key for the alarm topic and the Glue logs/bookmarks (AWS-managed keys
        cannot be used by CloudWatch alarms, EventBridge or CloudWatch Logs)."""
        key = kms.Key(
            self,
            "PipelineKey",
            description="cdc-lake: alarm topic, Glue job logs and bookmarks",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.RETAIN,
            pending_window=Duration.days(30),
        )
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AlarmAndEventPublishers",
                principals=[
                    iam.ServicePrincipal("cloudwatch.amazonaws.com"),
                    iam.ServicePrincipal("events.amazonaws.com"),
                ],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
            )
        )
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="GlueJobLogGroups",
                principals=[iam.ServicePrincipal(f"logs.{Aws.REGION}.amazonaws.com")],
                actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
                resources=["*"],
                conditions={
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": (
                            f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:log-group:/aws-glue/*"
                        )
                    }
                },
            )
        )
        return key

    def _outputs(self) -> None:
        replication = self.dms.replication
        outputs = {
            "RawBucketName": (self.storage.raw.bucket_name, "DMS target bucket (raw CSV/Parquet files)"),
            "LakeBucketName": (self.storage.lake.bucket_name, "Iceberg warehouse bucket"),
            "AccessLogBucketName": (self.storage.access_logs.bucket_name, "S3 server access logs"),
            "FullLoadJobName": (self.glue.full_load.ref, "Glue job applying full-load files"),
            "CdcReplayJobName": (self.glue.cdc_replay.ref, "Glue job replaying CDC files"),
            "MaintenanceJobName": (self.glue.maintenance.ref, "Glue job compacting and expiring the lake tables"),
            "DatabaseName": (self.glue.database_name, "Glue database of the lake tables"),
            "TableConfigUri": (self.glue.config_asset.s3_object_url, "Table configuration (--config_uri)"),
            "FailureQueueArn": (self.trigger.failure_queue.queue_arn, "Trigger Lambda on-failure queue"),
            "FailureQueueUrl": (self.trigger.failure_queue.queue_url, "Trigger Lambda on-failure queue URL"),
            "AlarmTopicArn": (self.monitoring.topic.topic_arn, "SNS topic for alarms and failed job runs"),
            "TriggerFunctionName": (self.trigger.function.function_name, "Trigger Lambda"),
            "DmsSecurityGroupId": (self.dms.security_group.security_group_id, "Allow it on the source database"),
            ("ReplicationConfigArn" if self.settings.dms_mode == "serverless" else "ReplicationTaskArn"): (
                replication.ref,
                "Start this to begin the full load and CDC",
            ),
        }
        for name, (value, description) in outputs.items():
            CfnOutput(self, name, value=value, description=description)

    def _acknowledge_cdk_internals(self) -> None:
        """Findings on resources CDK itself adds for the S3 -> Lambda notification."""
        handler_path = f"/{self.stack_name}/BucketNotificationsHandler050a0587b7544547bf325f094a3db834/Role"
        NagSuppressions.add_resource_suppressions_by_path(
            self,
            handler_path,
            [
                {
                    "id": "AwsSolutions-IAM4",
                    "reason": "CDK's bucket-notification custom resource (run only at deploy time) uses "
                    "AWSLambdaBasicExecutionRole for its own logs; the construct does not expose its role.",
                    "appliesTo": [
                        "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
                    ],
                },
            ],
            apply_to_children=True,
        )
