"""Operations on replicated tables: SCD2 history, change log, rollback and re-apply, maintenance.

The rollback, re-apply and maintenance tests share one replayed lake per lake path, built once for the module and
set back to its built snapshots before each test; under xdist they run on one worker, which builds it.
"""

from __future__ import annotations

import datetime as dt
import itertools
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from cdc_lake.core.config import PipelineConfig, parse_config
from cdc_lake.core.dms_files import parse_key
from cdc_lake.core.jsonl import read_jsonl
from cdc_lake.core.storage import LocalFolderStore
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.maintenance import Retention, maintain
from cdc_lake.engine.replay import replay
from cdc_lake.engine.tables import LakeLocation, history_name
from cdc_lake.local.generator import GeneratorSpec, generate, land_order
from cdc_lake.local.runtime import LocalPipeline, failed_runs
from cdc_lake.ops.export import export_tables
from cdc_lake.ops.operations import list_changes, reapply, rollback
from tests.support.lake import LAKE_PATHS, Lake, assert_lake_equals_oracle, write_file

pytestmark = pytest.mark.spark


def shop_config(**dms: Any) -> PipelineConfig:
    return parse_config(
        {
            "dms": {"bucket_folder": "dms", "timestamp_column": "dms_ts", **dms},
            "runs": {"mode": "per_file"},  # one commit per file: history and rollback points to step through
            "tables": [
                {
                    "name": "shop.orders",
                    "primary_key": ["order_id"],
                    "history": True,
                    "columns": [
                        {"name": "order_id", "type": "bigint"},
                        {"name": "status", "type": "string"},
                        {"name": "amount", "type": "decimal(10,2)"},
                    ],
                },
                {
                    "name": "shop.lines",
                    "primary_key": ["order_id", "line_no"],
                    "history": True,
                    # Merged on read (shop.orders takes the default, copy-on-write at this size): its delete files
                    # are what the maintenance test's compaction rewrites.
                    "write_mode": "merge-on-read",
                    "columns": [
                        {"name": "order_id", "type": "bigint"},
                        {"name": "line_no", "type": "int"},
                        {"name": "sku", "type": "string"},
                    ],
                },
            ],
        }
    )


def history_rows(lake: Lake, table_name: str) -> list[dict[str, Any]]:
    return [r.asDict() for r in lake.spark.table(lake.table(table_name)).collect()]


def table_rows(lake: Lake, table_name: str) -> list[tuple]:
    return sorted(tuple(r) for r in lake.spark.table(lake.table(table_name)).collect())


def test_history_of_one_row_under_ties_overlap_and_duplicate_triggers(spark, lake, landing):
    config = shop_config()
    prefix = "dms/shop/orders/"
    write_file(landing, prefix + "LOAD00000001.csv", "2025-03-01 12:05:00.000000,1,new,10.00\n")
    # Cached changes older than the full load's transfer time, then a delete and re-insert with one timestamp.
    first = write_file(
        landing,
        prefix + "20250301-120600000.csv",
        "U,2025-03-01 12:01:00.000000,1,paid,10.00\n"
        "D,2025-03-01 12:06:00.000000,1,paid,10.00\n"
        "I,2025-03-01 12:06:00.000000,1,again,11.00\n"
        "D,2025-03-01 12:06:00.000000,9,ghost,0.00\n",
    )
    second = write_file(landing, prefix + "20250301-120700000.csv", "U,2025-03-01 12:07:00.000000,1,shipped,11.00\n")
    context = ReplayContext(spark=spark, location=lake.location, config=config, store=lake.store())
    for key in (second, first, prefix + "LOAD00000001.csv", second):
        replay(context, parse_key(key, config))
    versions = sorted(history_rows(lake, "shop_orders_history"), key=lambda r: (r["order_id"], r["version"]))
    at = dt.datetime
    assert [
        (r["version"], r["op"], r["status"], r["valid_from"], r["valid_to"], r["is_current"], r["source_row"])
        for r in versions
    ] == [
        (1, "I", "new", at(2025, 3, 1, 12, 5), at(2025, 3, 1, 12, 5), False, 1),
        (2, "U", "paid", at(2025, 3, 1, 12, 5), at(2025, 3, 1, 12, 6), False, 1),
        (3, "D", "paid", at(2025, 3, 1, 12, 6), at(2025, 3, 1, 12, 6), False, 2),
        (4, "I", "again", at(2025, 3, 1, 12, 6), at(2025, 3, 1, 12, 7), False, 3),
        (5, "U", "shipped", at(2025, 3, 1, 12, 7), None, True, 1),
    ]
    assert {r["source_file"] for r in versions} == {prefix + "LOAD00000001.csv", first, second}


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("ops")
    config = shop_config()
    result = generate(
        config, out / "source", GeneratorSpec(seed=21, initial_rows=120, cdc_files=4, changes_per_file=50)
    )
    return config, result


def replay_all(lake: Lake, config, result, duplicates: bool = True) -> LocalPipeline:
    keys = land_order(result)
    lake.land_from(result.landing, keys)
    events = list(keys)
    if duplicates:  # shuffled, with repeats; otherwise in landing order, one change per file
        events += random.Random(2).sample(keys, k=len(keys) // 2)
        random.Random(1).shuffle(events)
    pipeline = lake.pipeline(config)
    runs = pipeline.deliver(events)
    assert not failed_runs(runs), [r.error for r in failed_runs(runs)]
    return pipeline


@dataclass(frozen=True)
class Replayed:
    """A lake replayed once from ``generated`` in landing order, and the snapshot each of its tables was left at."""

    lake: Lake
    pipeline: LocalPipeline
    built: dict[str, int]

    def reset(self) -> None:
        """Every table back at its built snapshot: the record of applied files travels with it."""
        for name, snapshot_id in self.built.items():
            if current_snapshot(self.lake, name) != snapshot_id:
                self.lake.spark.sql(
                    f"CALL {self.lake.catalog}.system.set_current_snapshot(table => '{self.lake.database}.{name}', "
                    f"snapshot_id => {snapshot_id})"
                ).collect()


def current_snapshot(lake: Lake, table_name: str) -> int:
    return lake.spark.sql(f"SELECT snapshot_id FROM {lake.table(table_name)}.refs WHERE name = 'main'").first()[0]


@pytest.fixture(scope="module")
def build_replayed(spark, aws_endpoint, tmp_path_factory, generated) -> Callable[[str], Replayed]:
    config, result = generated
    built: dict[str, Replayed] = {}

    def build(path: str) -> Replayed:
        if path not in built:
            landing = tmp_path_factory.mktemp(f"ops-{path}")
            lake = Lake(path, spark, f"t_{uuid.uuid4().hex[:12]}", landing, aws_endpoint)
            pipeline = replay_all(lake, config, result, duplicates=False)
            names = [n for t in config.tables for n in (t.lake_table, history_name(t))]
            built[path] = Replayed(lake, pipeline, {n: current_snapshot(lake, n) for n in names})
        return built[path]

    return build


# Under pytest-xdist (make test), the tests on the shared lake go to one worker, so it is built once per path.
on_the_replayed_lake = pytest.mark.xdist_group("replayed-operations")


@pytest.fixture
def replayed(request: pytest.FixtureRequest, build_replayed: Callable[[str], Replayed]) -> Replayed:
    """The module's replayed lake on the test's path (Hadoop unless parametrized), at its built snapshots."""
    shared = build_replayed(getattr(request, "param", "hadoop"))
    shared.reset()
    return shared


def check_history_invariants(lake: Lake, config: PipelineConfig) -> None:
    for table in config.tables:
        by_key: dict[tuple, list[dict[str, Any]]] = {}
        for row in history_rows(lake, history_name(table)):
            by_key.setdefault(tuple(row[k] for k in table.primary_key), []).append(row)
        current = set()
        for key, versions in by_key.items():
            versions.sort(key=lambda r: r["version"])
            assert [v["version"] for v in versions] == list(range(1, len(versions) + 1)), key
            for earlier, later in itertools.pairwise(versions):
                assert earlier["valid_to"] == later["valid_from"] >= earlier["valid_from"], key
                assert not earlier["is_current"]
            last = versions[-1]
            assert last["valid_to"] is None
            assert last["is_current"] == (last["op"] != "D")
            if last["is_current"]:
                current.add(tuple(last[c] for c in table.column_names))
        assert current == set(table_rows(lake, table.lake_table)), table.name


def test_history_is_exactly_once_and_its_current_rows_equal_the_table(spark, lake, tmp_path, generated):
    config, result = generated
    pipeline = replay_all(lake, config, result)
    assert_lake_equals_oracle(pipeline, result.expected, tmp_path / "export")
    check_history_invariants(lake, config)


@on_the_replayed_lake
@pytest.mark.budget(90)  # the first case on the Glue path builds the module's replayed lake there (about 60 s)
@pytest.mark.parametrize("replayed", LAKE_PATHS, indirect=True)
def test_rollback_then_reapply_gives_the_same_table_and_history(spark, replayed, tmp_path, generated):
    config, result = generated
    lake, pipeline = replayed.lake, replayed.pipeline
    table = config.table("shop.orders")
    before = table_rows(lake, table.lake_table)
    history_before = sorted(map(str, history_rows(lake, history_name(table))))
    changes = [c for c in list_changes(pipeline.context, table) if c.kind == "replay"]
    assert sum(len(c.files) for c in changes) == len(result.tables[0].load_files) + len(result.tables[0].cdc_files)
    assert sum(c.counts["I"] + c.counts["U"] + c.counts["D"] for c in changes) > 0

    assert len(changes) >= 4
    target = changes[1]
    done = rollback(pipeline.context, table, target.snapshot_id)
    assert done.files_to_reapply == sum(len(c.files) for c in changes[2:])
    as_of = tmp_path / "as-of"
    export_tables(pipeline.context, as_of, ["shop.orders"], snapshot_id=target.snapshot_id)
    export_tables(pipeline.context, tmp_path / "now", ["shop.orders"])
    assert read_jsonl(as_of / "shop.orders.jsonl") == read_jsonl(tmp_path / "now" / "shop.orders.jsonl")
    assert table_rows(lake, table.lake_table) != before
    check_history_invariants(lake, config)

    again = reapply(pipeline.context, table)
    assert again is not None and again.applied_files == [f for c in changes[2:] for f in c.files]
    assert table_rows(lake, table.lake_table) == before
    assert sorted(map(str, history_rows(lake, history_name(table)))) == history_before
    assert reapply(pipeline.context, table).already_applied


@on_the_replayed_lake
def test_a_stop_between_the_history_and_table_commits_is_safe_to_repeat(spark, replayed, generated):
    config, _ = generated
    lake, pipeline = replayed.lake, replayed.pipeline
    table = config.table("shop.orders")
    history_before = sorted(map(str, history_rows(lake, history_name(table))))
    before = table_rows(lake, table.lake_table)
    changes = [c for c in list_changes(pipeline.context, table) if c.kind == "replay"]
    # As if the last run stopped after its history commit: only the table goes back.
    spark.sql(
        f"CALL {lake.catalog}.system.set_current_snapshot(table => '{lake.database}.{table.lake_table}', "
        f"snapshot_id => {changes[-2].snapshot_id})"
    ).collect()
    again = reapply(pipeline.context, table)
    assert again is not None and again.applied_files == changes[-1].files and again.history_files == []
    assert table_rows(lake, table.lake_table) == before
    assert sorted(map(str, history_rows(lake, history_name(table)))) == history_before


@on_the_replayed_lake
def test_maintenance_keeps_the_table_its_record_and_its_rollback_points(spark, replayed):
    lake, pipeline = replayed.lake, replayed.pipeline
    table = pipeline.config.table("shop.lines")
    before = table_rows(lake, table.lake_table)
    changes_before = [c.snapshot_id for c in list_changes(pipeline.context, table) if c.kind == "replay"]
    results = maintain(pipeline.context, "all", tables=["shop.lines"], retention=Retention(days=7, last=5))
    actions = {(r.table.split(".")[-1], r.action) for r in results}
    assert actions == {(name, step) for name in ("shop_lines", "shop_lines_history")
                       for step in ("compact", "expire", "orphans")}  # fmt: skip
    assert any(r.detail.get("rewritten_data_files", 0) > 0 for r in results if r.action == "compact")
    assert table_rows(lake, table.lake_table) == before
    kinds = [c.kind for c in list_changes(pipeline.context, table)]
    assert kinds[-1] == "maintenance"
    # The record of applied files survives compaction: every trigger is still a no-op.
    assert reapply(pipeline.context, table).already_applied
    # Snapshots younger than the retention are kept: rolling back and re-applying still works.
    rollback(pipeline.context, table, changes_before[1])
    reapply(pipeline.context, table)
    assert table_rows(lake, table.lake_table) == before


def test_expiry_never_drops_the_newest_applied_files_record(spark, database, landing):
    config = shop_config()
    prefix = "dms/shop/orders/"
    key = write_file(landing, prefix + "LOAD00000001.csv", "2025-03-01 12:05:00.000000,1,new,10.00\n")
    location = LakeLocation("lake", database)
    context = ReplayContext(spark=spark, location=location, config=config, store=LocalFolderStore(landing))
    replay(context, parse_key(key, config))
    for _ in range(3):
        maintain(context, "compact", tables=["shop.orders"])
    later = dt.datetime.now(dt.UTC).replace(tzinfo=None) + dt.timedelta(days=30)
    retention = Retention(days=1, last=1, now=later)
    maintain(context, "expire", tables=["shop.orders"], retention=retention)
    assert replay(context, parse_key(key, config)).already_applied
