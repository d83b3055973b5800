"""A deployed Glue run's world on the local endpoint (``GlueRun``): the configuration and a generated source's files
in buckets, a lake database in the Glue catalog, and the clients the job builds."""

from __future__ import annotations

import json
import uuid
from functools import partial
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from cdc_lake.core.config import PipelineConfig, parse_config
from cdc_lake.core.names import GLUE_CATALOG, METRICS_NAMESPACE, PIPELINE_DIMENSION
from cdc_lake.core.storage import S3Store
from cdc_lake.engine.context import LakeContext, ReplayContext
from cdc_lake.engine.tables import LakeLocation
from cdc_lake.local.generator import GeneratorSpec, generate, land_order
from tests.support.aws import aws_client
from tests.support.configs import app_config_data


class GlueRun:
    """What a deployed run finds on the local endpoint: the configuration and a generated source's files in
    buckets, a lake database of its own in the Glue catalog, and the AWS clients its Python side builds."""

    def __init__(self, endpoint: str, database: str, tmp_path: Path, **lake: Any) -> None:
        self.client = partial(aws_client, endpoint)  # what the job builds its AWS clients with
        self.s3, self.cloudwatch = self.client("s3"), self.client("cloudwatch")
        self.database = database
        self.bucket = f"raw-{uuid.uuid4().hex[:12]}"
        self.s3.create_bucket(Bucket=self.bucket)
        data = app_config_data() | {"lake": {"database": database, **lake}}
        self.config: PipelineConfig = parse_config(data)
        self.s3.put_object(Bucket=self.bucket, Key="config/tables.json", Body=json.dumps(data).encode())
        spec = GeneratorSpec(seed=7, initial_rows=30, cdc_files=2, changes_per_file=10, cached_changes=0)
        self.generated = generate(self.config, tmp_path / "source", spec)
        self.keys = land_order(self.generated)

    def land(self, key: str, body: bytes | None = None) -> None:
        data = body if body is not None else (self.generated.landing / key).read_bytes()
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=data)

    def argv(self, key: str) -> list[str]:
        """The arguments Glue hands the script for a run the Lambda started for ``key``."""
        table = ".".join(key.split("/")[:2])
        return ["full_load.py", "--JOB_ID", "j_1", "--config_uri", f"s3://{self.bucket}/config/tables.json",
                "--bucket", self.bucket, "--key", key, "--table", table, "--catalog", GLUE_CATALOG,
                "--database", self.database, "--idle_seconds", "0"]  # fmt: skip

    def lake(self) -> LakeContext:
        spark = SparkSession.getActiveSession()
        assert spark is not None
        return LakeContext(spark=spark, location=LakeLocation(GLUE_CATALOG, self.database), config=self.config)

    def context(self) -> ReplayContext:
        """What a job's run carries: this lake, and the bucket the files land in."""
        lake = self.lake()
        store = S3Store(self.bucket, client=self.s3)
        return ReplayContext(spark=lake.spark, location=lake.location, config=self.config, store=store)

    def metric(self, name: str) -> list[dict[str, Any]]:
        """The datapoints of one of the pipeline's metrics, this run's pipeline (its lake database) only."""
        return self.cloudwatch.get_metric_statistics(
            Namespace=METRICS_NAMESPACE,
            MetricName=name,
            Dimensions=[{"Name": PIPELINE_DIMENSION, "Value": self.database}],
            StartTime="2000-01-01T00:00:00Z",
            EndTime="2100-01-01T00:00:00Z",
            Period=60,
            Statistics=["SampleCount", "Maximum", "Sum"],
        )["Datapoints"]
