"""Benchmarks, measured in one run on this machine (quote ratios: machines are shared and noisy).

1. One table at scale (bench.perf): full load of a 10M-row table in one and in ten LOAD files against plain
   Spark CSV -> Parquet, and where the one-file load spends its time; one batch of 1M changes; one 10k-change
   CDC file into tables of 10k to 10M rows, changed keys uniform or recent, each checked against (and timed
   with) a naive whole-table rebuild in plain Spark; small runs, the demo, Iceberg metadata commits per run,
   the driver's peak memory.
2. 50 busy tables: 50 x 4 CDC files land at once and drain through the Lambda's handler, one run per file
   against coalesced runs (bench.drain).
3. One day on AWS for 1 to 1,000 busy tables, old design against new, through the real Lambda handler with a
   simulated Glue (bench.simulate), fed with the batch time measured in 2., on the Glue version in force
   (GLUE_VERSION, else lake.glue_version of bench.yaml); then 100 and 1,000 busy tables on each Glue version.
4. The two lake paths (bench.paths, its own process and Spark session): small CDC runs on the Hadoop catalog
   and on the Glue catalog + S3 of a local AWS endpoint, and `cdc-lake demo` against `cdc-lake demo-aws`.
5. Drift (bench.drift, its own process): `cdc-lake verify` on a PostgreSQL table of --rows rows with 10 drifted
   keys, against exporting it and reconciling the lake with the extract; seconds, source queries, rows read.

Usage: python -m bench.run [--rows 10000000] [--changes 10000] [--perf-only] [--out bench/results]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from bench.drain import describe as describe_drain
from bench.drain import run_drain_bench
from bench.perf import OracleMismatch, run_perf
from bench.perf import write_results as write_perf_results
from bench.simulate import (
    VERSION_COLUMNS,
    VERSIONS_TITLE,
    SimParams,
    print_table,
    simulate_all,
    simulate_versions,
    warm_report,
    write_results,
)
from cdc_lake.core.config import PipelineConfig, glue_version, load_config
from cdc_lake.local.session import local_spark_session

HERE = Path(__file__).parent
DRAIN_TABLES = 50
DRAIN_FILES = 4
# Glue's speed against this machine's for one table's batch: taken as equal. A G.1X worker has 4 vCPUs to
# this machine's 2, but reads S3 and the Glue catalog over the network instead of a local disk.
GLUE_SCALE = 1.0


def progress(text: str) -> None:
    print(f"  {text}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000, help="the big table's rows (sizes: 10k up to it)")
    parser.add_argument("--changes", type=int, default=10_000, help="changes in the scaling runs' CDC file")
    parser.add_argument("--perf-only", action="store_true", help="only part 1: skip the drain and the simulation")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    work = args.out / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    spark = local_spark_session(work / "warehouse", app_name="cdc-lake-bench")
    config = load_config(HERE / "bench.yaml")

    print(f"one table at scale: {args.rows:,} rows, {args.changes:,} changes …", flush=True)
    try:
        perf = run_perf(spark, config, work / "perf", args.rows, args.changes, progress)
    except OracleMismatch as error:
        print(f"FAILED: {error}", file=sys.stderr)
        return 1
    perf_table = write_perf_results(perf, args.out)
    shutil.rmtree(work / "perf", ignore_errors=True)
    drained = None if args.perf_only else many_tables(spark, config, work, args.out)
    print()
    print("\n".join(perf_table))
    print(f"(also in {args.out / 'perf.md'}, {args.out / 'perf.json'}, {args.out / 'cdc_vs_table_size.png'})")
    if drained is not None:
        drain, simulation, versions = drained
        print()
        print("\n".join(describe_drain(drain)))
        print()
        print_table(simulation)
        print_table(versions, VERSION_COLUMNS, VERSIONS_TITLE)
        print(f"(also in {args.out / 'simulation.md'}; assumptions in docs/cost-simulation.md)")
    shutil.rmtree(work, ignore_errors=True)
    if not args.perf_only:
        spark.stop()  # one Spark session per process: the paths benchmark starts its own, beside a local endpoint
        print("\nthe two lake paths …", flush=True)
        subprocess.run([sys.executable, "-m", "bench.paths", "--out", str(args.out)], check=True)
        print(f"\ndrift: verify against export + reconcile, {args.rows:,} rows …", flush=True)
        subprocess.run([sys.executable, "-m", "bench.drift", "--rows", str(args.rows)], check=True)
    return 0


def many_tables(
    spark: SparkSession, config: PipelineConfig, work: Path, out: Path
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """Parts 2 and 3: the drain of many busy tables, then the simulated day fed with its batch time, on the Glue
    version in force and the new design on each version."""
    print(f"draining {DRAIN_TABLES} tables x {DRAIN_FILES} CDC files, one run per file and coalesced …", flush=True)
    drain = run_drain_bench(spark, work, DRAIN_TABLES, DRAIN_FILES, progress)
    (out / "drain.json").write_text(json.dumps(drain, indent=2) + "\n")
    measured = drain["coalesced"]
    params = SimParams(
        per_table_s=measured["batch_s_median"],
        check_s=measured["idle_check_s"],
        scale=GLUE_SCALE,
        glue_version=glue_version(config),
    )
    print(
        f"simulating one day on AWS Glue {params.glue_version} (per-table batch {params.per_table_s:.2f}s x "
        f"{GLUE_SCALE:g}) …",
        flush=True,
    )
    started = time.perf_counter()
    simulation = simulate_all(params)
    versions = simulate_versions(params, simulation)
    warm = warm_report(params, simulation)
    write_results(simulation, params, out, time.perf_counter() - started, versions, warm)
    return drain, simulation, versions


if __name__ == "__main__":
    raise SystemExit(main())
