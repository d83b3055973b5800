"""End to end against the generator's oracle: DMS files land, their S3 events go through the Lambda's
handler (in order, shuffled, duplicated), the local Glue stand-in runs the jobs, and the exported lake
tables must equal the expected tables exactly."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from cdc_lake.core.config import PipelineConfig, RunSettings, parse_config
from cdc_lake.core.jsonl import read_jsonl
from cdc_lake.engine.context import LakeContext
from cdc_lake.local.generator import GeneratorSpec, SchemaChange, generate, land, land_order
from cdc_lake.local.runtime import LocalPipeline, failed_runs
from cdc_lake.ops.export import export_tables
from tests.support.configs import ORDER_ITEMS_COLUMNS, columns, table_data
from tests.support.lake import assert_lake_equals_oracle

pytestmark = pytest.mark.spark

CUSTOMERS = table_data(
    "shop.customers", ["customer_id"], customer_id="bigint", full_name="string", email="string", is_active="boolean",
    signed_up_on="date", notes="string",
)  # fmt: skip
TABLES: list[dict[str, Any]] = [
    CUSTOMERS,
    {
        "name": "shop.order_items",
        "primary_key": ["order_id", "line_no"],
        "partition_by": ["bucket(4, order_id)"],
        "columns": [*ORDER_ITEMS_COLUMNS, {"name": "shipped_at", "type": "timestamp"}],
    },
]

DMS_VARIANTS: dict[str, dict[str, Any]] = {
    "csv-timestamps": {"format": "csv", "timestamp_column": "dms_timestamp"},
    "parquet": {"format": "parquet", "timestamp_column": "dms_timestamp"},
    "csv-gzip-date-folders": {
        "format": "csv",
        "compression": "gzip",
        "date_partition_enabled": True,
        "timestamp_column": "dms_timestamp",
    },
    # DMS's default NULL (an empty field) is every other variant's; this one writes a CsvNullValue marker.
    "csv-op-header-nullmarker-changeseq": {
        "format": "csv",
        "include_op_for_full_load": True,
        "add_column_name": True,
        "csv_null_value": "NULL",
        "change_sequence_column": "ar_h_change_seq",
    },
    # Key UPDATEs (chains included) with DMS's before-image key columns: no old row may survive.
    "csv-before-image-changeseq": {
        "format": "csv",
        "timestamp_column": "dms_timestamp",
        "change_sequence_column": "ar_h_change_seq",
        "before_image": {"column_prefix": "before_", "column_filter": "pk-only"},
    },
    # CdcInsertsAndUpdates: CDC files without Op, deletes never captured (the oracle keeps deleted rows).
    "csv-inserts-and-updates": {"format": "csv", "cdc_inserts_and_updates": True},
}


def oracle_config(dms: dict[str, Any], lake: dict[str, Any] | None = None) -> PipelineConfig:
    return parse_config({"dms": {"bucket_folder": "raw/dms", **dms}, "lake": lake or {}, "tables": TABLES})


# The generator's tables are small, so their batches are one MERGE; these variants also run merged as a delete
# and an append, as large tables are: key updates, a change sequence, and CDC files without deletes.
SPLIT_VARIANTS = ("csv-before-image-changeseq", "csv-inserts-and-updates", "parquet")


@pytest.mark.parametrize(
    ("variant", "split"),
    [(v, False) for v in DMS_VARIANTS] + [(v, True) for v in SPLIT_VARIANTS],
    ids=[*DMS_VARIANTS, *(f"{v}-split" for v in SPLIT_VARIANTS)],
)
def test_replay_equals_oracle(spark: SparkSession, database: str, tmp_path: Path, variant: str, split: bool) -> None:
    config = oracle_config(DMS_VARIANTS[variant], {"split_merge_from_rows": 0} if split else None)
    spec = GeneratorSpec(
        seed=11,
        initial_rows=240,
        cdc_files=3,
        changes_per_file=80,
        load_file_rows=20,  # 12 LOAD files per table: the hex counter passes 9
        boolean_style="postgres" if "changeseq" in variant else "mysql",
    )
    generated = generate(config, tmp_path / "source", spec)
    keys = land_order(generated)
    assert any("/LOAD0000000A." in k for k in keys), "the hex LOAD counter should pass 9"
    landing = tmp_path / "landing"
    land(generated.landing, landing, keys)
    pipeline = LocalPipeline(config, landing, spark, database=database)
    runs = pipeline.deliver(keys)
    assert not failed_runs(runs), [r.error for r in failed_runs(runs)]
    assert_lake_equals_oracle(pipeline, generated.expected, tmp_path / "export")


@pytest.mark.parametrize("mode", ["coalesced", "per_file"])
def test_shuffled_and_duplicated_events_through_the_handler(
    spark: SparkSession, database: str, tmp_path: Path, mode: str
) -> None:
    """S3 delivers at least once, in any order: the lake must still equal the oracle."""
    config = oracle_config(DMS_VARIANTS["csv-timestamps"]).model_copy(update={"runs": RunSettings(mode=mode)})
    spec = GeneratorSpec(seed=5, initial_rows=150, cdc_files=4, changes_per_file=50, load_file_rows=60)
    generated = generate(config, tmp_path / "source", spec)
    keys = land_order(generated)
    landing = tmp_path / "landing"
    land(generated.landing, landing, keys)  # every file has landed; only the events are late or repeated
    events = keys + random.Random(3).sample(keys, k=len(keys) // 2)
    random.Random(4).shuffle(events)
    pipeline = LocalPipeline(config, landing, spark, database=database)
    runs = pipeline.deliver(events)
    assert not failed_runs(runs), [r.error for r in failed_runs(runs)]
    if mode == "per_file":
        assert sum(1 for r in runs if r.result and r.result.already_applied) >= len(keys) // 2
    else:  # one run per job: the events after the first find it waiting
        assert sorted(r.job for r in runs) == ["cdc_replay", "full_load"]
    assert_lake_equals_oracle(pipeline, generated.expected, tmp_path / "export")


def test_files_landing_in_batches_with_duplicate_events(spark: SparkSession, database: str, tmp_path: Path) -> None:
    """Files land over time (full load first, then CDC batches); events may repeat within a batch."""
    config = oracle_config(DMS_VARIANTS["parquet"])
    spec = GeneratorSpec(seed=9, initial_rows=120, cdc_files=4, changes_per_file=40)
    generated = generate(config, tmp_path / "source", spec)
    keys = land_order(generated)
    landing = tmp_path / "landing"
    pipeline = LocalPipeline(config, landing, spark, database=database)
    rng = random.Random(8)
    for start in range(0, len(keys), 3):
        batch = keys[start : start + 3]
        land(generated.landing, landing, batch)
        events = [*batch, rng.choice(batch)]
        rng.shuffle(events)
        runs = pipeline.deliver(events)
        assert not failed_runs(runs), [r.error for r in failed_runs(runs)]
    assert_lake_equals_oracle(pipeline, generated.expected, tmp_path / "export")


# ---------------------------------------------------------------------------------------------------
# A living source: schema changes mid-stream, key updates without before-image columns, insert-only CDC
# ---------------------------------------------------------------------------------------------------

PRODUCTS: dict[str, Any] = table_data(
    "shop.products", ["product_id"], product_id="bigint", title="string", unit_price="decimal(10,2)", stock="int",
    notes="string",
)  # fmt: skip
ADDED = columns(region="string", loyalty_points="int")
ADDS = (SchemaChange("shop.products", 0, "add", "region"), SchemaChange("shop.products", 1, "add", "loyalty_points"))
WIDEN = SchemaChange("shop.products", 0, "widen", "stock", from_type="int")


def products(*, added: list[dict[str, Any]] | None = None, stock: str = "int", dropped: bool = False) -> dict[str, Any]:
    """The products table as configured: ``added`` columns last, ``stock``'s type, a dropped last column."""
    columns = [{**c, "type": stock} if c["name"] == "stock" else c for c in PRODUCTS["columns"]]
    legacy = [{"name": "legacy_code", "type": "string", "dropped": True}] if dropped else []
    return {**PRODUCTS, "columns": [*columns, *legacy, *(added or [])]}


@dataclass(frozen=True)
class Living:
    """One case: the DMS endpoint, the table after the changes, the script, what the engine is told, delivery."""

    dms: dict[str, Any]
    table: dict[str, Any]
    changes: tuple[SchemaChange, ...] = ()
    engine_table: dict[str, Any] | None = None  # default: ``table`` (the user declared the changes)
    as_string: tuple[str, ...] = ()  # columns the engine added itself from a header (as string)
    one_batch: bool = False  # land every file, then one event: every shape meets in one run
    key_updates: bool | None = None


LIVING: dict[str, Living] = {
    # (a) headerless: files before each ADD COLUMN hold a prefix of the configured columns
    "csv-add-columns-one-batch": Living(
        {"timestamp_column": "dms_timestamp"}, products(added=ADDED), ADDS, one_batch=True
    ),
    "csv-add-columns-run-per-file": Living({"timestamp_column": "dms_timestamp"}, products(added=ADDED), ADDS),
    # (b) header CSV, the new columns not declared: the engine adds them as string
    "csv-header-add-columns-undeclared": Living(
        {"add_column_name": True, "include_op_for_full_load": True},
        products(added=ADDED),
        ADDS,
        engine_table=products(),
        as_string=("region", "loyalty_points"),
    ),
    # ... and under a CsvNullValue marker, in one batch: NULL and '' in columns the engine added itself
    "csv-header-nullmarker-add-columns-undeclared-one-batch": Living(
        {"add_column_name": True, "csv_null_value": "NULL", "timestamp_column": "dms_timestamp"},
        products(added=ADDED),
        ADDS,
        engine_table=products(),
        as_string=("region", "loyalty_points"),
        one_batch=True,
    ),
    # (c) Parquet ADD COLUMN + int -> bigint, declared (one batch) and left to the engine (lake altered per run)
    "parquet-add-widen-declared-one-batch": Living(
        {"format": "parquet"}, products(added=ADDED[:1], stock="bigint"), (ADDS[0], WIDEN), one_batch=True
    ),
    "parquet-add-widen-undeclared": Living(
        {"format": "parquet", "timestamp_column": "dms_timestamp"},
        products(added=ADDED[:1], stock="bigint"),
        (ADDS[0], WIDEN),
        engine_table=products(),
    ),
    # (d) DROP COLUMN of the last configured column, marked dropped: later rows hold NULL in it
    "csv-drop-last-column": Living(
        {"timestamp_column": "dms_timestamp"},
        products(dropped=True),
        (SchemaChange("shop.products", 0, "drop", "legacy_code"),),
    ),
    # (e) key UPDATEs without before-image columns: the old-key rows stay (the oracle says so explicitly)
    "csv-key-updates-without-before-image": Living(
        {"change_sequence_column": "ar_h_change_seq"}, products(), key_updates=True, one_batch=True
    ),
    "csv-key-updates-with-before-image": Living(
        {"change_sequence_column": "ar_h_change_seq", "before_image": {"column_prefix": "before_"}},
        products(),
        one_batch=True,
    ),
    # (g) CdcInsertsOnly: CDC rows without Op, only INSERTs
    "parquet-inserts-only": Living({"format": "parquet", "cdc_inserts_only": True}, products(), one_batch=True),
}


@pytest.mark.parametrize("case", list(LIVING))
def test_living_source_equals_oracle(spark: SparkSession, database: str, tmp_path: Path, case: str) -> None:
    living = LIVING[case]
    dms = {"bucket_folder": "raw/dms", **living.dms}
    config = parse_config({"dms": dms, "tables": [living.table]})
    spec = GeneratorSpec(
        seed=13, initial_rows=60, cdc_files=3, changes_per_file=40, schema_changes=living.changes,
        key_updates=living.key_updates,
    )  # fmt: skip
    generated = generate(config, tmp_path / "source", spec)
    keys = land_order(generated)
    landing = tmp_path / "landing"
    engine_config = parse_config({"dms": dms, "tables": [living.engine_table or living.table]})
    pipeline = LocalPipeline(engine_config, landing, spark, database=database)
    if living.one_batch:
        land(generated.landing, landing, keys)
        runs = pipeline.deliver(keys[-1:])
        assert len(runs) == 1 and runs[0].result is not None and len(runs[0].result.applied_files) == len(keys)
    else:
        runs = []
        for key in keys:
            land(generated.landing, landing, [key])
            runs += pipeline.deliver([key])
    assert not failed_runs(runs), [r.error for r in failed_runs(runs)]
    # export with the lake's columns: every configured one, the ones the engine added typed as it added them
    lake_table = {
        **living.table,
        "columns": [{**c, "type": "string"} if c["name"] in living.as_string else c for c in living.table["columns"]],
    }
    lake_config = parse_config({"dms": dms, "tables": [lake_table]})
    table = lake_config.tables[0]
    export_tables(LakeContext(spark=spark, location=pipeline.location, config=lake_config), tmp_path / "export")
    expected = read_jsonl(generated.expected / f"{table.name}.jsonl")
    for row in expected:
        row.update({name: str(row[name]) for name in living.as_string if row[name] is not None})
    _assert_exercised(living, expected)
    actual = read_jsonl(tmp_path / "export" / f"{table.name}.jsonl")
    assert len(actual) == len(expected)
    assert actual == expected, f"{table.name}: lake differs from the oracle"


def _assert_exercised(living: Living, expected: list[dict[str, Any]]) -> None:
    """The expected table shows what the case is about (so a passing run proves something)."""
    for change in living.changes:
        values = [row[change.column] for row in expected]
        if change.kind in ("add", "drop"):  # rows NULL in it (not changed since the ADD / written after the DROP)
            assert None in values and any(v is not None for v in values), change
        else:
            assert any(v is not None and v >= 2**31 for v in values), change  # a value only the wide type holds
