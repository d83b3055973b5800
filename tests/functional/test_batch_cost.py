"""What a small batch costs on the deployed path (the Glue catalog and S3 of the local endpoint): the Spark jobs it
runs and the table loads it asks of the catalog, each bounded here so that a change which adds some fails.

A small batch's cost is Spark's and the catalog's per-call overhead, not its rows: each job is scheduled, each
table load is a Glue ``GetTable`` plus an S3 read of the table's metadata. docs/performance.md#small-batches
gives the figures; a change that lowers them lowers the bounds too.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from cdc_lake.core.dms_files import parse_key
from cdc_lake.core.jsonl import read_jsonl
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.replay import RunResult, replay
from cdc_lake.engine.runs.coalesced import Budget, drain
from cdc_lake.local.aws_endpoint import served_requests
from cdc_lake.ops.export import export_tables
from tests.support.glue_run import GlueRun

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.glue_path]

TABLE = "app.accounts"
# A warm batch of one CDC file (10 changes into a 30-row table), as it stands: the one-task read-check-reduce
# (1 job) and the MERGE of a small copy-on-write table, its key range rewritten whole (3); 12 GetTable and no
# metadata read (the columns and the base summary come with the recorded state; the engine keeps its tables
# loaded, asks whether a table exists through them, and reads a metadata file again only when it changed; what
# it reads right after a read or its own commit, it reads as kept; the lake's FileIO, core.catalogs.LAKE_IO, serves
# the metadata.json files this process wrote, 4 reads before 2026-12-04). Of those, Spark's MERGE makes 4 GetTable,
# and each of the two metadata commits 1 GetTable, its compare-and-swap.
MOST_JOBS = 4
MOST_GET_TABLE = 12
MOST_METADATA_READS = 0
# Every request of that batch, each a round trip on AWS (tens of milliseconds: local_aws_endpoint's in-Region
# profile): 15 Glue (the 12 GetTable, 3 UpdateTable) and 19 S3 (4 listings, the CSV's 2 reads and 3 HEADs, the
# 3 Parquet reads of the key range, 7 writes). 29 before the lake's FileIO, which serves from memory the manifest
# lists and metadata.json files this process wrote (and 30 with the file's applied tag, gone the same day).
MOST_GLUE_REQUESTS = 15
MOST_S3_REQUESTS = 19
# A table with nothing pending, in a run's first round (later rounds list only): whether its lake table exists
# (twice: before listing it, and before making it), its recorded state; each a refresh of the table the engine
# keeps loaded, and the metadata it wrote read from memory. Its dead run branches are read as kept.
MOST_IDLE_GET_TABLE = 3
MOST_IDLE_METADATA_READS = 0


# The same batch into a merge-on-read table (or a small one auto writes copy-on-write), as a row delta
# (engine.row_delta): its one small CSV file read, checked and reduced in the driver (engine.driver_batch: no job),
# the keys' rows found in the table's key index (engine.key_index, built by an earlier batch of this process: no data
# file read, no job). Glue: the planning read's GetTable (the table kept loaded, refreshed), the row delta's refresh
# before it makes its snapshot, and its one commit (a GetTable and an UpdateTable, Iceberg's compare-and-swap on
# Glue); the upkeep's read of the table's shape after the commit. S3: 39 when the rows were read by Iceberg's reader,
# 22 when Spark read the CSV file.
MOST_ROW_DELTA_JOBS = 0
# Each kind bounded on its own (issue 70: a test fails when any kind grows), as measured on 2026-12-04: the planning
# read's and the commit's GetTable, one UpdateTable; the CDC file read whole once, on its listed ETag (its layout
# and its rows); the batch's listing (the read on the ETag spares the listing again before the commit); written:
# the manifests and the list, metadata.json, a data file and a delete file. No read of the table's metadata.json
# or manifest lists: this process wrote them, and the lake's FileIO (core.catalogs.LAKE_IO) serves them from
# memory, where S3 gave 1 read of metadata.json, 2 GETs and 2 HEADs of manifest lists. No tag on the file since
# 2026-12-04 (the scheduled maintenance removes applied files by the record: engine.landed_expiry), where it was a
# PUT a file. Spark's S3A, reading the file, added 2 listings, 3 HEADs and a GET (Glue 6.0's: 3 HEADs more).
MOST_ROW_DELTA_REQUESTS = {
    "glue:GetTable": 2,
    "glue:UpdateTable": 1,
    "s3:GET csv": 1,
    "s3:LIST": 1,
    "s3:PUT avro": 3,
    "s3:PUT metadata.json": 1,
    "s3:PUT parquet": 2,
}
MOST_ROW_DELTA_GLUE_REQUESTS = sum(n for kind, n in MOST_ROW_DELTA_REQUESTS.items() if kind.startswith("glue:"))
MOST_ROW_DELTA_S3_REQUESTS = sum(n for kind, n in MOST_ROW_DELTA_REQUESTS.items() if kind.startswith("s3:"))


def _last_job(spark: SparkSession) -> int:
    return max(spark.sparkContext.statusTracker().getJobIdsForGroup(None), default=-1)


def _compiled(spark: SparkSession) -> int:
    """How many classes Spark's code generation has compiled in this session (its cache misses)."""
    return spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount()


def _counted_run(
    spark: SparkSession, endpoint: str, context: ReplayContext, key: str
) -> tuple[RunResult, int, int, Counter]:
    served_requests(endpoint, reset=True)
    before, compiled = _last_job(spark), _compiled(spark)
    result = replay(context, parse_key(key, context.config))
    return result, _last_job(spark) - before, _compiled(spark) - compiled, served_requests(endpoint)


def test_a_small_batch_runs_few_jobs_and_loads_its_table_few_times(
    spark: SparkSession, aws_endpoint: str, database: str, tmp_path: Path
) -> None:
    # Set to copy-on-write: auto would take the row delta (below) into a table this small.
    run = GlueRun(aws_endpoint, database, tmp_path, write_mode="copy-on-write")
    context = run.context()
    keys = [key for key in run.keys if key.startswith(TABLE.replace(".", "/") + "/")]
    loads, changes = [k for k in keys if "/LOAD" in k], [k for k in keys if "/LOAD" not in k]
    assert loads and len(changes) >= 2, keys
    for key in loads:
        run.land(key)
    replay(context, parse_key(loads[-1], run.config))
    for key in changes[:-1]:  # warm: the table's first CDC batch plans and compiles what later ones reuse
        run.land(key)
        replay(context, parse_key(key, run.config))
    run.land(changes[-1])

    result, jobs, compiled, requests = _counted_run(spark, aws_endpoint, context, changes[-1])

    assert result.applied_files == [changes[-1]]
    export_tables(run.lake(), tmp_path / "export", [TABLE])  # the counted batch left the table equal to the oracle
    lake = read_jsonl(tmp_path / "export" / f"{TABLE}.jsonl")
    assert lake == read_jsonl(run.generated.expected / f"{TABLE}.jsonl")
    cost = f"{jobs} Spark jobs, {compiled} classes compiled, requests {dict(sorted(requests.items()))}"
    assert jobs <= MOST_JOBS, cost
    assert compiled == 0, cost  # the batches before compiled it all: no key range, file or count in the code
    assert requests["glue:GetTable"] <= MOST_GET_TABLE, cost
    assert requests["s3:GET metadata.json"] <= MOST_METADATA_READS, cost
    assert requests["glue:UpdateTable"] == 3, cost  # the run's branch, its MERGE, main moved: see commit.py
    glue_calls = sum(n for kind, n in requests.items() if kind.startswith("glue:"))
    s3_calls = sum(n for kind, n in requests.items() if kind.startswith("s3:"))
    assert glue_calls <= MOST_GLUE_REQUESTS and s3_calls <= MOST_S3_REQUESTS, cost


# auto: the table is small, so copy-on-write; its small batch is a row delta all the same.
@pytest.mark.parametrize("mode", ["merge-on-read", "auto"])
def test_a_small_batch_is_a_row_delta_of_few_requests(
    spark: SparkSession, aws_endpoint: str, database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    from cdc_lake.engine import row_delta

    run = GlueRun(aws_endpoint, database, tmp_path, write_mode=mode)
    context = run.context()
    keys = [key for key in run.keys if key.startswith(TABLE.replace(".", "/") + "/")]
    for key in keys[:-1]:
        run.land(key)
        replay(context, parse_key(key, run.config))
    run.land(keys[-1])
    made: list[int] = []
    real = row_delta.commit_row_delta
    monkeypatch.setattr(row_delta, "commit_row_delta", lambda *args: made.append(real(*args)) or made[-1])

    result, jobs, compiled, requests = _counted_run(spark, aws_endpoint, context, keys[-1])

    assert made == [result.snapshot_id] and result.applied_files == [keys[-1]]
    export_tables(run.lake(), tmp_path / "export", [TABLE])
    assert read_jsonl(tmp_path / "export" / f"{TABLE}.jsonl") == read_jsonl(run.generated.expected / f"{TABLE}.jsonl")
    cost = f"{jobs} Spark jobs, {compiled} classes compiled, requests {dict(sorted(requests.items()))}"
    assert jobs <= MOST_ROW_DELTA_JOBS, cost
    assert requests["glue:UpdateTable"] == 1, cost  # one metadata commit
    assert not requests["s3:GET parquet"] and not requests["s3:HEAD parquet"], cost  # the key index's
    glue_calls = sum(n for kind, n in requests.items() if kind.startswith("glue:"))
    s3_calls = sum(n for kind, n in requests.items() if kind.startswith("s3:"))
    assert glue_calls <= MOST_ROW_DELTA_GLUE_REQUESTS and s3_calls <= MOST_ROW_DELTA_S3_REQUESTS, cost
    grown = {kind: n for kind, n in requests.items() if n > MOST_ROW_DELTA_REQUESTS.get(kind, 0)}
    assert not grown, f"more requests of a kind than measured: {grown}; {cost}"


def test_a_drain_round_with_nothing_pending_runs_no_spark_job(
    spark: SparkSession, aws_endpoint: str, database: str, tmp_path: Path
) -> None:
    run = GlueRun(aws_endpoint, database, tmp_path)
    context = run.context()
    for key in run.keys:
        run.land(key)
    first = drain(context, Budget(0, 0, 0.01, 2))
    assert not first.failures and len(first.applied_files) == len(run.keys)

    served_requests(aws_endpoint, reset=True)
    before = _last_job(spark)
    again = drain(context, Budget(0, 0, 0.01, 2))
    jobs, requests = _last_job(spark) - before, served_requests(aws_endpoint)

    assert again.already_applied and again.rounds == 1
    cost = f"{jobs} Spark jobs, requests {dict(sorted(requests.items()))}"
    assert jobs == 0, cost
    tables = len(run.config.tables)
    assert requests["s3:LIST"] <= 2 * tables, cost  # each table's listing, and the survey's
    assert requests["glue:GetTable"] <= MOST_IDLE_GET_TABLE * tables, cost
    assert requests["s3:GET metadata.json"] <= MOST_IDLE_METADATA_READS * tables, cost
