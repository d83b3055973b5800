"""Drift at scale: ``verify`` on a table of N rows (default 10M) with 10 drifted keys, against what a user does
without it: export the whole source table and reconcile the lake with the extract (``cdc-lake reconcile``).

A throwaway PostgreSQL holds the table; its full load reaches the lake as DMS would write it (one CSV LOAD file,
written by the database's own COPY: NULL as an empty field, as DMS writes it). Then 10 keys change at the
source and nothing carries them. Both ways must find exactly those 10 keys. Reported: the seconds of each,
their ratio, the source queries verify sent, and the rows each way read from the source and from the lake.
Measured in one run on this machine.

Usage: python -m bench.drift [--rows 10000000]
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from cdc_lake.core.config import parse_config
from cdc_lake.engine.context import LakeContext
from cdc_lake.engine.tables import TableSnapshot
from cdc_lake.local.runtime import LocalPipeline, failed_runs
from cdc_lake.local.session import local_spark_session
from cdc_lake.ops.reconcile import reconcile
from cdc_lake.ops.source_tls import SourceAddress
from cdc_lake.ops.verify import verify

DRIFTED = 10
COLUMNS = [
    {"name": "id", "type": "bigint", "nullable": False},
    {"name": "part", "type": "int"},
    {"name": "price", "type": "decimal(12,2)"},
    {"name": "name", "type": "string"},
    {"name": "at", "type": "timestamp"},
]


def _copy_out(conninfo: str, sql: str, path: Path) -> None:
    """The database's own COPY into a file (CSV: NULL an empty field, the empty string quoted, as DMS writes)."""
    import psycopg

    with psycopg.connect(conninfo) as connection, path.open("wb") as out, connection.cursor().copy(sql) as copy:
        for block in copy:
            out.write(block)


def _source(conninfo: str, rows: int, landing: Path) -> None:
    import psycopg

    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(
            "CREATE SCHEMA drift; CREATE TABLE drift.items (id bigint PRIMARY KEY, part int, price numeric(12,2), "
            "name text, at timestamp)"
        )
        connection.execute(
            "INSERT INTO drift.items SELECT n, n %% 7, n * 1.25, 'name ' || n, "
            "TIMESTAMP '2025-01-01' + n * INTERVAL '1 second' FROM generate_series(1, %s) n",
            (rows,),
        )
    folder = landing / "dms" / "drift" / "items"
    folder.mkdir(parents=True)
    _copy_out(conninfo, "COPY drift.items TO STDOUT WITH (FORMAT csv)", folder / "LOAD00000001.csv")


def _measure(conninfo: str, rows: int, work: Path) -> dict[str, Any]:
    import psycopg

    _source(conninfo, rows, work / "landing")
    config = parse_config(
        {"dms": {"bucket_folder": "dms"}, "lake": {"database": "bench_drift"},
         "tables": [{"name": "drift.items", "primary_key": ["id"], "columns": COLUMNS}]}
    )  # fmt: skip
    spark = local_spark_session(work / "warehouse")
    pipeline = LocalPipeline(config, work / "landing", spark)
    started = time.perf_counter()
    runs = pipeline.deliver(["dms/drift/items/LOAD00000001.csv"])
    loaded = time.perf_counter() - started
    assert not failed_runs(runs), [r.error for r in failed_runs(runs)]
    keys = random.Random(1).sample(range(1, rows + 1), DRIFTED)
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute("UPDATE drift.items SET price = price + 0.01 WHERE id = ANY(%s)", (keys,))

    started = time.perf_counter()
    [found] = verify(LakeContext(spark=spark, location=pipeline.location, config=config), SourceAddress(conninfo))
    verify_s = time.perf_counter() - started
    assert sorted(d.key["id"] for d in found.drift) == sorted(keys), found.drift

    started = time.perf_counter()
    extract = work / "extract.csv"
    _copy_out(conninfo, "COPY drift.items TO STDOUT WITH (FORMAT csv, HEADER)", extract)
    report = reconcile(spark, TableSnapshot(pipeline.location, config.tables[0]), extract, file_format="csv")
    reconcile_s = time.perf_counter() - started
    assert not report.matches
    return {"stats": found.stats, "verify_s": verify_s, "reconcile_s": reconcile_s, "loaded_s": loaded}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    args = parser.parse_args()
    from tests.pg.cluster import find_pg_bin, new_cluster
    from tests.support.servers import running

    pg_bin = find_pg_bin()
    if pg_bin is None:
        raise SystemExit("PostgreSQL not found: run `make setup`")
    work = Path(tempfile.mkdtemp(prefix="cdc-lake-bench-drift-"))
    try:
        with running(new_cluster(pg_bin)) as cluster:
            measured = _measure(cluster.conninfo, args.rows, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    stats, verify_s, reconcile_s = measured["stats"], measured["verify_s"], measured["reconcile_s"]
    table = Table(title=f"verify against export + reconcile: {args.rows:,} rows, {DRIFTED} drifted keys")
    for column in ("way", "seconds", "source queries", "source rows read", "lake rows listed"):
        table.add_column(column)
    table.add_row("cdc-lake verify", f"{verify_s:.1f}", str(stats.source_queries), f"{stats.source_rows:,}",
                  f"{stats.lake_rows:,}")  # fmt: skip
    table.add_row("export + reconcile", f"{reconcile_s:.1f}", "1 (COPY)", f"{args.rows:,}", f"{args.rows:,}")
    console = Console()
    console.print(table)
    console.print(
        f"verify is {reconcile_s / verify_s:.1f}x faster (the lake's full load took {measured['loaded_s']:.1f} s)"
    )


if __name__ == "__main__":
    main()
