"""The drift scenario ``cdc-lake verify`` is proven on, for any real source (tests/pg, tests/mariadb).

A table of 20,000 rows is replicated through the source's capture, then drift of each kind is injected the
ways production makes it: changes made at the source that DMS never carried (a row added, a row deleted, a
value changed, a value turned NULL, a long text the lake holds truncated) and a whole key range lost from the
lake. Verify must name exactly those keys, reading from the source a small part of the table.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pyspark.sql import SparkSession

from cdc_lake.core.config import PipelineConfig, load_config, parse_config
from cdc_lake.engine.context import LakeContext
from cdc_lake.engine.record import REPAIR, snapshot_summaries
from cdc_lake.local.runtime import LocalPipeline, failed_runs
from cdc_lake.ops.repair import repair
from cdc_lake.ops.source_tls import SourceAddress
from cdc_lake.ops.verify import Cuts, Settle, SourceTable, _Range, connection_for, verify
from tests.support.cli import cli
from tests.support.source_tables import SUMMARIES, SourceRows, check_tables, hadoop_reader, newest_per_table

ROWS = 20_000
LOST = range(12_001, 12_401)  # a whole range the lake lost (e.g. a DMS file removed by a lifecycle rule)
CUTS = Cuts(buckets=8, leaf_rows=200)


class Capture(Protocol):
    """The source's stand-in for DMS: the full load, then rounds of changes, as files in the landing folder."""

    def start(self) -> list[str]: ...
    def capture(self) -> list[str]: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class Source:
    """A real source under test: its URL, how to run SQL on it, and its capture."""

    url: str
    execute: Callable[..., None]
    capture: Callable[[PipelineConfig, Path], Capture]
    rows: SourceRows  # SELECT * of a table: the oracle


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


@dataclass(frozen=True)
class Replicated:
    written: Path  # the configuration config-from-source wrote
    pipeline: LocalPipeline
    capture: Capture

    @property
    def lake(self) -> LakeContext:
        return self.pipeline.context

    def deliver(self, keys: list[str]) -> None:
        runs = self.pipeline.deliver(newest_per_table(keys, self.pipeline.config))
        assert not failed_runs(runs), [r.error for r in failed_runs(runs)]


def replicate(spark: SparkSession, source: Source, database: str, tmp_path: Path, capsys: Any) -> Replicated:
    """The configuration written from the source, and the table's full load applied; the capture stays open."""
    written = tmp_path / "tables.yaml"
    code, printed = cli(capsys, "config-from-source", "--source", source.url, "--schema", "drift", "-o", written,
                        "--database", database)  # fmt: skip
    assert code == 0, printed
    # The capture here writes a round's changes at once: DMS's batch interval, which verify waits out, is 1 s.
    written.write_text(written.read_text().replace("\ndms:\n", "\ndms:\n  cdc_max_batch_interval: 1\n", 1))
    config = load_config(written)
    assert config.dms.cdc_max_batch_interval == 1
    landing = tmp_path / "landing"
    capture = source.capture(config, landing)
    replicated = Replicated(written, LocalPipeline(config, landing, spark, database=database), capture)
    replicated.deliver(capture.start())
    return replicated


def run_drift_scenario(
    spark: SparkSession, source: Source, warehouse: Path, database: str, tmp_path: Path, capsys: Any
) -> None:
    replicated = replicate(spark, source, database, tmp_path, capsys)
    replicated.capture.close()  # nothing more reaches the lake: what changes at the source now is drift
    written, pipeline, config, lake = (
        replicated.written,
        replicated.pipeline,
        replicated.pipeline.config,
        replicated.lake,
    )
    verify_args = ["verify", "-c", written, "-w", warehouse, "--database", database, "--source", source.url]

    # In step: nothing differs, and no source row is read (the sums are computed in the database).
    [clean] = verify(lake, SourceAddress(source.url), cuts=CUTS)
    assert clean.drift == [] and clean.stats.source_rows == 0, clean
    code, printed = cli(capsys, *verify_args)
    assert code == 0 and "drift.items: 0 differing key(s)" in printed, printed

    source.execute(*drift_statements("drift.items"))
    spark.sql(f"DELETE FROM {pipeline.location.table(config.tables[0])} WHERE id BETWEEN {LOST[0]} AND {LOST[-1]}")
    [found] = verify(lake, SourceAddress(source.url), cuts=CUTS)
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

    # Repair rewrites exactly those keys in one commit; the lake then equals SELECT *, and verify finds nothing.
    landing = ["-l", pipeline.landing]
    code, printed = cli(capsys, "repair", *verify_args[1:], *landing, "--dry-run")
    assert code == 1 and "drift.items: would rewrite id=4242 (changed: price)" in printed, printed
    code, printed = cli(capsys, "repair", *verify_args[1:], *landing)
    assert code == 0, printed
    assert f"drift.items: repaired {len(expected)} key(s), {len(expected) - 1} upserted and 1 deleted" in printed
    assert "verified again: 0 differing key(s)" in printed
    check_tables(spark, hadoop_reader(warehouse), source.rows, config, pipeline.location, "after repair")
    [summary] = [s["summary"] for s in snapshot_summaries(pipeline.context, config.tables[0])
                 if REPAIR in s["summary"]]  # fmt: skip
    assert json.loads(summary[REPAIR])["keys"] == len(expected)
    stats = found.stats
    SUMMARIES.append(
        f"verify on {_label(source.url)}: {len(expected)} drifted "
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


# Keys the concurrent writer keeps changing; lake-side drift stays outside them.
BUSY = range(5_000, 8_001)


def lake_drift(spark: SparkSession, lake_table: str) -> dict[tuple[int], tuple[str, list[str]]]:
    """A fix applied to the lake only, and a range lost from it: the drift expected, by key."""
    spark.sql(f"DELETE FROM {lake_table} WHERE id = 20000 OR id BETWEEN {LOST[0]} AND {LOST[-1]}")
    spark.sql(f"INSERT INTO {lake_table} SELECT 30000L, part, price, d, name, body, at FROM {lake_table} WHERE id = 1")
    spark.sql(f"UPDATE {lake_table} SET price = price + 0.01 WHERE id = 4242")
    spark.sql(f"UPDATE {lake_table} SET name = NULL WHERE id = 777")
    spark.sql(f"UPDATE {lake_table} SET body = substr(body, 1, 3) WHERE id = 9000")  # a LOB cut short
    return {
        (20000,): ("missing", []),
        (30000,): ("extra", []),
        (4242,): ("changed", ["price"]),
        (777,): ("changed", ["name"]),
        (9000,): ("changed", ["body"]),
        **{(k,): ("missing", []) for k in LOST},
    }


def run_concurrent_scenario(
    spark: SparkSession, source: Source, warehouse: Path, database: str, tmp_path: Path, capsys: Any
) -> None:
    """Verify while the source keeps changing and the pipeline keeps applying: only the real drift is reported."""
    replicated = replicate(spark, source, database, tmp_path, capsys)
    config = replicated.pipeline.config
    expected = lake_drift(spark, replicated.pipeline.location.table(config.tables[0]))
    stop = threading.Event()
    written = {"transactions": 0}

    def writer() -> None:
        chosen = random.Random(7)
        while not stop.is_set():
            key = chosen.choice(BUSY)
            source.execute(f"UPDATE drift.items SET price = price + 1, name = 'busy {key}' WHERE id = {key}")
            written["transactions"] += 1
            time.sleep(0.02)

    def land_and_apply(seconds: float) -> None:  # DMS writes what committed, the trigger's runs apply it
        replicated.deliver(replicated.capture.capture())
        time.sleep(seconds)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        time.sleep(1.0)  # changes are in flight before verify starts
        settle = Settle(
            replicated.pipeline.context, interval_s=1.0, timeout_s=120.0, poll_s=0.3, rounds=6, wait=land_and_apply
        )
        [repaired] = repair(replicated.pipeline.context, SourceAddress(source.url), settle=settle)
    finally:
        stop.set()
        thread.join()
    found = repaired.verified
    got = {tuple(d.key.values()): (d.kind, d.columns) for d in found.drift}
    assert got == expected, {k: v for k, v in got.items() if k not in expected}
    assert all(key["id"] in BUSY for key in found.unsettled), found.unsettled
    assert written["transactions"] > 50, written
    assert (repaired.keys, repaired.deleted, repaired.snapshot_id is not None) == (len(expected), 1, True)

    # What the writer left in flight lands, then changes to repaired keys: they apply after the repair, in DMS
    # order, and the lake equals SELECT *.
    source.execute(
        "UPDATE drift.items SET price = 7.77 WHERE id IN (4242, 12001)", "DELETE FROM drift.items WHERE id = 777"
    )
    try:
        replicated.deliver(replicated.capture.capture())
    finally:
        replicated.capture.close()
    location = replicated.pipeline.location
    check_tables(spark, hadoop_reader(warehouse), source.rows, config, location, "repair, then CDC")
    SUMMARIES.append(
        f"verify under load on {_label(source.url)}: {written['transactions']} transactions meanwhile; exactly the "
        f"{len(expected)} drifted keys reported, {len(found.unsettled)} busy key(s) left unsettled"
    )


def _label(url: str) -> str:
    return url.split(":", 1)[0] if "://" in url else "postgresql"


# A source table whose schema, table and column names hold ``%``, which both drivers read as a placeholder.
PERCENT_TABLE = {
    "name": "pct%schema.pct%items",
    "primary_key": ["id%"],
    "columns": [{"name": "id%", "type": "bigint"}, {"name": "rate%", "type": "string"}],
}
PERCENT_ROWS = [(1, "5%"), (2, "100%"), (3, None)]


def check_percent_names(url: str) -> None:
    """What verify and repair ask of the source (extent, sums, key listing, rows) answers on ``PERCENT_TABLE``,
    which the caller created at ``url`` holding ``PERCENT_ROWS``."""
    table = parse_config({"tables": [PERCENT_TABLE]}).tables[0]
    with connection_for(SourceAddress(url)) as (connection, dialect):
        source = SourceTable(connection, dialect, table, table.columns)
        assert source.extent() == (3, 1, 3)
        whole = _Range(None, None)
        everything = source.sums(whole, [2])
        assert sorted((b, n) for b, (n, _) in everything.items()) == [(0, 1), (1, 2)]
        assert sorted(source.listing(whole)) == [(1,), (2,), (3,)]
        rows = source.rows([(1,), (2,), (3,)])
    assert sorted((r["id_"], r["rate_"]) for r in rows.values()) == PERCENT_ROWS
