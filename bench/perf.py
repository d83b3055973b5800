"""One table at scale (bench.yaml's shop.orders, default configuration): what a run costs against plain Spark.

- Full load of one ``--rows``-row LOAD file, and of the same rows in ten LOAD files (LOAD00000001.csv …
  LOAD0000000A.csv, as DMS splits a large table), against plain Spark CSV -> Parquet of the same files; the
  one-file load split into its phases (the check for values spanning lines, reading and checking the rows, the
  sort, the write, the key check, the commit and the rest), from the Spark jobs the engine names.
- One CDC file of ``--changes`` changes (20 % inserts of new keys, 70 % updates, 10 % deletes) applied to tables
  of 10k rows up to ``--rows`` (one size per decade), with the changed keys "uniform" over the whole table or
  "recent" (the newest 1 % of keys). Each run is checked against a naive whole-table rebuild in plain Spark
  (current rows + the CDC rows, newest row per key, deletes dropped, Parquet overwritten), which is also timed:
  the rebuild is the oracle and the cost the replay avoids.
- A backlog: one batch of 1M uniform changes (a tenth of ``--rows`` when smaller) into the table loaded from ten
  files, checked against and timed with the rebuild.
- The peer: the same CDC file into the biggest table with uniform keys, as a user would apply it without cdc-lake
  (each key's last row, one ``MERGE INTO`` a plain Iceberg table of the same rows), in merge-on-read and in
  copy-on-write (Iceberg's default), each checked against the rebuild too.
- Small runs: 10 changes into a 10k-row table (median of 10 warm runs, each a new CDC file), and the wall time
  of ``cdc-lake demo`` in a fresh process.
- Iceberg metadata commits per run (the Hadoop catalog's version-hint.text before and after), the driver
  JVM's peak resident memory during the big full load, and the whole run's peaks of disk and memory.

The DMS files are written by Spark itself (the generator's Python is too slow for 10M rows) in DMS's CSV
form: no header, NULL as an unquoted empty field, quotes only around values that need them.

Out: perf.json, perf.md and cdc_vs_table_size.png under ``--out``; the table is printed.

Usage: python -m bench.perf [--rows 10000000] [--changes 10000] [--out bench/results]
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
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

from pyspark.sql import Column, DataFrame, Observation, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_lake.core.config import PipelineConfig, TableSpec, load_config
from cdc_lake.core.dms_files import parse_key
from cdc_lake.core.storage import LocalFolderStore
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.load_append import APPEND, KEY_CHECK, MULTILINE_CHECK, good_rows
from cdc_lake.engine.reader import file_layouts, read_changes
from cdc_lake.engine.replay import replay
from cdc_lake.engine.spark_types import parse_type
from cdc_lake.engine.tables import LakeLocation
from cdc_lake.local.generator import csv_field
from cdc_lake.local.session import LOCAL_CATALOG, local_spark_session

HERE = Path(__file__).parent
SMALL_TABLE_ROWS = 10_000  # the reference table of the CDC ratio and the table of the small runs
LOAD_FILES = 10  # DMS splits a large table's full load into files of a configured size
PATTERNS = ("uniform", "recent")
RECENT_SHARE = 0.01  # "recent" keys: the newest 1 % of the table
INSERT_SHARE, DELETE_SHARE = 0.2, 0.1  # the rest of a CDC file are updates
SMALL_RUN_CHANGES = 10
SMALL_RUNS = 10
AGAINST_MERGE_SMALL_RUNS = 3
SEED = 20_250_301
STATUSES = ("new", "paid", "shipped", "returned, refunded")  # one needs quoting
LOAD_TIMESTAMP = "2025-03-01 12:00:00.123456"  # DMS stamps full-load rows with the transfer time
CDC_START = dt.datetime(2025, 3, 1, 12, 0, 0)
BIG_BATCH = 1_000_000  # a backlog's changes in one batch, into the big table loaded from ten files
ORDERED_AT_START_US = 1_735_689_600_000_000  # 2025-01-01 00:00:00 UTC
TIMESTAMP_TEXT = "yyyy-MM-dd HH:mm:ss.SSSSSS"
POSITION, RANK = "_position", "_rank"
ONE_FILE_LOAD, TEN_FILES_LOAD = "load_one_file", "load_ten_files"  # the big full loads' databases
# Spark's CSV writer in DMS's form: no header, "\n" rows, RFC 4180 quotes (only where needed), NULL as an
# unquoted empty field (an empty string would be written quoted; the data has none).
DMS_CSV_WRITE = {"header": "false", "quote": '"', "escape": '"', "lineSep": "\n", "nullValue": ""}
DMS_CSV_READ = {"header": "false", "quote": '"', "escape": '"', "lineSep": "\n"}

Value = TypeVar("Value")


class OracleMismatch(Exception):
    """Raised when a lake table differs from the plain-Spark rebuild of the same changes."""


def timed(action: Callable[[], Value]) -> tuple[float, Value]:
    started = time.perf_counter()
    value = action()
    return time.perf_counter() - started, value


def table_sizes(rows: int) -> list[int]:
    """10k rows, then one size per decade up to ``rows`` (which is always the last)."""
    if rows < SMALL_TABLE_ROWS:
        raise ValueError(f"--rows must be at least {SMALL_TABLE_ROWS:,}")
    sizes = []
    size = SMALL_TABLE_ROWS
    while size < rows:
        sizes.append(size)
        size *= 10
    return [*sizes, rows]


def load_file_name(counter: int) -> str:
    """DMS's full-load file name: LOAD + an 8-digit hexadecimal counter from 1."""
    return f"LOAD{counter:08X}.csv"


def cdc_file_name(moment: dt.datetime) -> str:
    """DMS's CDC file name: YYYYMMDD-HHMMSSmmm."""
    return f"{moment:%Y%m%d-%H%M%S}{moment.microsecond // 1000:03d}.csv"


def short_count(count: int) -> str:
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if count >= size:
            return f"{count / size:g}{unit}"
    return str(count)


# ---------------------------------------------------------------------------------------------------- DMS files


@dataclass(frozen=True)
class LoadData:
    """One table size's full load, written once: ``LOAD_FILES`` key-ordered parts and their concatenation."""

    rows: int
    parts: tuple[Path, ...]
    single: Path


def write_load_data(spark: SparkSession, rows: int, folder: Path) -> LoadData:
    """Keys 1..rows in key order, as DMS's LOAD files hold them (no Op column), written by Spark."""
    shutil.rmtree(folder, ignore_errors=True)
    ident = F.col("id")
    statuses = F.array(*[F.lit(s) for s in STATUSES])
    status = F.element_at(statuses, (ident % len(STATUSES) + 1).cast("int"))
    frame = spark.range(0, rows, 1, LOAD_FILES).select(  # each partition a contiguous, ascending key range
        F.lit(LOAD_TIMESTAMP).alias("dms_timestamp"),
        (ident + 1).cast("string").alias("order_id"),
        (ident * 7_919 % 100_000 + 1).cast("string").alias("customer_id"),
        (ident * 104_729 % 10_000_000 / 100).cast("decimal(12,2)").cast("string").alias("amount"),
        F.when(ident % 13 == 0, F.lit(None).cast("string")).otherwise(status).alias("status"),
        F.date_format(F.timestamp_micros(F.lit(ORDERED_AT_START_US) + ident * 3_000_250), TIMESTAMP_TEXT).alias(
            "ordered_at"
        ),
    )
    frame.write.options(**DMS_CSV_WRITE).csv(str(folder / "parts"))
    parts = tuple(sorted((folder / "parts").glob("part-*.csv")))
    single = folder / load_file_name(1)
    with single.open("wb") as whole:
        for part in parts:
            with part.open("rb") as chunk:
                shutil.copyfileobj(chunk, whole, 16 << 20)
    return LoadData(rows, parts, single)


def _money(cents: int) -> str:
    return f"{cents // 100}.{cents % 100:02d}"


def write_cdc_file(path: Path, max_key: int, changes: int, pattern: str, rng: random.Random, start: dt.datetime) -> int:
    """A CDC file of ``changes`` rows (Op first); returns the table's new highest key.

    Inserts take new keys above ``max_key``; updates and deletes take existing keys, uniform over the table or
    from its newest 1 %, each at most once when there are enough keys (with repeats when there are not, which
    replay must order: a delete then an update is an upsert).
    """
    inserts = round(changes * INSERT_SHARE)
    deletes = round(changes * DELETE_SHARE)
    updates = changes - inserts - deletes
    lowest = 1 if pattern == "uniform" else max(1, max_key - int(max_key * RECENT_SHARE) + 1)
    existing = range(lowest, max_key + 1)
    touched = updates + deletes
    keys = rng.sample(existing, touched) if len(existing) >= touched else rng.choices(existing, k=touched)
    ops = ["I"] * inserts + ["U"] * updates + ["D"] * deletes
    rng.shuffle(ops)
    new_keys = iter(range(max_key + 1, max_key + inserts + 1))
    old_keys = iter(keys)
    lines = []
    for position, op in enumerate(ops):
        key = next(new_keys) if op == "I" else next(old_keys)
        status = rng.choice((*STATUSES, None))
        ordered_at = dt.datetime(2025, 1, 1) + dt.timedelta(microseconds=rng.randrange(10**13))
        fields = [
            op,
            (start + dt.timedelta(microseconds=position)).isoformat(" ", "microseconds"),
            str(key),
            str(rng.randrange(1, 100_001)),
            _money(rng.randrange(10**8)),
            "" if status is None else csv_field(status),
            ordered_at.isoformat(" ", "microseconds"),
        ]
        lines.append(",".join(fields) + "\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines), encoding="utf-8")
    return max_key + inserts


# ------------------------------------------------------------------------------------------ plain-Spark baselines


def typed_schema(table: TableSpec, *, with_op: bool) -> T.StructType:
    fields = [T.StructField("Op", T.StringType())] if with_op else []
    fields.append(T.StructField("dms_timestamp", T.StringType()))
    fields += [T.StructField(c.name, parse_type(c.type)) for c in table.columns]
    return T.StructType(fields)


def plain_csv_to_parquet(spark: SparkSession, table: TableSpec, files: Sequence[Path], out: Path) -> float:
    """The full-load baseline: Spark's own CSV reader with the typed schema, written as Parquet, nothing else."""
    shutil.rmtree(out, ignore_errors=True)
    reader = spark.read.schema(typed_schema(table, with_op=False)).options(**DMS_CSV_READ)
    seconds, _ = timed(lambda: reader.csv([str(f) for f in files]).write.parquet(str(out)))
    return seconds


def cdc_rows(spark: SparkSession, table: TableSpec, cdc_file: Path) -> DataFrame:
    """The CDC file's rows as plain Spark reads them: Op, the file order as ``POSITION``, the columns."""
    return (
        spark.read.schema(typed_schema(table, with_op=True))
        .options(**DMS_CSV_READ)
        .csv(str(cdc_file))
        .select("Op", F.monotonically_increasing_id().alias(POSITION), *table.column_names)  # file order
    )


def rebuild(spark: SparkSession, table: TableSpec, current: Path, cdc_file: Path, out: Path) -> float:
    """The naive alternative to replay: rewrite the whole table from its current rows and the CDC rows."""
    shutil.rmtree(out, ignore_errors=True)
    columns = table.column_names

    def run() -> None:
        rows = spark.read.parquet(str(current)).select(
            F.lit("I").alias("Op"), F.lit(-1).cast("long").alias(POSITION), *columns
        )
        changes = cdc_rows(spark, table, cdc_file)
        newest = Window.partitionBy(*table.primary_key).orderBy(F.col(POSITION).desc())
        result = (
            rows.unionByName(changes)
            .withColumn(RANK, F.row_number().over(newest))
            .filter((F.col(RANK) == 1) & (F.col("Op") != "D"))
            .select(*columns)
        )
        result.write.mode("overwrite").parquet(str(out))

    seconds, _ = timed(run)
    return seconds


PEER_MODES = ("merge-on-read", "copy-on-write")  # copy-on-write is Iceberg's default


def peer_table(spark: SparkSession, table: TableSpec, current: Path, mode: str) -> str:
    """A plain Iceberg table of the current rows, as a user would make it (CTAS, Iceberg's defaults but the
    write mode), for the peer MERGE; returns its name."""
    name = f"{LOCAL_CATALOG}.peer.{mode.replace('-', '_')}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {LOCAL_CATALOG}.peer")
    spark.sql(f"DROP TABLE IF EXISTS {name} PURGE")
    modes = ", ".join(f"'write.{op}.mode'='{mode}'" for op in ("merge", "update", "delete"))
    spark.read.parquet(str(current)).createOrReplaceTempView("peer_current")
    spark.sql(f"CREATE TABLE {name} USING iceberg TBLPROPERTIES ('format-version'='2', {modes}) "
              "AS SELECT * FROM peer_current")  # fmt: skip
    return name


def peer_merge(spark: SparkSession, table: TableSpec, name: str, cdc_file: Path) -> float:
    """What a user writes instead of cdc-lake (AWS's "CDC UPSERT with Iceberg and Glue" pattern): the CDC file
    reduced to each key's last row, then one MERGE INTO the plain table."""
    columns = table.column_names
    on = " AND ".join(f"t.{k} = s.{k}" for k in table.primary_key)
    values = ", ".join(f"s.{c}" for c in columns)
    assignments = ", ".join(f"t.{c} = s.{c}" for c in columns)

    def run() -> None:
        changes = cdc_rows(spark, table, cdc_file)
        newest = Window.partitionBy(*table.primary_key).orderBy(F.col(POSITION).desc())
        last = changes.withColumn(RANK, F.row_number().over(newest)).filter(F.col(RANK) == 1)
        last.localCheckpoint(eager=True).createOrReplaceTempView("peer_changes")  # MERGE needs a fixed source
        spark.sql(
            f"MERGE INTO {name} t USING peer_changes s ON {on} WHEN MATCHED AND s.Op = 'D' THEN DELETE "
            f"WHEN MATCHED THEN UPDATE SET {assignments} "
            f"WHEN NOT MATCHED AND s.Op <> 'D' THEN INSERT ({', '.join(columns)}) VALUES ({values})"
        )

    seconds, _ = timed(run)
    return seconds


def last_spark_job(spark: SparkSession) -> int:
    """The id of the session's newest Spark job: ids are consecutive, so jobs run = after - before."""
    return max(spark.sparkContext.statusTracker().getJobIdsForGroup(None), default=-1)


def job_seconds(spark: SparkSession, prefix: str, after_job: int) -> dict[str, float]:
    """Wall seconds of the Spark jobs after ``after_job`` whose description (``spark_types.described``) starts
    with ``prefix``, summed by the rest of the description."""
    seconds: dict[str, float] = {}
    jobs = spark._jsparkSession.sparkContext().statusStore().jobsList(None).iterator()
    while jobs.hasNext():
        job = jobs.next()
        description, started, ended = job.description(), job.submissionTime(), job.completionTime()
        if job.jobId() <= after_job or not description.isDefined() or not ended.isDefined():
            continue
        if description.get().startswith(prefix):
            phase = description.get()[len(prefix) :]
            seconds[phase] = seconds.get(phase, 0.0) + (ended.get().getTime() - started.get().getTime()) / 1000
    return seconds


def sort_seconds(spark: SparkSession, description: str) -> float:
    """The sort's share of the newest SQL execution so described: Spark's ``sort time`` metric (summed over the
    tasks) over the session's cores that ran them."""
    store = spark._jsparkSession.sharedState().statusStore()
    executions = store.executionsList()
    for index in reversed(range(executions.size())):
        execution = executions.apply(index)
        if execution.description() != description:
            continue
        values = store.executionMetrics(execution.executionId())
        metrics = execution.metrics()
        total_ms = 0.0
        for position in range(metrics.size()):
            metric = metrics.apply(position)
            shown = values.get(metric.accumulatorId())
            if metric.name() == "sort time" and shown.isDefined():
                total_ms += _duration_ms(shown.get())
        return total_ms / 1000 / spark.sparkContext.defaultParallelism
    raise LookupError(f"no Spark SQL execution described {description!r}")


def _duration_ms(shown: str) -> float:
    """The total of a Spark SQL timing metric as the UI shows it ("total (min, med, max …)\n2.1 s (…)")."""
    total = shown.rsplit("\n", maxsplit=1)[-1].split(" (", maxsplit=1)[0]
    number, unit = total.split(" ")
    return float(number) * {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000}[unit]


def _small_figures(runs: Sequence[tuple[float, ...]]) -> dict[str, Any]:
    """Seconds per run, their median, and the Spark jobs (and metadata commits, when counted) of each."""
    seconds = [run[0] for run in runs]
    figures = {"runs_s": [round(s, 3) for s in seconds], "median_s": round(statistics.median(seconds), 3)}
    figures["spark_jobs"] = [run[1] for run in runs]
    if runs and len(runs[0]) > 2:
        figures["metadata_commits"] = [run[2] for run in runs]
    return figures


def fingerprint(frame: DataFrame, columns: Sequence[str]) -> tuple[int, Decimal]:
    """Row count and an order-independent checksum of the rows' values (as text, NULL marked)."""
    texts: list[Column] = [F.coalesce(F.col(c).cast("string"), F.lit("\x00NULL")) for c in columns]
    row = frame.select(
        F.count(F.lit(1)).alias("rows"), F.sum(F.xxhash64(*texts).cast("decimal(38,0)")).alias("checksum")
    ).first()
    assert row is not None
    return int(row["rows"]), row["checksum"] or Decimal(0)


# ------------------------------------------------------------------------------------------------ the pipeline


class DriverMemory:
    """The local driver's resident memory: the JVM PySpark launched (Linux /proc; None elsewhere)."""

    def __init__(self, spark: SparkSession) -> None:
        gateway = getattr(spark.sparkContext, "_gateway", None)
        process = getattr(gateway, "proc", None)
        pid: int | None = getattr(process, "pid", None)
        comm = Path(f"/proc/{pid}/comm")
        # spark-submit execs the JVM, so the gateway's process is the driver itself.
        self.pid = pid if pid is not None and comm.exists() and comm.read_text().strip() == "java" else None

    def reset_peak(self) -> int | None:
        """Start a new peak (VmHWM := VmRSS); returns the resident MiB now."""
        if self.pid is None:
            return None
        Path(f"/proc/{self.pid}/clear_refs").write_text("5")
        return self.resident_mib()

    def peak_mib(self) -> int | None:
        return self._status_mib("VmHWM")

    def resident_mib(self) -> int | None:
        return self._status_mib("VmRSS")

    def _status_mib(self, field: str) -> int | None:
        if self.pid is None:
            return None
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) // 1024
        return None


class RunPeaks:
    """The whole run's peaks, sampled every second: bytes used on the work folder's file system above what was
    used at the start (data files, tables, Spark's spill and shuffle files alike) and the driver JVM's resident
    memory. A thread, not a hook per phase, so that no phase can be missed."""

    def __init__(self, work: Path, memory: DriverMemory, every_s: float = 1.0) -> None:
        self.work, self.memory, self.every_s = work, memory, every_s
        work.mkdir(parents=True, exist_ok=True)
        self.disk_start = shutil.disk_usage(work).used
        self.disk_peak = 0
        self.rss_peak_mib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="run-peaks", daemon=True)

    def __enter__(self) -> RunPeaks:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self._take()

    def _sample(self) -> None:
        while not self._stop.wait(self.every_s):
            self._take()

    def _take(self) -> None:
        self.disk_peak = max(self.disk_peak, shutil.disk_usage(self.work).used - self.disk_start)
        self.rss_peak_mib = max(self.rss_peak_mib, self.memory.resident_mib() or 0)

    def figures(self) -> dict[str, float | int]:
        return {"disk_peak_gib": round(self.disk_peak / 2**30, 1), "driver_peak_rss_mib": self.rss_peak_mib}


class PerfBench:
    """The bench's one Spark session, its configuration (bench.yaml) and work folder; one database per scenario."""

    def __init__(self, spark: SparkSession, config: PipelineConfig, work: Path, progress: Callable[[str], None]):
        self.spark = spark
        self.config = config
        self.table = config.tables[0]
        self.work = work
        self.progress = progress
        self.warehouse = Path(spark.conf.get(f"spark.sql.catalog.{LOCAL_CATALOG}.warehouse") or "")
        self.data: dict[int, LoadData] = {}

    def landing(self, database: str) -> Path:
        return self.work / "landing" / database

    def table_folder(self, database: str) -> Path:
        return self.landing(database) / self.config.table_prefix(self.table)

    def key(self, database: str, path: Path) -> str:
        return path.relative_to(self.landing(database)).as_posix()

    def load_data(self, rows: int) -> LoadData:
        if rows not in self.data:
            self.data[rows] = write_load_data(self.spark, rows, self.work / "generated" / str(rows))
        return self.data[rows]

    def land_load(self, database: str, rows: int, files: int) -> str:
        """Land a full load (one file, or the ``LOAD_FILES`` parts) as hard links; returns the last file's key."""
        data = self.load_data(rows)
        sources = [data.single] if files == 1 else list(data.parts)
        folder = self.table_folder(database)
        folder.mkdir(parents=True, exist_ok=True)
        landed = [folder / load_file_name(counter) for counter in range(1, len(sources) + 1)]
        for source, path in zip(sources, landed, strict=True):
            os.link(source, path)
        # S3 gives each object's ETag in the listing; the local store computes it (MD5, 1.2 s for a 10M-row file)
        # once per file and keeps it, so it is computed here, as S3 does when the object lands.
        LocalFolderStore(self.landing(database)).list(self.key(database, folder))
        return self.key(database, landed[-1])

    def land_cdc(self, database: str, max_key: int, changes: int, pattern: str, moment: dt.datetime) -> tuple[str, int]:
        """Write one CDC file into the database's landing folder; returns its key and the new highest key."""
        path = self.table_folder(database) / cdc_file_name(moment)
        rng = random.Random(f"{SEED}:{database}:{moment.isoformat()}")
        return self.key(database, path), write_cdc_file(path, max_key, changes, pattern, rng, moment)

    def apply(self, database: str, key: str, config: PipelineConfig | None = None) -> float:
        """One run through the library, as a job runs it: every pending file of the table up to ``key``."""
        config = config or self.config
        location, store = LakeLocation(LOCAL_CATALOG, database), LocalFolderStore(self.landing(database))
        context = ReplayContext(spark=self.spark, location=location, config=config, store=store)
        seconds, result = timed(lambda: replay(context, parse_key(key, config)))
        if not result.applied_files:
            raise RuntimeError(f"{database}: {key} applied nothing")
        return seconds

    def metadata_version(self, database: str) -> int:
        """The table's current metadata version (Hadoop catalog): commits in a run = after - before."""
        hint = self.warehouse / database / self.table.lake_table / "metadata" / "version-hint.text"
        return int(hint.read_text().strip()) if hint.exists() else 0

    def lake_frame(self, database: str) -> DataFrame:
        return self.spark.table(LakeLocation(LOCAL_CATALOG, database).dotted(self.table.lake_table))

    def table_files(self, database: str) -> dict[str, int]:
        """Data and delete files of the lake table's current snapshot."""
        files = LakeLocation(LOCAL_CATALOG, database).metadata(self.table.lake_table, "files")
        rows = self.spark.sql(f"SELECT content, count(*) AS n FROM {files} GROUP BY content").collect()
        counts = {int(r["content"]): int(r["n"]) for r in rows}
        return {"data_files": counts.get(0, 0), "delete_files": counts.get(1, 0) + counts.get(2, 0)}

    def check(self, database: str, rebuilt: Path) -> tuple[int, Decimal]:
        """The lake table must hold exactly the rebuild's rows."""
        columns = self.table.column_names
        lake = fingerprint(self.lake_frame(database), columns)
        oracle = fingerprint(self.spark.read.parquet(str(rebuilt)), columns)
        if lake != oracle:
            raise OracleMismatch(
                f"{database}: the lake table differs from the plain-Spark rebuild of the same changes: "
                f"{lake[0]:,} rows (checksum {lake[1]}) against {oracle[0]:,} rows (checksum {oracle[1]})"
            )
        return lake

    # ------------------------------------------------------------------------------------------- scenarios

    def full_load(self, database: str, rows: int, files: int, config: PipelineConfig | None = None) -> float:
        return self.apply(database, self.land_load(database, rows, files), config)

    def current_rows(self, rows: int) -> Path:
        """The table before any CDC, as plain Parquet (the rebuild's input): the baseline's output."""
        out = self.work / "current" / str(rows)
        if not out.exists():
            plain_csv_to_parquet(self.spark, self.table, [self.load_data(rows).single], out)
        return out

    def cdc_run(self, database: str, rows: int, changes: int, pattern: str, *, peers: bool = False) -> dict[str, Any]:
        """One CDC file into a freshly loaded table, checked against (and timed with) the naive rebuild; with
        ``peers``, the same file merged by plain ``MERGE INTO`` into plain tables of the same rows, checked too."""
        key, _ = self.land_cdc(database, rows, changes, pattern, CDC_START)
        before = self.metadata_version(database)
        cdc_s = self.apply(database, key)
        commits = self.metadata_version(database) - before
        rebuilt = self.work / "rebuilt" / database
        rebuild_s = rebuild(self.spark, self.table, self.current_rows(rows), self.landing(database) / key, rebuilt)
        rows_after, _ = self.check(database, rebuilt)
        peer_s = self.peers(rows, self.landing(database) / key, rebuilt) if peers else {}
        shutil.rmtree(rebuilt, ignore_errors=True)
        return {
            "rows": rows,
            "pattern": pattern,
            "changes": changes,
            "cdc_s": round(cdc_s, 3),
            "rebuild_s": round(rebuild_s, 3),
            "rebuild_vs_cdc": round(rebuild_s / cdc_s, 2),
            "metadata_commits": commits,
            "rows_after": rows_after,
            "equals_rebuild": True,
            **({"peer_merge_s": peer_s} if peers else {}),
            **self.table_files(database),
        }

    def peers(self, rows: int, cdc_file: Path, rebuilt: Path) -> dict[str, float]:
        """``peer_merge`` in each write mode, on a plain table of the same ``rows``, each checked against the
        rebuild; the tables are dropped after."""
        seconds = {}
        oracle = fingerprint(self.spark.read.parquet(str(rebuilt)), self.table.column_names)
        for mode in PEER_MODES:
            self.progress(f"the same changes by plain MERGE INTO a {mode} table of {short_count(rows)} rows …")
            name = peer_table(self.spark, self.table, self.current_rows(rows), mode)
            seconds[mode] = round(peer_merge(self.spark, self.table, name, cdc_file), 3)
            merged = fingerprint(self.spark.table(name), self.table.column_names)
            self.spark.sql(f"DROP TABLE {name} PURGE")
            if merged != oracle:
                raise OracleMismatch(f"plain MERGE INTO ({mode}) differs from the rebuild: {merged} against {oracle}")
        return seconds

    def warm_up(self) -> None:
        """Every code path once on a small table: JIT, class loading, Iceberg and Spark caches."""
        self.full_load("warmup", SMALL_TABLE_ROWS, 1)
        self.cdc_run("warmup", SMALL_TABLE_ROWS, 1_000, "uniform")

    def full_loads(self, rows: int, memory: DriverMemory) -> dict[str, Any]:
        """The big full load, in one LOAD file (the driver's peak memory measured) and in ten, each against
        plain Spark; the one-file baseline's Parquet is the rebuild's input later."""
        data = self.load_data(rows)
        self.progress(f"full load of {short_count(rows)} rows in one LOAD file, then plain Spark …")
        rss_before = memory.reset_peak()
        jobs_before = last_spark_job(self.spark)
        pipeline_s = self.full_load(ONE_FILE_LOAD, rows, 1)
        peak = memory.peak_mib()
        phases = self.load_phases(ONE_FILE_LOAD, pipeline_s, jobs_before)
        plain_s = plain_csv_to_parquet(self.spark, self.table, [data.single], self.work / "current" / str(rows))
        one = self._load_figures(ONE_FILE_LOAD, 1, pipeline_s, plain_s)
        one.update(driver_rss_before_mib=rss_before, driver_peak_rss_mib=peak, phases_s=phases)
        self.progress(f"full load of {short_count(rows)} rows in {LOAD_FILES} LOAD files, then plain Spark …")
        pipeline_s = self.full_load(TEN_FILES_LOAD, rows, LOAD_FILES)
        plain_s = plain_csv_to_parquet(self.spark, self.table, data.parts, self.work / "plain-ten-files")
        shutil.rmtree(self.work / "plain-ten-files", ignore_errors=True)
        return {"one_file": one, "ten_files": self._load_figures(TEN_FILES_LOAD, LOAD_FILES, pipeline_s, plain_s)}

    def load_phases(self, database: str, pipeline_s: float, after_job: int) -> dict[str, float]:
        """Where the full load just run into ``database`` spent its time: the Spark jobs the engine describes
        (``load_append``), the sort inside the append (Spark's metric), reading and checking the rows alone (the
        same read again, into a write that writes nothing) and so the write, and the rest (listing, planning,
        the branch and its commits)."""
        prefix = f"{self.table.name}: "
        jobs = job_seconds(self.spark, prefix, after_job)
        sort_s = sort_seconds(self.spark, prefix + APPEND)
        read_s = self.read_and_check(database)
        phases = {
            "values spanning lines": jobs.get(MULTILINE_CHECK, 0.0),
            "read and check": read_s,
            "sort": sort_s,
            "write": jobs.get(APPEND, 0.0) - read_s - sort_s,
            "key check": jobs.get(KEY_CHECK, 0.0),
            "commit and the rest": pipeline_s - sum(jobs.values()),
        }
        return {phase: round(seconds, 2) for phase, seconds in phases.items()}

    def read_and_check(self, database: str) -> float:
        """The append's rows as the engine reads, checks and counts them (split in parts as it splits a file
        with no value spanning lines), written nowhere."""
        context = ReplayContext(
            spark=self.spark,
            location=LakeLocation(LOCAL_CATALOG, database),
            config=self.config,
            store=LocalFolderStore(self.landing(database)),
        )
        loads = sorted(self.table_folder(database).glob("LOAD*"))
        files = [parse_key(self.key(database, path), self.config) for path in loads]
        split = len(files) < self.spark.sparkContext.defaultParallelism
        read = read_changes(context, files, self.table, file_layouts(context, files, self.table), split=split)
        good = good_rows(read, self.table, Observation(f"bench_read_{database}"))
        seconds, _ = timed(lambda: good.write.format("noop").mode("overwrite").save())
        return seconds

    def _load_figures(self, database: str, files: int, pipeline_s: float, plain_s: float) -> dict[str, Any]:
        return {
            "files": files,
            "pipeline_s": round(pipeline_s, 3),
            "plain_spark_s": round(plain_s, 3),
            "ratio": round(pipeline_s / plain_s, 2),
            **self.table_files(database),
        }

    def scaling(
        self, sizes: Sequence[int], changes: int, loaded: Mapping[tuple[int, str], str]
    ) -> list[dict[str, Any]]:
        """Each size and key pattern: one CDC file of ``changes`` into a table just loaded from one LOAD file
        (``loaded`` names tables already in that state, by size and pattern)."""
        runs = []
        for rows in sizes:
            for pattern in PATTERNS:
                self.progress(f"{changes:,} {pattern} changes into {short_count(rows)} rows (+ the rebuild) …")
                database = loaded.get((rows, pattern))
                if database is None:
                    database = f"cdc_{short_count(rows).replace('.', '_')}_{pattern}"
                    self.full_load(database, rows, 1)
                peers = rows == sizes[-1] and pattern == "uniform"
                runs.append(self.cdc_run(database, rows, changes, pattern, peers=peers))
        return runs

    def against_merge(self, sizes: Sequence[int], changes: int) -> list[dict[str, Any]]:
        """Into the smallest and the biggest table, each key pattern: one CDC file of ``changes`` applied to two
        tables just loaded from the same LOAD file, one as configured (its batch a row delta) and one with
        ``row_delta_keys: 0`` (the MERGE), side by side in this process, each checked against the rebuild. Into the
        smallest table, where a run takes about a second, the median of ``AGAINST_MERGE_SMALL_RUNS`` pairs, each
        pair in the other order than the last."""
        merge = self.config.model_copy(update={"lake": self.config.lake.model_copy(update={"row_delta_keys": 0})})
        configs = {"default": self.config, "merge": merge}
        runs = []
        for rows in sorted({sizes[0], sizes[-1]}):
            for pattern in PATTERNS:
                self.progress(f"{changes:,} {pattern} changes into {short_count(rows)} rows: default and the MERGE …")
                pairs = AGAINST_MERGE_SMALL_RUNS if rows == sizes[0] else 1
                seconds: dict[str, list[float]] = {label: [] for label in configs}
                for number in range(pairs):
                    order = list(configs) if number % 2 == 0 else list(reversed(configs))
                    for label, elapsed in self._side_by_side(configs, order, rows, changes, pattern, number).items():
                        seconds[label].append(elapsed)
                figures = {f"{label}_s": round(statistics.median(values), 3) for label, values in seconds.items()}
                ratio = {"default_vs_merge": round(figures["default_s"] / figures["merge_s"], 2)}
                runs.append({"rows": rows, "pattern": pattern, "changes": changes, **figures, **ratio})
        return runs

    def _side_by_side(
        self,
        configs: Mapping[str, PipelineConfig],
        order: Sequence[str],
        rows: int,
        changes: int,
        pattern: str,
        number: int,
    ) -> dict[str, float]:
        databases = {label: f"vs_{label}_{rows}_{pattern}_{number}" for label in configs}
        for label, config in configs.items():
            self.full_load(databases[label], rows, 1, config)
        key, _ = self.land_cdc(databases["default"], rows, changes, pattern, CDC_START)
        cdc_file = self.landing(databases["default"]) / key
        shutil.copyfile(cdc_file, self.landing(databases["merge"]) / key)
        seconds = {label: self.apply(databases[label], key, configs[label]) for label in order}
        rebuilt = self.work / "rebuilt" / "against-merge"
        rebuild(self.spark, self.table, self.current_rows(rows), cdc_file, rebuilt)
        for database in databases.values():
            self.check(database, rebuilt)
        shutil.rmtree(rebuilt, ignore_errors=True)
        return seconds

    def small_runs(self) -> dict[str, Any]:
        """``SMALL_RUN_CHANGES`` changes into a ``SMALL_TABLE_ROWS``-row table, ``SMALL_RUNS`` times, warm: seconds,
        Spark jobs and metadata commits per run, for the table as configured (copy-on-write at this size: the MERGE),
        merge-on-read (a row delta, ``engine.row_delta``), and with history. Side by side with the first two, each CDC
        file merged by hand into a plain merge-on-read table of the same rows (``peer_merge``), which must end equal
        to the lake table."""
        figures: dict[str, Any] = {"rows": SMALL_TABLE_ROWS, "changes": SMALL_RUN_CHANGES}
        merge_on_read = self.config.lake.model_copy(update={"write_mode": "merge-on-read"})
        variants = {
            "plain": self.config,
            "row_delta": self.config.model_copy(update={"lake": merge_on_read}),
            "history": self.config.model_copy(update={"tables": [self.table.model_copy(update={"history": True})]}),
        }
        for label, config in variants.items():
            beside = label != "history"
            self.progress(
                f"{SMALL_RUNS} small runs ({label}): {SMALL_RUN_CHANGES} changes into "
                f"{short_count(SMALL_TABLE_ROWS)} rows{', each beside a plain MERGE INTO' if beside else ''} …"
            )
            peer = peer_table(self.spark, self.table, self.current_rows(SMALL_TABLE_ROWS), PEER_MODES[0])
            database = f"small_runs_{label}"
            self.full_load(database, SMALL_TABLE_ROWS, 1, config)
            max_key, runs, peers = SMALL_TABLE_ROWS, [], []
            for number in range(SMALL_RUNS):
                moment = CDC_START + dt.timedelta(seconds=number + 1)
                key, max_key = self.land_cdc(database, max_key, SMALL_RUN_CHANGES, "uniform", moment)
                before, jobs = self.metadata_version(database), last_spark_job(self.spark)
                seconds = self.apply(database, key, config)
                runs.append((seconds, last_spark_job(self.spark) - jobs, self.metadata_version(database) - before))
                if beside:
                    jobs = last_spark_job(self.spark)
                    seconds = peer_merge(self.spark, self.table, peer, self.landing(database) / key)
                    peers.append((seconds, last_spark_job(self.spark) - jobs))
            figures[label] = _small_figures(runs)
            if beside:
                figures[f"{label}_peer_merge"] = _small_figures(peers)
                lake = fingerprint(self.lake_frame(database), self.table.column_names)
                merged = fingerprint(self.spark.table(peer), self.table.column_names)
                if lake != merged:
                    raise OracleMismatch(
                        f"small runs ({label}): the lake table {lake} differs from the MERGE's {merged}"
                    )
            self.spark.sql(f"DROP TABLE {peer} PURGE")
        figures["peer_merge"] = figures["plain_peer_merge"]
        return figures

    def demo(self) -> float:
        """``cdc-lake demo`` in a new process (its own JVM), as ``make demo`` runs it once set up."""
        self.progress("cdc-lake demo in a fresh process …")
        command = [str(Path(sys.executable).with_name("cdc-lake")), "demo", "--workdir", str(self.work / "demo")]
        seconds, done = timed(lambda: subprocess.run(command, capture_output=True, text=True, check=False))
        if done.returncode != 0:
            raise RuntimeError(f"cdc-lake demo failed ({done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")
        shutil.rmtree(self.work / "demo", ignore_errors=True)
        return seconds


def run_perf(
    spark: SparkSession,
    config: PipelineConfig,
    work: Path,
    rows: int,
    changes: int,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """Every measurement above, in one Spark session; raises OracleMismatch if a lake table is wrong."""
    sizes = table_sizes(rows)
    bench = PerfBench(spark, config, work, progress)
    memory = DriverMemory(spark)
    with RunPeaks(work, memory) as peaks:
        for size in sizes:
            progress(f"writing {short_count(size)} rows as DMS LOAD files (Spark) …")
            bench.load_data(size)
        progress("warming up the JVM on a small table …")
        bench.warm_up()
        full_loads = bench.full_loads(rows, memory)
        scaling = bench.scaling(sizes, changes, {(rows, "uniform"): ONE_FILE_LOAD})
        big_changes = min(BIG_BATCH, rows // 10)
        progress(
            f"{short_count(big_changes)} uniform changes in one batch into {short_count(rows)} rows (+ the rebuild) …"
        )
        big_batch = bench.cdc_run(TEN_FILES_LOAD, rows, big_changes, "uniform")
        against_merge = bench.against_merge(sizes, changes)
        small = bench.small_runs()
        demo_s = bench.demo()
    by_size = {(r["rows"], r["pattern"]): r for r in scaling}
    return {
        "rows": rows,
        "changes": changes,
        "sizes": sizes,
        "cores": os.cpu_count(),
        "spark_driver_memory": spark.conf.get("spark.driver.memory", None),
        "full_load": full_loads,
        "cdc": scaling,
        "big_batch": big_batch,
        "cdc_big_vs_small": {
            p: round(by_size[rows, p]["cdc_s"] / by_size[SMALL_TABLE_ROWS, p]["cdc_s"], 2) for p in PATTERNS
        },
        "against_merge": against_merge,
        "small_run": small,
        "demo_s": round(demo_s, 2),
        "run_peaks": peaks.figures(),
    }


# --------------------------------------------------------------------------------------------------- reporting


def _seconds(value: float) -> str:
    return f"{value:.2f} s" if value < 10 else f"{value:.1f} s"


def _faster(rebuild_vs_cdc: float) -> str:
    if rebuild_vs_cdc >= 1:
        return f"CDC {rebuild_vs_cdc:.1f} × faster"
    return f"rebuild {1 / rebuild_vs_cdc:.1f} × faster"


def _commits(values: Sequence[int]) -> str:
    distinct = sorted(set(values))
    return str(distinct[0]) if len(distinct) == 1 else "/".join(map(str, distinct))


def describe(figures: dict[str, Any]) -> list[str]:
    """The results as a markdown table."""
    rows, changes = figures["rows"], figures["changes"]
    big, small = short_count(rows), short_count(SMALL_TABLE_ROWS)
    one, ten = figures["full_load"]["one_file"], figures["full_load"]["ten_files"]
    runs = {(r["rows"], r["pattern"]): r for r in figures["cdc"]}
    lines = ["| work | cdc-lake | reference | ratio |", "|---|---|---|---|"]
    for label, load in ((f"one {big}-row LOAD file", one), (f"{LOAD_FILES} LOAD files ({big} rows)", ten)):
        lines.append(
            f"| full load of {label} | {_seconds(load['pipeline_s'])} | plain Spark CSV→Parquet of the same "
            f"file{'s' if load['files'] > 1 else ''}: {_seconds(load['plain_spark_s'])} | {load['ratio']:.2f} |"
        )
    phases = ", ".join(f"{phase} {_seconds(seconds)}" for phase, seconds in one["phases_s"].items())
    lines.append(f"| where the full load of one {big}-row LOAD file spends its time | {phases} | | |")
    for pattern in PATTERNS:
        into_big, into_small = runs[rows, pattern], runs[SMALL_TABLE_ROWS, pattern]
        lines.append(
            f"| {short_count(changes)} changes, {pattern} keys | {_seconds(into_big['cdc_s'])} into {big} rows | "
            f"{_seconds(into_small['cdc_s'])} into {small} rows | {figures['cdc_big_vs_small'][pattern]:.2f} |"
        )
    lines += describe_against_merge(figures["against_merge"])
    for pattern in PATTERNS:
        run = runs[rows, pattern]
        lines.append(
            f"| rebuild vs CDC, {pattern} ({big} rows) | rebuild {_seconds(run['rebuild_s'])} | "
            f"CDC {_seconds(run['cdc_s'])} | {_faster(run['rebuild_vs_cdc'])} |"
        )
    batch = figures["big_batch"]
    lines.append(
        f"| one batch of {short_count(batch['changes'])} uniform changes into {big} rows (loaded from "
        f"{LOAD_FILES} files) | {_seconds(batch['cdc_s'])} | naive rebuild in plain Spark: "
        f"{_seconds(batch['rebuild_s'])} | {_faster(batch['rebuild_vs_cdc'])} |"
    )
    uniform = runs[rows, "uniform"]
    peer = uniform["peer_merge_s"]
    mor, cow = peer["merge-on-read"], peer["copy-on-write"]
    lines.append(
        f"| {short_count(changes)} uniform changes into {big} rows against plain `MERGE INTO` (last row per key, "
        f"one MERGE on a plain Iceberg table) | {_seconds(uniform['cdc_s'])} | merge-on-read {_seconds(mor)}, "
        f"copy-on-write {_seconds(cow)} | {mor / uniform['cdc_s']:.2f}× faster than merge-on-read, "
        f"{cow / uniform['cdc_s']:.2f}× than copy-on-write |"
    )
    small_run = figures["small_run"]
    lines += describe_small(small_run)
    lines.append(f"| make demo (warm) | {_seconds(figures['demo_s'])} | | |")
    cdc_commits = _commits([r["metadata_commits"] for r in figures["cdc"]])
    lines.append(
        f"| Iceberg metadata commits per CDC run | {cdc_commits} ({short_count(changes)} changes), "
        f"{_commits(small_run['plain']['metadata_commits'])} (small run) | | |"
    )
    peak = one.get("driver_peak_rss_mib")
    lines.append(
        f"| driver peak RSS, {big} full load | {'n/a' if peak is None else f'{peak:,} MiB'} "
        f"(spark.driver.memory {figures['spark_driver_memory']}) | | |"
    )
    run = figures.get("run_peaks")
    if run:
        lines.append(
            f"| the whole run's peaks | disk {run['disk_peak_gib']} GiB above the start, "
            f"driver RSS {run['driver_peak_rss_mib']:,} MiB | | |"
        )
    return lines


def describe_small(small_run: Mapping[str, Any]) -> list[str]:
    """The small runs' rows of the results table."""
    lines: list[str] = []
    plain, history, hand = small_run["plain"], small_run["history"], small_run["peer_merge"]
    into = f"{small_run['changes']} changes into {short_count(small_run['rows'])} rows"
    lines.append(
        f"| small run: {into} (median of {len(plain['runs_s'])}, warm) | {_seconds(plain['median_s'])}, "
        f"{_commits(plain['spark_jobs'])} Spark jobs | plain `MERGE INTO` a merge-on-read table, side by side: "
        f"{_seconds(hand['median_s'])}, {_commits(hand['spark_jobs'])} jobs | "
        f"cdc-lake takes {plain['median_s'] / hand['median_s']:.2f}× its time |"
    )
    row_delta, beside = small_run["row_delta"], small_run["row_delta_peer_merge"]
    lines.append(
        f"| small run into a merge-on-read table (a row delta): {into} | {_seconds(row_delta['median_s'])}, "
        f"{_commits(row_delta['spark_jobs'])} Spark jobs | plain `MERGE INTO` a merge-on-read table, side by side: "
        f"{_seconds(beside['median_s'])}, {_commits(beside['spark_jobs'])} jobs | "
        f"cdc-lake takes {row_delta['median_s'] / beside['median_s']:.2f}× its time |"
    )
    lines.append(
        f"| small run with history: {into} | {_seconds(history['median_s'])}, "
        f"{_commits(history['spark_jobs'])} Spark jobs | | |"
    )
    return lines


def describe_scaling(figures: dict[str, Any]) -> list[str]:
    """CDC and rebuild seconds per table size: the data behind the PNG."""
    lines = [
        "| table rows | CDC uniform | CDC recent | rebuild uniform | rebuild recent |",
        "|---:|---:|---:|---:|---:|",
    ]
    runs = {(r["rows"], r["pattern"]): r for r in figures["cdc"]}
    for rows in figures["sizes"]:
        uniform, recent = runs[rows, "uniform"], runs[rows, "recent"]
        lines.append(
            f"| {rows:,} | {_seconds(uniform['cdc_s'])} | {_seconds(recent['cdc_s'])} | "
            f"{_seconds(uniform['rebuild_s'])} | {_seconds(recent['rebuild_s'])} |"
        )
    return lines


def plot_scaling(figures: dict[str, Any], path: Path) -> None:
    """CDC run time against table size, both key patterns, with the naive rebuild's time beside them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = figures["sizes"]
    runs = {(r["rows"], r["pattern"]): r for r in figures["cdc"]}
    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=120)
    for pattern, marker in zip(PATTERNS, ("o", "s"), strict=True):
        axes.plot(sizes, [runs[s, pattern]["cdc_s"] for s in sizes], marker=marker, label=f"cdc-lake, {pattern} keys")
    rebuilds = [statistics.mean(runs[s, p]["rebuild_s"] for p in PATTERNS) for s in sizes]
    axes.plot(sizes, rebuilds, marker="^", linestyle="--", label="naive rebuild, plain Spark (mean of both)")
    axes.set_xscale("log")
    axes.set_ylim(bottom=0)
    axes.set_xlabel("table rows")
    axes.set_ylabel("seconds")
    axes.set_title(f"{figures['changes']:,} changes applied to one table ({figures['cores']} cores)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def describe_against_merge(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """``PerfBench.against_merge``'s runs as rows of ``describe``'s table, and the default's growth with the table."""
    lines = [
        f"| {short_count(r['changes'])} {r['pattern']} changes into {short_count(r['rows'])} rows, as configured | "
        f"{_seconds(r['default_s'])} | the same file through the MERGE (`row_delta_keys: 0`) beside it: "
        f"{_seconds(r['merge_s'])} | {r['default_vs_merge']:.2f} |"
        for r in runs
    ]
    by_size = {(r["rows"], r["pattern"]): r for r in runs}
    small, big = min(r["rows"] for r in runs), max(r["rows"] for r in runs)
    for pattern in PATTERNS if big > small else ():
        into_big, into_small = by_size[big, pattern]["default_s"], by_size[small, pattern]["default_s"]
        lines.append(
            f"| the same, {pattern}: into {short_count(big)} rows against into {short_count(small)} | "
            f"{_seconds(into_big)} | {_seconds(into_small)} | {into_big / into_small:.2f} |"
        )
    return lines


def write_results(figures: dict[str, Any], out: Path) -> list[str]:
    """perf.json, perf.md and cdc_vs_table_size.png under ``out``; returns the printed table."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "perf.json").write_text(json.dumps(figures, indent=2) + "\n")
    table = describe(figures)
    document = [
        f"# One table at scale: {figures['rows']:,} rows, {figures['changes']:,} changes",
        "",
        f"{figures['cores']} cores, spark.driver.memory {figures['spark_driver_memory']}; `python -m bench.perf`.",
        "",
        *table,
        "",
        "CDC run and naive rebuild per table size (cdc_vs_table_size.png):",
        "",
        *describe_scaling(figures),
        "",
    ]
    (out / "perf.md").write_text("\n".join(document))
    plot_scaling(figures, out / "cdc_vs_table_size.png")
    return table


def small_only(
    spark: SparkSession, config: PipelineConfig, work: Path, out: Path, progress: Callable[[str], None]
) -> int:
    bench = PerfBench(spark, config, work, progress)
    bench.load_data(SMALL_TABLE_ROWS)
    bench.warm_up()
    small = bench.small_runs()
    out.mkdir(parents=True, exist_ok=True)
    (out / "small_runs.json").write_text(json.dumps(small, indent=2) + "\n")
    print("\n".join(describe_small(small)))
    return 0


def against_merge_only(
    spark: SparkSession, config: PipelineConfig, work: Path, args: argparse.Namespace, progress: Callable[[str], None]
) -> int:
    bench = PerfBench(spark, config, work, progress)
    sizes = table_sizes(args.rows)
    bench.warm_up()
    runs = bench.against_merge(sizes, args.changes)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "against_merge.json").write_text(json.dumps(runs, indent=2) + "\n")
    print("\n".join(describe_against_merge(runs)))
    shutil.rmtree(work, ignore_errors=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--changes", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument(
        "--against-merge-only",
        action="store_true",
        help="only the default path beside the MERGE, into the smallest and the biggest table (against_merge.json)",
    )
    parser.add_argument(
        "--small-only",
        action="store_true",
        help="only the small runs, each beside a hand-written MERGE (small_runs.json)",
    )
    args = parser.parse_args()
    work = args.out / "work-perf"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    spark = local_spark_session(work / "warehouse", app_name="cdc-lake-bench-perf")
    config = load_config(HERE / "bench.yaml")

    def progress(text: str) -> None:
        print(f"  {text}", flush=True)

    try:
        if args.against_merge_only:
            return against_merge_only(spark, config, work, args, progress)
        if args.small_only:
            return small_only(spark, config, work, args.out, progress)
        figures = run_perf(spark, config, work, args.rows, args.changes, progress)
    except OracleMismatch as error:
        print(f"FAILED: {error}", file=sys.stderr)
        return 1
    print("\n".join(write_results(figures, args.out)))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
