"""``make bench-warm``: busy tables replayed by a warm run (``runs.mode: warm``) on the deployed path, measured as AWS
would answer and as the local endpoint does.

``--tables`` tables (100) each land one DMS-named CDC file a minute (``--changes`` changes, 40, at a per-table offset
with a few seconds of jitter) for ``--minutes`` minutes (20) of wall time. Every file is put to the raw bucket of a
local AWS endpoint and its S3 event handed to the Lambda's own handler, which starts the shard's warm run (one run:
the tables fit one shard) and then finds it live; the warm run applies the tables through Iceberg's Glue catalog and
S3FileIO on the endpoint, in this process's Spark session: this machine's 2 cores, the driver held to a G.025X
worker's memory (``CDC_LAKE_DRIVER_MEMORY``, 3g of its 4 GB). The full loads before are not measured.

Two phases, one Spark session: the endpoint holding each Glue and S3 request as long as AWS answers in-Region
(``aws_endpoint``'s ``in-region`` profile), then not at all (``0``), each with a lake database and a bucket of its
own. Reported per phase: lag (a file's commit minus its landing) p50/p95/max, per-table batch seconds, rounds, Glue
and S3 requests per batch (and the listings a month of it would make), the driver's peak memory, and every table
against the generator's oracle.

``--commit-interval`` sets ``runs.warm.commit_interval_seconds`` (0), the quiet time raised to it.

Usage: python -m bench.warm [--tables 100] [--minutes 20] [--changes 40] [--delays in-region,0] [--commit-interval 0]
[--out bench/results]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from bench.bill import LAMBDA_GB, LINES, custom_metrics, monthly_bill, per_month
from bench.simulate import (
    S3_LIST_USD_PER_1000,
    SimParams,
    expiry_requests,
    percentile,
    shard_usd_per_month,
)
from cdc_lake.core.catalogs import glue_catalog_conf
from cdc_lake.core.config import PipelineConfig, parse_config
from cdc_lake.core.jsonl import read_jsonl
from cdc_lake.core.names import GLUE_CATALOG, WARM_JOB
from cdc_lake.core.shards import shard_count
from cdc_lake.core.storage import S3Store
from cdc_lake.engine.metrics import CloudWatchPublisher
from cdc_lake.engine.replay import RunResult
from cdc_lake.local.aws_endpoint import endpoint_environment, local_aws_endpoint, served_requests, set_delay
from cdc_lake.local.generator import GeneratorSpec, generate, land_order
from cdc_lake.local.runtime import LocalJobRun, LocalPipeline, failed_runs
from cdc_lake.local.session import local_spark_session
from cdc_lake.ops.export import export_tables

HERE = Path(__file__).parent
LAKE_BUCKET = "bench-warm-lake"
INTERVAL_S = 60.0
JITTER_S = 5.0
INITIAL_ROWS = 1000
# The run stops this long after the last file: the default (600 s) would only lengthen the bench's tail.
QUIET_S = 60
DRIVER_MEMORY = "3g"  # of a G.025X worker's 4 GB
PHASES = (("in-region", "AWS's in-Region round trips"), ("0", "no delay"))
MONTH_S = 30 * 24 * 3600.0


# The tables' shapes: ``narrow``, 4 columns under a bigint key; ``wide``, 8 columns under a two-column key (the
# shape of issue 71's slower run; with ``--changes 60``).
SHAPES: dict[str, tuple[list[dict[str, str]], list[str]]] = {
    "narrow": (
        [
            {"name": "id", "type": "bigint"},
            {"name": "label", "type": "string"},
            {"name": "amount", "type": "decimal(12,2)"},
            {"name": "updated_at", "type": "timestamp"},
        ],
        ["id"],
    ),
    "wide": (
        [
            {"name": "id", "type": "bigint"},
            {"name": "region", "type": "string"},
            {"name": "label", "type": "string"},
            {"name": "amount", "type": "decimal(12,2)"},
            {"name": "qty", "type": "int"},
            {"name": "active", "type": "boolean"},
            {"name": "score", "type": "double"},
            {"name": "updated_at", "type": "timestamp"},
        ],
        ["id", "region"],
    ),
}


def bench_config(tables: int, database: str, commit_interval_s: int = 0, shape: str = "narrow") -> PipelineConfig:
    columns, key = SHAPES[shape]
    quiet = max(QUIET_S, commit_interval_s)  # a run rests a table no longer than its quiet time
    return parse_config(
        {
            "dms": {"timestamp_column": "dms_timestamp"},
            "lake": {"database": database},
            "runs": {"mode": "warm", "warm": {"quiet_seconds": quiet, "commit_interval_seconds": commit_interval_s}},
            "tables": [{"name": f"app.t{i:03d}", "primary_key": key, "columns": columns} for i in range(tables)],
        }
    )


class Phase:
    """One phase: its bucket and database, the files it lands on schedule, and what its warm run committed."""

    def __init__(self, endpoint: str, name: str, generated: Any, config: PipelineConfig, minutes: int) -> None:
        import boto3

        self.endpoint, self.name, self.generated, self.config = endpoint, name, generated, config
        self.bucket = f"bench-warm-raw-{config.lake.database.replace('_', '-')}"
        self.s3 = boto3.client("s3", endpoint_url=endpoint)
        self.s3.create_bucket(Bucket=self.bucket)
        keys = land_order(generated)
        self.loads = [k for k in keys if "/LOAD" in k]
        cdc = [k for k in keys if k not in self.loads]
        rng = random.Random(58)
        self.schedule: list[tuple[float, str]] = []
        for table in config.tables:
            offset = rng.uniform(0, INTERVAL_S)
            own = [k for k in cdc if k.startswith(config.table_prefix(table))][:minutes]
            for number, key in enumerate(own):
                self.schedule.append((offset + number * INTERVAL_S + rng.uniform(-JITTER_S, JITTER_S), key))
        self.schedule.sort()
        self.landed_at: dict[str, float] = {}
        self.lags: list[float] = []
        self.batch_s: list[float] = []
        self.batches = 0
        self.lambda_s = 0.0  # the Lambda handler's time over the landed files' events
        self.lock = threading.Lock()
        self.pipeline: LocalPipeline | None = None

    def put(self, key: str) -> None:
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=(self.generated.landing / key).read_bytes())
        with self.lock:
            self.landed_at[key] = time.time()

    def committed(self, run: LocalJobRun, result: RunResult) -> None:
        now = time.time()
        if run.job != WARM_JOB:
            return
        with self.lock:
            self.batches += 1
            self.batch_s.append(result.seconds)
            self.lags += [now - self.landed_at[key] for key in result.applied_files if key in self.landed_at]

    def land_on_schedule(self, started: float) -> None:
        assert self.pipeline is not None
        for moment, key in self.schedule:
            time.sleep(max(0.0, started + moment - time.time()))
            self.put(key)
            handled = time.perf_counter()
            self.pipeline.notify(key)
            self.lambda_s += time.perf_counter() - handled


def run_phase(phase: Phase, spark: Any, delay: str) -> dict[str, Any]:
    import boto3

    config = phase.config
    for key in phase.loads:
        phase.put(key)
    # The shards' event queues, as the stack makes them: the Lambda tells them, the warm run reads its own.
    sqs = boto3.client("sqs", endpoint_url=phase.endpoint)
    queues = ",".join(
        sqs.create_queue(QueueName=f"{phase.bucket}-{shard}")["QueueUrl"] for shard in range(shard_count(config))
    )
    pipeline = LocalPipeline(
        config, phase.generated.landing, spark, database=config.lake.database, catalog=GLUE_CATALOG,
        store=S3Store(phase.bucket, client=phase.s3), on_batch=phase.committed,
        metrics=CloudWatchPublisher(boto3.client("cloudwatch", endpoint_url=phase.endpoint), config.lake.database),
        events_queues=queues, sqs=sqs,
    )  # fmt: skip
    phase.pipeline = pipeline
    pipeline.glue.keep_quiet = True  # files land on a clock here: the run waits out its quiet time, as on Glue
    loaded = pipeline.deliver(phase.loads)  # the full loads, unmeasured
    if failed_runs(loaded):
        raise RuntimeError(f"full loads failed: {[r.error for r in failed_runs(loaded)]}")
    phase.landed_at.clear()
    set_delay(phase.endpoint, delay)
    served_requests(phase.endpoint, reset=True)
    started = time.time()
    lander = threading.Thread(target=phase.land_on_schedule, args=(started,), daemon=True)
    lander.start()
    runs: list[LocalJobRun] = []
    while lander.is_alive() or any(not r.started for r in pipeline.glue.runs):
        runs += pipeline.glue.run_waiting()
        time.sleep(0.5)
    wall_s = time.time() - started
    requests = served_requests(phase.endpoint)
    set_delay(phase.endpoint, "0")
    if failed_runs(runs):
        raise RuntimeError(f"warm runs failed: {[r.error for r in failed_runs(runs)]}")
    unequal = _unequal_tables(pipeline, phase.generated.expected, phase.generated.landing.parent / "export")
    warm_runs = [r for r in runs if r.job == WARM_JOB]
    lags = sorted(phase.lags)
    glue = sum(n for kind, n in requests.items() if kind.startswith("glue:"))
    # The bench's own puts (DMS's writes) are not the pipeline's; the Lambda's look at the stop markers is.
    s3 = sum(n for kind, n in requests.items() if kind.startswith("s3:")) - len(phase.landed_at)
    listings = requests.get("s3:LIST", 0)
    # The bench's own puts are DMS's; the rest is what the pipeline asks of AWS, and the scheduled maintenance's
    # removal of the files it applied (a day's run, which the bench does not wait for).
    asked = requests - Counter({"s3:PUT csv": len(phase.landed_at)})
    asked.update(expiry_requests(len(phase.landed_at)))
    bill = monthly_bill(
        per_month(asked, wall_s, MONTH_S),
        glue_compute_usd=shard_usd_per_month(SimParams()) * sum(r.seconds for r in warm_runs) / wall_s,
        lambda_invocations=len(phase.landed_at) / wall_s * MONTH_S,
        lambda_gb_seconds=LAMBDA_GB * phase.lambda_s / wall_s * MONTH_S,
        custom_metrics=custom_metrics(),
    )
    return {
        "delay": delay,
        "tables": len(config.tables),
        "files": len(phase.lags),
        "landed": len(phase.schedule),
        "wall_s": round(wall_s, 1),
        "warm_runs": len(warm_runs),
        "rounds": sum(r.result.rounds for r in warm_runs if r.result is not None),
        "batches": phase.batches,
        "lag_s": {
            "p50": round(statistics.median(lags), 1),
            "p95": round(percentile(lags, 0.95), 1),
            "max": round(lags[-1], 1),
        },
        "batch_s": {
            "p50": round(statistics.median(phase.batch_s), 2),
            "p95": round(percentile(sorted(phase.batch_s), 0.95), 2),
        },
        "requests_per_batch": {"glue": round(glue / phase.batches, 1), "s3": round(s3 / phase.batches, 1)},
        "requests": dict(sorted(requests.items())),
        "requests_per_batch_by_kind": {k: round(n / phase.batches, 2) for k, n in sorted(asked.items())},
        "lambda_s_per_event": round(phase.lambda_s / max(len(phase.landed_at), 1), 4),
        "bill": bill.as_dict(),
        "s3_listings_per_month": round(listings / wall_s * MONTH_S),
        "s3_listing_usd_per_month": round(listings / wall_s * MONTH_S / 1000 * S3_LIST_USD_PER_1000, 2),
        "tables_unequal": unequal,
    }


def _unequal_tables(pipeline: LocalPipeline, expected: Path, out: Path) -> list[str]:
    export_tables(pipeline.context, out)
    return [
        t.name
        for t in pipeline.config.tables
        if read_jsonl(out / f"{t.name}.jsonl") != read_jsonl(expected / f"{t.name}.jsonl")
    ]


def _bill_line(line: str, figures: dict[str, Any]) -> str:
    bill = figures["bill"]
    return f"{bill['usd_per_month'][line]:,.2f} ({bill['requests_per_month'][line]:,})"


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=100)
    parser.add_argument("--minutes", type=int, default=20)
    parser.add_argument("--changes", type=int, default=40)
    parser.add_argument(
        "--commit-interval", type=int, default=0, help="runs.warm.commit_interval_seconds (0: a batch each round)"
    )
    parser.add_argument("--shape", choices=sorted(SHAPES), default="narrow", help="the tables' columns and key")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument(
        "--delays", default=",".join(d for d, _ in PHASES), help="the phases to run, by delay: in-region, 0, or both"
    )
    args = parser.parse_args()
    phases = [(delay, label) for delay, label in PHASES if delay in args.delays.split(",")]
    work = args.out / "warm-work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    os.environ["CDC_LAKE_DRIVER_MEMORY"] = DRIVER_MEMORY
    spec = GeneratorSpec(seed=58, initial_rows=INITIAL_ROWS, cdc_files=args.minutes, changes_per_file=args.changes,
                         cached_changes=0, edge_cases=False)  # fmt: skip
    figures: dict[str, Any] = {"tables": args.tables, "minutes": args.minutes, "changes_per_file": args.changes,
                               "commit_interval_s": args.commit_interval, "shape": args.shape}  # fmt: skip
    with local_aws_endpoint(delay="0") as endpoint:
        for name, value in endpoint_environment(endpoint).items():
            if name != "AWS_ENDPOINT_URL":  # the JVM's SDKs read credentials and region from the environment
                os.environ.setdefault(name, value)
        import boto3

        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=LAKE_BUCKET)
        spark = local_spark_session(
            work / "warehouse", app_name="cdc-lake-bench-warm", conf=glue_catalog_conf(f"s3://{LAKE_BUCKET}/warehouse/"),
            aws_endpoint=endpoint,
        )  # fmt: skip
        for delay, label in phases:
            database = f"warm_{'in_region' if delay != '0' else 'no_delay'}"
            config = bench_config(args.tables, database, args.commit_interval, args.shape)
            print(f"{label}: generating {args.tables} tables …", flush=True)
            generated = generate(config, work / database, spec)
            print(f"{label}: {args.tables} tables, a file a minute each for {args.minutes} min …", flush=True)
            figures[database] = run_phase(Phase(endpoint, database, generated, config, args.minutes), spark, delay)
            print(json.dumps(figures[database], indent=2), flush=True)
        pid = spark._jvm.java.lang.ProcessHandle.current().pid()
        figures["driver_peak_rss_mb"] = round(_peak_rss_mb(pid))
        figures["driver_memory"] = spark.conf.get("spark.driver.memory")
        spark.stop()
    (args.out / "warm.json").write_text(json.dumps(figures, indent=2) + "\n")
    lines = [
        "| | in-Region round trips | no delay |",
        "|---|---:|---:|",
    ]
    remote, local = figures.get("warm_in_region"), figures.get("warm_no_delay")
    rows: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
        ("files applied / landed", lambda f: f"{f['files']} / {f['landed']}"),
        ("lag p50 / p95 / max (s)", lambda f: f"{f['lag_s']['p50']} / {f['lag_s']['p95']} / {f['lag_s']['max']}"),
        ("batch seconds p50 / p95", lambda f: f"{f['batch_s']['p50']} / {f['batch_s']['p95']}"),
        ("batches, rounds, warm runs", lambda f: f"{f['batches']}, {f['rounds']}, {f['warm_runs']}"),
        ("Glue / S3 requests per batch", lambda f: "{glue} / {s3}".format(**f["requests_per_batch"])),
        ("S3 listings a month at this rate ($)",
         lambda f: f"{f['s3_listings_per_month']:,} (${f['s3_listing_usd_per_month']})"),
        ("tables unlike the oracle", lambda f: str(len(f["tables_unequal"]))),
        *((f"{line}, $ a month", partial(_bill_line, line)) for line in LINES),
        ("the whole bill, $ a month", lambda f: f"**{f['bill']['total_usd_per_month']:,.2f}**"),
    ]  # fmt: skip
    for label, pick in rows:
        lines.append(f"| {label} | {pick(remote) if remote else '-'} | {pick(local) if local else '-'} |")
    lines.append(f"| driver peak RSS (heap {figures['driver_memory']}) | {figures['driver_peak_rss_mb']:,} MB | |")
    (args.out / "warm.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    shutil.rmtree(work, ignore_errors=True)
    bad = any(phase["tables_unequal"] for phase in (remote, local) if phase)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
