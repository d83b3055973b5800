"""Benchmarks, measured in one run on this machine (quote ratios: machines are shared and noisy).

1. Full load of one 1M-row LOAD file through the pipeline vs plain Spark CSV -> Parquet of the same file.
2. Applying one 10k-change CDC file to the 1M-row table, and (scaling) to a 100k-row table.
3. 50 busy tables: 50 x 4 CDC files land at once and drain through the Lambda's handler, one run per file
   against coalesced runs (bench.drain).
4. One day on AWS for 1 to 1,000 busy tables, old design against new, through the real Lambda handler with a
   simulated Glue (bench.simulate), fed with the batch time measured in 3.

Usage: python -m bench.run [--rows 1000000] [--changes 10000] [--out bench/results]
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from bench.drain import describe as describe_drain
from bench.drain import run_drain_bench
from bench.simulate import SimParams, print_table, simulate_all, write_results
from cdc_lake.config import PipelineConfig, load_config
from cdc_lake.dms_files import parse_key
from cdc_lake.local.generator import GeneratorSpec, generate
from cdc_lake.local.session import local_spark_session
from cdc_lake.replay import apply_up_to
from cdc_lake.spark_types import parse_type
from cdc_lake.storage import LocalFolderStore
from cdc_lake.tables import LakeLocation

HERE = Path(__file__).parent
DRAIN_TABLES = 50
DRAIN_FILES = 4
# Glue's speed against this machine's for one table's batch: taken as equal. A G.1X worker has 4 vCPUs to
# this machine's 2, but reads S3 and the Glue catalog over the network instead of a local disk.
GLUE_SCALE = 1.0


def timed(action):  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    value = action()
    return time.perf_counter() - started, value


def plain_csv_to_parquet(spark: SparkSession, config: PipelineConfig, csv: Path, out: Path) -> float:
    """The baseline: Spark's own CSV reader with the typed schema, written as Parquet, nothing else."""
    table = config.tables[0]
    fields = [T.StructField("dms_timestamp", T.StringType())]
    fields += [T.StructField(c.name, parse_type(c.type)) for c in table.columns]
    shutil.rmtree(out, ignore_errors=True)
    seconds, _ = timed(lambda: spark.read.schema(T.StructType(fields)).csv(str(csv)).write.parquet(str(out)))
    return seconds


def pipeline_run(spark: SparkSession, config: PipelineConfig, landing: Path, database: str, key: str) -> float:
    location = LakeLocation("lake", database)
    seconds, result = timed(
        lambda: apply_up_to(spark, config, location, LocalFolderStore(landing), parse_key(key, config))
    )
    assert result.applied_files, f"{key} applied nothing"
    return seconds


def scenario(spark, config, work: Path, rows: int, changes: int, database: str):  # type: ignore[no-untyped-def]
    spec = GeneratorSpec(initial_rows=rows, cdc_files=1, changes_per_file=changes, edge_cases=False, cached_changes=0)
    started = time.perf_counter()
    generated = generate(config, work / database, spec)
    generation = time.perf_counter() - started
    table = generated.tables[0]
    load_key, cdc_key = table.load_files[0], table.cdc_files[0]
    full_load = pipeline_run(spark, config, generated.landing, database, load_key)
    cdc = pipeline_run(spark, config, generated.landing, database, cdc_key)
    return generated, load_key, generation, full_load, cdc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--changes", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    work = args.out / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    config = load_config(HERE / "bench.yaml")
    spark = local_spark_session(work / "warehouse", app_name="cdc-lake-bench")

    print("warming up the JVM on a small table …", flush=True)
    scenario(spark, config, work, 20_000, 1_000, "warmup")

    print(f"generating and replaying {args.rows:,} rows + {args.changes:,} changes …", flush=True)
    generated, load_key, generation, full_load, cdc_big = scenario(spark, config, work, args.rows, args.changes, "big")
    baseline = plain_csv_to_parquet(spark, config, generated.landing / load_key, work / "baseline-parquet")
    small_rows = max(args.rows // 10, args.changes)
    print(f"replaying {args.changes:,} changes into a {small_rows:,}-row table …", flush=True)
    *_, cdc_small = scenario(spark, config, work, small_rows, args.changes, "small")

    results = {
        "rows": args.rows,
        "changes": args.changes,
        "generation_s": round(generation, 2),
        "plain_spark_csv_to_parquet_s": round(baseline, 2),
        "full_load_s": round(full_load, 2),
        "full_load_vs_plain_ratio": round(full_load / baseline, 2),
        "cdc_into_big_table_s": round(cdc_big, 2),
        "cdc_into_small_table_s": round(cdc_small, 2),
        "small_table_rows": small_rows,
        "cdc_big_vs_small_ratio": round(cdc_big / cdc_small, 2),
    }
    print(f"draining {DRAIN_TABLES} tables x {DRAIN_FILES} CDC files, one run per file and coalesced …", flush=True)
    drain = run_drain_bench(spark, work, DRAIN_TABLES, DRAIN_FILES, lambda text: print(f"  {text}", flush=True))
    results["drain"] = drain
    (args.out / "drain.json").write_text(json.dumps(drain, indent=2) + "\n")
    measured = drain["coalesced"]
    params = SimParams(per_table_s=measured["batch_s_median"], check_s=measured["idle_check_s"], scale=GLUE_SCALE)
    print(f"simulating one day on AWS (per-table batch {params.per_table_s:.2f}s x {GLUE_SCALE:g}) …", flush=True)
    started = time.perf_counter()
    simulation = simulate_all(params)
    write_results(simulation, params, args.out, time.perf_counter() - started)
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print()
    print(f"generator: {args.rows:,} rows + {args.changes:,} changes written in {generation:.1f}s")
    print(
        f"full load, {args.rows:,} rows:   pipeline {full_load:.1f}s  vs plain Spark CSV->Parquet {baseline:.1f}s"
        f"  (ratio {full_load / baseline:.2f})"
    )
    print(
        f"CDC file, {args.changes:,} changes:  into {args.rows:,} rows {cdc_big:.1f}s  vs into {small_rows:,} rows"
        f" {cdc_small:.1f}s  (ratio {cdc_big / cdc_small:.2f})"
    )
    print()
    print("\n".join(describe_drain(drain)))
    print()
    print_table(simulation)
    print(f"(also in {args.out / 'simulation.md'}; assumptions in docs/cost-simulation.md)")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
