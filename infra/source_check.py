"""The source's network for Glue, and the two jobs that use it: the source check, which compares the table
configuration with the source's catalog on a schedule (``cdc_lake.jobs.source_check``), and the drift job, which
verifies the lake tables against the source, or repairs them (``cdc_lake.jobs.drift``).

Only these jobs run in the VPC, so the lake jobs keep reaching S3 and the catalog as before. The source check
has a role of its own: it reads the DMS source endpoint's secret and its assets, and puts one metric; it
cannot touch the raw files or the lake. The drift job's role has the lake jobs' policy, and the secret.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Annotations, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from cdk_nag import NagSuppressions
from constructs import Construct

from cdc_lake.core.job_arguments import DriftArguments, SourceArguments, declared_flags
from cdc_lake.core.names import METRICS_NAMESPACE
from infra.deployment import Deployment, stack_output
from infra.dms import outbound_group, reach_source
from infra.glue import (
    FLEX_JOBS,
    GlueJobs,
    JobDefinition,
    JobSizing,
    Schedule,
    glue_role,
    job_log_statements,
    read_assets_statement,
    scheduled_trigger,
)
from infra.settings import DRIFT_SECRET_ARN, SOURCE_SECRET_ARN, DeploySettings
from infra.storage import Storage

SCHEDULED_ARGUMENTS: dict[str, str] = {}  # the job's defaults say everything
# The tag key Glue puts on the network interfaces it makes for a job in a VPC (AWS's AWSGlueServiceRole policy).
GLUE_INTERFACE_TAG = "aws-glue-service-resource"
# The warning that the drift and repair jobs read DMS's secret, for lack of a drift secret of their own.
SHARED_SECRET_WARNING = "cdc-lake:sharedSourceSecret"
# The warning that the stack deploys no source jobs for the engine, so nothing checks the configuration against it.
NO_SOURCE_JOBS_WARNING = "cdc-lake:noSourceJobs"

SOURCE_CHECK_SIZING = JobSizing(
    workers=2,
    timeout_minutes=15,
    max_concurrent_runs=1,
    description="Compare the table configuration with the source database's catalog (cdc-lake config-check-source); "
    "puts the SourceDifferences metric",
)
DRIFT_SIZING = JobSizing(
    workers=2,
    timeout_minutes=240,
    max_concurrent_runs=1,
    description="Verify the lake tables against the live source, or repair their drifted keys (--action)",
)


def source_check(scope: Construct, construct_id: str, *, deployment: Deployment, jobs: GlueJobs) -> SourceCheck | None:
    """The source jobs, where the engine has a driver for them (infra/source_engines.py); else none, and the synth
    says so and what to use instead."""
    engine = deployment.settings.engine
    if engine.source_jobs:
        return SourceCheck(scope, construct_id, deployment=deployment, jobs=jobs)
    Annotations.of(scope).add_warning_v2(
        NO_SOURCE_JOBS_WARNING,
        f"sourceEngine={engine.name}: no source-check, drift or repair job is deployed (the "
        f"jobs carry no {engine.display_name} driver), nor their schedules, alarms and roles. Write the table "
        "configuration from DMS's landed files with `cdc-lake config-from-files` (docs/deploy.md#source-check)",
    )
    return None


class SourceCheck(Construct):
    """Security group and Glue network connection; the source check's role, job and schedule; the drift job's."""

    def __init__(self, scope: Construct, construct_id: str, *, deployment: Deployment, jobs: GlueJobs) -> None:
        super().__init__(scope, construct_id)
        storage, key = jobs.storage, jobs.key
        stack = Stack.of(self)
        settings = deployment.settings
        prefix = settings.resource_prefix

        # Glue's workers talk to each other over any TCP port within their group (a Glue requirement); out of
        # it only to the source and to HTTPS (S3, Secrets Manager, CloudWatch, PyPI: endpoints or NAT).
        description = "cdc-lake source check (Glue): the source database and AWS APIs only"
        https = "HTTPS to S3, Secrets Manager, CloudWatch"
        self.security_group = outbound_group(self, settings, description, https)
        self.security_group.add_ingress_rule(self.security_group, ec2.Port.all_tcp(), "Glue workers of this job")
        self.security_group.add_egress_rule(self.security_group, ec2.Port.all_tcp(), "Glue workers of this job")
        ingress = ("SourceIngressFromSourceCheck", "cdc-lake source check reads the source database's catalog")
        reach_source(self, self.security_group, settings, ingress)

        self.connection = glue.CfnConnection(
            self,
            "Connection",
            catalog_id=stack.account,
            connection_input=glue.CfnConnection.ConnectionInputProperty(
                name=f"{prefix}-source-network",
                description="cdc-lake source check: the network path to the source database",
                connection_type="NETWORK",
                physical_connection_requirements=glue.CfnConnection.PhysicalConnectionRequirementsProperty(
                    subnet_id=settings.subnet_ids[0],
                    security_group_id_list=[self.security_group.security_group_id],
                ),
            ),
        )

        # The source's driver beside the lake jobs' packages (the wheels pinned in infra/job-wheels-glue*.txt).
        driver = settings.engine.driver
        assert driver is not None, "no source jobs for an engine without a driver (source_jobs)"
        self.wheels = jobs.wheels(driver)
        self.role = self._role(stack, deployment, jobs, key)
        self.drift_trigger: glue.CfnTrigger | None = None
        self.drift_job = self._drift_job(deployment, jobs, storage)
        arguments = {
            **jobs.python_arguments,
            "--additional-python-modules": self.wheels.modules,
            **source_arguments(settings),
        }
        script = jobs.scripts["source_check"]
        definition = JobDefinition(
            f"{prefix}-source-check",
            script,
            SOURCE_CHECK_SIZING,
            self.role,
            arguments,
            self.connection.ref,
            locked_source_arguments(settings),
            flex="source_check" in FLEX_JOBS,
        )
        self.job = jobs.job(self, "Job", definition)
        self.job.node.add_dependency(self.policy)
        stack_output(self, "SourceCheckJobName", self.job.ref, "Glue job checking the configuration against the source")
        self.trigger: glue.CfnTrigger | None = None
        if settings.source_check_enabled:
            when = "Scheduled check of the table configuration against the source (UTC)"
            schedule = Schedule(
                f"{prefix}-source-check-schedule", when, settings.source_check_schedule, SCHEDULED_ARGUMENTS
            )
            self.trigger = scheduled_trigger(self, "Schedule", self.job, schedule)

    def _role(self, stack: Stack, deployment: Deployment, jobs: GlueJobs, key: kms.IKey) -> iam.Role:
        settings = deployment.settings
        role = glue_role(
            self, "Role", "cdc-lake source check: read the source secret and the job's assets, put one metric"
        )
        assets = [jobs.config_asset, jobs.library_asset, jobs.scripts["source_check"]]
        statements = [
            read_assets_statement(assets, self.wheels.arns),
            *source_access_statements(stack, settings),
            *job_log_statements(stack, key, "EncryptLogs"),
            iam.PolicyStatement(
                sid="SourceCheckMetric",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": METRICS_NAMESPACE}},
            ),
        ]
        self.policy = iam.Policy(self, "Policy", statements=statements, roles=[role])
        NagSuppressions.add_resource_suppressions(self.policy, wildcard_reasons(with_logs=True))
        return role

    def _drift_job(self, deployment: Deployment, jobs: GlueJobs, storage: Storage) -> glue.CfnJob:
        """The drift job, which verifies (on its schedule, or by hand): a read-only role (the lake's files and
        tables, the DMS files, no write, delete or create), the drift secret and the source network. Its repair
        twin, ``<prefix>-repair``, holds the lake jobs' own policy instead, and runs only when started."""
        settings, stack = deployment.settings, Stack.of(self)
        secret = settings.drift_secret_arn or settings.source_secret_arn
        if settings.drift_secret_arn is None:
            Annotations.of(self).add_warning_v2(
                SHARED_SECRET_WARNING,
                f"The drift and repair jobs read DMS's replication secret ({SOURCE_SECRET_ARN}): create a "
                f"read-only database user for them and set {DRIFT_SECRET_ARN} (docs/drift.md#a-read-only-user)",
            )
        assets = [*jobs.shared_assets, jobs.scripts["drift"]]
        role = glue_role(self, "DriftRole", "cdc-lake drift job: read the lake and the DMS files, the drift secret")
        lake = iam.Policy(
            self,
            "DriftLakePolicy",
            statements=jobs.lake_statements(stack, storage, jobs.key, assets, writes=False),
            roles=[role],
        )
        NagSuppressions.add_resource_suppressions(lake, jobs.lake_wildcard_reasons(writes=False))
        job = self._source_job(deployment, jobs, role, lake, "verify", secret)
        stack_output(self, "DriftJobName", job.ref, "Glue job verifying the lake against the source (read only)")
        if settings.drift_check_enabled:
            when = "Scheduled verify of every configured lake table against the source (UTC)"
            name = f"{settings.resource_prefix}-drift-schedule"
            schedule = Schedule(name, when, settings.drift_check_schedule, {"--action": "verify"})
            self.drift_trigger = scheduled_trigger(self, "DriftSchedule", job, schedule)

        repair_role = glue_role(self, "RepairRole", "cdc-lake repair job: the lake jobs' access, the drift secret")
        jobs.policy.attach_to_role(repair_role)
        self.repair_job = self._source_job(deployment, jobs, repair_role, jobs.policy, "repair", secret)
        stack_output(
            self, "RepairJobName", self.repair_job.ref, "Glue job repairing the lake's drifted keys from the source"
        )
        return job

    def _source_job(  # noqa: PLR0913, PLR0917 - one job of two, each its role, policy, action and secret
        self, deployment: Deployment, jobs: GlueJobs, role: iam.Role, lake: iam.Policy, action: str, secret: str
    ) -> glue.CfnJob:
        """A job of the drift script with ``role`` (its lake access in ``lake``), the source secret and network."""
        settings, stack = deployment.settings, Stack.of(self)
        name = "Drift" if action == "verify" else "Repair"
        statements = source_access_statements(stack, settings, secret)
        statements.append(
            iam.PolicyStatement(sid="ReadDriverWheels", actions=["s3:GetObject"], resources=list(self.wheels.arns))
        )
        access = iam.Policy(self, f"{name}Policy", statements=statements, roles=[role])
        NagSuppressions.add_resource_suppressions(access, wildcard_reasons(with_logs=False))
        arguments = {
            **jobs.default_arguments,
            "--additional-python-modules": self.wheels.modules,
            **source_arguments(settings),
            **declared_flags(
                DriftArguments, {"source_secret": secret, "action": action, "bucket": jobs.storage.raw.bucket_name}
            ),
        }
        suffix = "drift" if action == "verify" else "repair"
        definition = JobDefinition(
            f"{settings.resource_prefix}-{suffix}",
            jobs.scripts["drift"],
            DRIFT_SIZING,
            role,
            arguments,
            self.connection.ref,
            locked_source_arguments(settings),
            flex="drift" in FLEX_JOBS,  # the verify job and its repair twin
        )
        job = jobs.job(self, f"{name}Job", definition)
        job.node.add_dependency(access, lake)
        return job


def source_arguments(settings: DeploySettings) -> dict[str, str]:
    """The job arguments naming the source (as ``SourceArguments`` declares them): the DMS endpoint's secret, its
    engine, and its database if given."""
    arguments = {"source_secret": settings.source_secret_arn, "source_engine": settings.source_engine}
    if settings.source_database:
        arguments["source_database"] = settings.source_database
    return declared_flags(SourceArguments, arguments)


def locked_source_arguments(settings: DeploySettings) -> dict[str, str]:
    """The source jobs' arguments no run may change: whether the source may be reached without checked TLS, the
    stack's sourceWithoutTls, set either way, so that whoever may start a run cannot turn the check off for it."""
    return declared_flags(SourceArguments, {"source_without_tls": str(settings.source_without_tls).lower()})


def source_access_statements(
    stack: Stack, settings: DeploySettings, secret: str | None = None
) -> list[iam.PolicyStatement]:
    """Reading the source secret (``secret``, default DMS's; and its key), and what Glue does in the VPC for a job
    with the connection."""
    network = stack.format_arn(service="ec2", resource="network-interface", resource_name="*")
    vpc = stack.format_arn(service="ec2", resource="vpc", resource_name=settings.vpc_id)
    statements = [
        iam.PolicyStatement(
            sid="ReadSourceSecret",
            actions=["secretsmanager:GetSecretValue"],
            resources=[secret or settings.source_secret_arn],
        ),
        iam.PolicyStatement(
            sid="NetworkConnection",
            actions=["glue:GetConnection"],
            resources=[
                stack.format_arn(service="glue", resource="catalog"),
                stack.format_arn(
                    service="glue", resource="connection", resource_name=f"{settings.resource_prefix}-source-network"
                ),
            ],
        ),
        # What Glue does in the VPC for a job with a NETWORK connection (as AWSGlueServiceRole grants it).
        iam.PolicyStatement(
            sid="DescribeNetwork",
            actions=[
                "ec2:DescribeVpcEndpoints",
                "ec2:DescribeRouteTables",
                "ec2:DescribeNetworkInterfaces",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSubnets",
                "ec2:DescribeVpcAttribute",
            ],
            resources=["*"],
        ),
        # The workers' network interfaces, only in the stack's VPC and subnets (ec2:Vpc is a condition key of the
        # network-interface and security-group resources these actions name).
        iam.PolicyStatement(
            sid="WorkerNetworkInterfaces",
            actions=["ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface"],
            resources=[network, stack.format_arn(service="ec2", resource="security-group", resource_name="*")],
            conditions={"ArnEquals": {"ec2:Vpc": vpc}},
        ),
        iam.PolicyStatement(
            sid="WorkerSubnets",
            actions=["ec2:CreateNetworkInterface"],
            resources=[
                stack.format_arn(service="ec2", resource="subnet", resource_name=s) for s in settings.subnet_ids
            ],
        ),
        # Glue marks the interfaces it makes with one tag key; only that key may be set or removed (as
        # AWSGlueServiceRole grants it), so the role cannot retag other interfaces of the account.
        iam.PolicyStatement(
            sid="WorkerNetworkInterfaceTags",
            actions=["ec2:CreateTags", "ec2:DeleteTags"],
            resources=[network],
            conditions={"ForAllValues:StringEquals": {"aws:TagKeys": [GLUE_INTERFACE_TAG]}},
        ),
    ]
    if settings.source_secret_kms_key_arn:
        statements.append(
            iam.PolicyStatement(
                sid="DecryptSourceSecret", actions=["kms:Decrypt"], resources=[settings.source_secret_kms_key_arn]
            )
        )
    return statements


def wildcard_reasons(*, with_logs: bool) -> list[dict[str, Any]]:
    """cdk-nag's acknowledgments of the wildcards in these policies, with the reason for each."""
    reasons = {
        "Resource::*": "ec2:Describe* and cloudwatch:PutMetricData have no resource-level permissions; the "
        f"metric statement is limited to the {METRICS_NAMESPACE} namespace.",
        "Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:network-interface/*": "Glue creates "
        "its workers' network interfaces in the connection's subnet with names it chooses at run time.",
        "Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:security-group/*": "Creating a "
        "network interface names its security groups (the connection fixes which ones); limited to the stack's "
        "VPC by an ec2:Vpc condition.",
    }
    if with_logs:
        reasons["Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:/aws-glue/*"] = (
            "The job logs to the stack's /aws-glue/<stack>/ groups; the rest of /aws-glue/ stays writable so a run "
            "Glue logs under its own naming still logs."
        )
    return [
        {"id": "AwsSolutions-IAM5", "reason": reason, "appliesTo": [finding]} for finding, reason in reasons.items()
    ]
