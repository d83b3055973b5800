"""Reconciliation against the generator's oracle: a replayed lake table matches its expected extract in every
format and row order, and each kind of difference in a doctored extract is counted and named."""

from __future__ import annotations

import csv
import datetime as dt
import json
import random
import shutil
import uuid
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cdc_lake.config import PipelineConfig, TableSpec, parse_config
from cdc_lake.exceptions import CdcLakeError
from cdc_lake.generator import GeneratorSpec, generate, land_order
from cdc_lake.lake import LakeLocation, snapshot_summaries
from cdc_lake.local.runtime import LocalPipeline, failed_runs
from cdc_lake.reconcile import format_report, read_expected, reconcile

pytestmark = pytest.mark.spark

TABLES: list[dict[str, Any]] = [
    {
        "name": "shop.customers",
        "primary_key": ["customer_id"],
        "columns": [
            {"name": "customer_id", "type": "bigint"},
            {"name": "full_name", "type": "string"},
            {"name": "is_active", "type": "boolean"},
            {"name": "signed_up_on", "type": "date"},
            {"name": "notes", "type": "string"},
        ],
    },
    {
        "name": "shop.order_items",
        "primary_key": ["order_id", "line_no"],
        "columns": [
            {"name": "order_id", "type": "bigint"},
            {"name": "line_no", "type": "int"},
            {"name": "quantity", "type": "smallint"},
            {"name": "unit_price", "type": "decimal(10,2)"},
            {"name": "weight_kg", "type": "double"},
            {"name": "shipped_at", "type": "timestamp"},
        ],
    },
]
ARROW_TYPES = {
    "bigint": pa.int64(),
    "int": pa.int32(),
    "smallint": pa.int16(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "string": pa.string(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us"),
}


@dataclass(frozen=True)
class Replayed:
    config: PipelineConfig
    location: LakeLocation
    expected: Path
    work: Path

    def table(self, name: str) -> TableSpec:
        return self.config.table(name)

    def expected_lines(self, name: str) -> list[str]:
        return (self.expected / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()

    def write(self, name: str, lines: list[str]) -> Path:
        path = self.work / f"{uuid.uuid4().hex[:8]}-{name}.jsonl"
        path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        return path


@pytest.fixture(scope="module")
def replayed(spark, tmp_path_factory: pytest.TempPathFactory) -> Replayed:
    """One generated source (with edge-case values) replayed into a lake database of this module's own."""
    root = tmp_path_factory.mktemp("reconcile")
    config = parse_config({"dms": {"bucket_folder": "raw/dms", "timestamp_column": "dms_ts"}, "tables": TABLES})
    spec = GeneratorSpec(seed=23, initial_rows=120, cdc_files=1, changes_per_file=60)
    generated = generate(config, root / "source", spec)
    pipeline = LocalPipeline(config, generated.landing, spark, database=f"rc_{uuid.uuid4().hex[:12]}")
    runs = pipeline.deliver(land_order(generated))
    assert not failed_runs(runs), [r.error for r in failed_runs(runs)]
    work = root / "work"
    work.mkdir()
    return Replayed(config, pipeline.location, generated.expected, work)


def test_replayed_tables_match_their_oracle(spark, replayed):
    for table in replayed.config.tables:
        report = reconcile(spark, table, replayed.location, replayed.expected / f"{table.name}.jsonl")
        rows = len(replayed.expected_lines(table.name))
        assert (report.lake_rows, report.expected_rows) == (rows, rows)
        assert (report.missing_keys, report.extra_keys, report.differing_rows, report.duplicate_keys) == (0, 0, 0, 0)
        assert report.lake_checksum == report.expected_checksum
        assert report.lake_checksum.startswith(f"{rows}:")
        assert report.examples == []
        assert report.matches
        assert format_report(report).endswith("\nMATCH")


def test_doctored_extract_counts_and_names_each_difference(spark, replayed):
    name = "shop.customers"
    rows = [json.loads(line) for line in replayed.expected_lines(name)]
    removed = rows.pop(3)  # in the lake, not expected: an extra key
    added = {**rows[0], "customer_id": 10**15}  # expected, not in the lake: a missing key
    renamed = next(r for r in rows[5:] if r["full_name"] is not None)
    renamed["full_name"] = renamed["full_name"] + " Jr."
    blanked = next(r for r in rows[5:] if r["notes"] is None and r is not renamed)
    blanked["notes"] = ""  # NULL and the empty string are different values
    rows.append(added)
    random.Random(1).shuffle(rows)  # row order never matters

    report = reconcile(
        spark,
        replayed.table(name),
        replayed.location,
        replayed.write(name, [json.dumps(r, ensure_ascii=False) for r in rows]),
    )

    assert (report.missing_keys, report.extra_keys, report.differing_rows, report.duplicate_keys) == (1, 1, 2, 0)
    assert (report.lake_rows, report.expected_rows) == (len(rows), len(rows))
    assert report.lake_checksum != report.expected_checksum
    assert not report.matches
    examples = "\n".join(report.examples)
    assert f"extra key (customer_id={removed['customer_id']})" in examples
    assert f"missing key (customer_id={10**15})" in examples
    old_name = json.dumps(renamed["full_name"].removesuffix(" Jr."), ensure_ascii=False)
    new_name = json.dumps(renamed["full_name"], ensure_ascii=False)
    assert f"differs at (customer_id={renamed['customer_id']}): full_name lake={old_name} expected={new_name}" in (
        examples
    )
    assert f'differs at (customer_id={blanked["customer_id"]}): notes lake=NULL expected=""' in examples
    text = format_report(report)
    assert text.endswith("\nMISMATCH")
    assert "missing key" in text


def test_composite_key_and_decimal_difference(spark, replayed):
    name = "shop.order_items"
    rows = [json.loads(line) for line in replayed.expected_lines(name)]
    changed = rows[7]
    old_price = changed["unit_price"]
    changed["unit_price"] = str(Decimal(old_price) + Decimal("0.01")) if old_price else "1.50"
    dropped = [rows.pop(0), rows.pop(0)]

    report = reconcile(
        spark, replayed.table(name), replayed.location, replayed.write(name, list(map(json.dumps, rows)))
    )

    assert (report.missing_keys, report.extra_keys, report.differing_rows) == (0, 2, 1)
    assert report.examples[:2] == [f"extra key (order_id={r['order_id']}, line_no={r['line_no']})" for r in dropped]
    shown = "NULL" if old_price is None else old_price
    assert report.examples[2] == (
        f"differs at (order_id={changed['order_id']}, line_no={changed['line_no']}): "
        f"unit_price lake={shown} expected={changed['unit_price']}"
    )


def test_csv_and_parquet_extracts_match(spark, replayed):
    for name in ("shop.customers", "shop.order_items"):
        table = replayed.table(name)
        rows = [json.loads(line) for line in replayed.expected_lines(name)]
        csv_path = replayed.work / f"{name}.csv"
        write_csv(csv_path, table, rows)
        parquet_dir = replayed.work / f"{name}-parquet"
        write_parquet_folder(parquet_dir, table, rows)
        for path in (csv_path, parquet_dir):
            report = reconcile(spark, table, replayed.location, path)
            assert report.matches, format_report(report)
            assert report.expected_rows == len(rows)


def test_csv_null_convention_unquoted_empty_is_null_quoted_empty_is_empty(spark, replayed):
    name = "shop.customers"
    table = replayed.table(name)
    rows = [json.loads(line) for line in replayed.expected_lines(name)]
    null_notes = next(r for r in rows if r["notes"] is None)
    null_notes["notes"] = ""
    path = replayed.work / "customers-blank.csv"
    write_csv(path, table, rows)
    report = reconcile(spark, table, replayed.location, path)
    assert report.differing_rows == 1
    assert f'differs at (customer_id={null_notes["customer_id"]}): notes lake=NULL expected=""' in report.examples


def test_shuffled_lines_still_match(spark, replayed):
    name = "shop.order_items"
    lines = replayed.expected_lines(name)
    random.Random(7).shuffle(lines)
    report = reconcile(spark, replayed.table(name), replayed.location, replayed.write(name, lines))
    assert report.matches
    assert report.expected_checksum == report.lake_checksum


def test_unparsable_value_names_file_column_and_value(spark, replayed):
    name = "shop.order_items"
    rows = [json.loads(line) for line in replayed.expected_lines(name)]
    rows[4]["unit_price"] = "12.3x"
    path = replayed.write(name, list(map(json.dumps, rows)))
    with pytest.raises(CdcLakeError, match=r"column unit_price: cannot parse '12\.3x' as decimal\(10,2\)") as error:
        reconcile(spark, replayed.table(name), replayed.location, path)
    assert path.name in str(error.value)
    with pytest.raises(CdcLakeError, match="column unit_price"):
        read_expected(spark, replayed.table(name), path)


def test_values_that_would_be_rounded_or_truncated_are_refused(spark, replayed):
    name = "shop.order_items"
    for column, value in (("unit_price", "1.005"), ("line_no", "1.5"), ("quantity", 40_000)):
        rows = [json.loads(line) for line in replayed.expected_lines(name)]
        rows[0][column] = value
        with pytest.raises(CdcLakeError, match=f"column {column}: cannot parse"):
            read_expected(spark, replayed.table(name), replayed.write(name, list(map(json.dumps, rows))))


def test_missing_column_and_malformed_line_are_errors(spark, replayed):
    name = "shop.customers"
    rows = [json.loads(line) for line in replayed.expected_lines(name)]
    for row in rows:
        del row["notes"]
    with pytest.raises(CdcLakeError, match="lacks column"):
        reconcile(spark, replayed.table(name), replayed.location, replayed.write(name, list(map(json.dumps, rows))))
    lines = replayed.expected_lines(name)
    lines.insert(2, '{"customer_id": 1, "full_name": ')
    with pytest.raises(CdcLakeError, match="malformed line"):
        reconcile(spark, replayed.table(name), replayed.location, replayed.write(name, lines))


def test_duplicate_keys_in_expected_are_counted(spark, replayed):
    name = "shop.customers"
    lines = replayed.expected_lines(name)
    twice = json.loads(lines[10])
    lines += [lines[10], lines[10], lines[20]]
    report = reconcile(spark, replayed.table(name), replayed.location, replayed.write(name, lines), limit=1)
    assert report.duplicate_keys == 2
    assert (report.missing_keys, report.extra_keys, report.differing_rows) == (0, 0, 0)
    assert report.expected_rows == report.lake_rows + 3
    assert not report.matches
    assert report.examples == [f"duplicate key (customer_id={twice['customer_id']}): 3 rows in expected"]


def test_missing_table_reconciles_as_empty_and_snapshots_travel(spark, replayed):
    name = "shop.customers"
    expected = replayed.expected / f"{name}.jsonl"
    rows = len(replayed.expected_lines(name))
    absent = LakeLocation(replayed.location.catalog, f"absent_{uuid.uuid4().hex[:8]}")
    report = reconcile(spark, replayed.table(name), absent, expected)
    assert (report.lake_rows, report.missing_keys, report.extra_keys) == (0, rows, 0)
    assert report.lake_checksum == "0:0"

    snapshots = snapshot_summaries(spark, replayed.location, replayed.table(name))
    after_load = reconcile(
        spark, replayed.table(name), replayed.location, expected, snapshot_id=snapshots[0]["snapshot_id"]
    )
    assert not after_load.matches  # the CDC files changed the table after its first commit
    current = reconcile(
        spark, replayed.table(name), replayed.location, expected, snapshot_id=snapshots[-1]["snapshot_id"]
    )
    assert current.matches


def write_csv(path: Path, table: TableSpec, rows: list[dict[str, Any]]) -> None:
    """As PostgreSQL's COPY … CSV HEADER: NULL an unquoted empty field, every other value quoted."""
    with path.open("w", encoding="utf-8", newline="") as out:
        csv.writer(out).writerow(table.column_names)
        for row in rows:
            fields = []
            for column in table.column_names:
                value = row[column]
                if value is None:
                    fields.append("")
                    continue
                text = json.dumps(value) if isinstance(value, bool) else str(value)
                fields.append('"' + text.replace('"', '""') + '"')
            out.write(",".join(fields) + "\r\n")


def write_parquet_folder(folder: Path, table: TableSpec, rows: list[dict[str, Any]]) -> None:
    """Typed Parquet (decimals as decimal128, timestamps in microseconds), split over two files."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    fields, parsers = [], []
    for column in table.columns:
        if column.type.startswith("decimal"):
            precision, scale = (int(part) for part in column.type[8:-1].split(","))
            fields.append(pa.field(column.name, pa.decimal128(precision, scale)))
            parsers.append(Decimal)
        else:
            fields.append(pa.field(column.name, ARROW_TYPES[column.type]))
            parsers.append(
                {"date": dt.date.fromisoformat, "timestamp": dt.datetime.fromisoformat}.get(column.type, lambda v: v)
            )
    schema = pa.schema(fields)
    half = len(rows) // 2
    for index, part in enumerate((rows[:half], rows[half:])):
        columns = [
            [None if r[c.name] is None else parse(r[c.name]) for r in part]
            for c, parse in zip(table.columns, parsers, strict=True)
        ]
        pq.write_table(pa.Table.from_arrays(columns, schema=schema), folder / f"part-{index}.parquet")
