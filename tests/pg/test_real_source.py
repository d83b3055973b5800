"""The lake equals a real PostgreSQL: a random concurrent workload runs against the database while the capture
(a local stand-in for DMS on test_decoding) writes LOAD and CDC files; after every batch the local pipeline
replays the new files and each lake table must equal ``SELECT *`` exactly, read by Spark and by pyiceberg.

Batches: (1) full load while the workload runs (cached changes), (2) ADD COLUMN and int→bigint mid-batch with
the configuration updated as a user would, (3) a reload of order_lines while the workload runs, then more
plain batches. CDC_LAKE_PG_TRANSACTIONS (total) and CDC_LAKE_PG_BATCHES size the run (`make soak`).
"""

from __future__ import annotations

import copy
import os
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from cdc_lake.core.config import PipelineConfig, parse_config
from cdc_lake.local.pg_capture import PgCapture, table_entry
from cdc_lake.local.runtime import LocalPipeline, failed_runs
from tests.pg.cluster import Cluster, create_database
from tests.pg.workload import ADD_COLUMN, WIDEN, Workload
from tests.support.lake import Lake
from tests.support.source_tables import (
    SUMMARIES,
    check_fingerprints,
    check_tables,
    delete_files,
    glue_reader,
    hadoop_reader,
    newest_per_table,
    postgres_fingerprints,
)

pytestmark = [pytest.mark.pg, pytest.mark.spark]

TRANSACTIONS = int(os.environ.get("CDC_LAKE_PG_TRANSACTIONS", "2400"))
BATCHES = max(4, int(os.environ.get("CDC_LAKE_PG_BATCHES", "4")))

DMS_VARIANTS: dict[str, dict[str, Any]] = {
    "csv": {
        "format": "csv",
        "timestamp_column": "dms_timestamp",
        "change_sequence_column": "ar_h_change_seq",
        "before_image": {"column_prefix": "before_", "column_filter": "pk-only"},
    },
    "parquet": {
        "format": "parquet",
        "timestamp_column": "dms_timestamp",
        "before_image": {"column_prefix": "before_", "column_filter": "pk-only"},
    },
}
RELOADED = "public.order_lines"


# Each DMS variant on the Hadoop catalog; CSV once more through the deployed path (Glue catalog, S3).
@pytest.mark.parametrize(("variant", "path"), [("csv", "hadoop"), ("parquet", "hadoop"), ("csv", "glue")])
def test_lake_equals_postgres(
    spark: SparkSession,
    warehouse: Path,
    aws_endpoint: str,
    postgres: Cluster,
    database: str,
    tmp_path: Path,
    seed: int,
    variant: str,
    path: str,
) -> None:
    from cdc_lake.engine.reload import reload_table

    started = time.monotonic()
    conninfo = create_database(postgres, f"source_{variant}_{path}")
    workload = Workload(conninfo, seed, threads=4)
    capture: PgCapture | None = None
    per_batch = TRANSACTIONS // BATCHES
    try:
        workload.create(accounts=300, lines=400)
        import psycopg

        with psycopg.connect(conninfo) as connection:
            # accounts merged on read (delete files for both readers), order_lines in the default mode (auto:
            # copy-on-write at this size): both write modes meet the source.
            accounts = {**table_entry(connection, "public.accounts"), "write_mode": "merge-on-read"}
            entries = [accounts, table_entry(connection, RELOADED)]
        settings: dict[str, Any] = {
            "dms": {"bucket_folder": "dms", **DMS_VARIANTS[variant]},
            "lake": {"database": database},
            "tables": entries,
        }
        config = parse_config(settings)
        landing = tmp_path / "landing"
        capture = PgCapture(
            conninfo, config, landing, slot=f"cdc_lake_{variant}_{path}", files_per_round=3, load_file_rows=250
        )
        lake = Lake(path, spark, database, landing, aws_endpoint)
        read_iceberg = hadoop_reader(warehouse) if path == "hadoop" else glue_reader(aws_endpoint)

        def pipeline_for(config: PipelineConfig) -> LocalPipeline:
            return LocalPipeline(config, landing, spark, database=database, catalog=lake.catalog, store=lake.store())

        pipeline = pipeline_for(config)

        seconds = {"replay": 0.0, "check": 0.0}

        def replay(keys: list[str], reloaded: str | None = None) -> None:
            begun = time.monotonic()
            lake.store()  # the bucket gets what DMS wrote since
            runs = pipeline.deliver(newest_per_table(keys, pipeline.config, reloaded))
            seconds["replay"] += time.monotonic() - begun
            failed = failed_runs(runs)
            if reloaded is None:
                assert not failed, [r.error for r in failed]
                return
            # As deployed: runs drain every table, so they refuse the reloaded one, naming the remedy, and
            # apply the others, until `cdc-lake reload` rebuilds it.
            assert failed, "the reloaded table should have been refused"
            for run in failed:
                assert run.result is not None and set(run.result.failures) == {reloaded}, run.error
                assert f"cdc-lake reload -t {reloaded}" in (run.error or ""), run.error

        def check(label: str) -> dict[str, int]:
            begun = time.monotonic()
            counts = check_tables(
                spark, read_iceberg, conninfo, pipeline.config, pipeline.location, f"seed {seed} {label}"
            )
            seconds["check"] += time.monotonic() - begun
            return counts

        # Batch 1: the full load, written while the workload runs (and between LOAD files): cached changes.
        wait = workload.run_in_background(per_batch)
        keys = capture.start(between_files=workload.in_between)
        wait()
        keys += capture.capture()
        replay(keys)
        counts = check("batch 1 (full load + cached changes)")

        # Batch 2: ADD COLUMN and a widening mid-batch; the user adds both to the configuration.
        workload.run(per_batch // 2)
        workload.alter(ADD_COLUMN)
        workload.alter(WIDEN)
        updated = copy.deepcopy(settings)
        accounts = updated["tables"][0]
        accounts["columns"].append({"name": "tier", "type": "string"})
        next(c for c in accounts["columns"] if c["name"] == "qty")["type"] = "bigint"
        settings = updated
        config = parse_config(settings)
        capture.config = config
        pipeline = pipeline_for(config)
        workload.run(per_batch - per_batch // 2)
        keys = capture.capture()
        replay(keys)
        counts = check("batch 2 (ADD COLUMN, int -> bigint)")

        # Batch 3: DMS reloads order_lines while the workload runs; the lake rebuilds it (cdc-lake reload).
        wait = workload.run_in_background(per_batch)
        keys = capture.reload(RELOADED, between_files=workload.in_between)
        wait()
        keys += capture.capture()
        replay(keys, reloaded=RELOADED)
        begun = time.monotonic()
        lake.store()
        reload_table(pipeline.context, pipeline.config.table(RELOADED))
        seconds["replay"] += time.monotonic() - begun
        counts = check("batch 3 (reload of order_lines)")

        # Plain batches after the reload.
        for batch in range(4, BATCHES + 1):
            workload.run(per_batch)
            replay(capture.capture())
            counts = check(f"batch {batch}")

        # What verify sums per key range agrees row by row on the workload's values.
        fingerprinted = check_fingerprints(spark, pipeline.location, pipeline.config, postgres_fingerprints(conninfo))
        assert fingerprinted == sum(counts.values())
        deletes = {t.name: delete_files(spark, pipeline.location, t) for t in pipeline.config.tables}
        assert any(k.endswith("deletes") for kinds in deletes.values() for k in kinds), (
            f"the workload should leave delete files for both readers to apply: {deletes}"
        )
        stats, done = capture.stats, workload.stats
        SUMMARIES.append(
            f"{variant} on {path}: seed {seed}; {done.committed} transactions committed, "
            f"{done.rolled_back} rolled back ({dict(sorted(done.statements.items()))}); "
            f"{stats.changes} changes captured "
            f"(I {stats.per_op['I']} U {stats.per_op['U']} D {stats.per_op['D']}) in {stats.transactions} "
            f"transactions; {len(stats.load_files)} LOAD + {len(stats.cdc_files)} CDC files; {BATCHES} batches; "
            f"tables {counts} equal to the source by Spark and by pyiceberg after every batch; files at "
            f"the end {deletes}; {time.monotonic() - started:.0f} s "
            f"(Spark replay {seconds['replay']:.0f} s, checks {seconds['check']:.0f} s)"
        )
    finally:
        if capture is not None:
            capture.close(drop_slot=True)
        workload.close()
