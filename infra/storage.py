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

    def __init__(self, scope: Construct, construct_id: str, *, raw_retention_days: int) -> None:
        super().__init__(scope, construct_id)

        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            **_private_bucket_props(),
            lifecycle_rules=[s3.LifecycleRule(id="expire-access-logs", expiration=ACCESS_LOG_RETENTION)],
        )
        # cdk-nag's S1 accepts a bucket that is the access-log destination of other buckets, like this one.

        # No versioning: DMS advises against it on an S3 target, and the lake's Iceberg files are immutable.
        self.raw = self._logged_bucket(
            "Raw",
            s3.LifecycleRule(
                id="expire-dms-files",
                expiration=Duration.days(raw_retention_days),
                abort_incomplete_multipart_upload_after=Duration.days(1),
            ),
        )
        self.lake = self._logged_bucket(
            "Lake",
            s3.LifecycleRule(id="abort-incomplete-uploads", abort_incomplete_multipart_upload_after=Duration.days(7)),
            s3.LifecycleRule(id="expire-glue-temp", prefix=GLUE_TEMP_PREFIX, expiration=Duration.days(7)),
        )
        self.warehouse_uri = f"s3://{self.lake.bucket_name}/{WAREHOUSE_PREFIX}"
        self.glue_temp_uri = f"s3://{self.lake.bucket_name}/{GLUE_TEMP_PREFIX}"
        stack_output(self, "RawBucketName", self.raw.bucket_name, "DMS target bucket (raw CSV/Parquet files)")
        stack_output(self, "LakeBucketName", self.lake.bucket_name, "Iceberg warehouse bucket")
        stack_output(self, "AccessLogBucketName", self.access_logs.bucket_name, "S3 server access logs")

    def _logged_bucket(self, construct_id: str, *lifecycle_rules: s3.LifecycleRule) -> s3.Bucket:
        """A private bucket logging its access to ``access_logs`` under its own lower-cased name."""
        return s3.Bucket(
            self,
            construct_id,
            **_private_bucket_props(),
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix=f"{construct_id.lower()}/",
            lifecycle_rules=list(lifecycle_rules),
        )
