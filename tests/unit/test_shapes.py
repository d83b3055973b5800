"""File layouts and schema plans without Spark: which field is which, and what a change does to the lake."""

from __future__ import annotations

import gzip

import pytest
from pyspark.sql import types as T

from cdc_lake.core.config import parse_config
from cdc_lake.core.dms_files import parse_key
from cdc_lake.core.exceptions import SchemaChangeError
from cdc_lake.core.shapes import CHANGE_SEQ, OP, csv_first_record, csv_layouts, headerless_layout, named_layout
from cdc_lake.engine.schema import plan_schema, widens
from tests.support.configs import ITEMS_COLUMNS, items_config

CDC = "dms/shop/items/20250301-120000000.csv"


def test_headerless_prefix_shape_reads_older_files():
    cfg = items_config([*ITEMS_COLUMNS, {"name": "price", "type": "decimal(10,2)"}], change_sequence_column="seq")
    layout = headerless_layout(4, parse_key(CDC, cfg), cfg.tables[0], cfg.dms)
    assert layout.names == (OP, "id", "label", CHANGE_SEQ)
    assert layout.field("price") is None


def test_headerless_dropped_column_shape():
    cfg = items_config([*ITEMS_COLUMNS, {"name": "note", "type": "string", "dropped": True}])
    table = cfg.tables[0]
    assert headerless_layout(4, parse_key(CDC, cfg), table, cfg.dms).names == (OP, "id", "label", "note")
    assert headerless_layout(3, parse_key(CDC, cfg), table, cfg.dms).names == (OP, "id", "label")


def test_headerless_before_image_columns_come_last():
    cfg = items_config(change_sequence_column="seq", before_image={"column_prefix": "before_"})
    layout = headerless_layout(5, parse_key(CDC, cfg), cfg.tables[0], cfg.dms)
    assert layout.names == (OP, "id", "label", CHANGE_SEQ, "_before_0")


def test_headerless_more_fields_names_the_counts_and_what_to_add():
    cfg = items_config()
    with pytest.raises(SchemaChangeError) as refused:
        headerless_layout(5, parse_key(CDC, cfg), cfg.tables[0], cfg.dms)
    message = str(refused.value)
    assert f"{CDC}: 5 fields, but the configuration of shop.items accounts for 3 fields (Op, id, label)" in message
    assert "- {name: <new column 2>, type: <type>}" in message


def test_named_layout_matches_case_blind_and_flags_a_rename():
    cfg = items_config(add_column_name=True, timestamp_column="ts")
    table = cfg.tables[0]
    layout = named_layout(["OP", "TS", "ID", "LABEL", "Colour"], [None] * 5, parse_key(CDC, cfg), table, cfg.dms)
    # A column the configuration lacks plays its lake name; the file's own name stays the field's.
    assert layout.names == (OP, "_dms_ts", "id", "label", "colour")
    assert layout.unknown(table) == ["colour"]
    assert layout.field("colour") == "Colour"
    with pytest.raises(SchemaChangeError, match=r"\['label'\] are missing and \['title'\] are new"):
        named_layout(["Op", "id", "title"], [None] * 3, parse_key(CDC, cfg), table, cfg.dms)
    with pytest.raises(SchemaChangeError, match=r"no field for the primary key column\(s\) \['id'\]"):
        named_layout(["Op", "label"], [None] * 2, parse_key(CDC, cfg), table, cfg.dms)


def test_missing_op_field_names_the_insert_only_settings():
    cfg = items_config(format="parquet")
    key = "dms/shop/items/20250301-120000000.parquet"
    with pytest.raises(SchemaChangeError, match="cdc_inserts_only"):
        named_layout(["id", "label"], ["bigint", "string"], parse_key(key, cfg), cfg.tables[0], cfg.dms)
    inserts_only = items_config(format="parquet", cdc_inserts_only=True)
    layout = named_layout(
        ["id", "label"], ["bigint", "string"], parse_key(key, inserts_only), inserts_only.tables[0], inserts_only.dms
    )
    assert layout.field(OP) is None


def test_first_record_reads_more_while_a_quoted_value_spans_the_head():
    text = 'I,1,"' + "x\n" * 50_000 + '"\nI,2,b\n'
    data = text.encode()
    calls = []

    def read_head(key: str, size: int) -> bytes:
        calls.append(size)
        return data[:size]

    cfg = items_config()
    record = csv_first_record(read_head, parse_key(CDC, cfg), ",")
    assert record[:2] == ["I", "1"] and len(record) == 3
    assert len(calls) > 1


def test_gzip_head_is_decompressed():
    cfg = items_config(compression="gzip")
    key = CDC + ".gz"
    data = gzip.compress(b"I,1,a\nU,1,b\n")
    layouts = csv_layouts(lambda _k, size: data[:size], [parse_key(key, cfg)], cfg.tables[0], cfg.dms)
    assert layouts[key].names == (OP, "id", "label")


def test_widening_rules():
    assert widens(T.IntegerType(), T.LongType())
    assert widens(T.FloatType(), T.DoubleType())
    assert widens(T.DecimalType(10, 2), T.DecimalType(12, 2))
    assert not widens(T.DecimalType(10, 2), T.DecimalType(12, 3))
    assert not widens(T.LongType(), T.IntegerType())
    assert not widens(T.IntegerType(), T.StringType())


LAKE = [T.StructField("id", T.LongType()), T.StructField("label", T.StringType())]


def test_schema_plan_adds_declared_columns_and_widens():
    cfg = items_config(
        [{"name": "id", "type": "bigint"}, {"name": "label", "type": "string"}, {"name": "qty", "type": "int"}]
    )
    plan = plan_schema(cfg, cfg.tables[0], {}, [*LAKE])
    assert [c.name for c in plan.add] == ["qty"]
    widened = items_config(
        [{"name": "id", "type": "bigint"}, {"name": "label", "type": "string"}, {"name": "qty", "type": "bigint"}]
    )
    plan = plan_schema(widened, widened.tables[0], {}, [*LAKE, T.StructField("qty", T.IntegerType())])
    assert [c.name for c in plan.widen] == ["qty"] and not plan.add


def test_schema_plan_keeps_lake_only_columns_for_named_files_and_refuses_them_by_position():
    lake = [*LAKE, T.StructField("colour", T.StringType())]
    named = items_config(add_column_name=True)
    assert plan_schema(named, named.tables[0], {}, lake).table.column_names == ["id", "label", "colour"]
    headerless = items_config()
    with pytest.raises(SchemaChangeError, match=r"the lake table has column\(s\) \['colour'\]"):
        plan_schema(headerless, headerless.tables[0], {}, lake)


def test_schema_plan_refuse_mode_stops_at_a_file_column():
    cfg = items_config(add_column_name=True)
    refuse = parse_config({**cfg.model_dump(), "lake": {"schema_changes": "refuse"}})
    layout = named_layout(
        ["Op", "id", "label", "colour"], [None] * 4, parse_key(CDC, refuse), refuse.tables[0], refuse.dms
    )
    with pytest.raises(SchemaChangeError, match="whose schema_changes is 'refuse'"):
        plan_schema(refuse, refuse.tables[0], {CDC: layout}, LAKE)
    evolving = plan_schema(cfg, cfg.tables[0], {CDC: layout}, LAKE)
    assert [(c.name, c.type) for c in evolving.add] == [("colour", "string")]
