"""Crash safety: replay runs killed with SIGKILL (the process group, as a lost Glue worker or an OOM kill ends
them) at random moments, and at the three worst ones, then run again. The first run is a coalesced one; every later
run, the last included, is the warm runs of every shard (``runs.mode: warm``, as a stack switched to it runs), so a
warm run is killed at the worst moment and at random, and the next one takes up from there. One table is
merge-on-read, so its small batches commit as row deltas (``engine.row_delta``), one of them killed right after.

After the last run the lake equals the oracle, every landed file is recorded once in the table's lineage (and
in its history's), every data file the tables reference exists, and the only branches left are those of killed
runs: young, so kept (a live run's branch is never removed), and removed once older than the longest run.
``CDC_LAKE_KILLS`` sets how many runs are killed on each lake path (3 in ``make test``: the three worst moments, one
of each kind; 20 in ``make soak``: those, then at random), and
``CDC_LAKE_KILL_PATHS`` the paths: the Hadoop catalog in ``make test``; ``make soak`` adds the Glue Data Catalog
with S3, as deployed.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from cdc_lake.core.config import parse_config
from cdc_lake.core.jsonl import read_jsonl
from cdc_lake.core.names import GLUE_CATALOG, RUN_BRANCH_PREFIX
from cdc_lake.engine.commit import remove_dead_run_branches
from cdc_lake.engine.context import LakeContext
from cdc_lake.engine.iceberg_java import branches
from cdc_lake.engine.record import APPLIED, snapshot_summaries
from cdc_lake.engine.tables import LakeLocation, lake_tables
from cdc_lake.local.generator import GeneratorSpec, generate, land, land_order
from cdc_lake.local.session import LOCAL_CATALOG
from cdc_lake.ops.export import export_tables
from tests.support.aws import aws_client
from tests.support.configs import app_config_data

pytestmark = [pytest.mark.spark, pytest.mark.slow]

KILLS = int(os.environ.get("CDC_LAKE_KILLS", "3"))
KILL_PATHS = os.environ.get("CDC_LAKE_KILL_PATHS", "hadoop").split(",")
REPO = Path(__file__).resolve().parents[2]
# The three worst moments: main just moved to a run's branch, a history commit landed before the main one, and a row
# delta committed (the run then neither tags its files nor upkeeps the table).
TARGETED = ("fast_forward", "commit_history", "commit_row_delta")


def killed_run(args: list[str], rng: random.Random, die_after: str | None, *, warm: bool) -> int:
    """Start a run; kill it (its process group) a random moment after its session is up, or let it kill itself
    after ``die_after``. Its exit status (-9: killed)."""
    command = [sys.executable, "-m", "tests.functional.killable_run", *args, *(["--warm"] if warm else [])]
    if die_after:
        command += ["--die-after", die_after]
    with subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True
    ) as process:
        assert process.stdout is not None
        ready = ""
        while ready.strip() != "ready":  # the JVM may print first
            ready = process.stdout.readline()
            assert ready, "the run ended before its session was up"
        if die_after is None:
            try:
                process.wait(timeout=rng.uniform(0.2, 6.0))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=300)
        process.stdout.read()
        return process.returncode


def _exists(uri: str, aws_endpoint: str) -> bool:
    if not uri.startswith(("s3://", "s3a://")):
        return Path(uri.removeprefix("file:")).exists()
    bucket, _, key = uri.split("://", 1)[1].partition("/")
    try:
        aws_client(aws_endpoint, "s3").head_object(Bucket=bucket, Key=key)
    except ClientError:
        return False
    return True


def recorded_once(context: LakeContext, name: str, keys: list[str]) -> list[str]:
    """What is wrong with the applied-files record of lake table ``name``: each of ``keys`` exactly once."""
    counted: Counter[str] = Counter()
    for snapshot in snapshot_summaries(context, name):
        recorded = (snapshot["summary"] or {}).get(APPLIED)
        if recorded:
            counted.update(f["key"] for f in json.loads(recorded))
    wrong = [f"{key}: recorded {counted[key]} times" for key in keys if counted[key] != 1]
    return wrong + [f"{key}: recorded, not landed" for key in counted if key not in keys]


# Four runs, each a process of its own with its own JVM and Spark session (a kill ends a process): about 85 s here.
@pytest.mark.budget(120)
@pytest.mark.parametrize("path", KILL_PATHS)
def test_runs_killed_at_random_and_at_the_worst_moments_end_exact(
    spark: Any, warehouse: Path, database: str, tmp_path: Path, aws_endpoint: str, path: str
) -> None:
    data = app_config_data() | {"lake": {"database": database}}
    data["tables"][1]["history"] = True  # app.orders keeps history: its commit comes before main's
    data["tables"][2]["write_mode"] = "merge-on-read"  # app.events: its small batches are row deltas
    config = parse_config(data)
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(data))
    spec = GeneratorSpec(seed=11, initial_rows=40, cdc_files=KILLS + 2, changes_per_file=15, cached_changes=5)
    generated = generate(config, tmp_path / "source", spec)
    keys = land_order(generated)
    loads = [k for k in keys if "/LOAD" in k]
    cdc = [k for k in keys if k not in loads]
    landing = tmp_path / "landing"
    landing.mkdir()
    args = [str(config_file), str(landing), str(warehouse), database]
    location = LakeLocation(LOCAL_CATALOG, database)
    if path == "glue":
        bucket = f"landing-{database}".replace("_", "-")[:63]
        s3 = aws_client(aws_endpoint, "s3")
        s3.create_bucket(Bucket=bucket)
        args += ["--aws-endpoint", aws_endpoint, "--bucket", bucket]
        location = LakeLocation(GLUE_CATALOG, database)

    def land_files(batch: list[str]) -> None:
        land(generated.landing, landing, batch)
        if path == "glue":
            for key in batch:
                s3.put_object(Bucket=bucket, Key=key, Body=(landing / key).read_bytes())

    land_files(loads)
    rng = random.Random(KILLS)

    for number in range(KILLS):
        die_after = TARGETED[number] if number < len(TARGETED) else None
        status = killed_run(args, rng, die_after, warm=number > 0)
        assert status == -signal.SIGKILL or (die_after is None and status == 0), (number, die_after, status)
        # DMS keeps writing while runs come and go.
        land_files(cdc[number * len(cdc) // KILLS : (number + 1) * len(cdc) // KILLS])
    land_files([k for k in cdc if not (landing / k).exists()])
    command = [sys.executable, "-m", "tests.functional.killable_run", *args, "--warm"]
    last = subprocess.run(command, check=False, cwd=REPO, capture_output=True, text=True)
    assert last.returncode == 0, last.stdout + last.stderr[-3000:]

    context = LakeContext(spark=spark, location=location, config=config)
    out = tmp_path / "export"
    export_tables(context, out)
    for table in config.tables:
        assert read_jsonl(out / f"{table.name}.jsonl") == read_jsonl(generated.expected / f"{table.name}.jsonl")
    for table in config.tables:
        table_keys = [k for k in keys if k.startswith(config.table_prefix(table))]
        for name in lake_tables(table):
            assert not recorded_once(context, name, table_keys), (name, recorded_once(context, name, table_keys))
            paths = spark.sql(f"SELECT file_path FROM {context.location.named(name)}.files").collect()
            assert all(_exists(row["file_path"], aws_endpoint) for row in paths)
            # Killed runs' branches are young: kept, as a live run's would be; past the longest run, removed.
            dotted = context.location.dotted(name)
            left = [b.name for b in branches(spark, dotted, RUN_BRANCH_PREFIX)]
            assert remove_dead_run_branches(context, name, config.runs.longest_run) == []
            assert sorted(remove_dead_run_branches(context, name, older_than=dt.timedelta(0))) == sorted(left)
            assert not branches(spark, dotted, RUN_BRANCH_PREFIX)
