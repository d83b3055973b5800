"""The drift scenario ``cdc-lake verify`` is proven on, for any real source (tests/pg, tests/mariadb).

A table of 20,000 rows is replicated through the source's capture, then drift of each kind is injected the
ways production makes it: changes made at the source that DMS never carried (a row added, a row deleted, a
value changed, a value turned NULL, a long text the lake holds truncated) and a whole key range lost from the
lake. Verify must name exactly those keys, reading from the source a small part of the table.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from cdc_lake.core.config import PipelineConfig
from cdc_lake.engine.context import LakeContext
from cdc_lake.local.runtime import LocalPipeline, failed_runs
from cdc_lake.ops.verify import Cuts, verify
from tests.conftest import cli
from tests.pg.checks import SUMMARIES

ROWS = 20_000
LOST = range(12_001, 12_401)  # a whole range the lake lost (e.g. a DMS file removed by a lifecycle rule)
CUTS = Cuts(buckets=8, leaf_rows=200)


@dataclass(frozen=True)
class Source:
    """A real source under test: its URL, how to run SQL on it, and how its capture writes the table's files."""

    url: str
    execute: Callable[..., None]
    capture: Callable[[PipelineConfig, Path], list[str]]  # the full load's keys


def drift_statements(table: str) -> list[str]:
    """Changes at the source that DMS never carried into the lake."""
    return [
        f"INSERT INTO {table} (id, part, price, d, name, body, at) VALUES (20001, 1, 1.50, 0.5, 'new', 'b', NULL)",
        f"DELETE FROM {table} WHERE id = 17",
        f"UPDATE {table} SET price = price + 0.01 WHERE id = 4242",
        f"UPDATE {table} SET name = NULL WHERE id = 777",
        f"UPDATE {table} SET body = CONCAT(body, REPEAT('x', 5000)) WHERE id = 9000",  # the lake's copy cut short
        f"UPDATE {table} SET d = d * 2, at = NULL WHERE id = 19999",
    ]


EXPECTED = {
    (20001,): ("missing", []),
    (17,): ("extra", []),
    (4242,): ("changed", ["price"]),
    (777,): ("changed", ["name"]),
    (9000,): ("changed", ["body"]),
    (19999,): ("changed", ["d", "at"]),
}


def run_drift_scenario(
    spark: SparkSession, source: Source, warehouse: Path, database: str, tmp_path: Path, capsys: Any
) -> None:
    written = tmp_path / "tables.yaml"
    code, printed = cli(capsys, "config-from-source", "--source", source.url, "--schema", "drift", "-o", written,
                        "--database", database)  # fmt: skip
    assert code == 0, printed
    from cdc_lake.core.config import load_config

    config = load_config(written)
    landing = tmp_path / "landing"
    keys = source.capture(config, landing)
    pipeline = LocalPipeline(config, landing, spark, database=database)
    runs = pipeline.deliver([max(keys)])
    assert not failed_runs(runs), [r.error for r in failed_runs(runs)]
    lake = LakeContext(spark, config, pipeline.location)
    verify_args = ["verify", "-c", written, "-w", warehouse, "--database", database, "--source", source.url]

    # In step: nothing differs, and no source row is read (the sums are computed in the database).
    [clean] = verify(lake, source.url, cuts=CUTS)
    assert clean.drift == [] and clean.stats.source_rows == 0, clean
    code, printed = cli(capsys, *verify_args)
    assert code == 0 and "drift.items: 0 differing key(s)" in printed, printed

    source.execute(*drift_statements("drift.items"))
    spark.sql(f"DELETE FROM {pipeline.location.table(config.tables[0])} WHERE id BETWEEN {LOST[0]} AND {LOST[-1]}")
    [found] = verify(lake, source.url, cuts=CUTS)
    expected = {**EXPECTED, **{(k,): ("missing", []) for k in LOST}}
    got = {tuple(d.key.values()): (d.kind, d.columns) for d in found.drift}
    assert got == expected
    # The rows read from the source follow the drift: the drifted keys, and the leaves around them.
    assert found.stats.source_rows < ROWS // 10, found.stats

    code, printed = cli(capsys, *verify_args, "--json")
    assert code == 1, printed
    lines = [json.loads(line) for line in printed.splitlines()]
    assert len(lines) == len(expected)
    assert {"table": "drift.items", "key": {"id": 4242}, "kind": "changed", "columns": ["price"]} in lines
    stats = found.stats
    SUMMARIES.append(
        f"verify on {source.url.split(':', 1)[0] if '://' in source.url else 'postgresql'}: {len(expected)} drifted "
        f"keys of {ROWS} found with {stats.source_queries} source queries, {stats.source_rows} source rows and "
        f"{stats.lake_rows} lake rows read, {stats.ranges} ranges, {stats.seconds:.1f} s"
    )


def create_items(source: Source, generated: str, moment: str) -> None:
    """The table, filled by the source's own row generator: ``generated`` is a FROM clause giving ``n``,
    ``moment`` the expression of a timestamp ``n`` seconds into 2025."""
    source.execute(
        "CREATE TABLE drift.items (id bigint PRIMARY KEY, part int NOT NULL, price decimal(12,2), "
        "d double precision, name varchar(40), body text, at timestamp NULL)",
        "INSERT INTO drift.items SELECT n, n % 7, n * 1.25, n / 3.0e0, CONCAT('name ', n), "
        f"CONCAT('body of ', n), {moment} FROM {generated}",
    )
