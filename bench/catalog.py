"""Onboarding at scale: ``cdc-lake config-from-source`` (then ``config-check-source``) for N tables of a scripted
schema in a throwaway PostgreSQL and MariaDB, timed end to end as a user runs them (a new ``cdc-lake`` process).

Each table has a composite or single key and eight columns of common types. Measured in one run on this machine.

Usage: python -m bench.catalog [--tables 200]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from cdc_lake.core.config import load_config

PG_COLUMNS = "id bigint, part int, name varchar(40), price numeric(12,2), r real, ok boolean, day date, at timestamp(3)"
MARIADB_COLUMNS = (
    "id bigint, part int unsigned, name varchar(40), price decimal(12,2), r float, ok boolean, day date, at datetime(3)"
)


def _cli(*args: str, env: dict[str, str] | None = None) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "cdc_lake.local.cli", *args],
        capture_output=True, text=True, check=False, env={**os.environ, **(env or {})},
    )  # fmt: skip
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise RuntimeError(f"cdc-lake {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return seconds, done.stdout


def _measure(name: str, source: str, tables: int, out: Path) -> dict[str, float | str]:
    written = out / f"{name}.yaml"
    generate, _ = _cli("config-from-source", "--source", source, "--schema", "bench", "-o", str(written), "--force")
    config = load_config(written)
    if len(config.tables) != tables:
        raise RuntimeError(f"{name}: {len(config.tables)} tables configured, {tables} expected")
    check, printed = _cli("config-check-source", "-c", str(written), "--source", source)
    if f"{tables} table(s) checked: 0 difference(s)" not in printed:
        raise RuntimeError(f"{name}: the check found differences in what was just written:\n{printed}")
    return {"source": name, "generate_s": generate, "check_s": check}


def _postgres(tables: int, out: Path) -> dict[str, float | str]:
    import psycopg

    from tests.pg.cluster import find_pg_bin, new_cluster
    from tests.support.servers import running

    pg_bin = find_pg_bin()
    if pg_bin is None:
        raise RuntimeError("PostgreSQL not found: run `make setup`")
    with running(new_cluster(pg_bin)) as cluster:
        with psycopg.connect(cluster.conninfo, autocommit=True) as connection:
            connection.execute("CREATE SCHEMA bench")
            for index in range(tables):
                key = "id, part" if index % 2 else "id"
                connection.execute(f"CREATE TABLE bench.t{index:03d} ({PG_COLUMNS}, PRIMARY KEY ({key}))")
        return _measure("PostgreSQL 15", cluster.conninfo, tables, out)


def _mariadb(tables: int, out: Path) -> dict[str, float | str]:
    from tests.mariadb.server import create_database, execute, find_mariadbd, new_server
    from tests.support.servers import running

    mariadbd = find_mariadbd()
    if mariadbd is None:
        raise RuntimeError("MariaDB not found: run `make setup`")
    with running(new_server(mariadbd)) as server:
        url = create_database(server, "bench")
        statements = [
            f"CREATE TABLE t{index:03d} ({MARIADB_COLUMNS}, PRIMARY KEY ({'id, part' if index % 2 else 'id'}))"
            for index in range(tables)
        ]
        execute(url, *statements)
        return _measure("MariaDB 10.11", url, tables, out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=200)
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="cdc-lake-bench-catalog-"))
    try:
        rows = [_postgres(args.tables, out), _mariadb(args.tables, out)]
    finally:
        shutil.rmtree(out, ignore_errors=True)
    table = Table(title=f"config-from-source and config-check-source, {args.tables} tables of 8 columns")
    for column in ("source", "config-from-source (s)", "config-check-source (s)"):
        table.add_column(column)
    for row in rows:
        table.add_row(str(row["source"]), f"{row['generate_s']:.2f}", f"{row['check_s']:.2f}")
    Console().print(table)


if __name__ == "__main__":
    main()
