"""A small batch committed through Iceberg's RowDelta (``engine.row_delta``) leaves the table the MERGE leaves: the
same batches are applied through both, each checked against an oracle replayed in Python, on both lake paths."""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from cdc_lake.core.config import parse_config
from tests.support.aws import aws_client
from tests.support.configs import CONVERTED_TYPES, columns, items_config_data
from tests.support.lake import Lake, on_both_paths, write_file

pytestmark = pytest.mark.spark

T = "dms/shop/items/"
MERGE_ON_READ = {"write_mode": "merge-on-read"}
TYPED = columns(id="bigint", **CONVERTED_TYPES)


def _config(row_delta: bool, table_columns: list[dict[str, Any]] | None = None) -> Any:
    lake = {**MERGE_ON_READ, **({} if row_delta else {"row_delta_keys": 0})}
    data = items_config_data(table_columns, lake=lake) if table_columns else items_config_data(lake=lake)
    return parse_config(data)


def _row_deltas(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The snapshots the row delta commits from now on, as it makes them."""
    from cdc_lake.engine import row_delta

    made: list[int] = []
    real = row_delta.commit_row_delta

    def counted(*args: Any) -> int:
        made.append(real(*args))
        return made[-1]

    monkeypatch.setattr(row_delta, "commit_row_delta", counted)
    return made


def _snapshots(lake: Lake) -> list[int]:
    name = lake.table("shop_items")
    return [r[0] for r in lake.spark.sql(f"SELECT snapshot_id FROM {name}.snapshots ORDER BY committed_at").collect()]


def _batches(seed: int, count: int, keys: int) -> list[list[tuple[str, int, str]]]:
    """Random change batches over a few keys: inserts, updates and deletes, of keys that exist and that do not, a
    key changed several times in one batch."""
    rng = random.Random(seed)
    return [
        [(rng.choice("IUD"), rng.randint(1, keys), f"v{batch}_{row}") for row in range(rng.randint(1, 12))]
        for batch in range(count)
    ]


@on_both_paths
@pytest.mark.parametrize("row_delta", [True, False], ids=["row-delta", "merge"])
def test_both_paths_leave_the_oracle_after_every_batch(spark, lake, landing, monkeypatch, row_delta):
    config = _config(row_delta)
    made = _row_deltas(monkeypatch)
    write_file(landing, T + "LOAD00000001.csv", "".join(f"{k},load{k}\n" for k in range(1, 21)))
    expected = {k: f"load{k}" for k in range(1, 21)}
    lake.apply(config, T + "LOAD00000001.csv")
    for number, batch in enumerate(_batches(seed=58, count=8, keys=30)):
        key = write_file(
            landing, f"{T}20250301-12{number:02d}00000.csv", "".join(f"{op},{k},{v}\n" for op, k, v in batch)
        )
        for op, k, value in batch:  # DMS order: each key's last change wins; an update of a missing key inserts
            if op == "D":
                expected.pop(k, None)
            else:
                expected[k] = value
        result = lake.apply(config, key)
        assert result.applied_files == [key]
        assert lake.rows() == sorted(expected.items()), f"after batch {number}"
        if row_delta:  # one snapshot, main's new head, with the batch's record
            assert made[-1:] == [result.snapshot_id] == [lake.head()] == _snapshots(lake)[-1:]
    assert len(made) == (8 if row_delta else 0)
    assert not lake.spark.sql(f"SELECT * FROM {lake.table('shop_items')}.refs WHERE name <> 'main'").count()


@on_both_paths
def test_every_type_is_written_as_the_merge_writes_it(spark, lake, landing, monkeypatch):
    load = (
        "1,one,1.50,2024-01-31,2024-01-31 10:11:12.123456,2024-01-31 10:11:12.5+00,0.5,1.25,7,true\n"
        "2,two,,,,,,,,\n"
        "3,three,-0.01,1970-01-01,1970-01-01 00:00:00.000001,1970-01-01 00:00:01+00,0,0,-1,false\n"
    )
    changes = (
        "U,1,uno,99999999.99,2025-12-31,2025-12-31 23:59:59.999999,2025-12-31 23:59:59.999999+02,-1e+30,-2.5e+10,"
        "2147483647,false\n"
        "D,3,three,,,,,,,,\n"
        "I,4,four,0.00,1999-09-09,1999-09-09 09:09:09,1999-09-09 09:09:09+00,1.5,3.0,0,true\n"
        "U,2,,,,,,,,,\n"
    )
    made = _row_deltas(monkeypatch)
    tables = {}
    for row_delta in (False, True):
        config = _config(row_delta, TYPED)
        write_file(landing, T + "LOAD00000001.csv", load)
        lake.apply(config, T + "LOAD00000001.csv")
        key = write_file(landing, T + "20250301-120000000.csv", changes)
        lake.apply(config, key)
        tables[row_delta] = lake.rows()
        spark.sql(f"DROP TABLE {lake.table('shop_items')}")
    assert tables[True] == tables[False]
    assert len(tables[True]) == 3 and len(made) == 1


@on_both_paths
def test_a_table_of_a_codec_arrow_does_not_write_keeps_the_merge(spark, lake, landing, monkeypatch):
    """The row delta writes its files with pyarrow: a table whose Parquet codec pyarrow does not write as Iceberg
    names it (lz4) takes the MERGE, and one of another codec it writes (snappy) the row delta, read back right."""
    made = _row_deltas(monkeypatch)
    config = _config(True)
    write_file(landing, T + "LOAD00000001.csv", "1,a\n2,b\n")
    lake.apply(config, T + "LOAD00000001.csv")
    name = lake.table("shop_items")
    expected = {1: "a", 2: "b"}
    for number, codec in enumerate(["lz4", "snappy"]):
        spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('write.parquet.compression-codec' = '{codec}')")
        key = write_file(landing, f"{T}20250301-12{number:02d}00000.csv", f"U,1,a{number}\nI,{3 + number},n\n")
        expected |= {1: f"a{number}", 3 + number: "n"}
        assert lake.apply(config, key).applied_files == [key]
        assert lake.rows() == sorted(expected.items()), codec
        assert len(made) == number, codec


@on_both_paths
def test_a_commit_since_the_plan_refuses_the_row_delta_and_the_run_plans_again(spark, lake, landing, monkeypatch):
    """Another writer commits between the batch's plan and its row delta: the row delta is refused (main moved),
    and the next attempt plans from that commit: nothing is lost or applied twice."""
    from cdc_lake.engine import row_delta

    config = _config(True)
    write_file(landing, T + "LOAD00000001.csv", "1,a\n2,b\n")
    lake.apply(config, T + "LOAD00000001.csv")
    name = lake.table("shop_items")
    real = row_delta._indexed_positions  # where each attempt finds its keys' rows first
    calls: list[int] = []

    def foreign_commit_first(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:  # a compaction by someone else, between this batch's plan and its commit
            spark.sql(f"INSERT INTO {name} VALUES (100, 'foreign')")
        return real(*args, **kwargs)

    monkeypatch.setattr(row_delta, "_indexed_positions", foreign_commit_first)
    key = write_file(landing, T + "20250301-120000000.csv", "U,1,a1\nD,2,b\nI,3,c\n")
    result = lake.apply(config, key)
    assert result.attempts == 2 and len(calls) == 2
    assert lake.rows() == [(1, "a1"), (3, "c"), (100, "foreign")]
    assert lake.apply(config, key).already_applied


@on_both_paths
def test_the_next_batch_plans_from_the_kept_commit_until_the_table_is_written_otherwise(spark, lake, landing):
    from cdc_lake.engine.iceberg_java import kept_commit, set_table_property

    config = _config(True)
    write_file(landing, T + "LOAD00000001.csv", "1,a\n2,b\n")
    lake.apply(config, T + "LOAD00000001.csv")
    dotted = lake.location.dotted("shop_items")
    assert kept_commit(spark, dotted) is None  # the full load is Spark's append, not a row delta
    first = lake.apply(config, write_file(landing, T + "20250301-120000000.csv", "U,1,a1\n"))
    kept = kept_commit(spark, dotted)
    assert kept is not None and kept.currentSnapshot().snapshotId() == first.snapshot_id == lake.head()
    second = lake.apply(config, write_file(landing, T + "20250301-120100000.csv", "D,2,b\n"))
    assert kept_commit(spark, dotted).currentSnapshot().snapshotId() == second.snapshot_id
    set_table_property(spark, dotted, "cdc-lake.test", "1")  # another write of this process: no longer trusted
    assert kept_commit(spark, dotted) is None
    assert lake.rows() == [(1, "a1")]


@on_both_paths
def test_a_batch_that_adds_a_column_writes_its_rows_with_it(spark, lake, landing, monkeypatch):
    """The batch alters the lake table (a column added at the source) and then commits as a row delta, in its new
    columns, at its first attempt."""
    made = _row_deltas(monkeypatch)
    before = _config(True)
    write_file(landing, T + "LOAD00000001.csv", "1,a\n2,b\n")
    lake.apply(before, T + "LOAD00000001.csv")
    lake.apply(before, write_file(landing, T + "20250301-120000000.csv", "U,1,a1\n"))
    after = _config(True, columns(id="bigint", label="string", note="string"))
    result = lake.apply(after, write_file(landing, T + "20250301-120100000.csv", "U,2,b1,noted\nI,3,c,new\n"))
    assert result.attempts == 1 and made[-1] == result.snapshot_id and len(made) == 2
    assert lake.rows() == [(1, "a1", None), (2, "b1", "noted"), (3, "c", "new")]


@on_both_paths
def test_a_table_written_by_row_deltas_alone_finds_its_keys_in_its_index_built_once(spark, lake, landing, monkeypatch):
    """The run is the table's only writer: its key index is built once, in bulk, and each later batch finds its keys'
    rows there, reading no data file; another writer's commit leaves main at a snapshot the index does not
    describe, so the next batch builds it again. The table equals the oracle after every batch."""
    from cdc_lake.engine import row_delta
    from cdc_lake.engine.key_index import KEY_INDEXES

    def generic_reader(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a batch read the table's files for its keys' rows")

    monkeypatch.setattr(row_delta, "key_positions", generic_reader)
    config = _config(True)
    write_file(landing, T + "LOAD00000001.csv", "".join(f"{k},load{k}\n" for k in range(1, 21)))
    expected = {k: f"load{k}" for k in range(1, 21)}
    lake.apply(config, T + "LOAD00000001.csv")
    builds = KEY_INDEXES.builds
    name = lake.table("shop_items")
    for number, batch in enumerate(_batches(seed=71, count=8, keys=30)):
        if number == 5:  # another writer: the index no longer describes main
            spark.sql(f"INSERT INTO {name} VALUES (100, 'foreign')")
            expected[100] = "foreign"
        key = write_file(
            landing, f"{T}20250301-12{number:02d}00000.csv", "".join(f"{op},{k},{v}\n" for op, k, v in batch)
        )
        for op, k, value in batch:
            if op == "D":
                expected.pop(k, None)
            else:
                expected[k] = value
        assert lake.apply(config, key).applied_files == [key]
        assert lake.rows() == sorted(expected.items()), f"after batch {number}"
        assert KEY_INDEXES.builds - builds == (1 if number < 5 else 2), number


def _restorer(lake: Lake) -> Callable[[], None]:
    """A copy of the lake table's folder (on the Glue path its catalog entry too), and what puts the table back as it
    was, as a person restoring it from a backup does: every file written since gone, the pointer at the old metadata."""
    name = lake.table("shop_items")
    (newest,) = lake.spark.sql(f"SELECT file FROM {name}.metadata_log_entries ORDER BY timestamp DESC LIMIT 1").first()
    folder = newest.rsplit("/metadata/", 1)[0]
    if lake.path == "hadoop":
        root = Path(urlparse(folder).path)
        files = {path: path.read_bytes() for path in root.rglob("*") if path.is_file()}

        def restore_folder() -> None:
            shutil.rmtree(root)
            for path, body in files.items():
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(body)

        return restore_folder
    s3, glue = aws_client(lake.endpoint, "s3"), aws_client(lake.endpoint, "glue")
    bucket, prefix = folder.removeprefix("s3://").split("/", 1)

    def listed() -> list[str]:
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
        return [item["Key"] for page in pages for item in page.get("Contents", [])]

    objects = {key: s3.get_object(Bucket=bucket, Key=key)["Body"].read() for key in listed()}
    entry = glue.get_table(DatabaseName=lake.database, Name="shop_items")["Table"]

    def restore_objects() -> None:
        for key in listed():
            s3.delete_object(Bucket=bucket, Key=key)
        for key, body in objects.items():
            s3.put_object(Bucket=bucket, Key=key, Body=body)
        kept = {"Name", "TableType", "Parameters", "StorageDescriptor"}
        glue.update_table(DatabaseName=lake.database, TableInput={k: v for k, v in entry.items() if k in kept})

    return restore_objects


@on_both_paths
def test_a_table_restored_to_older_metadata_under_a_live_run_is_replayed_from_its_restored_record(
    spark, lake, landing, monkeypatch
):
    """The table's folder put back as it was a batch ago while the process that wrote since lives on: its key index
    and the metadata its FileIO keeps describe a snapshot no longer main's, so the next batch trusts neither, reads
    the restored table, and applies the batch the restore took out with its own, each change once."""
    from cdc_lake.engine.key_index import KEY_INDEXES

    made = _row_deltas(monkeypatch)
    config = _config(True)
    write_file(landing, T + "LOAD00000001.csv", "".join(f"{k},load{k}\n" for k in range(1, 11)))
    lake.apply(config, T + "LOAD00000001.csv")
    batches = [[("U", 1, "a"), ("D", 2, ""), ("I", 11, "new")], [("U", 1, "b"), ("U", 3, "c")], [("I", 2, "back")]]
    keys = [
        write_file(landing, f"{T}20250301-12{n:02d}00000.csv", "".join(f"{op},{k},{v}\n" for op, k, v in batch))
        for n, batch in enumerate(batches)
    ]
    lake.apply(config, keys[0])
    restore = _restorer(lake)
    restored_head = lake.head()
    lake.apply(config, keys[1])
    builds = KEY_INDEXES.builds
    restore()
    assert lake.head() == restored_head

    result = lake.apply(config, keys[2])
    assert result.applied_files == keys[1:]
    expected = {k: f"load{k}" for k in range(1, 11)} | {1: "b", 3: "c", 11: "new", 2: "back"}
    assert lake.rows() == sorted(expected.items())
    assert made[-1] == result.snapshot_id == lake.head(), "the batch after the restore is a row delta"
    assert KEY_INDEXES.builds == builds + 1, "the index of a snapshot no longer main's was trusted"
    assert lake.apply(config, keys[2]).already_applied
