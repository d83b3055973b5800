"""Names and defaults shared by the Glue jobs, the Lambda and the CDK stack; pure, so all three import it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

# The Glue jobs the trigger Lambda starts for landed files: full_load for LOAD files, cdc_replay for CDC files. The
# stack's other jobs, and the table of all of them, are in core.glue_jobs, which the Lambda does not need.
TriggeredJob = Literal["full_load", "cdc_replay"]
TRIGGERED_JOBS: tuple[TriggeredJob, ...] = ("full_load", "cdc_replay")
# runs.mode warm: the long-lived replay on Glue's smallest workers, one run per shard of the tables (core.shards),
# which the Lambda starts for CDC files instead of cdc_replay; cdc_replay then takes only what a warm run hands over.
WARM_JOB: Literal["cdc_warm"] = "cdc_warm"
StartedJob = Literal["full_load", "cdc_replay", "cdc_warm"]  # what the Lambda starts, in every mode
# Where, in the raw bucket, a warm run says it is stopping (``<prefix><shard>/<run id>``), before its last look at
# the landing: the Lambda then starts the shard's next run instead of counting on it (engine.runs.warm).
WARM_MARKER_PREFIX = "cdc-lake-warm/"
# runs.mode warm: one SQS queue per shard, by which the Lambda tells a live warm run which of its tables a file landed
# for, so that the run lists those tables, not all (engine.runs.events). The queues' URLs in shard order, comma-joined:
# the Lambda's environment variable and the warm job's argument.
WARM_QUEUES_ENV = "CDC_WARM_QUEUES"
WARM_QUEUES_ARGUMENT = "--events_queues"

# The Glue versions the stack runs on, and the default of lake.glue_version (core.config.glue_version picks the one
# in force); cdc_lake.local.jars maps each to the local runtime that reproduces it.
GlueVersion = Literal["5.1", "6.0"]
GLUE_VERSION: GlueVersion = "5.1"
# Overrides lake.glue_version for a make target: `make test GLUE_VERSION=6.0`.
GLUE_VERSION_ENV = "GLUE_VERSION"


@dataclass(frozen=True)
class GlueVersionFacts:
    """What the stack and the cost figures take from one Glue version. The jobs' arguments are the same on every
    version: 6.0 still loads Iceberg with --datalake-formats, and turns ANSI SQL on by default, which
    engine.session turns off in code (so no --conf carries it)."""

    worker_type: str
    # Spark jobs, us-east-1, billed per second with a one-minute minimum (docs/cost-simulation.md has the sources).
    usd_per_dpu_hour: float
    # STARTING -> RUNNING, billed. AWS publishes no figure for any version: the cost simulation's assumption.
    startup_seconds: float


GLUE_VERSIONS: Mapping[GlueVersion, GlueVersionFacts] = MappingProxyType(
    {
        "5.1": GlueVersionFacts(worker_type="G.1X", usd_per_dpu_hour=0.44, startup_seconds=10.0),
        # The price AWS's pricing page gives Spark jobs. A 6.0 rate of its own (a 30% cut was reported at its
        # release) could not be read on any AWS page: plan with the rate every version is billed at until it is.
        "6.0": GlueVersionFacts(worker_type="G.1X", usd_per_dpu_hour=0.44, startup_seconds=10.0),
    }
)

# The Spark catalog name the Glue jobs register the Glue Data Catalog under (job --conf and --catalog).
GLUE_CATALOG = "glue_catalog"

# Maintenance retention: snapshots younger than RETAIN_DAYS stay for rollback, but no more than KEEP_SNAPSHOTS
# of them (every commit reads and rewrites metadata.json, which holds them all), and the newest RETAIN_LAST stay
# whatever their age; only unreferenced files older than ORPHAN_DAYS are orphans (younger ones may belong to a
# running commit).
RETAIN_DAYS = 1
KEEP_SNAPSHOTS = 500
RETAIN_LAST = 20
ORPHAN_DAYS = 3

# The scheduled maintenance removes the landed DMS files a table's record holds once they are rawRetentionDays old
# (engine.landed_expiry; a tag per file was a write a file); under this prefix of the raw bucket, outside DMS's
# folder, it leaves a mark per table of what it removed, which a lake table's first batch reads (engine.continuity).
EXPIRED_MARK_PREFIX = "cdc-lake-expired/"

# CloudWatch metrics the replay jobs emit (namespace, the one dimension, names) and the stack alarms on.
# One dimension, the lake database, not one per table: a metric costs per month, and hundreds of tables
# would multiply it; the per-table detail is in each commit's snapshot summary (cdc-lake.freshness).
METRICS_NAMESPACE = "CdcLake"
PIPELINE_DIMENSION = "Pipeline"
CHANGE_LAG_METRIC = "ChangeLagSeconds"  # newest applied change's DMS timestamp -> commit
LANDED_LAG_METRIC = "LandedLagSeconds"  # oldest applied file's landing -> commit
# The scheduled maintenance run's look at the raw bucket: since when the oldest file no table applied has waited.
OLDEST_WAITING_METRIC = "OldestWaitingFileSeconds"
FILES_APPLIED_METRIC = "FilesApplied"
ROWS_APPLIED_METRIC = "RowsApplied"
BYTES_APPLIED_METRIC = "BytesApplied"
BATCH_SECONDS_METRIC = "BatchSeconds"  # one table's batch, plan to commit
TABLE_FAILURES_METRIC = "TableFailures"  # tables a run left unapplied (bad input); their files stay
INPUT_NOTICES_METRIC = "InputNotices"  # input a run accepted on purpose and announced (core.notices)
SOURCE_DIFFERENCES_METRIC = "SourceDifferences"  # configuration vs the source's catalog (jobs.source_check)
DRIFTED_KEYS_METRIC = "DriftedKeys"  # keys differing from the live source after a drift job (jobs.drift)
# The trigger Lambda's metric (Powertools, dimension service): files of tables the configuration lacks.
UNKNOWN_TABLE_OBJECTS_METRIC = "UnknownTableObjects"
# What each committed batch publishes: its freshness field -> (metric, unit).
BATCH_METRICS = {
    "change_lag_s": (CHANGE_LAG_METRIC, "Seconds"),
    "landed_lag_s": (LANDED_LAG_METRIC, "Seconds"),
    "files": (FILES_APPLIED_METRIC, "Count"),
    "rows": (ROWS_APPLIED_METRIC, "Count"),
    "bytes": (BYTES_APPLIED_METRIC, "Bytes"),
    "seconds": (BATCH_SECONDS_METRIC, "Seconds"),
}
TRIGGER_SERVICE_NAME = "cdc-lake-trigger"

# The Glue jobs' timeouts (minutes); a coalesced replay run's is its time budget plus LAST_ROUND_MINUTES, for the
# round under way when the budget runs out. No run of any job lives longer than the longest of them, so a run
# branch older than that belongs to a run that was killed or timed out (``engine.commit.remove_dead_run_branches``).
FULL_LOAD_TIMEOUT_MINUTES = 480
CDC_REPLAY_TIMEOUT_MINUTES = 60
MAINTENANCE_TIMEOUT_MINUTES = 120
LAST_ROUND_MINUTES = 60
# A warm run lives for days, so its timeout cannot judge its branches: each of its batches is bounded instead, and a
# batch that outlives WARM_BATCH_MINUTES ends its run (engine.runs.warm), so that no live warm batch is older than that.
WARM_BATCH_MINUTES = 30
# Its Spark jobs cancelled, such a run ends through its stop path; one that has not within this long ends its process.
WARM_END_GRACE_MINUTES = 5
# Glue restarts a streaming job after 7 days at the latest and wants its timeout under that.
WARM_TIMEOUT_MINUTES = 7 * 24 * 60 - 60
# Each run commits on a private branch named for it and for when it began (epoch milliseconds).
RUN_BRANCH_PREFIX = "cdc_lake_run_"
