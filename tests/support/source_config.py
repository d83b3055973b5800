"""A source's configuration checked against it: the source-check Glue job run through its entry on moto, and what
``config-from-source`` and ``config-check-source`` must say of the source tests' typed schema."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import cli


@dataclass(frozen=True)
class SourceCheckRun:
    differences: list[Any]  # cdc_lake.ops.source_catalog.Difference
    metric: list[float]  # the SourceDifferences values put


def run_source_check_job(
    config_file: Path, secret: dict[str, Any], engine: str, ca: Path, database: str = ""
) -> SourceCheckRun:
    """The source-check Glue job through its entry, its clients on moto: the configuration in S3, the source's
    connection details in a Secrets Manager secret as RDS writes them, checked TLS with the server's ``ca``."""
    import json

    import boto3
    from moto import mock_aws

    from cdc_lake.core.names import METRICS_NAMESPACE, SOURCE_DIFFERENCES_METRIC
    from cdc_lake.jobs.entry import glue_entry
    from cdc_lake.jobs.source_check import SOURCE_CHECK

    options = {"region_name": "us-east-1", "aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
    with mock_aws():
        s3, secrets, cloudwatch = (boto3.client(n, **options) for n in ("s3", "secretsmanager", "cloudwatch"))
        s3.create_bucket(Bucket="assets")
        s3.put_object(Bucket="assets", Key="tables.yaml", Body=config_file.read_bytes())
        arn = secrets.create_secret(Name="cdc-lake/source", SecretString=json.dumps(secret))["ARN"]
        arguments = {"--config_uri": "s3://assets/tables.yaml", "--source_secret": arn, "--source_engine": engine,
                     "--source_ca": str(ca)}  # fmt: skip
        if database:
            arguments["--source_database"] = database
        argv = ["source_check.py", *(item for pair in arguments.items() for item in pair)]
        found = glue_entry(SOURCE_CHECK, argv, lambda service: boto3.client(service, **options))
        stats = cloudwatch.get_metric_statistics(
            Namespace=METRICS_NAMESPACE, MetricName=SOURCE_DIFFERENCES_METRIC,
            Dimensions=[{"Name": "Pipeline", "Value": "cdc_lake"}],
            StartTime=dt.datetime(2000, 1, 1), EndTime=dt.datetime(2100, 1, 1), Period=60, Statistics=["Maximum"],
        )  # fmt: skip
    return SourceCheckRun(found, [p["Maximum"] for p in stats["Datapoints"]])


def config_from_source(capsys: pytest.CaptureFixture[str], source: str, out: Path, *options: str | Path) -> Path:
    """``config-from-source`` of ``source`` (with these options) written to ``out``, which it returns."""
    code, printed = cli(capsys, "config-from-source", "--source", source, "-o", out, *options)
    assert code == 0, printed
    return out


def check_written_shop(
    capsys: pytest.CaptureFixture[str], source: str, out: Path, types: dict[str, str], notes: dict[str, str]
) -> str:
    """``config-from-source`` of a source test's typed schema, ``shop``, written to ``out``: its orders and typed
    tables in that order (log has no key: only a comment lists it), orders with its key and NOT NULL columns as the
    source declares them, typed with the ``types`` this source maps its columns to, and each column of ``notes``
    commented with its note. Returns the file's text."""
    from cdc_lake.core.config import load_config

    code, printed = cli(capsys, "config-from-source", "--source", source, "--schema", "shop", "-o", out)
    assert code == 0, printed
    assert f"{out}: 2 table(s); 1 without a primary key listed in a comment" in printed
    config = load_config(out)
    assert [t.name for t in config.tables] == ["shop.orders", "shop.typed"]
    orders, typed = config.tables
    assert orders.primary_key == ["order_id", "line"]
    assert [(c.name, c.nullable) for c in orders.columns] == [("order_id", False), ("line", False), ("qty", False)]
    assert {c.name: c.type for c in typed.columns} == types
    text = out.read_text()
    for name, note in notes.items():
        [line] = [line for line in text.splitlines() if f'"name": "{name}"' in line]
        assert note in line.split("#", 1)[1], line
    assert "#   shop.log" in text
    return text


def check_source_differences(
    capsys: pytest.CaptureFixture[str], config_file: Path, source: str, schema: str, source_bigint: str
) -> None:
    """``config-check-source`` of ``config_file`` against ``source`` once a source test changed its typed schema
    (``schema``): typed gained note, lost body and had i widened to bigint (``source_bigint``, as the source spells
    the type), and the orders key lost line. Each of the four differences is named."""
    code, printed = cli(capsys, "config-check-source", "-c", config_file, "--source", source)
    assert code == 1, printed
    added = f"{schema}.typed: column-added: note text (add it at the end of columns as {{name: note, type: string}})"
    assert added in printed
    assert f"{schema}.typed: column-dropped: body (mark it dropped: true)" in printed
    assert f"{schema}.typed: type-changed: i: source {source_bigint} (bigint), configured int" in printed
    assert f"{schema}.orders: key-changed: source ['order_id'], configured ['order_id', 'line']" in printed
    assert "2 table(s) checked: 4 difference(s)" in printed
