"""Glue: the lake database, the lake jobs of ``core.glue_jobs.GLUE_JOBS`` (full load, CDC replay, maintenance; Glue 5.1
or 6.0 as configured, Iceberg on the Glue catalog), their security configuration, a role limited to the buckets, the
database and its tables, the maintenance job's own role (the one that may delete landed DMS files) and its schedule;
in runs.mode warm also the warm job (a ``gluestreaming`` job on G.025X workers, one run per shard of the tables), its
role, which may start the G.1X replay jobs, and the shards' event queues (``infra.warm_events``)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from aws_cdk import ArnFormat, Aws, FileAssetPackaging, RemovalPolicy, Stack, Stage
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3_assets as s3_assets
from cdk_nag import NagSuppressions
from constructs import Construct

from cdc_lake.core.catalogs import glue_catalog_conf, render_conf
from cdc_lake.core.config import PipelineConfig, RunSettings
from cdc_lake.core.glue_jobs import GLUE_JOBS
from cdc_lake.core.job_arguments import MaintenanceArguments, WarmArguments, declared_flags, default_text
from cdc_lake.core.names import (
    CDC_REPLAY_TIMEOUT_MINUTES,
    EXPIRED_MARK_PREFIX,
    FULL_LOAD_TIMEOUT_MINUTES,
    GLUE_CATALOG,
    GLUE_VERSIONS,
    MAINTENANCE_TIMEOUT_MINUTES,
    METRICS_NAMESPACE,
    WARM_JOB,
    WARM_MARKER_PREFIX,
    WARM_QUEUES_ARGUMENT,
    WARM_TIMEOUT_MINUTES,
)
from cdc_lake.core.shards import shard_count
from infra.deployment import Deployment, stack_output
from infra.log_groups import glue_log_prefix, log_group
from infra.storage import GLUE_TEMP_PREFIX, WAREHOUSE_PREFIX, Storage
from infra.warm_events import WarmEvents
from infra.wheels import WheelGroup, job_wheels

# pip's options for --additional-python-modules: the listed wheels only, never an index.
MODULES_INSTALLER_OPTION = "--no-index"

JobCommand = Literal["glueetl", "gluestreaming"]
# Flex runs on Glue's spare capacity, for less: "Only jobs with Glue version 3.0 and above and command type glueetl
# will be allowed to set ExecutionClass to FLEX" (the Glue API's Job.ExecutionClass), on G.1X or G.2X workers
# (https://docs.aws.amazon.com/glue/latest/dg/add-job.html); a run may wait for capacity before it starts, up to 20
# minutes (https://docs.aws.amazon.com/glue/latest/dg/job-run-statuses.html). So: the jobs nobody waits for
# (maintenance, the drift verify and its repair twin, the source check), never the replay jobs, which the lake's
# freshness waits for. Run queuing (JobRunQueuingEnabled) is the standard class's: job-run-statuses.html queues only
# "Spark jobs (Standard)" (a Flex run waits for capacity, not in the queue), and CDK's own Flex jobs
# (PySparkFlexEtlJob) set JobRunQueuingEnabled false. So a Flex job here does not queue, and nothing relies on it:
# its schedule starts one run a day or a week, MaxConcurrentRuns is 1, and a run started while another works fails at
# once (ConcurrentRunsExceededException; a scheduled start meeting a run by hand fails as a run, which the failed-run
# rule reports) instead of waiting. The trigger Lambda, which starts runs with JobRunQueuingEnabled, starts only the
# replay jobs and the warm job, none of them Flex.
FLEX_JOBS = frozenset({"maintenance", "source_check", "drift"})
FLEX_WORKER_TYPES = frozenset({"G.1X", "G.2X"})


@dataclass(frozen=True)
class JobWheels:
    """A job group's wheels in the assets bucket: the ``--additional-python-modules`` value and their ARNs."""

    modules: str
    arns: tuple[str, ...]


@dataclass(frozen=True)
class JobSizing:
    """Capacity of one job: the full load reads whole tables, CDC runs apply small batches per table."""

    workers: int
    timeout_minutes: int
    max_concurrent_runs: int
    description: str
    worker_type: str | None = None  # None: the Glue version's (GLUE_VERSIONS)


# The sizes below are those of runs.mode per_file, one run per landed file. Runs for one table may then
# overlap: each applies the table's pending files in DMS order and commits with Iceberg's optimistic
# concurrency (retried), so concurrency is capped, not forced to 1. Runs beyond the cap are queued by Glue
# (JobRunQueuingEnabled) instead of failing with ConcurrentRunsExceededException.
# In coalesced mode (the default) job_sizes() replaces them: see there.
FULL_LOAD_SIZING = JobSizing(
    workers=10,
    timeout_minutes=FULL_LOAD_TIMEOUT_MINUTES,
    max_concurrent_runs=10,
    description="Apply a table's DMS full-load (LOAD*) files up to --key into its Iceberg table",
)
CDC_REPLAY_SIZING = JobSizing(
    workers=2,
    timeout_minutes=CDC_REPLAY_TIMEOUT_MINUTES,
    max_concurrent_runs=10,
    description="Replay a table's pending DMS CDC files (I/U/D) up to --key into its Iceberg table",
)
# One maintenance run at a time (a second one, e.g. started by hand during the scheduled run, is queued).
MAINTENANCE_SIZING = JobSizing(
    workers=2,
    timeout_minutes=MAINTENANCE_TIMEOUT_MINUTES,
    max_concurrent_runs=1,
    description="Iceberg table maintenance: compact files, expire snapshots, remove orphan files and the applied DMS "
    "files (--action)",
)
# Job defaults of the maintenance script (a run or the schedule overrides them key by key), read from its declared
# arguments; the values, and why they are safe, are defined once in cdc_lake.core.names.
MAINTENANCE_ARGUMENTS = declared_flags(
    MaintenanceArguments,
    {
        "action": "all",
        "retain_last": default_text(MaintenanceArguments, "retain_last"),
        "orphan_days": default_text(MaintenanceArguments, "orphan_days"),
    },
)
SCHEDULED_MAINTENANCE_ARGUMENTS = declared_flags(MaintenanceArguments, {"action": "all"})


def raw_objects_finding(prefix: str) -> dict[str, str]:
    """cdk-nag's finding for a policy's wildcard on the raw bucket's objects under ``prefix`` (``<raw>/<prefix>*``)."""
    escaped = re.sub(r"[\\^$.*+?()[\]{}|/]", r"\\\g<0>", prefix)
    return {"regex": f"/^Resource::<.*Raw.*\\.Arn>\\/{escaped}\\*$/"}


# cdk-nag's finding for a policy's one wildcard, the warm runs' marker objects in the raw bucket (the warm policy's,
# which writes them, and the trigger's, which reads them).
MARKER_OBJECTS_FINDING = raw_objects_finding(WARM_MARKER_PREFIX)
WARM_WILDCARD_REASONS = [
    {
        "id": "AwsSolutions-IAM5",
        "reason": f"A warm run writes and deletes its stop markers, named by shard and Glue's run id, under "
        f"{WARM_MARKER_PREFIX} of the raw bucket, and nothing else in it.",
        "appliesTo": [MARKER_OBJECTS_FINDING],
    }
]


def job_sizes(runs: RunSettings) -> dict[str, JobSizing]:
    """Sizes of the lake jobs (``GLUE_JOBS`` of network ``lake``) for the configured run mode.

    coalesced: one run at a time per replay job. Each run drains every table with pending files, round after
    round, so a second concurrent run would only compete for the same tables; a start while a run is
    under way queues as WAITING (JobRunQueuingEnabled), and a WAITING or STARTING run is exactly what
    the trigger Lambda looks for (glue:GetJobRuns) before starting another. The replay job gets the
    configured workers, shared by the tables it applies at once, and a timeout beyond its time budget.
    per_file: the per-file sizes above, unchanged.
    """
    sizes = {"full_load": FULL_LOAD_SIZING, "cdc_replay": CDC_REPLAY_SIZING, "maintenance": MAINTENANCE_SIZING}
    if runs.run_mode.every_table:
        sizes["full_load"] = replace(
            FULL_LOAD_SIZING,
            max_concurrent_runs=1,
            description="Apply every table's landed DMS files, LOAD files first, into the Iceberg tables "
            "(one run at once)",
        )
        sizes["cdc_replay"] = replace(
            CDC_REPLAY_SIZING,
            workers=runs.workers,
            timeout_minutes=runs.replay_timeout_minutes,
            max_concurrent_runs=1,
            description="Replay every table's landed DMS CDC files (I/U/D) into the Iceberg tables, round after "
            "round up to the time budget (one run at a time)",
        )
    return sizes


def warm_sizing(config: PipelineConfig) -> JobSizing:
    """The warm job (runs.mode warm): one run per shard of the tables applies at once (``core.shards``), each on
    ``runs.warm.workers`` G.025X workers, for hours. Glue wants a streaming job's timeout under 7 days
    (``WARM_TIMEOUT_MINUTES``); a run ends itself before, after ``runs.warm.lifetime_hours`` at most.

    ``MaxConcurrentRuns`` is two per shard: a shard's next run starts while the stopping one is still RUNNING, and
    a run that yields lives a little while. AWS does not document whether a streaming job's run past the limit is
    queued or refused; with the room, neither happens in the protocol's course (a run bills by its time, so the
    room costs nothing).

    The replay jobs keep their per-file sizes in this mode (``job_sizes``): a warm run hands each of their runs one
    table's LOAD files or large backlog (``--one_table``), so several go at once.
    """
    return JobSizing(
        workers=config.runs.warm.workers,
        timeout_minutes=WARM_TIMEOUT_MINUTES,
        max_concurrent_runs=2 * shard_count(config),
        description="Replay one shard of the tables' DMS CDC files as they land, for hours (--shard); hands LOAD "
        "files and large backlogs to the full-load and CDC replay jobs",
        worker_type=config.runs.run_mode.worker_type,
    )


@dataclass(frozen=True)
class JobDefinition:
    """What one Glue job runs, as whom and where; what every job shares (Glue version, worker type, no retries,
    queued runs, the security configuration) is filled in by ``GlueJobs.job``."""

    name: str
    script: s3_assets.Asset
    sizing: JobSizing
    role: iam.IRole
    arguments: dict[str, str]
    connection: str | None = None  # a Glue connection's name: the job runs in its network
    # Arguments no run can change (Glue's NonOverridableArguments, which win over a run's own Arguments).
    locked: dict[str, str] = field(default_factory=dict)
    command: JobCommand = "glueetl"
    flex: bool = False  # Glue's FLEX execution class (FLEX_JOBS): spare capacity, no run queuing
    # When Glue may restart a streaming job's run for its own maintenance ("Sun:03", GMT); streaming jobs only.
    maintenance_window: str | None = None


@dataclass(frozen=True)
class JobRole:
    """The role a job runs as, and the policies that give it its rights: Glue validates the role when the job is
    created, so the job depends on them."""

    role: iam.IRole
    policies: tuple[iam.Policy, ...]


@dataclass(frozen=True)
class Schedule:
    """A scheduled trigger of a job: its name, description, cron expression, and the arguments it passes."""

    name: str
    description: str
    cron: str
    arguments: dict[str, str]


def scheduled_trigger(scope: Construct, construct_id: str, job: glue.CfnJob, schedule: Schedule) -> glue.CfnTrigger:
    return glue.CfnTrigger(
        scope,
        construct_id,
        name=schedule.name,
        description=schedule.description,
        type="SCHEDULED",
        schedule=schedule.cron,
        start_on_creation=True,
        actions=[glue.CfnTrigger.ActionProperty(job_name=job.ref, arguments=dict(schedule.arguments))],
    )


def iceberg_spark_conf(warehouse_uri: str, catalog: str = GLUE_CATALOG) -> str:
    """The Iceberg/Glue-catalog settings as ONE ``--conf`` value (Glue accepts the key only once)."""
    return render_conf(glue_catalog_conf(warehouse_uri, catalog))


def glue_role(scope: Construct, construct_id: str, description: str) -> iam.Role:
    """A role the Glue service assumes; its policies are attached statement by statement."""
    return iam.Role(scope, construct_id, assumed_by=iam.ServicePrincipal("glue.amazonaws.com"), description=description)


def read_assets_statement(assets: list[s3_assets.Asset], wheels: Sequence[str] = ()) -> iam.PolicyStatement:
    """Reading a job's own assets (script, library, configuration, the ARNs of its ``wheels``), not the rest of
    the assets bucket."""
    return iam.PolicyStatement(
        sid="ReadJobAssets",
        actions=["s3:GetObject"],
        resources=[*(asset.bucket.arn_for_objects(asset.s3_object_key) for asset in assets), *wheels],
    )


def job_log_statements(stack: Stack, key: kms.IKey, encrypt_sid: str) -> list[iam.PolicyStatement]:
    """A Glue job's continuous logs under /aws-glue/, encrypted with the security configuration's key."""
    log_groups = stack.format_arn(
        service="logs", resource="log-group", resource_name="/aws-glue/*", arn_format=ArnFormat.COLON_RESOURCE_NAME
    )
    return [
        iam.PolicyStatement(
            sid="JobLogs",
            actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:AssociateKmsKey"],
            resources=[log_groups],
        ),
        iam.PolicyStatement(
            sid=encrypt_sid, actions=["kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey"], resources=[key.key_arn]
        ),
    ]


class GlueJobs(Construct):
    """Database, security configuration, the lake jobs, their roles and the maintenance schedule."""

    def __init__(
        self, scope: Construct, construct_id: str, *, deployment: Deployment, storage: Storage, key: kms.IKey
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.storage, self.key = storage, key  # what the jobs in the source's network share (infra.source_check)
        self.glue_version = deployment.glue_version
        self.worker_type = GLUE_VERSIONS[deployment.glue_version].worker_type
        config, assets, settings = deployment.config, deployment.assets, deployment.settings
        name_prefix = settings.resource_prefix
        # The maintenance trigger's Glue cron expression; None for no trigger.
        maintenance_schedule = settings.maintenance_schedule if settings.maintenance_enabled else None
        database_name = config.lake.database

        self.database = glue.CfnDatabase(
            self,
            "Database",
            catalog_id=Aws.ACCOUNT_ID,
            database_input=glue.CfnDatabase.DatabaseInputProperty(
                name=database_name,
                description="cdc-lake Iceberg tables replayed from DMS",
                location_uri=f"{storage.warehouse_uri}{database_name}.db",
            ),
        )
        # The lake's data is retained with its bucket; keep the catalog that describes it too.
        self.database.apply_removal_policy(RemovalPolicy.RETAIN)
        self.database_name = database_name
        self.bucket_folder = config.dms.bucket_folder
        # The DMS files' objects in the raw bucket: its folder's, or any without one.
        self.dms_objects = f"{self.bucket_folder}/*" if self.bucket_folder else "*"

        self.security_configuration = glue.CfnSecurityConfiguration(
            self,
            "SecurityConfiguration",
            name=f"{name_prefix}-glue",
            encryption_configuration=glue.CfnSecurityConfiguration.EncryptionConfigurationProperty(
                cloud_watch_encryption=glue.CfnSecurityConfiguration.CloudWatchEncryptionProperty(
                    cloud_watch_encryption_mode="SSE-KMS", kms_key_arn=key.key_arn
                ),
                job_bookmarks_encryption=glue.CfnSecurityConfiguration.JobBookmarksEncryptionProperty(
                    job_bookmarks_encryption_mode="CSE-KMS", kms_key_arn=key.key_arn
                ),
                s3_encryptions=[glue.CfnSecurityConfiguration.S3EncryptionProperty(s3_encryption_mode="SSE-S3")],
            ),
        )

        self._wheel_arns: dict[str, tuple[str, str]] = {}  # wheel file name -> (s3:// URL, object ARN)
        self.lake_wheels = self.wheels("lake")
        self.config_asset = s3_assets.Asset(self, "TableConfig", path=str(assets.config_json))
        self.library_zip = assets.library_zip
        self.library_asset = s3_assets.Asset(self, "Library", path=str(assets.library_zip))
        # The lake's FileIO (catalogs.LAKE_IO), which every job's --conf names.
        self.lake_io_asset = s3_assets.Asset(self, "LakeIoJar", path=str(assets.lake_io_jar))
        # The scripts of the jobs this stack makes: the warm job's only in runs.mode warm.
        self.scripts = scripts = {
            job: s3_assets.Asset(self, f"Script-{job}", path=str(path))
            for job, path in assets.glue_scripts.items()
            if config.runs.run_mode.makes(job)
        }
        self.role = self._role(stack, storage, key, [*self.shared_assets, *scripts.values()])
        # Where every job of the stack logs (Glue 5.0+: <prefix>/error and <prefix>/output), made here with a
        # retention and the pipeline key instead of by Glue at the first run.
        self.log_prefix = glue_log_prefix(settings)
        self.log_groups = [
            log_group(self, f"{kind.title()}LogGroup", f"{self.log_prefix}/{kind}", settings, key)
            for kind in ("error", "output")
        ]

        # What every job of the stack runs with, the lake's or not: the library, its wheels, its logs.
        self.python_arguments = {
            "--job-language": "python",
            "--config_uri": self.config_asset.s3_object_url,
            "--extra-py-files": self.library_asset.s3_object_url,
            "--additional-python-modules": self.lake_wheels.modules,
            "--python-modules-installer-option": MODULES_INSTALLER_OPTION,
            # Glue 5.0 and later log every job in real time to <prefix>/error and <prefix>/output; the continuous
            # logging flag is Glue 4.0's and deprecated since 5.0 (glue/latest/dg/monitor-continuous-logging.html).
            "--custom-logGroup-prefix": self.log_prefix,
        }
        self.default_arguments = {
            **self.python_arguments,
            "--catalog": GLUE_CATALOG,
            "--warehouse": storage.warehouse_uri,
            "--database": database_name,
            "--datalake-formats": "iceberg",
            "--extra-jars": self.lake_io_asset.s3_object_url,
            "--conf": iceberg_spark_conf(storage.warehouse_uri),
            "--enable-metrics": "true",
            "--enable-glue-datacatalog": "true",
            "--job-bookmark-option": "job-bookmark-disable",
            "--TempDir": storage.glue_temp_uri,
        }
        # Every lake job of the table, with its sizing, and the arguments of its own: the maintenance job's retention
        # defaults, the raw bucket (--action reload rebuilds a table from its landed files) and rawRetentionDays
        # (--action all removes the landed files a table applied once that old). The maintenance job runs as a role
        # of its own, the one that may delete landed files; the others share one.
        sizes = job_sizes(config.runs)
        maintenance_arguments = {
            "bucket": storage.raw.bucket_name,
            "raw_retention_days": str(settings.raw_retention_days),
        }
        own_arguments = {
            "maintenance": {**MAINTENANCE_ARGUMENTS, **declared_flags(MaintenanceArguments, maintenance_arguments)}
        }
        shared_role = JobRole(self.role, (self.policy,))
        own_roles = {"maintenance": self._maintenance_role(storage)}
        self.maintenance_role = own_roles["maintenance"].role
        self.lake_jobs: dict[str, glue.CfnJob] = {}
        for facts in GLUE_JOBS.values():
            if facts.network != "lake" or facts.warm:
                continue
            job = self._job(
                facts.construct_id,
                f"{name_prefix}-{facts.resource_name}",
                scripts[facts.name],
                sizes[facts.name],
                own_roles.get(facts.name, shared_role),
                extra_arguments=own_arguments.get(facts.name),
                flex=facts.name in FLEX_JOBS,
            )
            stack_output(self, f"{facts.construct_id}Name", job.ref, f"Glue job {facts.summary}")
            self.lake_jobs[facts.name] = job
        self.warm_role: iam.Role | None = None
        self.warm_events: WarmEvents | None = None  # the shards' event queues, with the warm job
        if config.runs.run_mode.own_job == WARM_JOB:
            self.lake_jobs[WARM_JOB] = self._warm_job(stack, deployment)
        stack_output(self, "DatabaseName", database_name, "Glue database of the lake tables")
        stack_output(self, "TableConfigUri", self.config_asset.s3_object_url, "Table configuration (--config_uri)")
        self.maintenance_trigger: glue.CfnTrigger | None = None
        if maintenance_schedule is not None:
            when = "Scheduled maintenance of every configured lake table (UTC)"
            schedule = Schedule(
                f"{name_prefix}-maintenance-schedule", when, maintenance_schedule, SCHEDULED_MAINTENANCE_ARGUMENTS
            )
            self.maintenance_trigger = scheduled_trigger(self, "MaintenanceSchedule", self.maintenance, schedule)

    @property
    def jobs(self) -> list[glue.CfnJob]:
        return list(self.lake_jobs.values())

    @property
    def full_load(self) -> glue.CfnJob:
        return self.lake_jobs["full_load"]

    @property
    def cdc_replay(self) -> glue.CfnJob:
        return self.lake_jobs["cdc_replay"]

    @property
    def maintenance(self) -> glue.CfnJob:
        return self.lake_jobs["maintenance"]

    @property
    def warm(self) -> glue.CfnJob | None:
        """The warm job, in runs.mode warm only."""
        return self.lake_jobs.get(WARM_JOB)

    def _job(  # noqa: PLR0913 - one lake job: its names, script, sizing, role, and what sets it apart
        self,
        construct_id: str,
        name: str,
        script: s3_assets.Asset,
        sizing: JobSizing,
        job_role: JobRole,
        *,
        extra_arguments: dict[str, str] | None = None,
        flex: bool = False,
    ) -> glue.CfnJob:
        arguments = {**self.default_arguments, **(extra_arguments or {})}
        job = self.job(self, construct_id, JobDefinition(name, script, sizing, job_role.role, arguments, flex=flex))
        job.node.add_dependency(*job_role.policies)  # Glue validates the role when the job is created
        return job

    def _maintenance_role(self, storage: Storage) -> JobRole:
        """The maintenance job's role: the lake jobs' policy, and what only the maintenance does in the raw bucket
        (``maintenance_statements``), so that no replay, full-load or warm run may delete a landed file."""
        role = glue_role(
            self,
            "MaintenanceRole",
            "cdc-lake maintenance job: the lake jobs' access, remove applied DMS files and mark what it removed",
        )
        self.policy.attach_to_role(role)
        policy = iam.Policy(self, "MaintenancePolicy", statements=self.maintenance_statements(storage), roles=[role])
        NagSuppressions.add_resource_suppressions(policy, self.maintenance_wildcard_reasons())
        return JobRole(role, (self.policy, policy))

    def maintenance_statements(self, storage: Storage) -> list[iam.PolicyStatement]:
        """What a maintenance run does beyond the lake jobs: delete the landed DMS files a table's record holds once
        they are rawRetentionDays old (DeleteObjects asks s3:DeleteObject of each key), and write a mark per table of
        what it removed under ``EXPIRED_MARK_PREFIX``, which a lake table's first batch reads."""
        raw = storage.raw
        return [
            iam.PolicyStatement(
                sid="DeleteAppliedDmsFiles",
                actions=["s3:DeleteObject"],
                resources=[raw.arn_for_objects(self.dms_objects)],
            ),
            iam.PolicyStatement(
                sid="WriteExpiryMarks",
                actions=["s3:PutObject"],
                resources=[raw.arn_for_objects(f"{EXPIRED_MARK_PREFIX}*")],
            ),
        ]

    def maintenance_wildcard_reasons(self) -> list[dict[str, Any]]:
        """cdk-nag's acknowledgments of ``maintenance_statements``' wildcards, with the reason for each (the marks'
        first: a finding takes the first reason that applies, and with no DMS folder the DMS objects' covers it)."""
        folder = f"{self.bucket_folder}/" if self.bucket_folder else ""
        wildcard_reasons = [
            (
                raw_objects_finding(EXPIRED_MARK_PREFIX),
                f"The maintenance writes one mark per lake table under {EXPIRED_MARK_PREFIX} of the raw bucket: what "
                "it removed of the table's landed files.",
            ),
            (
                raw_objects_finding(folder),
                "The maintenance deletes the landed DMS files a table's record holds as applied once they are "
                "rawRetentionDays old; DMS names them (LOAD*/timestamped CDC files per table), so they cannot be "
                "listed in advance. Only this job's role may delete them.",
            ),
        ]
        return [
            {"id": "AwsSolutions-IAM5", "reason": reason, "appliesTo": [finding]}
            for finding, reason in wildcard_reasons
        ]

    def _warm_job(self, stack: Stack, deployment: Deployment) -> glue.CfnJob:
        """The warm job, with a role of its own: the lake jobs' policy (as the repair job holds it), and what only a
        warm run does (``warm_statements``), so that no other job may start runs."""
        facts = GLUE_JOBS[WARM_JOB]
        name = f"{deployment.settings.resource_prefix}-{facts.resource_name}"
        role = glue_role(
            self,
            "WarmRole",
            "cdc-lake warm job: the lake jobs' access, start the replay jobs, its stop markers and event queues",
        )
        self.policy.attach_to_role(role)
        self.warm_events = events = WarmEvents.create(self, shard_count(deployment.config))
        statements = [*self.warm_statements(stack, name), events.receive_statement()]
        warm_policy = iam.Policy(self, "WarmPolicy", statements=statements, roles=[role])
        NagSuppressions.add_resource_suppressions(warm_policy, WARM_WILDCARD_REASONS)
        arguments = {
            **self.default_arguments,
            **declared_flags(
                WarmArguments,
                {
                    "config_uri": self.config_asset.s3_object_url,
                    "bucket": self.storage.raw.bucket_name,
                    "full_load_job": self.full_load.ref,
                    "cdc_replay_job": self.cdc_replay.ref,
                    "catalog": GLUE_CATALOG,
                    "database": self.database_name,
                },
            ),
            WARM_QUEUES_ARGUMENT: events.urls,
        }
        definition = JobDefinition(
            name,
            self.scripts[WARM_JOB],
            warm_sizing(deployment.config),
            role,
            arguments,
            command="gluestreaming",
            # Glue restarts a streaming run whose timeout is over 7 days in this window; the warm job's is under 7
            # days, so Glue lets its runs go to their end (docs.aws.amazon.com/glue/latest/dg/
            # glue-streaming-maintenance.html): the window is set for a timeout Glue may one day lengthen.
            maintenance_window=deployment.settings.warm_maintenance_window,
        )
        job = self.job(self, facts.construct_id, definition)
        job.node.add_dependency(self.policy, warm_policy)  # Glue validates the role when the job is created
        stack_output(self, f"{facts.construct_id}Name", job.ref, f"Glue job {facts.summary}")
        self.warm_role = role
        return job

    def warm_statements(self, stack: Stack, warm_job_name: str) -> list[iam.PolicyStatement]:
        """What a warm run does beyond the lake jobs: start the replay jobs for a table it hands over and follow their
        runs, read its own job's runs (the other runs of its shard) and start its shard's next one (a run ending while
        a handed run lives, or whose batch outlived the bound), and write, read, delete and list its stop markers and
        holds (``WARM_MARKER_PREFIX``) in the raw bucket. The warm job is named, not referenced: it depends on this
        policy."""
        raw = self.storage.raw
        markers = f"{WARM_MARKER_PREFIX}*"
        return [
            iam.PolicyStatement(
                sid="StartReplayRuns",
                actions=["glue:StartJobRun", "glue:GetJobRun", "glue:GetJobRuns"],
                resources=[self.job_arn(self.full_load), self.job_arn(self.cdc_replay)],
            ),
            iam.PolicyStatement(
                sid="WarmRuns",
                actions=["glue:StartJobRun", "glue:GetJobRun", "glue:GetJobRuns"],
                resources=[stack.format_arn(service="glue", resource="job", resource_name=warm_job_name)],
            ),
            iam.PolicyStatement(
                sid="WriteStopMarkers",
                # GetObject: a run reads, once a round, whether a run of a newer deployment asks for its shard.
                actions=["s3:PutObject", "s3:DeleteObject", "s3:GetObject"],
                resources=[raw.arn_for_objects(markers)],
            ),
            # The lake policy lists the whole raw bucket already (ListBuckets); this says what a warm run lists, and
            # holds if that grant narrows.
            iam.PolicyStatement(
                sid="ListStopMarkers",
                actions=["s3:ListBucket"],
                resources=[raw.bucket_arn],
                conditions={"StringLike": {"s3:prefix": markers}},
            ),
        ]

    def job(self, scope: Construct, construct_id: str, definition: JobDefinition) -> glue.CfnJob:
        """A Glue job in ``scope`` (the deployment's Glue version and its worker type unless its sizing names one, no
        retries, runs beyond the cap queued unless it is Flex, this security configuration)."""
        sizing = definition.sizing
        worker_type = sizing.worker_type or self.worker_type
        if definition.flex and (definition.command != "glueetl" or worker_type not in FLEX_WORKER_TYPES):
            raise ValueError(f"{definition.name}: Flex runs glueetl jobs on G.1X or G.2X only, not {worker_type}")
        if definition.maintenance_window is not None and definition.command != "gluestreaming":
            raise ValueError(f"{definition.name}: a maintenance window is for streaming jobs only")
        connections = None
        if definition.connection is not None:
            connections = glue.CfnJob.ConnectionsListProperty(connections=[definition.connection])
        return glue.CfnJob(
            scope,
            construct_id,
            name=definition.name,
            description=sizing.description,
            role=definition.role.role_arn,
            command=glue.CfnJob.JobCommandProperty(
                name=definition.command, python_version="3", script_location=definition.script.s3_object_url
            ),
            glue_version=self.glue_version,
            worker_type=worker_type,
            number_of_workers=sizing.workers,
            timeout=sizing.timeout_minutes,
            max_retries=0,
            execution_property=glue.CfnJob.ExecutionPropertyProperty(max_concurrent_runs=sizing.max_concurrent_runs),
            execution_class="FLEX" if definition.flex else None,
            job_run_queuing_enabled=not definition.flex,
            maintenance_window=definition.maintenance_window,
            connections=connections,
            security_configuration=self.security_configuration.ref,
            default_arguments=definition.arguments,
            non_overridable_arguments=definition.locked or None,
        )

    def job_arn(self, job: glue.CfnJob) -> str:
        return Stack.of(self).format_arn(service="glue", resource="job", resource_name=job.ref)

    def wheels(self, group: WheelGroup) -> JobWheels:
        """``group``'s wheels (infra/wheels.py) as assets, each once per stack and published under its own wheel
        file name (pip installs only a file named like a wheel; CDK names assets by their hash otherwise)."""
        stack = Stack.of(self)
        found = []
        for wheel in job_wheels(self.glue_version, group):
            if wheel.name not in self._wheel_arns:
                staged = Path(Stage.of(self).outdir) / f"wheel.{wheel.name}"
                shutil.copyfile(wheel, staged)
                location = stack.synthesizer.add_file_asset(
                    file_name=staged.name, packaging=FileAssetPackaging.FILE, source_hash=wheel.stem
                )
                arn = f"arn:{Aws.PARTITION}:s3:::{location.bucket_name}/{location.object_key}"
                self._wheel_arns[wheel.name] = (location.s3_object_url, arn)
            found.append(self._wheel_arns[wheel.name])
        return JobWheels(",".join(url for url, _ in found), tuple(arn for _, arn in found))

    @property
    def shared_assets(self) -> list[s3_assets.Asset]:
        """What every job of the lake reads: the configuration, the library, the lake's FileIO."""
        return [self.config_asset, self.library_asset, self.lake_io_asset]

    def _role(self, stack: Stack, storage: Storage, key: kms.IKey, assets: list[s3_assets.Asset]) -> iam.Role:
        role = glue_role(
            self, "JobRole", "cdc-lake Glue jobs: read DMS files, write the Iceberg warehouse, update the lake tables"
        )
        statements = self.lake_statements(stack, storage, key, assets, writes=True)
        policy = iam.Policy(self, "JobPolicy", statements=statements, roles=[role])
        self.policy = policy
        NagSuppressions.add_resource_suppressions(policy, self.lake_wildcard_reasons(writes=True))
        return role

    def lake_statements(
        self, stack: Stack, storage: Storage, key: kms.IKey, assets: list[s3_assets.Asset], *, writes: bool
    ) -> list[iam.PolicyStatement]:
        """What a job does with the lake: read the DMS files, its assets, the warehouse and the lake tables, write
        Glue's scratch files, its logs and metrics; with ``writes``, also read the maintenance's expiry marks, write
        and delete warehouse files and create and update the lake tables (the replay, maintenance and repair jobs).
        No job deletes or changes a landed file here: only the maintenance job's role deletes them
        (``maintenance_statements``)."""
        database = self.database_name
        catalog_arn = stack.format_arn(service="glue", resource="catalog")
        warehouse_actions = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"]
        table_actions = ["glue:GetDatabase", "glue:GetTable", "glue:GetTables"]
        table_actions += ["glue:CreateTable", "glue:UpdateTable"] if writes else []
        statements = [
            read_assets_statement(assets, self.lake_wheels.arns),
            iam.PolicyStatement(
                sid="ListBuckets",
                actions=["s3:ListBucket", "s3:GetBucketLocation"],
                resources=[storage.raw.bucket_arn, storage.lake.bucket_arn],
            ),
            iam.PolicyStatement(
                sid="ReadDmsFiles",
                actions=["s3:GetObject"],
                resources=[storage.raw.arn_for_objects(self.dms_objects)],
            ),
            # A lake table's first batch reads what the maintenance removed of its landed files (one GET).
            *(
                [
                    iam.PolicyStatement(
                        sid="ReadExpiryMarks",
                        actions=["s3:GetObject"],
                        resources=[storage.raw.arn_for_objects(f"{EXPIRED_MARK_PREFIX}*")],
                    )
                ]
                if writes
                else []
            ),
            iam.PolicyStatement(
                sid="WriteWarehouseAndTemp" if writes else "ReadWarehouseWriteTemp",
                actions=warehouse_actions,
                resources=[storage.lake.arn_for_objects(f"{GLUE_TEMP_PREFIX}*")]
                + ([storage.lake.arn_for_objects(f"{WAREHOUSE_PREFIX}*")] if writes else []),
            ),
            *(
                []
                if writes
                else [
                    iam.PolicyStatement(
                        sid="ReadWarehouse",
                        actions=["s3:GetObject"],
                        resources=[storage.lake.arn_for_objects(f"{WAREHOUSE_PREFIX}*")],
                    )
                ]
            ),
            iam.PolicyStatement(
                sid="LakeCatalog",
                actions=table_actions,
                resources=[
                    catalog_arn,
                    stack.format_arn(service="glue", resource="database", resource_name=database),
                    stack.format_arn(service="glue", resource="table", resource_name=f"{database}/*"),
                ],
            ),
            # --enable-glue-datacatalog makes Spark's session catalog look up the "default" database at start.
            iam.PolicyStatement(
                sid="DefaultDatabaseLookup",
                actions=["glue:GetDatabase"],
                resources=[catalog_arn, stack.format_arn(service="glue", resource="database", resource_name="default")],
            ),
            *job_log_statements(stack, key, "EncryptLogsAndBookmarks"),
            iam.PolicyStatement(
                sid="JobMetrics",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": "Glue"}},
            ),
            # Freshness, volume and failures the replay jobs publish after each commit (the stack's alarms).
            iam.PolicyStatement(
                sid="PipelineMetrics",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": METRICS_NAMESPACE}},
            ),
        ]
        return statements

    def lake_wildcard_reasons(self, *, writes: bool) -> list[dict[str, Any]]:
        """cdk-nag's acknowledgments of ``lake_statements``' wildcards, with the reason for each."""
        database = self.database_name
        marks = [
            (
                raw_objects_finding(EXPIRED_MARK_PREFIX),
                f"Read access to the maintenance's marks under {EXPIRED_MARK_PREFIX} of the raw bucket, one per lake "
                "table: a lake table's first batch reads its own.",
            )
        ]
        # The marks' first: a finding takes the first reason that applies, and the DMS files' regex covers any object.
        wildcard_reasons = [
            *(marks if writes else []),
            (
                {"regex": "/^Resource::<.*Raw.*\\.Arn>\\/.*\\*$/"},
                "Read access to the DMS folder of the raw bucket (never write or delete): DMS names the files it "
                "lands (LOAD*/timestamped CDC files per table), so they cannot be listed in advance.",
            ),
            (
                {"regex": "/^Resource::<.*Lake.*\\.Arn>\\/warehouse\\/\\*$/"},
                "Iceberg writes data, delete and metadata files with generated names under the warehouse/ prefix "
                "of the lake bucket, and deletes those of expired snapshots, replaced metadata and orphans; "
                "access is limited to that prefix."
                if writes
                else "Reading the Iceberg tables' files, named by Iceberg, under the warehouse/ prefix (read only).",
            ),
            (
                {"regex": "/^Resource::<.*Lake.*\\.Arn>\\/tmp\\/glue\\/\\*$/"},
                "Glue writes scratch files with generated names under --TempDir (tmp/glue/ of the lake bucket, "
                "expired after 7 days).",
            ),
            (
                f"Resource::arn:<AWS::Partition>:glue:<AWS::Region>:<AWS::AccountId>:table/{database}/*",
                "The jobs create and update the lake tables named in the table configuration, which can change "
                "without redeploying this stack; access is limited to tables of the lake database."
                if writes
                else "Reading the lake tables named in the table configuration, which can change without "
                "redeploying this stack; limited to tables of the lake database.",
            ),
            (
                "Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:/aws-glue/*",
                "The jobs log to the stack's /aws-glue/<stack>/error and /output groups (--custom-logGroup-prefix); "
                "the rest of /aws-glue/ stays writable so a run Glue logs under its own naming (with a security "
                "configuration, /aws-glue/jobs/<configuration>-role/<role>/...) still logs.",
            ),
            (
                "Resource::*",
                "cloudwatch:PutMetricData has no resource-level permissions; its two statements are limited by a "
                f"cloudwatch:namespace condition, one to Glue's job metrics (Glue), one to the pipeline's "
                f"freshness and failure metrics ({METRICS_NAMESPACE}).",
            ),
        ]
        return [
            {"id": "AwsSolutions-IAM5", "reason": reason, "appliesTo": [finding]}
            for finding, reason in wildcard_reasons
        ]
