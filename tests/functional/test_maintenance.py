"""Maintenance beside replay: the record of applied files survives what Glue's optimizers, Athena or a user run
(compaction, snapshot expiry down to one snapshot), and maintenance running while replay runs commit loses
nothing and applies nothing twice."""

from __future__ import annotations

import datetime as dt
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from cdc_lake.core.config import PipelineConfig, parse_config
from cdc_lake.core.exceptions import CommitConflictError, RecordLostError
from cdc_lake.engine.iceberg_errors import is_commit_conflict, is_expiry_beaten_by_a_branch, root_cause
from cdc_lake.engine.iceberg_java import table_properties
from cdc_lake.engine.maintenance import UPKEEP_SMALL_FILE_BYTES, Retention, compact, maintain, table_shape
from cdc_lake.engine.record import RECORD, STATE, snapshot_summaries
from cdc_lake.local.generator import GeneratorSpec, generate, land_order
from cdc_lake.ops.operations import list_changes, rollback
from cdc_lake.ops.status import table_status
from tests.support.configs import table_data
from tests.support.lake import Lake, assert_lake_equals_oracle, on_both_paths

pytestmark = pytest.mark.spark

TABLE = "shop.orders"


def orders_config(**lake: Any) -> PipelineConfig:
    return parse_config(
        {
            "dms": {"timestamp_column": "dms_ts"},
            "runs": {"mode": "per_file"},
            "lake": lake,
            "tables": [table_data(TABLE, ["order_id"], order_id="bigint", status="string", amount="decimal(10,2)")],
        }
    )


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Any:
    spec = GeneratorSpec(seed=40, initial_rows=200, cdc_files=12, changes_per_file=30, cached_changes=0)
    return generate(orders_config(), tmp_path_factory.mktemp("maintenance") / "source", spec)


def optimize_and_vacuum(lake: Lake, name: str) -> None:
    """What Glue's compaction and snapshot-retention optimizers, Athena's OPTIMIZE/VACUUM or a user's own job do:
    a rewrite of every data file (a snapshot with no cdc-lake record), then expiry down to the last snapshot."""
    rewrite_all(lake, name)
    expire_to_one(lake, name)


def rewrite_all(lake: Lake, name: str) -> None:
    target = f"{lake.database}.{name}"
    lake.spark.sql(
        f"CALL {lake.catalog}.system.rewrite_data_files(table => '{target}', options => map('rewrite-all', 'true'))"
    ).collect()


def expire_to_one(lake: Lake, name: str) -> None:
    """Expiry of every snapshot but the current one."""
    target = f"{lake.database}.{name}"
    later = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=5)).strftime("%Y-%m-%d %H:%M:%S")
    lake.spark.sql(
        f"CALL {lake.catalog}.system.expire_snapshots(table => '{target}', older_than => TIMESTAMP '{later}', "
        "retain_last => 1)"
    ).collect()


def compacted_after(lake: Lake, generated: Any, applied: int, landed: int) -> tuple[PipelineConfig, list[str]]:
    """The generated source's first ``landed`` files landed, its first ``applied`` applied, then shop_orders
    compacted and expired to one snapshot; the configuration and every key in landing order."""
    config = orders_config()
    keys = land_order(generated)
    lake.land_from(generated.landing, keys[:landed])
    for key in keys[:applied]:
        lake.apply(config, key)
    optimize_and_vacuum(lake, "shop_orders")
    return config, keys


@on_both_paths
def test_the_record_of_applied_files_survives_compaction_and_expiry_to_one_snapshot(
    lake: Lake, generated: Any, tmp_path: Path
) -> None:
    config, keys = compacted_after(lake, generated, applied=6, landed=6)
    lineage = snapshot_summaries(lake, "shop_orders")
    assert len(lineage) == 1 and STATE not in (lineage[0]["summary"] or {})  # no record left in any snapshot

    lake.land_from(generated.landing, keys[6:7])
    result = lake.apply(config, keys[6])
    assert result.applied_files == [keys[6]]  # the next file only: nothing from the LOAD file on again
    assert not result.notices
    lake.land_from(generated.landing, keys[7:])
    for key in keys[7:]:
        assert lake.apply(config, key).applied_files == [key]
    assert_lake_equals_oracle(lake.pipeline(config), generated.expected, tmp_path / "export")


@on_both_paths
def test_a_run_that_last_wrote_the_table_plans_again_after_another_tools_compaction_and_expiry(
    lake: Lake, generated: Any, tmp_path: Path
) -> None:
    """A merge-on-read table's batches are row deltas, and the next batch plans from the metadata this process
    committed (``kept_commit``). Another tool's compaction and expiry to one snapshot right after removes manifests
    that metadata names: the batch plans again from the table as it is, rather than fail on a missing file."""
    config = orders_config(write_mode="merge-on-read")
    keys = land_order(generated)
    lake.land_from(generated.landing, keys)
    for key in keys[:4]:
        assert lake.apply(config, key).applied_files == [key]
    optimize_and_vacuum(lake, "shop_orders")
    for key in keys[4:]:
        assert lake.apply(config, key).applied_files == [key]
    assert_lake_equals_oracle(lake.pipeline(config), generated.expected, tmp_path / "export")


@on_both_paths
def test_a_compaction_beaten_after_its_first_rewrite_landed_leaves_the_record_readable_after_another_tools_expiry(
    lake: Lake, generated: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cdc-lake's compaction is three commits. Its data rewrite lands, then its manifest rewrite is beaten (here: it
    fails before it starts). Main is then a snapshot past the record; another tool's compaction and expiry to one
    snapshot after it must still leave a record the next run can read (the CI failure of 2026-12-01)."""
    config = orders_config(write_mode="merge-on-read")  # delete files: the data rewrite has files to rewrite
    keys = land_order(generated)
    lake.land_from(generated.landing, keys[:5])
    for key in keys[:4]:
        lake.apply(config, key)
    before = snapshot_summaries(lake, "shop_orders")[-1]["snapshot_id"]
    sql = lake.spark.sql

    def beaten_at_manifests(statement: str, *args: Any, **kwargs: Any) -> Any:
        if "rewrite_manifests" in statement:
            raise CommitConflictError("shop_orders: main moved while the manifests were rewritten")
        return sql(statement, *args, **kwargs)

    monkeypatch.setattr(lake.spark, "sql", beaten_at_manifests)
    with pytest.raises(CommitConflictError):
        compact(lake, "shop_orders")
    monkeypatch.undo()
    assert snapshot_summaries(lake, "shop_orders")[-1]["snapshot_id"] != before  # the data rewrite landed
    optimize_and_vacuum(lake, "shop_orders")
    assert lake.apply(config, keys[4]).applied_files == [keys[4]]


def test_a_lost_record_refuses_the_run_and_changes_nothing(lake: Lake, generated: Any) -> None:
    config, keys = compacted_after(lake, generated, applied=3, landed=4)
    lake.spark.sql(f"ALTER TABLE {lake.table('shop_orders')} UNSET TBLPROPERTIES ('{RECORD}')")
    before = lake.rows("shop_orders")
    with pytest.raises(RecordLostError, match=r"record of which DMS files .* is lost.*cdc-lake reload"):
        lake.apply(config, keys[3])
    assert lake.rows("shop_orders") == before
    assert all((lake.landing / key).exists() for key in keys[:4])
    status = table_status(lake.pipeline(config).context, config.table(TABLE), dt.datetime.now(dt.UTC))
    assert status.state == "refused" and "is lost" in status.detail


def test_a_record_that_describes_undone_commits_is_never_trusted(lake: Lake, generated: Any) -> None:
    """Main set back by Iceberg's own procedure to a compaction made before the last commits, then everything else
    expired: the property describes commits main no longer holds, so the run refuses rather than skip the files
    the rollback undid."""
    config = orders_config()
    keys = land_order(generated)
    lake.land_from(generated.landing, keys[:5])
    for key in keys[:2]:
        lake.apply(config, key)
    target = f"{lake.database}.shop_orders"
    rewrite_all(lake, "shop_orders")
    compacted = list_changes(lake, config.table(TABLE))[-1]
    assert compacted.kind == "maintenance"
    for key in keys[2:4]:
        lake.apply(config, key)
    lake.spark.sql(
        f"CALL {lake.catalog}.system.set_current_snapshot(table => '{target}', snapshot_id => {compacted.snapshot_id})"
    ).collect()
    expire_to_one(lake, "shop_orders")
    before = lake.rows("shop_orders")
    with pytest.raises(RecordLostError, match="cannot be shown to be an ancestor of main"):
        lake.apply(config, keys[4])
    assert lake.rows("shop_orders") == before


def test_cdc_lake_rollback_moves_the_record_with_main(lake: Lake, generated: Any, tmp_path: Path) -> None:
    config = orders_config()
    keys = land_order(generated)
    lake.land_from(generated.landing, keys)
    for key in keys[:5]:
        lake.apply(config, key)
    table = config.table(TABLE)
    replays = [c.snapshot_id for c in list_changes(lake, table) if c.kind == "replay"]
    rollback(lake.context(config), table, replays[2])
    record = json.loads(table_properties(lake.spark, lake.location.dotted("shop_orders"))[RECORD])
    assert record["snapshot"] == replays[2]
    optimize_and_vacuum(lake, "shop_orders")
    result = lake.apply(config, keys[-1])  # the files the rollback undid, and the rest
    assert result.applied_files == keys[3:]
    assert_lake_equals_oracle(lake.pipeline(config), generated.expected, tmp_path / "export")


@on_both_paths
def test_maintenance_beside_replay_runs_loses_nothing_and_applies_nothing_twice(
    lake: Lake, generated: Any, tmp_path: Path
) -> None:
    """Every file triggers its own run while a user's compaction and expiry, and cdc-lake's own maintenance, run
    again and again in another thread. A run beaten by them plans again (or, beaten every time, fails and is
    triggered again, as a later file would): each file is applied by exactly one commit, in order."""
    config = orders_config()
    keys = land_order(generated)
    lake.land_from(generated.landing, keys[:2])
    lake.apply(config, keys[1])
    pipeline = lake.pipeline(config)
    done = threading.Event()
    failures: list[str] = []
    rounds = 0

    def maintenance() -> None:
        nonlocal rounds
        retention = Retention(days=0, last=1)
        # Every second, and on after the runs until one round has landed: runs may end before a round beside
        # them lands (each beaten), and the lake must then still take maintenance.
        while not failures and not (done.wait(1.0) and rounds):
            try:
                optimize_and_vacuum(lake, "shop_orders")
                maintain(pipeline.context, "all", tables=[TABLE], retention=retention)
                rounds += 1
            except Exception as error:  # beaten by a replay commit or a run's new branch: tried again next round
                if not (is_commit_conflict(error) or is_expiry_beaten_by_a_branch(error)):
                    failures.append(f"{type(error).__name__}: {root_cause(error)}")

    worker = threading.Thread(target=maintenance)
    worker.start()
    applied: list[str] = []
    beaten: list[str] = []
    try:
        lake.land_from(generated.landing, keys[2:])
        for key in keys[2:]:
            for _ in range(10):
                try:
                    applied += lake.apply(config, key).applied_files
                    break
                except CommitConflictError as error:
                    beaten.append(f"{key}: {error}")
    finally:
        done.set()
        worker.join(timeout=600)
    assert not failures, failures
    assert rounds > 0
    assert applied == keys[2:], beaten
    assert_lake_equals_oracle(lake.pipeline(config), generated.expected, tmp_path / "export")


def test_upkeep_keeps_a_busy_table_compacted_and_its_snapshots_bounded(lake: Lake, tmp_path: Path) -> None:
    """The default write mode (auto): the table is small, so copy-on-write, and its small batches are row deltas
    all the same, whose delete files upkeep compacts."""
    upkeep = {"compact_at_delete_files": 3, "compact_every_commits": 0, "keep_snapshots": 4}
    config = orders_config(upkeep=upkeep)
    spec = GeneratorSpec(seed=41, initial_rows=100, cdc_files=24, changes_per_file=8, cached_changes=0)
    generated = generate(config, tmp_path / "source", spec)
    keys = land_order(generated)
    lake.land_from(generated.landing, keys)
    steps, shapes = [], []
    for key in keys:
        result = lake.apply(config, key)
        assert result.applied_files == [key]
        steps += [r.action for r in result.upkeep]
        shapes.append(table_shape(lake, "shop_orders"))
    assert "compact" in steps and "expire" in steps
    assert max(s.delete_files for s in shapes) <= 3  # compacted as soon as a commit reached the threshold
    assert {s.write_mode for s in shapes} == {"copy-on-write"} and max(s.delete_files for s in shapes) > 0
    assert max(s.snapshots for s in shapes) <= 4 + 10  # expired as soon as it held the margin more than it keeps
    assert_lake_equals_oracle(lake.pipeline(config), generated.expected, tmp_path / "export")


def test_auto_writes_a_small_table_copy_on_write_and_switches_as_it_crosses_the_size(
    lake: Lake, generated: Any, tmp_path: Path
) -> None:
    """``lake.write_mode: auto``: the table starts merge-on-read, its first commit's upkeep switches it to
    copy-on-write (its files are under the size). Set to ``copy-on-write``, its batches are MERGEs that leave no
    delete file; under ``auto`` its small batches are row deltas, whose delete files upkeep compacts. Once its files
    are past the size (here: the size lowered under them) it goes merge-on-read."""
    small, large = orders_config(), orders_config(copy_on_write_up_to_mb=0.0001)
    rewritten = orders_config(write_mode="copy-on-write")
    keys = land_order(generated)
    lake.land_from(generated.landing, keys)
    dotted = lake.location.dotted("shop_orders")
    first = lake.apply(small, keys[0])
    assert [(u.action, u.detail["copy_on_write"]) for u in first.upkeep] == [("write-mode", 1)]
    assert table_properties(lake.spark, dotted)["write.merge.mode"] == "copy-on-write"
    for key in keys[1:3]:
        assert not lake.apply(rewritten, key).upkeep
    assert table_shape(lake, "shop_orders").delete_files == 0
    for key in keys[3:6]:
        assert not [u for u in lake.apply(small, key).upkeep if u.action == "write-mode"]  # no switch back and forth
    assert table_properties(lake.spark, dotted)["write.merge.mode"] == "copy-on-write"
    assert table_shape(lake, "shop_orders").delete_files > 0  # the row deltas' own

    grown = lake.apply(large, keys[6])
    assert [(u.action, u.detail["copy_on_write"]) for u in grown.upkeep] == [("write-mode", 0)]
    for key in keys[7:]:
        lake.apply(large, key)
    assert table_properties(lake.spark, dotted)["write.merge.mode"] == "merge-on-read"
    assert table_shape(lake, "shop_orders").delete_files > 0
    assert_lake_equals_oracle(lake.pipeline(large), generated.expected, tmp_path / "export")


def test_upkeep_compaction_merges_the_files_batches_wrote_and_leaves_a_full_loads_files(lake: Lake) -> None:
    # A target of 16 MiB, so that Iceberg's own bound for a small file (three quarters of it) lies above
    # upkeep's; two tasks' files of about 10 MiB of random bytes (incompressible: no roll before the target)
    # stand in for a full load's, which Iceberg's bound would rewrite.
    spark, name = lake.spark, "upkeep_files"
    table = lake.table(name)
    spark.sql(
        f"CREATE TABLE {table} (id bigint, payload binary) USING iceberg "
        f"TBLPROPERTIES ('write.target-file-size-bytes' = '{16 * 1024 * 1024}')"
    )
    bound = UPKEEP_SMALL_FILE_BYTES
    spark.range(0, 600_000, numPartitions=2).selectExpr(
        "id", "unhex(sha2(cast(id as string), 256)) AS payload"
    ).writeTo(table).append()
    for first in (600_000, 600_010, 600_020):  # three batches' files
        spark.range(first, first + 10, numPartitions=1).selectExpr("id", "cast('batch' AS binary) AS payload").writeTo(
            table
        ).append()

    def sizes() -> dict[str, int]:
        found = spark.sql(f"SELECT file_path, file_size_in_bytes FROM {table}.data_files").collect()
        return {r["file_path"]: r["file_size_in_bytes"] for r in found}

    before = sizes()
    large = {path for path, size in before.items() if size >= bound}
    assert len(large) == 2 and len(before) == 5
    detail = compact(lake, name, thorough=False)
    after = sizes()
    assert large <= set(after)  # not one byte of the large files rewritten
    assert len([size for size in after.values() if size < bound]) <= 1  # the batches' files merged
    assert detail["rewritten_data_files"] == len(before) - len(large)
    assert spark.table(table).count() == 600_030
