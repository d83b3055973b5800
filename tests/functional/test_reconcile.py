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

from cdc_lake.core.config import TableSpec, parse_config
from cdc_lake.core.exceptions import CdcLakeError
from cdc_lake.engine.record import snapshot_summaries
from cdc_lake.engine.tables import Lake, LakeLocation, TableSnapshot
from cdc_lake.local.generator import GeneratorSpec, generate, land_order
from cdc_lake.local.runtime import LocalPipeline, failed_runs
from cdc_lake.ops.reconcile import format_report, read_expected, reconcile
from tests.support.configs import ORDER_ITEMS_COLUMNS, columns

pytestmark = pytest.mark.spark

# One table with a composite key and every kind of value the generator's edge cases stress.
TABLE: dict[str, Any] = {
    "name": "shop.order_items",
    "primary_key": ["order_id", "line_no"],
    "columns": [
        *ORDER_ITEMS_COLUMNS,
        *columns(is_gift="boolean", ship_on="date", shipped_at="timestamp", notes="string"),
    ],
}
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
    table: TableSpec
    location: LakeLocation
    oracle: Path
    work: Path

    def oracle_rows(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines()]

    def lines(self) -> list[str]:
        return self.oracle.read_text(encoding="utf-8").splitlines()

    def write(self, rows: list[dict[str, Any]] | list[str]) -> Path:
        """A JSON Lines copy of the oracle, doctored: rows as dicts or as ready lines."""
        path = self.work / f"{uuid.uuid4().hex[:8]}.jsonl"
        lines = [row if isinstance(row, str) else json.dumps(row, ensure_ascii=False) for row in rows]
        path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        return path

    def reconcile(self, spark, expected: Path, *, snapshot_id: int | None = None, **options: Any):
        return reconcile(spark, TableSnapshot(self.location, self.table, snapshot_id), expected, **options)


@pytest.fixture(scope="module")
def replayed(spark, tmp_path_factory: pytest.TempPathFactory) -> Replayed:
    """One generated source (with edge-case values) replayed into a lake database of this module's own."""
    root = tmp_path_factory.mktemp("reconcile")
    # Parquet DMS files: with CSV, a CRLF inside a quoted value of a file's first row trips the DMS reader.
    dms = {"format": "parquet", "bucket_folder": "raw/dms", "timestamp_column": "dms_ts"}
    config = parse_config({"dms": dms, "tables": [TABLE]})
    spec = GeneratorSpec(seed=23, initial_rows=150, cdc_files=1, changes_per_file=60)
    generated = generate(config, root / "source", spec)
    pipeline = LocalPipeline(config, generated.landing, spark, database=f"rc_{uuid.uuid4().hex[:12]}")
    runs = pipeline.deliver(land_order(generated))
    assert not failed_runs(runs), [r.error for r in failed_runs(runs)]
    work = root / "work"
    work.mkdir()
    table = config.tables[0]
    return Replayed(table, pipeline.location, generated.expected / f"{table.name}.jsonl", work)


def where(row: dict[str, Any]) -> str:
    return f"(order_id={row['order_id']}, line_no={row['line_no']})"


def test_replayed_table_matches_its_oracle(spark, replayed):
    report = replayed.reconcile(spark, replayed.oracle)
    rows = len(replayed.lines())
    assert (report.lake_rows, report.expected_rows) == (rows, rows)
    assert (report.missing_keys, report.extra_keys, report.differing_rows, report.duplicate_keys) == (0, 0, 0, 0)
    assert report.lake_checksum == report.expected_checksum
    assert report.lake_checksum.startswith(f"{rows}:")
    assert report.examples == []
    assert report.matches
    assert format_report(report).endswith("\nMATCH")


def test_doctored_extract_counts_and_names_each_difference(spark, replayed):
    rows = replayed.oracle_rows()
    removed = [rows.pop(0), rows.pop(0)]  # in the lake, not expected: extra keys, first in key order
    added = {**rows[0], "order_id": 10**15}  # expected, not in the lake: a missing key
    renamed = next(r for r in rows[5:] if r["sku"] is not None)
    renamed["sku"] += " v2"
    repriced = next(r for r in rows[5:] if r["unit_price"] is not None and r is not renamed)
    old_price = repriced["unit_price"]
    repriced["unit_price"] = str(Decimal(old_price) + Decimal("0.01"))
    blanked = next(r for r in rows[5:] if r["notes"] is None and r is not renamed and r is not repriced)
    blanked["notes"] = ""  # NULL and the empty string are different values
    rows.append(added)
    random.Random(1).shuffle(rows)  # row order never matters

    report = replayed.reconcile(spark, replayed.write(rows))

    assert (report.missing_keys, report.extra_keys, report.differing_rows, report.duplicate_keys) == (1, 2, 3, 0)
    assert (report.lake_rows, report.expected_rows) == (len(rows) + 1, len(rows))
    assert report.lake_checksum != report.expected_checksum
    assert not report.matches
    assert report.examples[:2] == [f"extra key {where(r)}" for r in removed]
    old_sku = json.dumps(renamed["sku"].removesuffix(" v2"), ensure_ascii=False)
    new_sku = json.dumps(renamed["sku"], ensure_ascii=False)
    assert f"differs at {where(renamed)}: sku lake={old_sku} expected={new_sku}" in report.examples
    new_price = repriced["unit_price"]
    assert f"differs at {where(repriced)}: unit_price lake={old_price} expected={new_price}" in report.examples
    assert f'differs at {where(blanked)}: notes lake=NULL expected=""' in report.examples
    assert f"missing key {where(added)}" in report.examples
    text = format_report(report)
    assert text.endswith("\nMISMATCH")
    assert f"extra key {where(removed[0])}" in text


def test_example_limit(spark, replayed):
    rows = replayed.oracle_rows()
    report = replayed.reconcile(spark, replayed.write(rows[3:]), limit=2)
    assert report.extra_keys == 3
    assert report.examples == [f"extra key {where(r)}" for r in rows[:2]]


def test_checksum_tells_which_column_is_null(spark, replayed):
    """A row of NULLs but one value must hash differently depending on which column holds the value."""
    checksums = set()
    for column in ("sku", "notes"):
        rows = replayed.oracle_rows()
        empty = next(r for r in rows if all(r[c] is None for c in replayed.table.value_columns))
        empty[column] = "v"
        report = replayed.reconcile(spark, replayed.write(rows))
        assert report.differing_rows == 1
        checksums.add(report.expected_checksum)
    assert len(checksums) == 2


def test_csv_and_parquet_extracts_match(spark, replayed):
    rows = replayed.oracle_rows()
    csv_path = replayed.work / "extract.csv"
    write_csv(csv_path, replayed.table, rows)
    parquet_dir = replayed.work / "extract-parquet"
    write_parquet_folder(parquet_dir, replayed.table, rows)
    for path in (csv_path, parquet_dir):
        report = replayed.reconcile(spark, path)
        assert report.matches, format_report(report)
        assert report.expected_rows == len(rows)


def test_csv_null_convention_unquoted_empty_is_null_quoted_empty_is_empty(spark, replayed):
    rows = replayed.oracle_rows()
    blanked = next(r for r in rows if r["notes"] is None)
    blanked["notes"] = ""
    path = replayed.work / "blanked.csv"
    write_csv(path, replayed.table, rows, line_end="\n")  # LF rows; values keep their CRLFs either way
    report = replayed.reconcile(spark, path)
    assert report.differing_rows == 1
    assert report.examples == [f'differs at {where(blanked)}: notes lake=NULL expected=""']


def test_shuffled_lines_still_match(spark, replayed):
    lines = replayed.lines()
    random.Random(7).shuffle(lines)
    report = replayed.reconcile(spark, replayed.write(lines))
    assert report.matches
    assert report.expected_checksum == report.lake_checksum


def test_unparsable_value_names_file_column_and_value(spark, replayed):
    rows = replayed.oracle_rows()
    rows[4]["unit_price"] = "12.3x"
    path = replayed.write(rows)
    with pytest.raises(CdcLakeError, match=r"column unit_price: cannot parse '12\.3x' as decimal\(10,2\)") as error:
        replayed.reconcile(spark, path)
    assert path.name in str(error.value)
    with pytest.raises(CdcLakeError, match="column unit_price"):
        read_expected(spark, replayed.table, path)


def test_values_that_would_be_rounded_or_truncated_are_refused(spark, replayed):
    for column, value in (("unit_price", "1.005"), ("line_no", "1.5"), ("quantity", 40_000), ("ship_on", "2025-02-30")):
        rows = replayed.oracle_rows()
        rows[0][column] = value
        with pytest.raises(CdcLakeError, match=f"column {column}: cannot parse"):
            read_expected(spark, replayed.table, replayed.write(rows))


def test_missing_column_and_malformed_line_are_errors(spark, replayed):
    rows = replayed.oracle_rows()
    for row in rows:
        del row["notes"]
    with pytest.raises(CdcLakeError, match="lacks column"):
        replayed.reconcile(spark, replayed.write(rows))
    lines = replayed.lines()
    lines.insert(2, '{"order_id": 1, "line_no": ')
    with pytest.raises(CdcLakeError, match="malformed line"):
        replayed.reconcile(spark, replayed.write(lines))


def test_duplicate_keys_in_expected_are_counted(spark, replayed):
    lines = replayed.lines()
    lines += [lines[10], lines[10], lines[20]]
    report = replayed.reconcile(spark, replayed.write(lines), limit=1)
    assert report.duplicate_keys == 2
    assert (report.missing_keys, report.extra_keys, report.differing_rows) == (0, 0, 0)
    assert report.expected_rows == report.lake_rows + 3
    assert not report.matches
    assert report.examples == [f"duplicate key {where(json.loads(lines[10]))}: 3 rows in expected"]


def test_missing_table_reconciles_as_empty_and_snapshots_travel(spark, replayed):
    rows = len(replayed.lines())
    absent = LakeLocation(replayed.location.catalog, f"absent_{uuid.uuid4().hex[:8]}")
    report = reconcile(spark, TableSnapshot(absent, replayed.table), replayed.oracle)
    assert (report.lake_rows, report.missing_keys, report.extra_keys) == (0, rows, 0)
    assert report.lake_checksum == "0:0"

    snapshots = snapshot_summaries(Lake(spark, replayed.location), replayed.table)
    after_load = replayed.reconcile(spark, replayed.oracle, snapshot_id=snapshots[0]["snapshot_id"])
    assert not after_load.matches  # the CDC file changed the table after its first commit
    current = replayed.reconcile(spark, replayed.oracle, snapshot_id=snapshots[-1]["snapshot_id"])
    assert current.matches


def write_csv(path: Path, table: TableSpec, rows: list[dict[str, Any]], line_end: str = "\r\n") -> None:
    """As PostgreSQL's COPY … CSV HEADER: NULL an unquoted empty field, every other value quoted."""
    with path.open("w", encoding="utf-8", newline="") as out:
        csv.writer(out, lineterminator=line_end).writerow(table.column_names)
        for row in rows:
            fields = []
            for column in table.column_names:
                value = row[column]
                if value is None:
                    fields.append("")
                    continue
                text = json.dumps(value) if isinstance(value, bool) else str(value)
                fields.append('"' + text.replace('"', '""') + '"')
            out.write(",".join(fields) + line_end)


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
