"""Day 30 of a busy table, locally: one table takes thousands of small batches, landed one file at a time through
the Lambda's handler and coalesced runs, in the default configuration (the replay's own upkeep included).

Every batch is timed (its upkeep counted in it); every ``--read-every`` batches the whole table is read and its
metadata measured (``metadata.json``, files under ``metadata/``, data and delete files, snapshots). Then
``cdc-lake maintain`` (the maintenance job's ``--action all``) runs and the table is read fresh from that
compaction, and ``--after`` more batches land. The lake must equal the generator's oracle.

The claims (issue "Day 30"): the median batch of the last 100 at most 1.2x that of the first 100; the read at the
end at most 1.3x the freshly compacted one; metadata bounded.

Usage: python -m bench.aging [--batches 2000] [--changes 40] [--rows 50000] [--out bench/results]
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
from cdc_lake.engine.maintenance import maintain, table_shape
from cdc_lake.local.generator import GeneratorSpec, generate, land, land_order
from cdc_lake.local.runtime import LocalPipeline, failed_runs
from cdc_lake.ops.export import export_tables

HERE = Path(__file__).parent
TABLE = "app.orders"
LAKE_TABLE = "app_orders"
DATABASE = "aging"
WINDOW = 100


def aging_config() -> PipelineConfig:
    return parse_config(
        {
            "dms": {"timestamp_column": "dms_timestamp"},
            "lake": {"database": DATABASE},
            "tables": [
                {
                    "name": TABLE,
                    "primary_key": ["id"],
                    "columns": [
                        {"name": "id", "type": "bigint"},
                        {"name": "status", "type": "string"},
                        {"name": "amount", "type": "decimal(12,2)"},
                        {"name": "updated_at", "type": "timestamp"},
                    ],
                }
            ],
        }
    )


def full_read(spark: SparkSession, pipeline: LocalPipeline, times: int = 3) -> float:
    """Seconds to read every row and column of the table, as a reader's full scan does: the median of ``times``
    reads (a read of a small table takes tens of milliseconds, where one scheduling hiccup weighs)."""
    seconds = []
    for _ in range(times):
        started = time.perf_counter()
        spark.table(pipeline.location.named(LAKE_TABLE)).write.format("noop").mode("overwrite").save()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def metadata_size(warehouse: Path) -> dict[str, int]:
    folder = warehouse / DATABASE / LAKE_TABLE / "metadata"
    versions = sorted(folder.glob("v*.metadata.json"), key=lambda p: int(p.name[1:].split(".")[0]))
    return {
        "metadata_json_bytes": versions[-1].stat().st_size if versions else 0,
        "metadata_files": sum(1 for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")),
    }


def measure(spark: SparkSession, pipeline: LocalPipeline, warehouse: Path, batch: int) -> dict[str, Any]:
    shape = table_shape(pipeline.context, LAKE_TABLE)
    head = spark.sql(
        f"SELECT summary['total-data-files'] AS data FROM {pipeline.location.metadata(LAKE_TABLE, 'snapshots')} "
        "ORDER BY committed_at DESC LIMIT 1"
    ).first()
    return {
        "batch": batch,
        "read_s": round(full_read(spark, pipeline), 3),
        "data_files": int(head["data"]) if head and head["data"] else 0,
        "delete_files": shape.delete_files,
        "snapshots": shape.snapshots,
        **metadata_size(warehouse),
    }


def run_batches(pipeline: LocalPipeline, generated: Any, keys: list[str]) -> tuple[float, list[str]]:
    """Land and deliver each key as its own batch; the batch's wall seconds and the upkeep steps it ran."""
    land(generated.landing, pipeline.landing, keys)
    started = time.perf_counter()
    runs = pipeline.deliver(keys)
    seconds = time.perf_counter() - started
    assert not failed_runs(runs), [r.error for r in failed_runs(runs)]
    steps = [u.action for run in runs if run.result for c in run.result.commits for u in c.upkeep]
    return seconds, steps


def run_aging(
    spark: SparkSession, work: Path, warehouse: Path, batches: int, changes: int, rows: int, after: int, progress: Any
) -> dict[str, Any]:
    config = aging_config()
    spec = GeneratorSpec(seed=30, initial_rows=rows, cdc_files=batches + after, changes_per_file=changes,
                         cached_changes=0, edge_cases=False, timestamp_ties=False)  # fmt: skip
    progress(f"generating {rows} rows and {batches + after} CDC files of {changes} changes")
    generated = generate(config, work / "source", spec)
    keys = land_order(generated)
    loads, cdc = [k for k in keys if "/LOAD" in k], [k for k in keys if "/LOAD" not in k]
    pipeline = LocalPipeline(config, work / "landing", spark, database=DATABASE)
    land(generated.landing, pipeline.landing, loads)
    assert not failed_runs(pipeline.deliver(loads))

    times: list[float] = []
    upkeep: dict[str, int] = {"write-mode": 0, "compact": 0, "expire": 0}
    samples = [measure(spark, pipeline, warehouse, 0)]
    started = time.perf_counter()
    for number, key in enumerate(cdc[:batches], start=1):
        seconds, steps = run_batches(pipeline, generated, [key])
        times.append(seconds)
        for step in steps:
            upkeep[step] += 1
        if number % WINDOW == 0:
            samples.append(measure(spark, pipeline, warehouse, number))
            last = samples[-1]
            progress(
                f"batch {number}: median of the last {WINDOW} {statistics.median(times[-WINDOW:]):.3f} s, read "
                f"{last['read_s']:.2f} s, {last['data_files']} data / {last['delete_files']} delete files, "
                f"{last['snapshots']} snapshots, metadata.json {last['metadata_json_bytes'] // 1024} KB, "
                f"{last['metadata_files']} files under metadata/ ({time.perf_counter() - started:.0f} s so far)"
            )
    end = samples[-1] if samples[-1]["batch"] == batches else measure(spark, pipeline, warehouse, batches)

    progress("maintenance: cdc-lake maintain --action all")
    begun = time.perf_counter()
    maintain(pipeline.context, "all")
    maintenance_s = time.perf_counter() - begun
    compacted = measure(spark, pipeline, warehouse, batches)
    later = [run_batches(pipeline, generated, [key])[0] for key in cdc[batches:]]

    export_tables(pipeline.context, work / "export")
    equal = read_jsonl(work / "export" / f"{TABLE}.jsonl") == read_jsonl(generated.expected / f"{TABLE}.jsonl")
    assert equal, f"{TABLE}: the lake differs from the oracle"
    first, last = statistics.median(times[:WINDOW]), statistics.median(times[-WINDOW:])
    return {
        "rows": rows,
        "batches": batches,
        "changes_per_batch": changes,
        "median_first_100_s": round(first, 3),
        "median_last_100_s": round(last, 3),
        "batch_ratio": round(last / first, 2),
        "mean_batch_s": round(statistics.fmean(times), 3),
        "slowest_batch_s": round(max(times), 3),
        "upkeep_runs": upkeep,
        "read_end_s": end["read_s"],
        "read_compacted_s": compacted["read_s"],
        "read_ratio": round(end["read_s"] / compacted["read_s"], 2),
        "maintenance_s": round(maintenance_s, 1),
        "median_after_maintenance_s": round(statistics.median(later), 3) if later else None,
        "samples": samples,
        "compacted": compacted,
        "batch_seconds": [round(t, 3) for t in times],
        "equals_oracle": equal,
    }


def describe(figures: dict[str, Any]) -> list[str]:
    by_batch = {s["batch"]: s for s in figures["samples"]}
    header = (
        f"{'after batch':>11} {'read s':>7} {'data/delete files':>18} {'snapshots':>10} {'metadata.json':>14} "
        f"{'metadata/ files':>16}"
    )
    lines = [header, "-" * len(header)]
    for batch in sorted(by_batch):
        if batch in (0, 100) or batch % 500 == 0 or batch == figures["batches"]:
            s = by_batch[batch]
            lines.append(
                f"{batch:>11} {s['read_s']:>7.2f} {str(s['data_files']) + ' / ' + str(s['delete_files']):>18} "
                f"{s['snapshots']:>10} {s['metadata_json_bytes'] // 1024:>11} KB {s['metadata_files']:>16}"
            )
    lines.append(
        f"median batch: first 100 {figures['median_first_100_s']:.3f} s, last 100 {figures['median_last_100_s']:.3f} s "
        f"({figures['batch_ratio']:.2f}x; claim <= 1.2x); mean {figures['mean_batch_s']:.3f} s with upkeep "
        f"{figures['upkeep_runs']}; full read at the end {figures['read_end_s']:.2f} s against "
        f"{figures['read_compacted_s']:.2f} s freshly compacted ({figures['read_ratio']:.2f}x; claim <= 1.3x); "
        f"maintain {figures['maintenance_s']:.0f} s; after it, median batch {figures['median_after_maintenance_s']} s; "
        f"equals the oracle: {figures['equals_oracle']}"
    )
    return lines


def plot(figures: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seconds = figures["batch_seconds"]
    rolling = [statistics.median(seconds[max(0, i - WINDOW + 1) : i + 1]) for i in range(len(seconds))]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    top.plot(range(1, len(seconds) + 1), seconds, ",", alpha=0.4, label="batch")
    top.plot(range(1, len(seconds) + 1), rolling, label=f"median of the last {WINDOW}")
    top.set_ylabel("seconds")
    top.set_ylim(0, max(rolling) * 2.5)
    top.legend()
    samples = figures["samples"]
    bottom.plot(
        [s["batch"] for s in samples], [s["metadata_json_bytes"] / 1024 for s in samples], label="metadata.json KB"
    )
    bottom.plot([s["batch"] for s in samples], [s["read_s"] * 1000 for s in samples], label="full read ms")
    bottom.set_xlabel("batch")
    bottom.legend()
    fig.suptitle(f"One table, {figures['batches']} batches of {figures['changes_per_batch']} changes")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    from cdc_lake.local.session import local_spark_session

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=2000)
    parser.add_argument("--changes", type=int, default=40)
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--after", type=int, default=50, help="batches after the maintenance")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    work = args.out / "work-aging"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    warehouse = work / "warehouse"
    spark = local_spark_session(warehouse, app_name="cdc-lake-bench-aging")
    figures = run_aging(spark, work, warehouse, args.batches, args.changes, args.rows, args.after,
                        lambda text: print(f"  {text}", flush=True))  # fmt: skip
    (args.out / "aging.json").write_text(json.dumps(figures, indent=2) + "\n")
    plot(figures, args.out / "aging.png")
    print("\n".join(describe(figures)))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
