"""A living source: columns added, widened, dropped and renamed, and key columns updated, mid-stream.

Each test writes the files DMS writes around the DDL or the key UPDATE, runs the real pipeline, and compares
the lake table with the rows the source holds afterwards, written out by hand.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cdc_lake.core.exceptions import DmsInputError, SchemaChangeError
from tests.support.configs import items_config
from tests.support.lake import Lake, on_both_paths, write_file

pytestmark = [pytest.mark.spark, pytest.mark.each_runtime]

T = "dms/shop/items/"
ID = {"name": "id", "type": "bigint"}
LABEL = {"name": "label", "type": "string"}
PRICE = {"name": "price", "type": "decimal(10,2)"}


def lake_table(lake: Lake, table: str = "shop_items", version: int | None = None) -> tuple[list[str], list[tuple]]:
    as_of = f" VERSION AS OF {int(version)}" if version is not None else ""
    frame = lake.spark.sql(f"SELECT * FROM {lake.table(table)}{as_of}")
    rows = [tuple(r) for r in frame.collect()]
    return frame.columns, sorted(rows, key=lambda row: tuple((v is None, v) for v in row))


def snapshots(lake: Lake) -> list[int]:
    rows = lake.spark.sql(f"SELECT snapshot_id FROM {lake.table('shop_items')}.snapshots ORDER BY committed_at")
    return [r[0] for r in rows.collect()]


def test_headerless_add_column_is_refused_until_configured_then_old_and_new_files_read_in_one_batch(
    spark, lake, landing
):
    before = items_config([ID, LABEL], change_sequence_column="seq")
    seq = "20250301120000000000{:015d}"
    write_file(landing, T + "LOAD00000001.csv", "1,a,\n2,b,\n")
    old = write_file(landing, T + "20250301-120000000.csv", f"U,1,a2,{seq.format(1)}\n")
    lake.apply(before, old)
    pre_change = snapshots(lake)[-1]
    # ALTER TABLE items ADD COLUMN price decimal(10,2); then two more changes, one in the old shape's file
    # order but written after: DMS appends the new field before the columns its rules add.
    new = write_file(landing, T + "20250301-120100000.csv", f"I,3,c,9.50,{seq.format(3)}\nU,2,b2,,{seq.format(4)}\n")
    with pytest.raises(SchemaChangeError) as refused:
        lake.apply(before, new)
    message = str(refused.value)
    assert f"{new}: 5 fields, but the configuration of shop.items accounts for 4 fields (Op, id, label, seq)" in message
    assert "add them at the end of `columns` of shop.items" in message
    assert "- {name: <new column 1>, type: <type>}" in message
    assert lake_table(lake) == (["id", "label"], [(1, "a2"), (2, "b")])

    after = items_config([ID, LABEL, PRICE], change_sequence_column="seq")
    result = lake.apply(after, new)
    assert result.applied_files == [new]
    assert lake_table(lake) == (
        ["id", "label", "price"],
        [(1, "a2", None), (2, "b2", None), (3, "c", Decimal("9.50"))],
    )
    # Time travel to before the change still reads the old shape.
    assert lake_table(lake, version=pre_change) == (["id", "label"], [(1, "a2"), (2, "b")])


def test_headerless_old_and_new_shape_files_in_one_batch(spark, lake, landing):
    cfg = items_config([ID, LABEL, PRICE])
    write_file(landing, T + "LOAD00000001.csv", "1,a\n2,b\n")
    write_file(landing, T + "20250301-120000000.csv", "U,1,a2\nD,2,\n")
    last = write_file(landing, T + "20250301-120100000.csv", 'I,2,b3,1.25\nU,1,a3,"2.00"\n')
    result = lake.apply(cfg, last)
    assert len(result.applied_files) == 3
    assert lake_table(lake)[1] == [(1, "a3", Decimal("2.00")), (2, "b3", Decimal("1.25"))]


@on_both_paths
def test_header_csv_adds_a_new_column_by_itself_and_history_follows(spark, lake, landing):
    cfg = items_config([ID, LABEL], history=True, add_column_name=True)
    write_file(landing, T + "LOAD00000001.csv", "id,label\n1,a\n")
    write_file(landing, T + "20250301-120000000.csv", "Op,id,label\nU,1,a2\n")
    last = write_file(landing, T + "20250301-120100000.csv", "Op,id,label,colour\nI,2,b,red\nU,1,a3,\n")
    lake.apply(cfg, last)
    assert lake_table(lake) == (["id", "label", "colour"], [(1, "a3", None), (2, "b", "red")])
    history_columns, history = lake_table(lake, "shop_items_history")
    assert "colour" in history_columns
    current_flag, colour = history_columns.index("is_current"), history_columns.index("colour")
    current = sorted((r[0], r[1], r[colour]) for r in history if r[current_flag])
    assert current == [(1, "a3", None), (2, "b", "red")]


def test_refuse_mode_stops_at_an_undeclared_column_and_names_the_line_to_add(spark, lake, landing):
    cfg = items_config([ID, LABEL], add_column_name=True, schema_changes="refuse")
    write_file(landing, T + "LOAD00000001.csv", "id,label\n1,a\n")
    first = write_file(landing, T + "20250301-120000000.csv", "Op,id,label\nU,1,a2\n")
    lake.apply(cfg, first)
    new = write_file(landing, T + "20250301-120100000.csv", "Op,id,label,colour\nI,2,b,red\n")
    with pytest.raises(SchemaChangeError) as refused:
        lake.apply(cfg, new)
    assert f"{new}: new column 'colour' (string) is not in the configuration of shop.items" in str(refused.value)
    assert "(- {name: colour, type: string})" in str(refused.value)
    assert lake_table(lake) == (["id", "label"], [(1, "a2")])
    declared = items_config(
        [ID, LABEL, {"name": "colour", "type": "string"}], add_column_name=True, schema_changes="refuse"
    )
    lake.apply(declared, new)
    assert lake_table(lake)[1] == [(1, "a2", None), (2, "b", "red")]


def _parquet(landing: Path, name: str, columns: dict[str, pa.Array]) -> str:
    path = landing / T / name
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)
    return T + name


@on_both_paths
def test_parquet_add_column_and_widening_evolve_in_place(spark, lake, landing):
    cfg = items_config([ID, {"name": "qty", "type": "int"}], format="parquet")
    _parquet(landing, "LOAD00000001.parquet", {"id": pa.array([1, 2], pa.int64()), "qty": pa.array([5, 6], pa.int32())})
    first = _parquet(
        landing,
        "20250301-120000000.parquet",
        {"Op": pa.array(["U"]), "id": pa.array([1], pa.int64()), "qty": pa.array([7], pa.int32())},
    )
    lake.apply(cfg, first)
    # ALTER TABLE … ALTER COLUMN qty TYPE bigint, ADD COLUMN note text
    last = _parquet(
        landing,
        "20250301-120100000.parquet",
        {
            "Op": pa.array(["U", "I"]),
            "id": pa.array([2, 3], pa.int64()),
            "qty": pa.array([6_000_000_000, 1], pa.int64()),
            "note": pa.array([None, ""], pa.string()),
        },
    )
    lake.apply(cfg, last)
    schema = spark.table(lake.table("shop_items")).schema
    assert [(f.name, f.dataType.simpleString()) for f in schema.fields] == [
        ("id", "bigint"), ("qty", "bigint"), ("note", "string"),
    ]  # fmt: skip
    assert lake_table(lake)[1] == [(1, 7, None), (2, 6_000_000_000, None), (3, 1, "")]


def test_parquet_incompatible_type_change_is_refused(spark, lake, landing):
    cfg = items_config([ID, {"name": "qty", "type": "int"}], format="parquet")
    _parquet(landing, "LOAD00000001.parquet", {"id": pa.array([1], pa.int64()), "qty": pa.array([5], pa.int32())})
    bad = _parquet(
        landing,
        "20250301-120000000.parquet",
        {"Op": pa.array(["U"]), "id": pa.array([1], pa.int64()), "qty": pa.array(["five"])},
    )
    with pytest.raises(SchemaChangeError) as refused:
        lake.apply(cfg, bad)
    assert f"{bad}: column 'qty' of shop.items changed type from int to string" in str(refused.value)
    assert lake_table(lake) == (["id", "qty"], [])


def test_configured_widening_alters_the_lake_and_narrowing_is_refused(spark, lake, landing):
    narrow = items_config([ID, {"name": "qty", "type": "int"}])
    write_file(landing, T + "LOAD00000001.csv", "1,5\n")
    first = write_file(landing, T + "20250301-120000000.csv", "U,1,6\n")
    lake.apply(narrow, first)
    wide = items_config([ID, {"name": "qty", "type": "bigint"}])
    big = write_file(landing, T + "20250301-120100000.csv", "I,2,6000000000\n")
    lake.apply(wide, big)
    assert lake_table(lake)[1] == [(1, 6), (2, 6_000_000_000)]
    later = write_file(landing, T + "20250301-120200000.csv", "U,1,7\n")
    with pytest.raises(SchemaChangeError) as refused:
        lake.apply(narrow, later)
    assert "column 'qty' is bigint in the lake but int in the configuration: Iceberg cannot narrow" in str(
        refused.value
    )


def test_dropped_column_keeps_its_values_and_later_rows_carry_null(spark, lake, landing):
    cfg = items_config([ID, LABEL, {"name": "note", "type": "string", "dropped": True}])
    write_file(landing, T + "LOAD00000001.csv", "1,a,n1\n2,b,n2\n")
    write_file(landing, T + "20250301-120000000.csv", "U,1,a2,n1b\n")
    # ALTER TABLE items DROP COLUMN note
    last = write_file(landing, T + "20250301-120100000.csv", "U,2,b2\nI,3,c\n")
    lake.apply(cfg, last)
    assert lake_table(lake) == (["id", "label", "note"], [(1, "a2", "n1b"), (2, "b2", None), (3, "c", None)])


def test_parquet_dropped_column_needs_no_configuration(spark, lake, landing):
    cfg = items_config([ID, LABEL, {"name": "note", "type": "string"}], format="parquet")
    _parquet(landing, "LOAD00000001.parquet", {"id": pa.array([1], pa.int64()), "label": ["a"], "note": ["n"]})
    last = _parquet(
        landing,
        "20250301-120000000.parquet",
        {"Op": ["U", "I"], "id": pa.array([1, 2], pa.int64()), "label": ["a2", "b"]},
    )
    lake.apply(cfg, last)
    assert lake_table(lake)[1] == [(1, "a2", None), (2, "b", None)]


def test_headerless_count_fitting_two_shapes_is_refused(spark, lake, landing):
    cfg = items_config([ID, LABEL, {"name": "note", "type": "string", "dropped": True}, PRICE])
    ambiguous = write_file(landing, T + "20250301-120000000.csv", "U,1,a,x\n")
    with pytest.raises(SchemaChangeError) as refused:
        lake.apply(cfg, ambiguous)
    assert f"{ambiguous}: 4 fields fit two shapes of shop.items" in str(refused.value)


def test_rename_is_refused_in_named_and_headerless_files(spark, lake, landing):
    named = items_config([ID, LABEL], add_column_name=True)
    write_file(landing, T + "LOAD00000001.csv", "id,label\n1,a\n")
    renamed = write_file(landing, T + "20250301-120000000.csv", "Op,id,title\nU,1,b\n")
    with pytest.raises(SchemaChangeError) as refused:
        lake.apply(named, renamed)
    assert (
        f"{renamed}: shop.items column(s) ['label'] are missing and ['title'] are new in the same file: "
        "the source renamed a column?" in str(refused.value)
    )


def test_headerless_rename_in_the_configuration_is_refused(spark, lake, landing):
    cfg = items_config([ID, LABEL])
    write_file(landing, T + "LOAD00000001.csv", "1,a\n")
    first = write_file(landing, T + "20250301-120000000.csv", "U,1,b\n")
    lake.apply(cfg, first)
    renamed = items_config([ID, {"name": "title", "type": "string"}])
    later = write_file(landing, T + "20250301-120100000.csv", "U,1,c\n")
    with pytest.raises(SchemaChangeError) as refused:
        lake.apply(renamed, later)
    assert "the lake table has column(s) ['label'] that the configuration no longer lists and ['title'] are new" in (
        str(refused.value)
    )
    assert lake_table(lake)[1] == [(1, "b")]


BEFORE = {"before_image": {"column_prefix": "before_", "column_filter": "pk-only"}}


def test_key_updates_with_before_image_leave_no_ghost_rows_including_chains_and_returns(spark, lake, landing):
    cfg = items_config([ID, LABEL], history=True, change_sequence_column="seq", **BEFORE)
    seq = "20250301120000000000{:015d}"
    write_file(landing, T + "LOAD00000001.csv", "1,a,,\n2,b,,\n")
    # UPDATE SET id = 10 WHERE id = 1; then 10 -> 11 -> 12 in one batch; key 1 comes back as a new row;
    # a non-key update has an empty before-image.
    last = write_file(
        landing,
        T + "20250301-120000000.csv",
        f"U,10,a,{seq.format(1)},1\nU,11,a,{seq.format(2)},10\nU,12,a,{seq.format(3)},11\n"
        f"I,1,again,{seq.format(4)},\nU,2,b2,{seq.format(5)},\n",
    )
    lake.apply(cfg, last)
    assert lake_table(lake)[1] == [(1, "again"), (2, "b2"), (12, "a")]
    columns, history = lake_table(lake, "shop_items_history")
    current = sorted((r[0], r[1]) for r in history if r[columns.index("is_current")])
    assert current == [(1, "again"), (2, "b2"), (12, "a")]
    tombstones = sorted(r[0] for r in history if r[columns.index("op")] == "D")
    assert tombstones == [1, 10, 11]  # every old key's version is closed; 1 then comes back


def test_key_update_without_before_image_leaves_the_old_row(spark, lake, landing):
    cfg = items_config([ID, LABEL])
    write_file(landing, T + "LOAD00000001.csv", "1,a\n")
    last = write_file(landing, T + "20250301-120000000.csv", "U,10,a\n")
    lake.apply(cfg, last)
    assert lake_table(lake)[1] == [(1, "a"), (10, "a")]  # the documented ghost row


def test_null_marker_settings(spark, lake, landing):
    default = items_config([ID, LABEL, {"name": "day", "type": "date"}])
    write_file(landing, T + "LOAD00000001.csv", '1,,\n2,"",2025-03-01\n3,NULL,\n')
    last = write_file(landing, T + "20250301-120000000.csv", 'U,3,"",\n')
    lake.apply(default, last)
    assert lake_table(lake)[1] == [(1, None, None), (2, "", dt.date(2025, 3, 1)), (3, "", None)]


def test_null_marker_setting_null_text(spark, lake, landing):
    marker = items_config([ID, LABEL, {"name": "day", "type": "date"}], csv_null_value="NULL")
    last = write_file(landing, T + "LOAD00000001.csv", '1,NULL,NULL\n2,,2025-03-01\n3,"NULL",NULL\n')
    lake.apply(marker, last)
    assert lake_table(lake)[1] == [(1, None, None), (2, "", dt.date(2025, 3, 1)), (3, None, None)]


def test_load_file_without_before_image_fields_is_refused_not_misread(spark, lake, landing):
    cfg = items_config([ID, {"name": "qty", "type": "int"}], **BEFORE)
    load = write_file(landing, T + "LOAD00000001.csv", "1,5\n")  # 2 fields: read as id + before_id
    with pytest.raises(DmsInputError) as refused:
        lake.apply(cfg, load)
    assert f"{load}: row 1, column before_id: before-image value on a full-load row (value '5')" in str(refused.value)
