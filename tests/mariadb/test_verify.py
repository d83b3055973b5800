"""``cdc-lake verify`` against a real MariaDB: each kind of drift found, key by key, reading a small part of the
table from the source, and changes in flight under load never reported (tests/support/verify_cases.py)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import boto3
import pytest
from moto import mock_aws
from pyspark.sql import SparkSession

from cdc_lake.core.config import PipelineConfig, load_config_uri
from cdc_lake.core.names import DRIFTED_KEYS_METRIC, METRICS_NAMESPACE
from cdc_lake.engine.metrics import CloudWatchPublisher
from cdc_lake.jobs.drift import DRIFT, DriftOptions
from cdc_lake.jobs.entry import JobClients, job_context
from cdc_lake.local.mysql_capture import MysqlCapture
from cdc_lake.local.session import LOCAL_CATALOG
from tests.mariadb.server import Server, create_database, execute, source_rows
from tests.support.verify_cases import (
    PERCENT_ROWS,
    ROWS,
    Source,
    check_percent_names,
    create_items,
    lake_drift,
    replicate,
    run_concurrent_scenario,
    run_drift_scenario,
)

pytestmark = [pytest.mark.mariadb, pytest.mark.spark]


def items_source(mariadb: Server) -> Source:
    url = create_database(mariadb, "drift")  # a fresh one each time

    def capture(config: PipelineConfig, landing: Path) -> MysqlCapture:
        return MysqlCapture(url, config, landing, load_file_rows=5_000, files_per_round=1)

    source = Source(url, lambda *sql: execute(url, *sql), capture, source_rows(url))
    moment = "TIMESTAMP '2025-01-01 00:00:00' + INTERVAL n SECOND"
    create_items(source, f"(SELECT seq AS n FROM seq_1_to_{ROWS}) s", moment)
    return source


def test_verify_finds_each_kind_of_drift(
    spark: SparkSession, mariadb: Server, warehouse: Path, database: str, tmp_path: Path, capsys
) -> None:
    run_drift_scenario(spark, items_source(mariadb), warehouse, database, tmp_path, capsys)


def test_changes_in_flight_are_not_drift_and_repair_is_exact(
    spark: SparkSession, mariadb: Server, warehouse: Path, database: str, tmp_path: Path, capsys
) -> None:
    run_concurrent_scenario(spark, items_source(mariadb), warehouse, database, tmp_path, capsys)


def test_the_drift_job_repairs_from_the_dms_secret_and_puts_what_is_left(
    spark: SparkSession, mariadb: Server, database: str, tmp_path: Path, capsys, caplog: pytest.LogCaptureFixture
) -> None:
    source = items_source(mariadb)
    replicated = replicate(spark, source, database, tmp_path, capsys)
    replicated.capture.close()
    expected = lake_drift(spark, replicated.pipeline.location.table(replicated.pipeline.config.tables[0]))
    password = "drift:job/é"
    execute(source.url, f"CREATE USER 'repairer'@'127.0.0.1' IDENTIFIED BY '{password}'",
            "GRANT SELECT ON drift.* TO 'repairer'@'127.0.0.1'")  # fmt: skip
    secret = {"host": "localhost", "port": mariadb.port, "username": "repairer", "password": password}
    options = {"region_name": "us-east-1", "aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
    caplog.set_level("INFO", logger="cdc_lake.jobs.drift")
    with mock_aws():
        s3, secrets, cloudwatch = (boto3.client(n, **options) for n in ("s3", "secretsmanager", "cloudwatch"))
        s3.create_bucket(Bucket="assets")
        s3.put_object(Bucket="assets", Key="tables.yaml", Body=replicated.written.read_bytes())
        arn = secrets.create_secret(Name="cdc-lake/source", SecretString=json.dumps(secret))["ARN"]
        arguments = {
            "--config_uri": "s3://assets/tables.yaml", "--source_secret": arn, "--source_engine": "mariadb",
            "--action": "repair", "--bucket": "raw", "--catalog": LOCAL_CATALOG, "--database": database,
            "--settle_timeout": "60", "--source_ca": str(mariadb.authority.ca),
        }  # fmt: skip
        # The job's run as its entry calls it, with the landed files read from the pipeline's own store.
        options = DriftOptions.from_options(arguments)
        config = load_config_uri(options.config_uri, s3_client=s3)
        context = job_context(options, spark, config=config, store=replicated.pipeline.store)
        clients = JobClients(s3, secrets, CloudWatchPublisher(cloudwatch, options.lake_database(config)))
        [after] = DRIFT.run(options, context, clients)
        stats = cloudwatch.get_metric_statistics(
            Namespace=METRICS_NAMESPACE, MetricName=DRIFTED_KEYS_METRIC,
            Dimensions=[{"Name": "Pipeline", "Value": database}],
            StartTime=dt.datetime(2000, 1, 1), EndTime=dt.datetime(2100, 1, 1), Period=60, Statistics=["Maximum"],
        )  # fmt: skip
    assert after.drift == [] and [p["Maximum"] for p in stats["Datapoints"]] == [0.0]
    logged = [
        json.loads(r.getMessage().split(" ", 1)[1]) for r in caplog.records if r.getMessage().startswith("DRIFT ")
    ]
    assert {tuple(d["key"].values()): (d["kind"], d["columns"]) for d in logged} == expected
    assert password not in caplog.text


def test_names_holding_a_percent_sign_are_read(mariadb: Server) -> None:
    url = create_database(mariadb, "verify_percent", "pct%schema")  # connected to the first, reading the second
    values = ", ".join(f"({n}, {'NULL' if r is None else repr(r)})" for n, r in PERCENT_ROWS)
    execute(url, "CREATE TABLE `pct%schema`.`pct%items` (`id%` BIGINT PRIMARY KEY, `rate%` TEXT)",
            f"INSERT INTO `pct%schema`.`pct%items` VALUES {values}")  # fmt: skip
    check_percent_names(url)
