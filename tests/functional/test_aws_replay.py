"""``cdc-lake aws-replay`` end to end on the local endpoint: the stack synthesized and created there, the real
Lambda handler, each Glue run through ``glue-run`` in its own process (as Glue runs it), and the result read
by a second reader (pyiceberg's Glue catalog) against the generator's expected tables."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from cdc_lake.core.config import load_config
from cdc_lake.core.jsonl import write_jsonl
from cdc_lake.core.names import (
    CHANGE_LAG_METRIC,
    FILES_APPLIED_METRIC,
    GLUE_CATALOG,
    METRICS_NAMESPACE,
    TABLE_FAILURES_METRIC,
    TRIGGER_SERVICE_NAME,
)
from cdc_lake.engine.tables import LakeLocation
from cdc_lake.local.demo import demo_config_path
from cdc_lake.local.generator import GeneratorSpec, generate, land, land_order
from tests.support.aws import aws_client
from tests.support.cli import (
    DEPLOYMENT_WARNINGS,
    UNACTIONABLE_LINES,
    aws_replay,
    aws_replay_environment,
    unactionable_lines,
)
from tests.support.source_tables import glue_reader

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.glue_path]

BAD_KEY = "dms/shop/orders/20990101-000000000.csv"


# One deployed-path replay (a CDK synth, a Glue run per job, each its own JVM, as on AWS): about 60 s here.
@pytest.mark.budget(90)
def test_a_landing_folder_through_the_deployed_path(aws_endpoint: str, tmp_path: Path) -> None:
    config = load_config(demo_config_path())
    generated = generate(config, tmp_path / "source", GeneratorSpec(seed=5, initial_rows=150, cdc_files=2))
    landing = tmp_path / "landing"
    land(generated.landing, landing, land_order(generated))
    # One bad value in the newest orders file: that table is refused, the others are applied.
    (landing / BAD_KEY).write_text("U,2099-01-01 00:00:00.000000,1,1,oops,paid,2099-01-01 00:00:00\n")
    (landing / "dms/shop/unconfigured/LOAD00000001.csv").parent.mkdir(parents=True)
    (landing / "dms/shop/unconfigured/LOAD00000001.csv").write_text("1\n")

    environment = aws_replay_environment(aws_endpoint)
    code, output = aws_replay(sys.executable, demo_config_path(), landing, tmp_path / "work", environment, timeout=600)

    assert code == 1, output
    assert f"{BAD_KEY}: row 1, column amount: cannot parse as decimal(12,2) (value 'oops')" in output
    assert "not a DMS file of a configured table: dms/shop/unconfigured/LOAD00000001.csv" in output
    orders_files = [k for k in land_order(generated) if k.startswith("dms/shop/orders/")]
    assert f"shop.orders: {len(orders_files) + 1} file(s) not applied" in output
    # The stack's placeholder values are the replay's own choice: no CDK warning about them, and no JVM noise; the
    # jobs' own warnings still show (the folder of no configured table), as plain lines for people: the only JSON
    # lines are the Lambda's own, whose logger must not take over the jobs' lines in the same process.
    assert unactionable_lines(output, UNACTIONABLE_LINES + DEPLOYMENT_WARNINGS) == []
    lines = output.splitlines()
    jobs_warnings = [line for line in lines if " WARNING cdc_lake.engine." in line and not line.startswith("{")]
    assert any("dms/shop/unconfigured/: holds files of a table" in line for line in jobs_warnings), output
    json_services = {json.loads(line)["service"] for line in lines if line.startswith("{")}
    assert json_services <= {TRIGGER_SERVICE_NAME}, output

    database = config.lake.database
    glue = aws_client(aws_endpoint, "glue")
    read = glue_reader(aws_endpoint)
    location = LakeLocation(GLUE_CATALOG, database)
    for name in ("shop.customers", "shop.order_items"):
        table = config.table(name)
        parameters = glue.get_table(DatabaseName=database, Name=table.lake_table)["Table"]["Parameters"]
        assert parameters["table_type"].upper() == "ICEBERG"
        assert parameters["metadata_location"].startswith("s3://")
        text = io.StringIO()
        write_jsonl(read(location, table), table, text)
        assert text.getvalue() == (generated.expected / f"{name}.jsonl").read_text(encoding="utf-8"), name
    # The jobs' metrics reached the same endpoint (their boto3 client follows AWS_ENDPOINT_URL).
    metrics = aws_client(aws_endpoint, "cloudwatch").list_metrics(Namespace=METRICS_NAMESPACE)["Metrics"]
    assert {CHANGE_LAG_METRIC, FILES_APPLIED_METRIC, TABLE_FAILURES_METRIC} <= {m["MetricName"] for m in metrics}
    # Nothing landed was removed from the raw bucket.
    s3 = aws_client(aws_endpoint, "s3")
    raw = next(b["Name"] for b in s3.list_buckets()["Buckets"] if "storageraw" in b["Name"])
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=raw)
    listed = {o["Key"] for page in pages for o in page.get("Contents", [])}
    assert listed == {p.relative_to(landing).as_posix() for p in landing.rglob("*") if p.is_file()}
