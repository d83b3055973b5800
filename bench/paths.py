"""The two lake paths side by side, in one run: the Hadoop catalog on local folders, and the deployed path (the
Glue Data Catalog with S3FileIO, files read from a bucket through S3A) on a local AWS endpoint.

- a small CDC run (``SMALL_RUN_CHANGES`` changes into a ``SMALL_TABLE_ROWS``-row table, ``SMALL_RUNS`` times,
  warm) on each catalog, in one Spark session holding both; then on the Glue catalog again with the local
  endpoint holding each Glue and S3 request as long as AWS answers in-Region (``aws_endpoint.IN_REGION``), so
  that the network's share of a small run shows, with the requests it makes; and so into a merge-on-read table,
  whose small batch is a row delta (``engine.row_delta``);
- ``cdc-lake demo`` against ``cdc-lake demo-aws``, each in a fresh process, as ``make demo`` and
  ``make demo-aws`` run them once set up.

Usage: python -m bench.paths [--out bench/results] [--no-demos]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from bench.perf import (
    CDC_START,
    SMALL_RUN_CHANGES,
    SMALL_RUNS,
    SMALL_TABLE_ROWS,
    cdc_file_name,
    last_spark_job,
    load_file_name,
    timed,
    write_cdc_file,
    write_load_data,
)
from cdc_lake.core.catalogs import glue_catalog_conf
from cdc_lake.core.config import PipelineConfig, load_config
from cdc_lake.core.dms_files import parse_key
from cdc_lake.core.names import GLUE_CATALOG
from cdc_lake.core.storage import LocalFolderStore, ObjectStore, S3Store
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.replay import replay
from cdc_lake.engine.tables import LakeLocation
from cdc_lake.local.aws_endpoint import (
    endpoint_environment,
    local_aws_endpoint,
    served_delay,
    served_requests,
    set_delay,
)
from cdc_lake.local.session import LOCAL_CATALOG, local_spark_session

HERE = Path(__file__).parent
LAKE_BUCKET = "bench-lake"
LANDING_BUCKET = "bench-landing"


@dataclass(frozen=True)
class _LakePath:
    landing: Path
    store: ObjectStore
    location: LakeLocation
    s3: Any = None  # the landing bucket's client, when files land in a bucket

    def land(self, key: str) -> None:
        """Land the file: a bucket gets it put, as DMS writes it."""
        if self.s3 is not None:
            self.s3.put_object(Bucket=LANDING_BUCKET, Key=key, Body=(self.landing / key).read_bytes())

    def land_and_apply(self, spark: SparkSession, config: PipelineConfig, key: str) -> float:
        """Land the file, then time one run up to it."""
        self.land(key)
        return self.apply(spark, config, key)

    def apply(self, spark: SparkSession, config: PipelineConfig, key: str) -> float:
        """Time one run up to the landed file."""
        context = ReplayContext(spark=spark, location=self.location, config=config, store=self.store)
        seconds, result = timed(lambda: replay(context, parse_key(key, config)))
        if not result.applied_files:
            raise RuntimeError(f"{self.location.catalog}: {key} applied nothing")
        return seconds


# (name, catalog, the endpoint's delay profile while it runs, the table's write mode): copy-on-write, the MERGE at
# every batch; merge-on-read, a row delta; auto, the default, whatever it chooses for a table this small.
PATHS = (
    ("hadoop", LOCAL_CATALOG, "0", "copy-on-write"),
    ("glue", GLUE_CATALOG, "0", "copy-on-write"),
    ("glue_in_region", GLUE_CATALOG, "in-region", "copy-on-write"),
    ("glue_in_region_row_delta", GLUE_CATALOG, "in-region", "merge-on-read"),
    ("glue_in_region_auto", GLUE_CATALOG, "in-region", "auto"),
)


def small_runs(config: PipelineConfig, work: Path, endpoint: str, runs: int = SMALL_RUNS) -> dict[str, Any]:
    """The same ``runs`` small CDC runs on each of ``PATHS``; seconds per run, their median and their mean (upkeep
    included), per path; on the Glue paths the requests of the last run, and the seconds the endpoint held each
    run's requests for."""
    import boto3

    s3 = boto3.client("s3", endpoint_url=endpoint)
    for bucket in (LAKE_BUCKET, LANDING_BUCKET):
        s3.create_bucket(Bucket=bucket)
    spark = local_spark_session(
        work / "warehouse",
        app_name="cdc-lake-bench-paths",
        conf=glue_catalog_conf(f"s3://{LAKE_BUCKET}/warehouse/"),
        aws_endpoint=endpoint,
    )
    table = config.tables[0]
    prefix = config.table_prefix(table)
    load = write_load_data(spark, SMALL_TABLE_ROWS, work / "load")
    figures: dict[str, Any] = {"rows": SMALL_TABLE_ROWS, "changes": SMALL_RUN_CHANGES}
    for path, catalog, delay, mode in PATHS:
        set_delay(endpoint, delay)
        path_config = config.model_copy(update={"lake": config.lake.model_copy(update={"write_mode": mode})})
        landing = work / path / "landing"
        (landing / prefix).mkdir(parents=True)
        shutil.copyfile(load.single, landing / prefix / load_file_name(1))
        location = LakeLocation(catalog, f"paths_{path}")
        if catalog == LOCAL_CATALOG:
            lake = _LakePath(landing, LocalFolderStore(landing), location)
        else:
            lake = _LakePath(landing, S3Store(LANDING_BUCKET, client=s3), location, s3)
        full_load_s = lake.land_and_apply(spark, path_config, prefix + load_file_name(1))
        max_key, seconds, jobs, requests, held = SMALL_TABLE_ROWS, [], [], [], []
        for number in range(runs):
            moment = CDC_START + dt.timedelta(seconds=number + 1)
            file = landing / prefix / cdc_file_name(moment)
            max_key = write_cdc_file(file, max_key, SMALL_RUN_CHANGES, "uniform", random.Random(number), moment)
            lake.land(prefix + file.name)
            served_requests(endpoint, reset=True)
            before = last_spark_job(spark)
            seconds.append(lake.apply(spark, path_config, prefix + file.name))
            jobs.append(last_spark_job(spark) - before)
            held.append(served_delay(endpoint))
            requests.append(served_requests(endpoint))
        figures[path] = {
            "full_load_s": round(full_load_s, 3),
            "runs_s": [round(s, 3) for s in seconds],
            "median_s": round(statistics.median(seconds), 3),
            "mean_s": round(statistics.mean(seconds), 3),
            "spark_jobs": jobs,
        }
        if catalog == GLUE_CATALOG:  # what the run asked of AWS: a table load is a GetTable and a metadata read
            figures[path]["requests"] = dict(sorted(requests[-1].items()))
            figures[path]["held_s"] = [round(h, 3) for h in held]
    spark.stop()
    return figures


def demos(work: Path) -> dict[str, float]:
    """``cdc-lake demo`` and ``cdc-lake demo-aws`` in fresh processes, one after the other."""
    cli = str(Path(sys.executable).with_name("cdc-lake"))
    seconds = {}
    for name in ("demo", "demo-aws"):
        started = time.perf_counter()
        done = subprocess.run([cli, name, "--workdir", str(work / name)], capture_output=True, text=True, check=False)
        seconds[name] = round(time.perf_counter() - started, 1)
        if done.returncode != 0:
            raise RuntimeError(f"cdc-lake {name} failed ({done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--no-demos", action="store_true", help="only the small runs")
    parser.add_argument(
        "--runs", type=int, default=SMALL_RUNS, help="small runs on each path (past 16, a row delta's compactions show)"
    )
    args = parser.parse_args()
    work = args.out / "paths-work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    config = load_config(HERE / "bench.yaml")
    print(
        "small CDC runs on the Hadoop catalog, on the Glue catalog + S3 (local endpoint), and there with AWS's "
        "in-Region round trips …",
        flush=True,
    )
    with local_aws_endpoint(delay="0") as endpoint:
        for name, value in endpoint_environment(endpoint).items():
            if name != "AWS_ENDPOINT_URL":  # the JVM's SDKs read credentials and region from the environment
                os.environ.setdefault(name, value)
        figures = small_runs(config, work, endpoint, args.runs)
    if not args.no_demos:
        print("cdc-lake demo, then cdc-lake demo-aws, each in a fresh process …", flush=True)
        figures["demos_s"] = demos(work)
    (args.out / "paths.json").write_text(json.dumps(figures, indent=2) + "\n")
    hadoop, glue = figures["hadoop"], figures["glue"]
    lines = [
        "| work | Hadoop catalog, local folders | Glue catalog + S3 (local endpoint) | ratio |",
        "|---|---:|---:|---:|",
        f"| small CDC run: {SMALL_RUN_CHANGES} changes into {SMALL_TABLE_ROWS:,} rows (median of {args.runs}, warm) "
        f"| {hadoop['median_s']:.2f} s | {glue['median_s']:.2f} s | {glue['median_s'] / hadoop['median_s']:.2f} |",
        f"| full load of {SMALL_TABLE_ROWS:,} rows (first run, cold) | {hadoop['full_load_s']:.2f} s "
        f"| {glue['full_load_s']:.2f} s | {glue['full_load_s'] / hadoop['full_load_s']:.2f} |",
    ]
    asked = glue["requests"]
    glue_calls = sum(n for kind, n in asked.items() if kind.startswith("glue:"))
    s3_calls = sum(n for kind, n in asked.items() if kind.startswith("s3:"))
    lines.append(
        f"| a small run's Spark jobs; on the Glue path, its table loads (GetTable, metadata reads) and commits "
        f"| {hadoop['spark_jobs'][-1]} jobs | {glue['spark_jobs'][-1]} jobs; {asked.get('glue:GetTable', 0)} GetTable, "
        f"{asked.get('s3:GET metadata.json', 0)} metadata reads, {asked.get('glue:UpdateTable', 0)} UpdateTable; "
        f"{glue_calls} Glue and {s3_calls} S3 requests in all | |"
    )
    remote = figures["glue_in_region"]
    network = statistics.median(remote["held_s"])
    lines.append(
        f"| the Glue path's small run with AWS's in-Region round trips (the endpoint holds each Glue and S3 request "
        f"as long as AWS answers; the MERGE, copy-on-write; median of {args.runs}) | | {remote['median_s']:.2f} s: "
        f"{remote['median_s'] - glue['median_s']:+.2f} s over no delay; its requests held {network:.2f} s in all "
        f"(some at once) | {remote['median_s'] / glue['median_s']:.2f} |"
    )
    for path, what in (
        ("glue_in_region_row_delta", "a merge-on-read table: a row delta (engine.row_delta)"),
        ("glue_in_region_auto", "a table of the default write mode (auto)"),
    ):
        delta = figures[path]
        asked = delta["requests"]
        lines.append(
            f"| the same into {what}, in-Region round trips; mean with upkeep | | "
            f"{delta['median_s']:.2f} s, mean {delta['mean_s']:.2f} s (the MERGE's {remote['mean_s']:.2f}), "
            f"{delta['spark_jobs'][-1]} job; {asked.get('glue:GetTable', 0)} GetTable, "
            f"{asked.get('glue:UpdateTable', 0)} UpdateTable, "
            f"{sum(n for kind, n in asked.items() if kind.startswith('s3:'))} S3 requests; its requests held "
            f"{statistics.median(delta['held_s']):.2f} s | {delta['median_s'] / remote['median_s']:.2f} of the "
            f"MERGE's; mean {delta['mean_s'] / remote['mean_s']:.2f} |"
        )
    if "demos_s" in figures:
        demo, demo_aws = figures["demos_s"]["demo"], figures["demos_s"]["demo-aws"]
        lines.append(f"| `make demo` (5,000 rows, 4 batches) / `make demo-aws` (2,000 rows, 2 batches), warm setup "
                     f"| {demo:.1f} s | {demo_aws:.1f} s "
                     f"| {demo_aws / demo:.2f} |")  # fmt: skip
    (args.out / "paths.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
