"""Many busy tables, locally: 50 tables × 4 CDC files land at once and the local runtime drains them through
the Lambda's own handler, one run per file (``runs.mode: per_file``) against coalesced runs (the default).

Both lakes must equal the generator's oracle; the figures are wall time, job runs, commits, listing requests
and objects listed, and the seconds of one table's batch (the day simulation's per-table input).

Usage: python -m bench.drain [--tables 50] [--files 4] [--out bench/results]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from cdc_lake.core.config import PipelineConfig, parse_config
from cdc_lake.core.jsonl import read_jsonl
from cdc_lake.local.generator import GeneratorSpec, generate, land, land_order
from cdc_lake.local.runtime import LocalPipeline, failed_runs
from cdc_lake.ops.export import export_tables

HERE = Path(__file__).parent


def many_tables_config(tables: int, mode: str) -> PipelineConfig:
    return parse_config(
        {
            "dms": {"timestamp_column": "dms_timestamp"},
            "runs": {"mode": mode},
            "tables": [
                {
                    "name": f"app.t{number:03d}",
                    "primary_key": ["id"],
                    "columns": [
                        {"name": "id", "type": "bigint"},
                        {"name": "status", "type": "string"},
                        {"name": "amount", "type": "decimal(12,2)"},
                        {"name": "updated_at", "type": "timestamp"},
                    ],
                }
                for number in range(1, tables + 1)
            ],
        }
    )


def drain_once(spark: SparkSession, work: Path, tables: int, files: int, mode: str, progress: Any) -> dict[str, Any]:
    """Full load first (not measured), then every table's CDC files land at once and are drained."""
    config = many_tables_config(tables, mode)
    spec = GeneratorSpec(seed=9, initial_rows=200, cdc_files=files, changes_per_file=40, cached_changes=0)
    generated = generate(config, work / f"source-{mode}", spec)
    keys = land_order(generated)
    loads = [k for k in keys if "/LOAD" in k]
    cdc = [k for k in keys if "/LOAD" not in k]
    landing = work / f"landing-{mode}"
    pipeline = LocalPipeline(config, landing, spark, database=f"drain_{mode}")
    land(generated.landing, landing, loads)
    progress(f"{mode}: full load of {tables} tables")
    runs = pipeline.deliver(loads)
    assert not failed_runs(runs), [r.error for r in failed_runs(runs)]

    land(generated.landing, landing, cdc)
    listings, listed, marked = pipeline.store.listings, pipeline.store.listed_objects, len(pipeline.store.marked)
    progress(f"{mode}: draining {len(cdc)} CDC files")
    started = time.perf_counter()
    runs = pipeline.deliver(cdc)
    wall = time.perf_counter() - started
    assert not failed_runs(runs), [r.error for r in failed_runs(runs)]

    check_s = None
    if config.runs.run_mode.every_table:
        # A run with nothing pending still checks every table once: lane-seconds per table.
        started = time.perf_counter()
        idle = pipeline.deliver(cdc[-1:])
        check_s = (time.perf_counter() - started) * config.runs.parallel_tables / tables
        assert all(r.result and r.result.already_applied for r in idle)

    export_tables(pipeline.context, work / f"export-{mode}")
    for table in config.tables:
        expected = read_jsonl(generated.expected / f"{table.name}.jsonl")
        assert read_jsonl(work / f"export-{mode}" / f"{table.name}.jsonl") == expected, f"{mode}: {table.name}"
    batches = [b for run in runs if run.result for b in run.result.commits]
    return {
        "mode": mode,
        "tables": tables,
        "files": len(cdc),
        "wall_s": round(wall, 2),
        "job_runs": len(runs),
        "commits": len(batches),
        "listing_requests": pipeline.store.listings - listings,
        "objects_listed": pipeline.store.listed_objects - listed,
        # S3 requests to tag the files applied (a tag read and a tag write each): what the lifecycle costs a batch.
        "tagging_requests": 2 * (len(pipeline.store.marked) - marked),
        "batch_s_median": round(statistics.median(b.seconds for b in batches), 3),
        "idle_check_s": round(check_s, 3) if check_s is not None else None,
        "equals_oracle": True,
    }


def run_drain_bench(spark: SparkSession, work: Path, tables: int, files: int, progress: Any) -> dict[str, Any]:
    old = drain_once(spark, work, tables, files, "per_file", progress)
    new = drain_once(spark, work, tables, files, "coalesced", progress)
    return {"per_file": old, "coalesced": new, "speedup": round(old["wall_s"] / new["wall_s"], 2)}


def describe(figures: dict[str, Any]) -> list[str]:
    old, new = figures["per_file"], figures["coalesced"]
    header = (
        f"{'design':<24} {'wall s':>8} {'job runs':>9} {'commits':>8} {'LIST calls':>11} {'keys listed':>12} "
        f"{'tag calls':>10}"
    )
    lines = [header, "-" * len(header)]
    for label, row in (("one run per file (old)", old), ("coalesced (new)", new)):
        lines.append(
            f"{label:<24} {row['wall_s']:>8.1f} {row['job_runs']:>9} {row['commits']:>8} "
            f"{row['listing_requests']:>11} {row['objects_listed']:>12} {row['tagging_requests']:>10}"
        )
    lines.append(
        f"{old['tables']} tables x {old['files'] // old['tables']} CDC files: coalesced drains in "
        f"{new['wall_s'] / old['wall_s']:.0%} of the per-file time ({figures['speedup']:.1f}x faster); "
        f"median batch {new['batch_s_median']:.2f}s; a table with nothing pending costs {new['idle_check_s']:.2f} "
        "lane-seconds to check"
    )
    return lines


def main() -> int:
    from cdc_lake.local.session import local_spark_session

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=50)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    work = args.out / "work-drain"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    spark = local_spark_session(work / "warehouse", app_name="cdc-lake-bench-drain")
    figures = run_drain_bench(spark, work, args.tables, args.files, lambda text: print(text, flush=True))
    (args.out / "drain.json").write_text(json.dumps(figures, indent=2) + "\n")
    print("\n".join(describe(figures)))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
