"""Replay semantics on hand-written DMS files, through real Spark and Iceberg."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cdc_lake.core.config import PipelineConfig
from cdc_lake.core.exceptions import DmsInputError, ReplayOrderError, SchemaChangeError
from cdc_lake.engine.record import FRESHNESS, snapshot_summaries
from tests.support.configs import items_config, one_table_config, table_data
from tests.support.lake import Lake, on_both_paths, write_file

# The deployed path (Glue catalog, S3FileIO, files through S3A) runs the order, overlap, duplicate, refusal,
# concurrency and split-read cases; value parsing is the same code on both, so it runs on the Hadoop path.
pytestmark = pytest.mark.spark

T = "dms/shop/items/"


def snapshot_count(lake: Lake, cfg: PipelineConfig) -> int:
    """Replay commits in the table's lineage (those recording applied files)."""
    summaries = snapshot_summaries(lake, cfg.tables[0])
    return sum(1 for s in summaries if "cdc-lake.state" in (s["summary"] or {}))


@on_both_paths
def test_insert_delete_insert_in_one_file_ends_inserted(spark, lake, landing):
    cfg = items_config()
    write_file(landing, T + "LOAD00000001.csv", "1,one\n")
    key = write_file(landing, T + "20250301-120000000.csv", "I,2,a\nD,2,a\nI,2,b\nD,1,one\nI,1,uno\nU,1,eins\n")
    result = lake.apply(cfg, key)
    assert result.applied_files == [T + "LOAD00000001.csv", key]
    assert lake.rows() == [(1, "eins"), (2, "b")]


@on_both_paths
def test_same_timestamp_changes_follow_row_order_not_timestamp(spark, lake, landing):
    cfg = items_config(timestamp_column="dms_ts")
    ts = "2025-03-01 12:00:00.000000"
    write_file(landing, T + "LOAD00000001.csv", f"{ts},1,a\n")
    # The later-written change carries an EARLIER timestamp: row order must still win.
    key = write_file(
        landing, T + "20250301-120000000.csv", f"U,{ts},1,b\nU,{ts},1,c\nU,2025-01-01 00:00:00.000000,1,d\n"
    )
    lake.apply(cfg, key)
    assert lake.rows() == [(1, "d")]


@on_both_paths
def test_cached_changes_with_older_timestamps_after_the_full_load(spark, lake, landing):
    cfg = items_config(timestamp_column="dms_ts")
    # The full load already shows key 1 updated and key 2 deleted; CDC repeats those cached changes
    # with commit times older than the LOAD rows' transfer time, then goes on.
    write_file(landing, T + "LOAD00000001.csv", "2025-03-01 12:05:00.000000,1,after\n")
    first = write_file(
        landing,
        T + "20250301-120600000.csv",
        "I,2025-03-01 12:00:00.000000,2,temp\nU,2025-03-01 12:01:00.000000,1,after\n"
        "D,2025-03-01 12:02:00.000000,2,temp\nI,2025-03-01 12:06:00.000000,3,new\n",
    )
    lake.apply(cfg, T + "LOAD00000001.csv")
    lake.apply(cfg, first)
    assert lake.rows() == [(1, "after"), (3, "new")]


@on_both_paths
def test_ghost_keys_update_is_upsert_delete_is_no_op(spark, lake, landing):
    cfg = items_config()
    write_file(landing, T + "LOAD00000001.csv", "1,a\n")
    key = write_file(landing, T + "20250301-120000000.csv", "U,7,ghost\nD,8,never\nI,1,again\n")
    lake.apply(cfg, key)
    assert lake.rows() == [(1, "again"), (7, "ghost")]


@on_both_paths
def test_later_trigger_applies_earlier_files_and_repeats_change_nothing(spark, lake, landing):
    cfg = items_config()
    load = write_file(landing, T + "LOAD00000001.csv", "1,a\n2,b\n")
    cdc1 = write_file(landing, T + "20250301-120000000.csv", "U,1,a1\n")
    cdc2 = write_file(landing, T + "20250301-120100000.csv", "U,1,a2\nD,2,b\n")
    result = lake.apply(cfg, cdc2)
    assert result.applied_files == [load, cdc1, cdc2]
    assert snapshot_count(lake, cfg) == 1
    for repeat in (cdc1, load, cdc2, cdc2):
        assert lake.apply(cfg, repeat).already_applied
    assert snapshot_count(lake, cfg) == 1
    cdc3 = write_file(landing, T + "20250301-120200000.csv", "I,3,c\n")
    assert lake.apply(cfg, cdc3).applied_files == [cdc3]
    assert lake.rows() == [(1, "a2"), (3, "c")]


@on_both_paths
def test_hex_load_counter_and_cdc_name_order(spark, lake, landing):
    cfg = items_config()
    # LOAD0000000A sorts after LOAD00000009 by counter; both load the same key, the later one wins.
    write_file(landing, T + "LOAD00000009.csv", "1,nine\n")
    write_file(landing, T + "LOAD0000000A.csv", "1,ten\n")
    write_file(landing, T + "20250301-120000000.csv", "U,2,first\n")
    last = write_file(landing, T + "20250301-120000001.csv", "U,2,second\n")
    lake.apply(cfg, last)
    assert lake.rows() == [(1, "ten"), (2, "second")]


@on_both_paths
def test_csv_row_order_survives_split_reads(spark, lake, landing):
    cfg = items_config()
    lines = [f"U,{i % 7},v{i:05d}\n" for i in range(6000)]
    key = write_file(landing, T + "20250301-120000000.csv", "".join(lines))
    spark.conf.set("spark.sql.files.maxPartitionBytes", "1024")
    try:
        lake.apply(cfg, key)
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    expected = {i % 7: f"v{i:05d}" for i in range(6000)}
    assert lake.rows() == sorted(expected.items())


@on_both_paths
def test_parquet_row_order_survives_split_reads(spark, lake, landing):
    cfg = items_config(format="parquet")
    count = 20000
    table = pa.table(
        {
            "Op": ["U"] * count,
            "id": pa.array([i % 11 for i in range(count)], pa.int64()),
            "label": [f"v{i:05d}" for i in range(count)],
        }
    )
    path = landing / T / "20250301-120000000.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(table, path, row_group_size=500)
    spark.conf.set("spark.sql.files.maxPartitionBytes", "2048")
    try:
        lake.apply(cfg, T + "20250301-120000000.parquet")
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    expected = {i % 11: f"v{i:05d}" for i in range(count)}
    assert lake.rows() == sorted(expected.items())


def test_change_sequence_orders_cdc_rows(spark, lake, landing):
    cfg = items_config(change_sequence_column="ar_h_change_seq")
    write_file(landing, T + "LOAD00000001.csv", "1,loaded,\n")
    seq = "20250301120000000000{:015d}"
    key = write_file(
        landing,
        T + "20250301-120000000.csv",
        f"U,1,second,{seq.format(2)}\nU,1,first,{seq.format(1)}\nI,2,x,{seq.format(3)}\n",
    )
    lake.apply(cfg, key)
    assert lake.rows() == [(1, "second"), (2, "x")]


# Bad rows, late files and the other kinds of damaged input: the corpus in test_bad_input.py.


@on_both_paths
def test_rewritten_load_file_is_refused(spark, lake, landing):
    cfg = items_config()
    load = write_file(landing, T + "LOAD00000001.csv", "1,a\n")
    lake.apply(cfg, load)
    write_file(landing, T + "LOAD00000001.csv", "1,reloaded\n")
    with pytest.raises(ReplayOrderError, match="its LOAD files changed since they were applied"):
        lake.apply(cfg, load)


def test_only_no_op_changes_still_record_the_file(spark, lake, landing):
    cfg = items_config()
    write_file(landing, T + "LOAD00000001.csv", "1,a\n")
    key = write_file(landing, T + "20250301-120000000.csv", "D,9,ghost\n")
    lake.apply(cfg, key)
    assert lake.apply(cfg, key).already_applied
    assert lake.rows() == [(1, "a")]


def test_types_nulls_and_empty_strings(spark, lake, landing):
    values = {"amount": "decimal(12,2)", "day": "date", "at": "timestamp", "flag": "boolean", "ratio": "double"}
    cfg = one_table_config(table_data("shop.typed", ["k1", "k2"], k1="int", k2="string", **values, note="string"))
    prefix = "dms/shop/typed/"
    write_file(
        landing,
        prefix + "LOAD00000001.csv",
        '1,a,-12.50,1970-01-01,2025-03-01 12:00:00.000001,1,0.5,"multi\nline, ""quoted"" é 日本 🎉"\n'
        '1,b,0.00,2099-12-31,2025-03-01 23:59:59.999999,0,-1.0000000000000000e-03,""\n'
        '2,a,,,,,,""\n'
        "2,b,9999999999.99,2025-03-01,2025-03-01 00:00:00,true,+3.0000000000000000e+00,\n",
    )
    lake.apply(cfg, prefix + "LOAD00000001.csv")
    got = lake.rows("shop_typed")
    assert got == [
        (1, "a", Decimal("-12.50"), dt.date(1970, 1, 1), dt.datetime(2025, 3, 1, 12, 0, 0, 1), True, 0.5,
         'multi\nline, "quoted" é 日本 🎉'),
        (1, "b", Decimal("0.00"), dt.date(2099, 12, 31), dt.datetime(2025, 3, 1, 23, 59, 59, 999999), False,
         -0.001, ""),
        (2, "a", None, None, None, None, None, ""),
        (2, "b", Decimal("9999999999.99"), dt.date(2025, 3, 1), dt.datetime(2025, 3, 1), True, 3.0, None),
    ]  # fmt: skip


@on_both_paths
@pytest.mark.parametrize(
    ("split", "settings"),
    [
        pytest.param(False, {}, id="row-delta"),
        pytest.param(False, {"write_mode": "copy-on-write"}, id="one-merge"),
        pytest.param(True, {"row_delta_keys": 0}, id="delete-append"),
    ],
)
def test_concurrent_runs_never_lose_or_double_apply(spark, lake, landing, split, settings):
    # Six runs of one table at once, each commit beaten by up to five others: on a loaded machine the default
    # four retries can run out before the last one's turn (a safe refusal, not what this test is about).
    # A small auto table's batch is a row delta; a table set to copy-on-write keeps one MERGE; split: every batch
    # is merged as a delete and an append, as into a large table.
    lake_settings = {"commit_retries": 20, "split_merge_from_rows": 0 if split else 1_000_000, **settings}
    cfg = items_config(lake=lake_settings)
    write_file(landing, T + "LOAD00000001.csv", "".join(f"{i},v0\n" for i in range(50)))
    keys = [
        write_file(landing, T + f"20250301-1200{n:02d}000.csv", "".join(f"U,{i},v{n}\n" for i in range(n, 50, 3)))
        for n in range(1, 7)
    ]
    errors = lake.apply_at_once(cfg, keys)
    assert not errors, errors
    expected = {i: "v0" for i in range(50)}
    for n in range(1, 7):
        for i in range(n, 50, 3):
            expected[i] = f"v{n}"
    assert lake.rows() == sorted(expected.items())
    commits = [_applied(s) for s in snapshot_summaries(lake, cfg.tables[0])]
    assert sorted(key for applied in commits for key in applied) == sorted([T + "LOAD00000001.csv", *keys])
    with_changes = sum(1 for applied in commits if set(applied) & set(keys))
    assert lake.run_parts("shop_items").count("deleted") == (with_changes if split else 0)


def _applied(summary: dict) -> list[str]:
    import json

    text = (summary.get("summary") or {}).get("cdc-lake.applied-files")
    return [f["key"] for f in json.loads(text)] if text else []


def test_crlf_inside_the_first_quoted_value_does_not_change_the_row_separator(spark, lake, landing):
    cfg = items_config()
    key = write_file(landing, T + "LOAD00000001.csv", '1,"first\r\nvalue"\n2,b\n3,"c\nd"\n4,e\n')
    lake.apply(cfg, key)
    assert lake.rows() == [(1, "first\r\nvalue"), (2, "b"), (3, "c\nd"), (4, "e")]


def test_values_that_would_be_rounded_or_overflow_are_refused(spark, lake, landing):
    cfg = one_table_config(table_data("shop.prices", ["id"], id="smallint", price="decimal(6,2)"))
    key = write_file(landing, "dms/shop/prices/LOAD00000001.csv", "1,1.25\n2,1.005\n40000,1.00\n3,12345.67\n")
    with pytest.raises(DmsInputError) as raised:
        lake.apply(cfg, key)
    message = str(raised.value)
    assert "refused 3 bad row(s)" in message
    assert f"{key}: row 2, column price: cannot parse as decimal(6,2) (value '1.005')" in message
    assert f"{key}: row 3, column id: cannot parse as smallint (value '40000')" in message
    assert f"{key}: row 4, column price: cannot parse as decimal(6,2) (value '12345.67')" in message
    kept = raised.value.without_values()  # what the lake table's refused property holds: no value of the data
    assert f"{key}: row 3, column id: cannot parse as smallint (value withheld)" in kept
    assert not [value for value in ("1.005", "40000", "12345.67") if value in kept]


def test_a_non_ascii_value_in_a_number_or_time_column_is_refused_and_shown_as_written(spark, lake, landing):
    cfg = one_table_config(table_data("shop.visits", ["id"], id="bigint", at="timestamp", note="string"))
    # Arabic-Indic digits, a full-width 1, and a timestamp with a non-breaking space: text, not numbers or times.
    at = "2025-01-01 00:00:00"
    rows = f"1,{at},a\n\u0662,{at},b\n\uff11,{at},c\n4,2025-01-01\u00a000:00:00,d\n"
    key = write_file(landing, "dms/shop/visits/LOAD00000001.csv", rows)
    with pytest.raises(DmsInputError) as raised:
        lake.apply(cfg, key)
    message = str(raised.value)
    assert "refused 3 bad row(s)" in message
    assert f"{key}: row 2, column id: cannot parse as bigint (value '\u0662')" in message
    assert f"{key}: row 3, column id: cannot parse as bigint (value '\uff11')" in message
    # A character that prints as nothing is shown escaped.
    assert f"{key}: row 4, column at: cannot parse as timestamp (value '2025-01-01\\xa000:00:00')" in message


@pytest.mark.parametrize("mode", ["cdc_inserts_only", "cdc_inserts_and_updates"])
def test_cdc_files_without_op_are_upserts(spark, lake, landing, mode):
    cfg = items_config(**{mode: True})
    write_file(landing, T + "LOAD00000001.csv", "1,a\n2,b\n")
    key = write_file(landing, T + "20250301-120000000.csv", "3,c\n1,a2\n")
    lake.apply(cfg, key)
    assert lake.rows() == [(1, "a2"), (2, "b"), (3, "c")]
    with_op = write_file(landing, T + "20250301-120100000.csv", "I,4,d\n")  # Op present: one field too many
    with pytest.raises(SchemaChangeError, match=r"3 fields, but the configuration of shop\.items accounts for 2"):
        lake.apply(cfg, with_op)


@on_both_paths
def test_each_commit_records_its_batch_and_freshness(spark, lake, landing):
    cfg = items_config(timestamp_column="dms_ts")
    write_file(landing, T + "LOAD00000001.csv", "2025-03-01 11:00:00.000000,1,a\n")
    key = write_file(
        landing,
        T + "20250301-120000000.csv",
        "U,2025-03-01 11:59:00.000000,1,b\nI,2025-03-01 11:59:30.500000,2,c\nD,2025-03-01 11:58:00.000000,3,\n",
    )
    landed = time.time() - 120
    for name in ("LOAD00000001.csv", "20250301-120000000.csv"):
        os.utime(landing / T / name, (landed, landed))
    # When the files landed, as the store tells it (a folder: their mtime; S3: LastModified, set by the put).
    landed_at = min(o.last_modified for o in lake.store().list(T) if o.last_modified is not None)
    before = dt.datetime.now(dt.UTC)
    lake.apply(cfg, key)
    after = dt.datetime.now(dt.UTC)
    summary = snapshot_summaries(lake, cfg.tables[0])[-1]["summary"]
    facts = json.loads(summary[FRESHNESS])
    sizes = sum((landing / T / n).stat().st_size for n in ("LOAD00000001.csv", "20250301-120000000.csv"))
    assert (facts["files"], facts["rows"], facts["bytes"]) == (2, 4, sizes)
    newest = dt.datetime(2025, 3, 1, 11, 59, 30, 500000, tzinfo=dt.UTC)  # by timestamp, not row order
    assert (before - newest).total_seconds() <= facts["change_lag_s"] <= (after - newest).total_seconds()
    assert (before - landed_at).total_seconds() - 0.01 <= facts["landed_lag_s"] <= (after - landed_at).total_seconds()
    assert 0 < facts["seconds"] <= (after - before).total_seconds()


def test_a_bad_row_refuses_a_small_batch_before_history_moves(spark, lake, landing):
    """A table with history takes the one-task read of a small batch too: its check runs before either table is
    written, so a refused batch leaves the table and its history where they were."""
    from cdc_lake.engine.tables import history_name

    cfg = items_config(history=True)
    lake.apply(cfg, write_file(landing, T + "LOAD00000001.csv", "1,a\n2,b\n"))
    good = write_file(landing, T + "20250301-120000000.csv", "U,1,a1\nI,3,c\n")
    lake.apply(cfg, good)
    history = lake.table(history_name(cfg.tables[0]))
    heads = [
        spark.sql(f"SELECT max(committed_at) FROM {t}.snapshots").first()[0]
        for t in (lake.table("shop_items"), history)
    ]
    bad = write_file(landing, T + "20250301-120100000.csv", "U,2,b1\nU,x,c1\n")

    with pytest.raises(DmsInputError) as raised:
        lake.apply(cfg, bad)

    assert f"{bad}: row 2, column id: cannot parse as bigint (value 'x')" in str(raised.value)
    assert lake.rows() == [(1, "a1"), (2, "b"), (3, "c")]
    assert [
        spark.sql(f"SELECT max(committed_at) FROM {t}.snapshots").first()[0]
        for t in (lake.table("shop_items"), history)
    ] == heads
    versions = spark.sql(f"SELECT id, label, version FROM {history} ORDER BY id, version").collect()
    assert [tuple(v) for v in versions] == [(1, "a", 1), (1, "a1", 2), (2, "b", 1), (3, "c", 1)]
