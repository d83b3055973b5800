"""The trigger: a small Lambda that turns each new DMS file in the raw bucket into a Glue job run."""

from __future__ import annotations

from aws_cdk import Aws, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_notifications as s3n
from aws_cdk import aws_sqs as sqs
from cdk_nag import NagSuppressions
from constructs import Construct

from cdc_lake.core.names import TRIGGER_SERVICE_NAME, WARM_MARKER_PREFIX, WARM_QUEUES_ENV
from cdc_lake.core.run_modes import Starts
from infra.deployment import Deployment, stack_output
from infra.glue import MARKER_OBJECTS_FINDING, GlueJobs
from infra.log_groups import log_group, trigger_log_group
from infra.packaging import CONFIG_FILE_NAME, LAMBDA_HANDLER

RUNTIME = lambda_.Runtime.PYTHON_3_14
ARCHITECTURE = lambda_.Architecture.ARM_64
# AWS-managed Powertools for AWS Lambda (Python) v3 layer; it is built with the [all] extras, so it
# carries pydantic 2 as well. One layer per Python version and architecture.
POWERTOOLS_LAYER_ACCOUNT = "017000801446"
POWERTOOLS_SERVICE_NAME = TRIGGER_SERVICE_NAME
METRICS_NAMESPACE = "CdcLake"
MAX_RETRY_ATTEMPTS = 2
MAX_EVENT_AGE = Duration.hours(2)

# Environment variable names the handler reads (see lambda/dms_trigger).
ENV_CONFIG = "CDC_LAKE_CONFIG"
ENV_FULL_LOAD_JOB = "FULL_LOAD_JOB_NAME"
ENV_CDC_REPLAY_JOB = "CDC_REPLAY_JOB_NAME"
ENV_WARM_JOB = "CDC_WARM_JOB_NAME"  # runs.mode warm only

# cdk-nag's acknowledgment of the function's one wildcard: the warm runs' markers and holds it reads by key.
MARKER_READ_REASONS = [
    {
        "id": "AwsSolutions-IAM5",
        "reason": f"The function reads a running warm run's stop marker and hold, named by shard, run id and "
        f"configuration, under {WARM_MARKER_PREFIX} of the raw bucket (HeadObject), and nothing else in it.",
        "appliesTo": [MARKER_OBJECTS_FINDING],
    }
]


def powertools_layer_arn(version: int, runtime: lambda_.Runtime = RUNTIME) -> str:
    python = runtime.name.replace(".", "")  # python3.14 -> python314
    arch = ARCHITECTURE.name  # "arm64" or "x86_64", as in the layer names
    return (
        f"arn:{Aws.PARTITION}:lambda:{Aws.REGION}:{POWERTOOLS_LAYER_ACCOUNT}:layer:"
        f"AWSLambdaPowertoolsPythonV3-{python}-{arch}:{version}"
    )


class DmsTrigger(Construct):
    """Function, its on-failure queue and the raw bucket's OBJECT_CREATED notification."""

    def __init__(  # noqa: PLR0913 - the stack's pieces it wires together, all keyword
        self,
        scope: Construct,
        construct_id: str,
        *,
        deployment: Deployment,
        raw_bucket: s3.IBucket,
        jobs: GlueJobs,
        key: kms.IKey,
    ) -> None:
        """Runs ``jobs``' full-load and CDC jobs for the files that land in ``raw_bucket`` (in runs.mode warm, the warm
        job's run of the file's shard for CDC files)."""
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        folder = deployment.config.dms.bucket_folder
        key_prefix = f"{folder}/" if folder else ""
        full_load_job, cdc_replay_job = jobs.full_load.ref, jobs.cdc_replay.ref
        # Coalesced runs: the function looks at the jobs' recent runs (glue:GetJobRuns) before it starts one.
        coalesced = deployment.config.runs.run_mode.starts is Starts.UNLESS_WAITING
        warm_job = jobs.warm  # runs.mode warm: CDC files start their shard's warm run instead

        self.failure_queue = sqs.Queue(
            self,
            "FailureQueue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        NagSuppressions.add_resource_suppressions(
            self.failure_queue,
            [
                {
                    "id": "AwsSolutions-SQS3",
                    "reason": "This queue is itself the dead-letter (on-failure) destination of the trigger "
                    "Lambda; nothing consumes it automatically, its depth is alarmed and an operator inspects it.",
                }
            ],
        )
        self.log_group = log_group(self, "LogGroup", trigger_log_group(deployment.settings), deployment.settings, key)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="cdc-lake trigger: write its logs and start the two Glue jobs",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[self.log_group.log_group_arn]
            )
        )
        job_actions = ["glue:StartJobRun"]
        if coalesced:
            # A run still WAITING or STARTING will list the bucket after the new file landed, so the
            # function starts no other: it reads the recent runs of the two jobs it may start, and no others.
            job_actions.append("glue:GetJobRuns")
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=job_actions,
                resources=[
                    stack.format_arn(service="glue", resource="job", resource_name=name)
                    for name in (full_load_job, cdc_replay_job)
                ],
            )
        )
        environment = {
            ENV_CONFIG: CONFIG_FILE_NAME,
            ENV_FULL_LOAD_JOB: full_load_job,
            ENV_CDC_REPLAY_JOB: cdc_replay_job,
        }
        if warm_job is not None:
            environment[ENV_WARM_JOB] = warm_job.ref
            self.role.add_to_policy(
                iam.PolicyStatement(
                    sid="StartWarmRuns",
                    # It starts the shard's run unless one is live, which it reads from the job's recent runs.
                    actions=["glue:StartJobRun", "glue:GetJobRuns"],
                    resources=[jobs.job_arn(warm_job)],
                )
            )
            self.role.add_to_policy(
                iam.PolicyStatement(
                    sid="ReadWarmRunMarkers",
                    # A RUNNING warm run may be stopping, or hold its shard for another configuration: the function
                    # reads its marker and hold under WARM_MARKER_PREFIX<shard>/ by key (HeadObject). Without
                    # s3:ListBucket a missing key answers 403, which the function reads as absent.
                    actions=["s3:GetObject"],
                    resources=[raw_bucket.arn_for_objects(f"{WARM_MARKER_PREFIX}*")],
                )
            )
            NagSuppressions.add_resource_suppressions(self.role, MARKER_READ_REASONS, apply_to_children=True)
            if jobs.warm_events is not None:
                # Each CDC file is told to its shard's queue: a live warm run lists only the tables told, and all of
                # them now and then.
                environment[WARM_QUEUES_ENV] = jobs.warm_events.urls
                self.role.add_to_policy(jobs.warm_events.send_statement())

        layer = lambda_.LayerVersion.from_layer_version_arn(
            self, "PowertoolsLayer", powertools_layer_arn(deployment.settings.powertools_layer_version)
        )
        self.function = lambda_.Function(
            self,
            "Function",
            description="Starts the cdc-lake Glue job for each new DMS file in the raw bucket",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=LAMBDA_HANDLER,
            code=lambda_.Code.from_asset(str(deployment.assets.lambda_dir)),
            layers=[layer],
            role=self.role,
            log_group=self.log_group,
            memory_size=256,
            timeout=Duration.seconds(60),
            # A burst of DMS files cannot take the account's concurrency from other functions; an event over the
            # limit is throttled and retried by Lambda within max_event_age. 0: none (accounts with a reduced limit).
            reserved_concurrent_executions=deployment.settings.trigger_reserved_concurrency or None,
            environment={
                **environment,
                "POWERTOOLS_SERVICE_NAME": POWERTOOLS_SERVICE_NAME,
                "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
            },
            retry_attempts=MAX_RETRY_ATTEMPTS,
            max_event_age=MAX_EVENT_AGE,
            on_failure=destinations.SqsDestination(self.failure_queue),
        )

        filters = [s3.NotificationKeyFilter(prefix=key_prefix)] if key_prefix else []
        raw_bucket.add_event_notification(s3.EventType.OBJECT_CREATED, s3n.LambdaDestination(self.function), *filters)
        stack_output(self, "FailureQueueArn", self.failure_queue.queue_arn, "Trigger Lambda on-failure queue")
        stack_output(self, "FailureQueueUrl", self.failure_queue.queue_url, "Trigger Lambda on-failure queue URL")
        stack_output(self, "TriggerFunctionName", self.function.function_name, "Trigger Lambda")
