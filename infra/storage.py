"""Buckets: the raw landing bucket DMS writes to, the lake bucket (Iceberg warehouse, Glue temp files)
and the access-log bucket both of them log to. Private, encrypted, TLS-only, retained on stack deletion."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.deployment import stack_output

WAREHOUSE_PREFIX = "warehouse/"
GLUE_TEMP_PREFIX = "tmp/glue/"
ACCESS_LOG_RETENTION = Duration.days(365)


def _private_bucket_props() -> dict:
    return {
        "encryption": s3.BucketEncryption.S3_MANAGED,
        "block_public_access": s3.BlockPublicAccess.BLOCK_ALL,
        "enforce_ssl": True,
        "object_ownership": s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        "removal_policy": RemovalPolicy.RETAIN,
    }


class Storage(Construct):
    """``raw`` (DMS target), ``lake`` (Iceberg warehouse) and ``access_logs``."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        raw_unapplied_retention_days: int,
        lake_noncurrent_days: int,
    ) -> None:
        super().__init__(scope, construct_id)

        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            **_private_bucket_props(),
            lifecycle_rules=[s3.LifecycleRule(id="expire-access-logs", expiration=ACCESS_LOG_RETENTION)],
        )
        # cdk-nag's S1 accepts a bucket that is the access-log destination of other buckets, like this one.

        # Applied files go by the record, not by a rule: the scheduled maintenance deletes those a table's record
        # holds once they are rawRetentionDays old (infra.glue, --raw_retention_days). This catch-all, far later, is
        # for the files no table applied (a refused table, failing replays, a table the maintenance did not run
        # for); the OldestWaitingFile alarm fires long before. No versioning: DMS advises against it.
        self.raw = self._logged_bucket(
            "Raw",
            s3.LifecycleRule(
                id="expire-any-dms-file",
                expiration=Duration.days(raw_unapplied_retention_days),
                abort_incomplete_multipart_upload_after=Duration.days(1),
            ),
        )
        # Versioned: a file removed by mistake (a wrong manual maintenance, a bug in orphan removal) can be restored
        # for lake_noncurrent_days (docs/deploy.md#restoring-deleted-lake-files). Iceberg never overwrites a file, so
        # only deleted files leave versions behind; their delete markers go once nothing is left under them.
        self.lake = self._logged_bucket(
            "Lake",
            s3.LifecycleRule(id="abort-incomplete-uploads", abort_incomplete_multipart_upload_after=Duration.days(7)),
            s3.LifecycleRule(id="expire-glue-temp", prefix=GLUE_TEMP_PREFIX, expiration=Duration.days(7)),
            s3.LifecycleRule(
                id="expire-deleted-files",
                noncurrent_version_expiration=Duration.days(lake_noncurrent_days),
                expired_object_delete_marker=True,
            ),
            versioned=True,
        )
        self.warehouse_uri = f"s3://{self.lake.bucket_name}/{WAREHOUSE_PREFIX}"
        self.glue_temp_uri = f"s3://{self.lake.bucket_name}/{GLUE_TEMP_PREFIX}"
        stack_output(self, "RawBucketName", self.raw.bucket_name, "DMS target bucket (raw CSV/Parquet files)")
        stack_output(self, "LakeBucketName", self.lake.bucket_name, "Iceberg warehouse bucket")
        stack_output(self, "AccessLogBucketName", self.access_logs.bucket_name, "S3 server access logs")

    def _logged_bucket(
        self, construct_id: str, *lifecycle_rules: s3.LifecycleRule, versioned: bool = False
    ) -> s3.Bucket:
        """A private bucket logging its access to ``access_logs`` under its own lower-cased name."""
        return s3.Bucket(
            self,
            construct_id,
            **_private_bucket_props(),
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix=f"{construct_id.lower()}/",
            lifecycle_rules=list(lifecycle_rules),
            versioned=versioned,
        )
