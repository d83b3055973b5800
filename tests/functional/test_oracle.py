"""End to end against the generator's oracle: DMS files land, their S3 events go through the Lambda's
handler (in order, shuffled, duplicated), the local Glue stand-in runs the jobs, and the exported lake
tables must equal the expected tables exactly."""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from cdc_lake.config import PipelineConfig, parse_config
from cdc_lake.export import export_tables
from cdc_lake.jsonl import read_jsonl
from cdc_lake.local.generator import GeneratorSpec, generate, land_order
from cdc_lake.local.runtime import LocalPipeline, failed_runs

pytestmark = pytest.mark.spark

TABLES: list[dict[str, Any]] = [
    {
        "name": "shop.customers",
        "primary_key": ["customer_id"],
        "columns": [
            {"name": "customer_id", "type": "bigint"},
            {"name": "full_name", "type": "string"},
            {"name": "email", "type": "string"},
            {"name": "is_active", "type": "boolean"},
            {"name": "signed_up_on", "type": "date"},
            {"name": "notes", "type": "string"},
        ],
    },
    {
        "name": "shop.order_items",
        "primary_key": ["order_id", "line_no"],
        "partition_by": ["bucket(4, order_id)"],
        "columns": [
            {"name": "order_id", "type": "bigint"},
            {"name": "line_no", "type": "int"},
            {"name": "sku", "type": "string"},
            {"name": "quantity", "type": "smallint"},
            {"name": "unit_price", "type": "decimal(10,2)"},
            {"name": "weight_kg", "type": "double"},
            {"name": "shipped_at", "type": "timestamp"},
        ],
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


def make_config(dms: dict[str, Any]) -> PipelineConfig:
    return parse_config({"dms": {"bucket_folder": "raw/dms", **dms}, "tables": TABLES})


def assert_lake_equals_oracle(spark, pipeline: LocalPipeline, expected_dir: Path, out: Path) -> None:
    export_tables(spark, pipeline.config, pipeline.location, out)
    for table in pipeline.config.tables:
        expected = read_jsonl(expected_dir / f"{table.name}.jsonl")
        actual = read_jsonl(out / f"{table.name}.jsonl")
        assert len(actual) == len(expected), table.name
        assert actual == expected, f"{table.name}: lake differs from the oracle"


def land(generated_landing: Path, landing: Path, keys: list[str]) -> None:
    for key in keys:
        target = landing / key
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(generated_landing / key, target)


@pytest.mark.parametrize("variant", list(DMS_VARIANTS))
def test_replay_equals_oracle(spark, database, tmp_path, variant):
    config = make_config(DMS_VARIANTS[variant])
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
    assert_lake_equals_oracle(spark, pipeline, generated.expected, tmp_path / "export")


def test_shuffled_and_duplicated_events_through_the_handler(spark, database, tmp_path):
    """S3 delivers at least once, in any order: the lake must still equal the oracle."""
    config = make_config(DMS_VARIANTS["csv-timestamps"])
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
    assert sum(1 for r in runs if r.result and r.result.already_applied) >= len(keys) // 2
    assert_lake_equals_oracle(spark, pipeline, generated.expected, tmp_path / "export")


def test_files_landing_in_batches_with_duplicate_events(spark, database, tmp_path):
    """Files land over time (full load first, then CDC batches); events may repeat within a batch."""
    config = make_config(DMS_VARIANTS["parquet"])
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
    assert_lake_equals_oracle(spark, pipeline, generated.expected, tmp_path / "export")
