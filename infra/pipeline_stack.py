"""The whole pipeline in one stack: storage, DMS, Glue, the trigger and monitoring, wired together."""

from __future__ import annotations

from typing import Any

from aws_cdk import Aws, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from cdk_nag import NagSuppressions
from constructs import Construct

from infra.deployment import Deployment
from infra.dms import DmsReplication
from infra.glue import GlueJobs
from infra.log_groups import key_log_group_arns
from infra.monitoring import Monitoring, Watched
from infra.source_check import source_check
from infra.storage import Storage
from infra.trigger import DmsTrigger


class PipelineStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, deployment: Deployment, **kwargs: Any) -> None:
        description = "cdc-lake: DMS full load + CDC into S3, replayed by Glue into Iceberg tables"
        super().__init__(scope, construct_id, description=description, **kwargs)
        self.settings = deployment.settings
        self.config = deployment.config

        self.key = self._key()
        self.storage = Storage(
            self,
            "Storage",
            raw_unapplied_retention_days=self.settings.raw_unapplied_retention_days,
            lake_noncurrent_days=self.settings.lake_noncurrent_days,
        )
        self.dms = DmsReplication(self, "Dms", deployment=deployment, raw_bucket=self.storage.raw, key=self.key)
        self.glue = GlueJobs(self, "Glue", deployment=deployment, storage=self.storage, key=self.key)
        self.trigger = DmsTrigger(
            self, "Trigger", deployment=deployment, raw_bucket=self.storage.raw, jobs=self.glue, key=self.key
        )
        self.source_check = source_check(self, "SourceCheck", deployment=deployment, jobs=self.glue)
        jobs = list(self.glue.jobs)
        if self.source_check:
            jobs += [self.source_check.job, self.source_check.drift_job]
        watched = Watched(
            [job.ref for job in jobs], self.trigger.failure_queue, self.trigger.function, bool(self.source_check)
        )
        self.monitoring = Monitoring(self, "Monitoring", deployment=deployment, key=self.key, watched=watched)
        self._acknowledge_cdk_internals()

    def _key(self) -> kms.Key:
        """One customer-managed key for the alarm topic, the pipeline's log groups and the Glue bookmarks
        (AWS-managed keys cannot be used by CloudWatch alarms, EventBridge or CloudWatch Logs)."""
        key = kms.Key(
            self,
            "PipelineKey",
            description="cdc-lake: alarm topic, log groups (Glue, DMS, trigger) and Glue bookmarks",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.RETAIN,
            pending_window=Duration.days(30),
        )
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AlarmPublishers",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
                conditions={
                    "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                    "ArnLike": {
                        "aws:SourceArn": f"arn:{Aws.PARTITION}:cloudwatch:{Aws.REGION}:{Aws.ACCOUNT_ID}:alarm:*"
                    },
                },
            )
        )
        # No aws:SourceAccount/SourceArn here: EventBridge's requests to KMS carry neither, and SNS's guide says
        # they are not supported for EventBridge-to-encrypted-topic (a condition would drop every notification).
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="GlueFailureEvents",
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
            )
        )
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="PipelineLogGroups",
                principals=[iam.ServicePrincipal(f"logs.{Aws.REGION}.amazonaws.com")],
                actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
                resources=["*"],
                conditions={"ArnLike": {"kms:EncryptionContext:aws:logs:arn": key_log_group_arns(self.settings)}},
            )
        )
        return key

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
