"""``make bench-soak``: a day of a busy shard through one warm run, for what the run keeps (issue 69, scenario 5).

One warm run (the real ``engine.runs.warm.warm``: ``WarmShift``, ``drain``, its ``ListingLog`` and ``DrainResult``)
takes ``--tables`` tables (100) while each lands a DMS-named CDC file every round, as fast as the run takes them,
until ``--batches`` batches (50,000: a day of 100 tables landing a file every three minutes) are applied. A table's
batch is a stand-in without Spark: it reads every pending file's head for its layout, as a replay does
(``core.shapes.csv_layouts``), and applies every listed file not applied yet. The bucket answers from memory, its
keys made before the measure starts, so that what grows is what the run keeps.

Reported: the Python heap the run holds (tracemalloc, after a collection) once 10 % of the batches are applied and at
the end, their ratio (the goal: at most 1.10), the process's peak RSS, and the oracle: every landed file applied
exactly once. Spark's own heap is not in it: 50,000 Spark batches take about a day on this machine (1.5 to 3 s a
batch), which ``make bench-warm``'s 20 minutes sample instead (the driver held to 3g, its peak reported).

Usage: python -m bench.soak [--tables 100] [--batches 50000] [--out bench/results]
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import datetime as dt
import gc
import json
import resource
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cdc_lake.core.config import PipelineConfig, TableSpec, parse_config
from cdc_lake.core.dms_files import LandedFiles, list_landed
from cdc_lake.core.names import WARM_JOB
from cdc_lake.core.shapes import csv_layouts
from cdc_lake.core.storage import ReadAsListed, StoredObject
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.replay import RunResult
from cdc_lake.engine.runs import coalesced
from cdc_lake.engine.runs.coalesced import Budget
from cdc_lake.engine.runs.shift import DrainHooks
from cdc_lake.engine.runs.warm import WarmShift, warm
from cdc_lake.engine.tables import LakeLocation

HERE = Path(__file__).parent
START = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
CHANGES = 40  # rows of a file: about 2 KB, so a head is the whole file, as for most warm batches


def soak_config(tables: int) -> PipelineConfig:
    columns = [{"name": "id", "type": "bigint"}, {"name": "name", "type": "string"}, {"name": "n", "type": "int"}]
    return parse_config(
        {
            "runs": {"mode": "warm", "warm": {"tables_per_job": tables}},
            "tables": [{"name": f"shop.t{i:03d}", "primary_key": ["id"], "columns": columns} for i in range(tables)],
        }
    )


class Bucket:
    """The raw bucket in memory: every key made before the measure, landed by moving a mark (S3's listing from
    ``start_after`` by bisection); an object's bytes made when read."""

    def __init__(self, config: PipelineConfig, rounds: int) -> None:
        names = [(START + dt.timedelta(minutes=r)).strftime("%Y%m%d-%H%M%S%f")[:-3] for r in range(rounds)]
        self.keys = {config.table_prefix(t): [f"{config.table_prefix(t)}{n}.csv" for n in names] for t in config.tables}
        self.landed = 0  # files landed per table
        self.markers: dict[str, bytes] = {}
        self.body = "".join(f"I,{i},name-{i},{i}\n" for i in range(CHANGES)).encode()

    def list(self, prefix: str, start_after: str | None = None) -> list[StoredObject]:
        if prefix not in self.keys:
            return [StoredObject(k, len(v), "e") for k, v in sorted(self.markers.items()) if k.startswith(prefix)]
        keys = self.keys[prefix][: self.landed]
        first = 0 if start_after is None else bisect.bisect_right(keys, start_after)
        return [StoredObject(key, len(self.body), "e") for key in keys[first:]]

    def uri(self, key: str) -> str:
        return f"memory://{key}"

    def read_head(self, key: str, size: int) -> bytes:
        if key in self.markers:
            return self.markers[key][:size]
        if not key.endswith(".csv"):
            raise FileNotFoundError(key)
        return bytes(bytearray(self.body[:size]))  # a response of its own, as S3's

    def read_listed(self, item: StoredObject) -> ReadAsListed | None:
        return ReadAsListed(self.read_head(item.key, item.size))

    def folders(self, prefix: str) -> list[str]:
        return []

    def put(self, key: str, data: bytes) -> None:
        self.markers[key] = data

    def delete(self, key: str) -> None:
        self.markers.pop(key, None)

    def delete_many(self, keys: Sequence[str]) -> None:
        for key in keys:
            self.delete(key)


@dataclasses.dataclass
class Oracle:
    """What the stand-in batches applied, checked as they go: each table's files once each, in the order they
    landed (the bench's expected table). Per table it keeps a count, so the bench's own state does not grow."""

    bucket: Bucket
    next_file: dict[str, int] = dataclasses.field(default_factory=dict)  # per folder: the index of the next to apply
    out_of_order: int = 0  # a file applied twice, or before one landed earlier
    batches: int = 0

    def batch(self, context: ReplayContext, table: TableSpec, landed: LandedFiles | None = None) -> RunResult:
        landed = landed if landed is not None else list_landed(context.store, context.config, table)
        prefix = context.config.table_prefix(table)
        done = self.next_file.get(prefix, 0)
        applied_up_to = self.bucket.keys[prefix][done - 1] if done else ""
        pending = [f for f in landed.files if f.key > applied_up_to]
        csv_layouts(context.store.read_head, pending, table, context.config.dms)
        for f in pending:
            if f.key != self.bucket.keys[prefix][self.next_file.get(prefix, 0)]:
                self.out_of_order += 1
            self.next_file[prefix] = self.next_file.get(prefix, 0) + 1
        self.batches += 1
        newest = pending[-1].key if pending else None
        return RunResult(table.name, landed.newest, applied_files=[f.key for f in pending], listing_start=newest)


class NoGlue:
    """The warm run's Glue: nothing is handed over in this bench."""

    def get_job_runs(self, **_: Any) -> dict[str, Any]:
        return {"JobRuns": []}

    def get_job_run(self, **_: Any) -> dict[str, Any]:
        raise AssertionError("nothing is handed over")

    def start_job_run(self, **_: Any) -> dict[str, Any]:
        raise AssertionError("nothing is handed over")


def heap_mb() -> float:
    gc.collect()
    return tracemalloc.get_traced_memory()[0] / 1e6


def soak(tables: int, batches: int) -> dict[str, Any]:
    config = soak_config(tables)
    rounds = batches // tables
    bucket = Bucket(config, rounds)
    oracle = Oracle(bucket)
    coalesced.replay = oracle.batch  # the stand-in batch, for this process only
    context = ReplayContext(spark=None, location=LakeLocation("lake", "db"), config=config, store=bucket)  # type: ignore[arg-type]
    jobs = {"full_load": "full-load", "cdc_replay": "cdc-replay", WARM_JOB: "cdc-warm"}
    shift = WarmShift(context, NoGlue(), 0, "jr_soak", jobs, "raw")  # type: ignore[arg-type]
    clock = [0.0]
    marks: dict[str, float] = {}

    def on_round(number: int, commits: int) -> None:
        clock[0] += 1.0  # a round a second: quiet after two rounds without a landing
        if bucket.landed < rounds:
            bucket.landed += 1
        if "tenth" not in marks and oracle.batches >= batches // 10:
            marks["tenth"] = heap_mb()
            marks["tenth_batches"] = oracle.batches

    budget = Budget(1e9, 2.0, 0.0, config.runs.warm.parallel_tables, clock=lambda: clock[0], sleep=lambda _: None)
    tracemalloc.start()
    began = time.perf_counter()
    outcome = warm(context, shift, budget, DrainHooks(on_round=on_round))
    seconds = time.perf_counter() - began
    end = heap_mb()
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    files = bucket.landed * len(bucket.keys)
    missing = sum(bucket.landed - oracle.next_file.get(prefix, 0) for prefix in bucket.keys)
    return {
        "tables": tables,
        "batches": oracle.batches,
        "files": files,
        "rounds": outcome.rounds,
        "seconds": round(seconds, 1),
        "heap_mb_at_tenth": round(marks["tenth"], 2),
        "batches_at_tenth": marks["tenth_batches"],
        "heap_mb_at_end": round(end, 2),
        "heap_ratio": round(end / marks["tenth"], 3),
        "traced_peak_mb": round(peak, 1),
        "rss_peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "files_applied_twice_or_out_of_order": oracle.out_of_order,
        "files_not_applied": missing,
        "results_kept": len(outcome.results),
        "applied_counted": outcome.applied_count,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=100)
    parser.add_argument("--batches", type=int, default=50_000)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    figures = soak(args.tables, args.batches)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "soak.json").write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    for name, value in figures.items():
        print(f"{name:>22}  {value}")
    exact = not figures["files_applied_twice_or_out_of_order"] and not figures["files_not_applied"]
    good = figures["heap_ratio"] <= 1.10 and exact
    print("soak: " + ("held" if good else "NOT held: the heap grew past 10 %, or a file was not applied once"))
    return 0 if good else 1


if __name__ == "__main__":
    raise SystemExit(main())
