"""The drift Glue job: ``cdc-lake verify`` or ``repair`` on the deployed lake, run in the source's network.

It reads the DMS source endpoint's secret, compares (and with ``--action repair`` rewrites) the configured
tables, re-checking changes in flight against the raw bucket, logs each differing key as ``DRIFT <json>`` and
puts the number still differing at the end as the ``DriftedKeys`` metric (0 too), which the stack alarms on.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

from cdc_lake.core.config import load_config_uri
from cdc_lake.core.exceptions import JobArgumentError
from cdc_lake.core.names import DRIFTED_KEYS_METRIC, GLUE_CATALOG, METRICS_NAMESPACE, PIPELINE_DIMENSION
from cdc_lake.core.storage import ObjectStore, S3Store
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.tables import LakeLocation
from cdc_lake.ops.repair import repair
from cdc_lake.ops.source_check import secret_url
from cdc_lake.ops.source_tls import SourceAddress, job_tls
from cdc_lake.ops.verify import Settle, TableVerify, verify

log = logging.getLogger(__name__)

ACTIONS = ("verify", "repair")
JOB_REQUIRED = ("config_uri", "source_secret", "source_engine", "action", "bucket")
JOB_OPTIONAL = (
    "source_database", "table", "catalog", "database", "settle_timeout", "source_without_tls", "source_ca"
)  # fmt: skip


@dataclass(frozen=True)
class DriftClients:
    """The job's AWS clients: the configuration (S3), the source secret, the metric."""

    s3: Any
    secrets: Any
    cloudwatch: Any


def run_drift_job(
    options: Mapping[str, str], clients: DriftClients, spark: SparkSession, store: ObjectStore | None = None
) -> list[TableVerify]:
    """Verify (or repair, then verify again) the configured tables; ``store`` defaults to the raw bucket."""
    plain = {k.removeprefix("--"): v for k, v in options.items()}
    missing = [name for name in JOB_REQUIRED if not plain.get(name)]
    if missing:
        raise JobArgumentError(f"missing job argument(s): {', '.join('--' + m for m in missing)}")
    action = plain["action"]
    if action not in ACTIONS:
        raise JobArgumentError(f"--action {action!r}: use one of {', '.join(ACTIONS)}")
    config = load_config_uri(plain["config_uri"], s3_client=clients.s3)
    secret = json.loads(clients.secrets.get_secret_value(SecretId=plain["source_secret"])["SecretString"])
    source = SourceAddress(
        secret_url(secret, plain["source_engine"], plain.get("source_database") or None), job_tls(plain)
    )
    location = LakeLocation(plain.get("catalog") or GLUE_CATALOG, plain.get("database") or config.lake.database)
    context = ReplayContext(spark, config, location, store or S3Store(plain["bucket"], client=clients.s3))
    timeout = float(plain.get("settle_timeout") or 900)
    settle = Settle(context, float(config.dms.cdc_max_batch_interval), timeout_s=timeout)
    tables: Sequence[str] | None = [plain["table"]] if plain.get("table") else None
    if action == "repair":
        for repaired in repair(context, source, tables, settle=settle):
            for drift in repaired.verified.drift:
                log.warning("DRIFT %s", json.dumps(drift.as_json()))
            if repaired.snapshot_id is not None:
                log.info("%s: repaired %d key(s) in change %d (source position %s)", repaired.table, repaired.keys,
                         repaired.snapshot_id, repaired.position)  # fmt: skip
        tables = tables or [t.name for t in config.tables]
        results = verify(context, source, tables, settle=settle)
    else:
        results = verify(context, source, tables, settle=settle)
        for result in results:
            for drift in result.drift:
                log.warning("DRIFT %s", json.dumps(drift.as_json()))
    left = sum(len(r.drift) for r in results)
    done = {"verify": "verified", "repair": "repaired"}[action]
    log.info("%d table(s) %s: %d key(s) differ from the source", len(results), done, left)
    clients.cloudwatch.put_metric_data(
        Namespace=METRICS_NAMESPACE,
        MetricData=[
            {
                "MetricName": DRIFTED_KEYS_METRIC,
                "Dimensions": [{"Name": PIPELINE_DIMENSION, "Value": location.database}],
                "Timestamp": dt.datetime.now(dt.UTC),
                "Value": float(left),
                "Unit": "Count",
            }
        ],
    )
    return results


def glue_main(argv: Sequence[str] | None = None) -> list[TableVerify]:
    """Entry point of the drift Glue script."""
    import boto3

    from cdc_lake.engine.jobs import resolve_glue_arguments
    from cdc_lake.engine.session import glue_spark_session

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    options = resolve_glue_arguments(list(argv if argv is not None else sys.argv), JOB_REQUIRED, JOB_OPTIONAL)
    clients = DriftClients(boto3.client("s3"), boto3.client("secretsmanager"), boto3.client("cloudwatch"))
    return run_drift_job(options, clients, glue_spark_session(options.get("catalog") or GLUE_CATALOG))
