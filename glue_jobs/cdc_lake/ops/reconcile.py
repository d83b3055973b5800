"""``cdc-lake reconcile``: prove a lake table equals an expected extract of the source, or show where not.

The expected extract is JSON Lines (the form of ``cdc_lake.core.jsonl``: the generator's oracle or ``cdc-lake
export``), CSV with a header row, or Parquet (one file or a folder). Its columns are matched by name and cast
to the lake types; a value that does not parse is an error naming the file, the column and the value.

Formats:
- JSON Lines: read with every column as a string, so numbers keep their exact text (a huge bigint or a
  decimal written as a string never passes through a double), then cast. Decimals written as JSON numbers
  go through a double; write them as strings (as ``cdc_lake.core.jsonl`` does) to compare them exactly.
- CSV: a header row, RFC 4180 quoting (``"`` doubled inside quoted fields), values may span lines. As
  PostgreSQL's ``COPY … TO … CSV HEADER`` writes it: an unquoted empty field is NULL, a quoted ``""`` is the
  empty string, and the text ``NULL`` is the string "NULL". Binary values are base64, as in JSON Lines.
- Parquet: typed columns are cast to the lake types; string columns are parsed like CSV text.

Everything is a Spark aggregation: the expected rows and the lake rows are joined on the primary key, counted
per key and summed, so nothing but the totals and the first ``limit`` examples reaches the driver. Rows are
compared NULL-safely (``<=>``) and exactly, with Spark's floating-point equality (NaN equals NaN, -0.0 equals
0.0). The checksum of a side is ``<rows>:<sum>``, the sum over its rows of xxhash64 of every column in column
order (each with its NULL flag, so NULLs in different columns cannot cancel out), as a DECIMAL(38,0): equal
tables give equal checksums whatever the row order.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from pathlib import Path
from typing import Any, Literal, NamedTuple, assert_never, get_args

from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.utils import AnalysisException

from cdc_lake.core.config import TableSpec
from cdc_lake.core.exceptions import CdcLakeError
from cdc_lake.core.jsonl import converter
from cdc_lake.core.sql import quote
from cdc_lake.engine.reader import NO_NULL_SENTINEL
from cdc_lake.engine.spark_types import lake_type, strict_parse
from cdc_lake.engine.tables import Lake, TableSnapshot, table_exists
from cdc_lake.ops.export import read_table

log = logging.getLogger(__name__)

ExpectedFormat = Literal["jsonl", "csv", "parquet"]
EXPECTED_FORMATS: tuple[ExpectedFormat, ...] = get_args(ExpectedFormat)
_ALIASES: dict[str, ExpectedFormat] = {**{f: f for f in EXPECTED_FORMATS}, "json": "jsonl", "ndjson": "jsonl"}
_SUFFIXES: dict[str, ExpectedFormat] = {f".{alias}": f for alias, f in _ALIASES.items()}
_COMPRESSION_SUFFIXES = (".gz", ".bz2", ".deflate", ".snappy", ".zst", ".lz4")
_CORRUPT = "_cdc_lake_corrupt"
_BAD = "_cdc_lake_bad"  # index of the first column that did not parse, -1 for a malformed line, else NULL
_HASH = "_cdc_lake_hash"
_FILE = "_cdc_lake_file"
_VALUE_WIDTH = 80


@dataclasses.dataclass(frozen=True)
class ReconcileReport:
    """How a lake table compares with an expected extract; ``matches`` says whether they are equal."""

    table: str
    expected_source: str
    lake_rows: int
    expected_rows: int
    missing_keys: int  # in expected, not in the lake
    extra_keys: int  # in the lake, not in expected
    differing_rows: int  # keys in both whose rows differ in some column (per key, NULL-safe)
    duplicate_keys: int  # keys appearing more than once in the expected extract
    lake_checksum: str
    expected_checksum: str
    examples: list[str] = dataclasses.field(default_factory=list)  # the first differences, in key order

    @property
    def matches(self) -> bool:
        return (
            self.lake_rows == self.expected_rows
            and self.missing_keys == 0
            and self.extra_keys == 0
            and self.differing_rows == 0
            and self.duplicate_keys == 0
            and self.lake_checksum == self.expected_checksum
        )


def reconcile(
    spark: SparkSession,
    lake: TableSnapshot,
    expected: str | Path,
    *,
    file_format: str | None = None,
    limit: int = 10,
) -> ReconcileReport:
    """Compare the lake table (at its snapshot, default current; a missing table is empty) with ``expected``.

    Raises CdcLakeError when the extract cannot be read: unknown format, missing column, malformed line or a
    value that does not parse as the column's type.
    """
    started = time.monotonic()
    table = lake.table
    chosen = detect_format(expected, file_format)
    source = f"{expected} ({chosen})"
    parsed = _parse_expected(spark, table, expected, chosen)
    expected_side = parsed.select(
        *[quote(c) for c in table.column_names], _row_hash(table).alias(_HASH), F.col(_BAD), F.lit(1).alias("_e")
    )
    lake_side = _lake_rows(spark, lake).select(
        *[quote(c) for c in table.column_names], _row_hash(table).alias(_HASH), F.lit(1).alias("_l")
    )
    sides = _Sides(expected_side, lake_side)
    per_key = _per_key(expected_side, lake_side, table)
    totals = _totals(per_key)
    if totals["bad_rows"]:
        _raise_first_problem(parsed, table, expected)
    expected_rows, lake_rows = int(totals["expected_rows"] or 0), int(totals["lake_rows"] or 0)
    report = ReconcileReport(
        table=table.name,
        expected_source=source,
        lake_rows=lake_rows,
        expected_rows=expected_rows,
        missing_keys=int(totals["missing"]),
        extra_keys=int(totals["extra"]),
        differing_rows=int(totals["differing"]),
        duplicate_keys=int(totals["duplicates"]),
        lake_checksum=f"{lake_rows}:{totals['lake_hash'] or 0}",
        expected_checksum=f"{expected_rows}:{totals['expected_hash'] or 0}",
    )
    if limit > 0 and (report.missing_keys or report.extra_keys or report.differing_rows or report.duplicate_keys):
        examples = _examples(spark, per_key, sides, table, limit)
        report = dataclasses.replace(report, examples=examples)
    log.info(
        "%s: reconciled %d lake rows with %d expected rows in %.1f s: %s",
        table.name, lake_rows, expected_rows, time.monotonic() - started, "match" if report.matches else "mismatch",
    )  # fmt: skip
    return report


def read_expected(spark: SparkSession, table: TableSpec, path: str | Path, file_format: str | None = None) -> DataFrame:
    """The expected extract as a DataFrame of the table's columns in their lake types.

    Reads the extract once to check every value (raising CdcLakeError at the first that does not parse);
    the returned DataFrame reads it again when used.
    """
    parsed = _parse_expected(spark, table, path, detect_format(path, file_format))
    if parsed.filter(F.col(_BAD).isNotNull()).limit(1).count():
        _raise_first_problem(parsed, table, path)
    return parsed.select(*[quote(c) for c in table.column_names])


def format_report(report: ReconcileReport) -> str:
    """A short multi-line summary ending with MATCH or MISMATCH."""
    lines = [
        f"{report.table} against {report.expected_source}",
        f"  rows:            lake {report.lake_rows:,}, expected {report.expected_rows:,}",
        f"  missing keys:    {report.missing_keys:,} (expected, not in the lake)",
        f"  extra keys:      {report.extra_keys:,} (in the lake, not expected)",
        f"  differing rows:  {report.differing_rows:,}",
        f"  duplicate keys:  {report.duplicate_keys:,} (in the expected extract)",
        f"  checksum:        lake {report.lake_checksum}, expected {report.expected_checksum}",
    ]
    if report.examples:
        lines.append("  first differences:")
        lines.extend(f"    {example}" for example in report.examples)
    lines.append("MATCH" if report.matches else "MISMATCH")
    return "\n".join(lines)


def detect_format(path: str | Path, file_format: str | None = None) -> ExpectedFormat:
    """``jsonl``, ``csv`` or ``parquet``: as given, else by the file's extension or the files in a local folder."""
    if file_format is not None:
        chosen = _ALIASES.get(file_format.lower())
        if chosen is None:
            known = ", ".join(EXPECTED_FORMATS)
            raise CdcLakeError(f"unknown expected-file format {file_format!r}; use one of {known}")
        return chosen
    by_name = _format_of_name(str(path))
    if by_name is not None:
        return by_name
    local = Path(path)
    if "://" not in str(path) and local.is_dir():
        found = {
            named
            for f in local.rglob("*")
            if f.is_file() and not f.name.startswith(("_", ".")) and (named := _format_of_name(f.name)) is not None
        }
        if len(found) == 1:
            return found.pop()
        if found:
            raise CdcLakeError(f"{path}: holds files of several formats ({', '.join(sorted(found))})")
    raise CdcLakeError(f"{path}: cannot tell the format from the name; give it ({', '.join(EXPECTED_FORMATS)})")


def _format_of_name(name: str) -> ExpectedFormat | None:
    lowered = name.lower().rstrip("/")
    for suffix in _COMPRESSION_SUFFIXES:
        lowered = lowered.removesuffix(suffix)
    return next((fmt for suffix, fmt in _SUFFIXES.items() if lowered.endswith(suffix)), None)


def _parse_expected(spark: SparkSession, table: TableSpec, path: str | Path, file_format: ExpectedFormat) -> DataFrame:
    """The extract with the typed columns, ``_BAD`` (first column that did not parse), ``_FILE`` and the raw text."""
    location = str(path)
    if "://" not in location and not Path(location).exists():
        raise CdcLakeError(f"{location}: no such file or folder")
    try:
        match file_format:
            case "jsonl":
                raw, corrupt = _read_jsonl(spark, table, location), F.col(_CORRUPT)
            case "csv":
                raw, corrupt = _read_csv(spark, table, location), F.col(_CORRUPT)
            case "parquet":
                raw, corrupt = _read_parquet(spark, table, location), F.lit(None)
            case unhandled:
                assert_never(unhandled)
    except AnalysisException as error:
        raise CdcLakeError(f"{location}: cannot read as {file_format}: {error}") from None
    typed: list[Column] = []
    bad: list[Column] = [F.when(corrupt.isNotNull(), F.lit(-1))]
    for index, column in enumerate(table.columns):
        value, fault = _convert(_raw(index), raw.schema[_raw(index)].dataType, column.type)
        typed.append(value.alias(column.name))
        bad.append(F.when(fault, F.lit(index)))
    return raw.select(
        *typed,
        F.coalesce(*bad).alias(_BAD),
        F.col("_metadata.file_path").alias(_FILE),
        corrupt.cast("string").alias(_CORRUPT),
        *[F.col(_raw(i)) for i in range(len(table.columns))],
    )


def _raw(index: int) -> str:
    return f"_cdc_lake_raw_{index}"


def _read_jsonl(spark: SparkSession, table: TableSpec, location: str) -> DataFrame:
    first = spark.read.text(location).filter(F.trim("value") != "").limit(1).collect()
    if first:
        try:
            present = set(json.loads(first[0]["value"]))
        except (ValueError, TypeError):
            present = set(table.column_names)  # the line is reported as malformed below
        missing = [c for c in table.column_names if c not in present]
        if missing:
            raise CdcLakeError(f"{location}: lacks column(s) {', '.join(missing)} (first line: {sorted(present)})")
    schema = T.StructType(
        [T.StructField(c, T.StringType()) for c in table.column_names] + [T.StructField(_CORRUPT, T.StringType())]
    )
    frame = (
        spark.read.schema(schema)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", _CORRUPT)
        .option("encoding", "UTF-8")
        .json(location)
    )
    return frame.select(
        *[F.col(quote(c)).alias(_raw(i)) for i, c in enumerate(table.column_names)], F.col(_CORRUPT), F.col("_metadata")
    )


def _read_csv(spark: SparkSession, table: TableSpec, location: str) -> DataFrame:
    first = spark.read.option("lineSep", "\n").text(location).limit(1).collect()
    if not first:
        raise CdcLakeError(f"{location}: empty; a CSV extract starts with a header row")
    options: dict[str, bool | str] = {
        "header": True,
        "multiLine": True,
        "quote": '"',
        "escape": '"',
        "encoding": "UTF-8",
        # Left to guess, Spark turns CRLF inside quoted values of a CRLF file into LF; named, it keeps them.
        "lineSep": "\r\n" if first[0]["value"].endswith("\r") else "\n",
    }
    header = spark.read.options(**options).csv(location).columns
    names = _resolve(table, header, location)
    schema = T.StructType(
        [T.StructField(h, T.StringType()) for h in header] + [T.StructField(_CORRUPT, T.StringType())]
    )
    frame = (
        spark.read.schema(schema)
        .options(**options)
        .option("enforceSchema", False)  # every file's header must name the same columns
        .option("nullValue", NO_NULL_SENTINEL)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", _CORRUPT)
        .csv(location)
    )
    return frame.select(
        *[F.col(quote(n)).alias(_raw(i)) for i, n in enumerate(names)], F.col(_CORRUPT), F.col("_metadata")
    )


def _read_parquet(spark: SparkSession, table: TableSpec, location: str) -> DataFrame:
    frame = spark.read.parquet(location)
    names = _resolve(table, frame.columns, location)
    return frame.select(*[F.col(quote(n)).alias(_raw(i)) for i, n in enumerate(names)], F.col("_metadata"))


def _resolve(table: TableSpec, present: list[str], location: str) -> list[str]:
    """The extract's name of each table column (matched case-insensitively); raises naming the missing ones."""
    by_lower = {name.lstrip("\ufeff").lower(): name for name in present}  # a byte-order mark is no part of a name
    missing = [c for c in table.column_names if c.lower() not in by_lower]
    if missing:
        raise CdcLakeError(f"{location}: lacks column(s) {', '.join(missing)} (has {', '.join(present)})")
    return [by_lower[c.lower()] for c in table.column_names]


def _convert(raw_name: str, raw_type: T.DataType, column_type: str) -> tuple[Column, Column]:
    """The value in the lake type, and when it failed to parse (never silently rounded or truncated)."""
    target = lake_type(column_type)
    if raw_type == target:
        return F.col(raw_name), F.lit(False)
    if isinstance(target, T.BinaryType) and isinstance(raw_type, T.StringType):
        value = F.expr(f"try_to_binary({quote(raw_name)}, 'base64')")
        return value, F.col(raw_name).isNotNull() & value.isNull()
    # The configured type's range, not only the lake's: 40000 is no smallint even if the lake stores an int.
    value, fault = strict_parse(raw_name, column_type)
    return value.cast(target), fault


def _row_hash(table: TableSpec) -> Column:
    parts: list[Column] = []
    for name in table.column_names:
        parts += [F.col(quote(name)).isNull(), F.col(quote(name))]
    return F.xxhash64(*parts).cast(T.DecimalType(20, 0))


def _lake_rows(spark: SparkSession, lake: TableSnapshot) -> DataFrame:
    location, table, snapshot_id = lake.location, lake.table, lake.snapshot_id
    schema = T.StructType([T.StructField(c.name, lake_type(c.type)) for c in table.columns])
    in_lake = Lake(spark, location)
    if not table_exists(in_lake, table):
        if snapshot_id is not None:
            raise CdcLakeError(f"{location.table(table)} does not exist, so it has no snapshot {snapshot_id}")
        log.info("%s: %s does not exist; reconciling as an empty table", table.name, location.table(table))
        return spark.createDataFrame([], schema)
    frame = read_table(in_lake, table, snapshot_id)
    present = {c.lower(): c for c in frame.columns}
    missing = [c for c in table.column_names if c.lower() not in present]
    if missing:
        raise CdcLakeError(f"{location.table(table)} lacks configured column(s) {', '.join(missing)}")
    return frame.select(*[F.col(quote(present[f.name.lower()])).cast(f.dataType).alias(f.name) for f in schema])


def _per_key(expected_side: DataFrame, lake_side: DataFrame, table: TableSpec) -> DataFrame:
    """One row per key of either side: expected row count, lake presence, any difference, hash sums, bad rows."""
    keys = table.primary_key
    expected_values = expected_side.select(
        *[quote(k) for k in keys],
        *[F.col(quote(c)).alias(f"_e_{i}") for i, c in enumerate(table.column_names) if c not in keys],
        F.col(_HASH).alias("_e_hash"),
        F.col(_BAD),
        "_e",
    )
    lake_values = lake_side.select(
        *[quote(k) for k in keys],
        *[F.col(quote(c)).alias(f"_l_{i}") for i, c in enumerate(table.column_names) if c not in keys],
        F.col(_HASH).alias("_l_hash"),
        "_l",
    )
    joined = expected_values.join(lake_values, on=keys, how="full")
    value_indexes = [i for i, c in enumerate(table.column_names) if c not in keys]
    differs = F.lit(False)
    for i in value_indexes:
        differs = differs | ~F.col(f"_e_{i}").eqNullSafe(F.col(f"_l_{i}"))
    both = F.col("_e").isNotNull() & F.col("_l").isNotNull()
    return joined.groupBy(*[quote(k) for k in keys]).agg(
        F.count("_e").alias("_n_expected"),
        F.max("_l").alias("_in_lake"),
        F.max(both & differs).alias("_differs"),
        F.sum("_e_hash").alias("_expected_hash"),
        F.max("_l_hash").alias("_lake_hash"),  # one lake row per key, repeated for each duplicate expected row
        F.count(_BAD).alias("_bad_rows"),
    )


def _totals(per_key: DataFrame) -> Row:
    """Every count and hash sum in one aggregation over the per-key rows."""
    n_expected, in_lake = F.col("_n_expected"), F.col("_in_lake").isNotNull()
    return per_key.agg(
        F.sum(n_expected).alias("expected_rows"),
        F.count(F.when(in_lake, 1)).alias("lake_rows"),
        F.count(F.when((n_expected > 0) & ~in_lake, 1)).alias("missing"),
        F.count(F.when((n_expected == 0) & in_lake, 1)).alias("extra"),
        F.count(F.when((n_expected > 0) & in_lake & F.col("_differs"), 1)).alias("differing"),
        F.count(F.when(n_expected > 1, 1)).alias("duplicates"),
        F.sum("_expected_hash").alias("expected_hash"),
        F.sum("_lake_hash").alias("lake_hash"),
        F.sum("_bad_rows").alias("bad_rows"),
    ).collect()[0]


class _Sides(NamedTuple):
    """The two sides compared, each with the table's columns and a row hash."""

    expected: DataFrame
    lake: DataFrame


def _examples(spark: SparkSession, per_key: DataFrame, sides: _Sides, table: TableSpec, limit: int) -> list[str]:
    """The first ``limit`` differences in primary-key order, with the differing values of changed rows."""
    keys = table.primary_key
    n_expected, in_lake = F.col("_n_expected"), F.col("_in_lake").isNotNull()
    problem = (n_expected == 0) | ~in_lake | (n_expected > 1) | F.coalesce(F.col("_differs"), F.lit(False))
    first = (
        per_key.filter(problem)
        .select(*[quote(k) for k in keys], "_n_expected", "_in_lake", "_differs")
        .orderBy(*[quote(k) for k in keys])
        .limit(limit)
        .collect()
    )
    changed = [row for row in first if row["_differs"] and row["_in_lake"] is not None and row["_n_expected"]]
    details = _differences(spark, [row.asDict() for row in changed], sides, table) if changed else {}
    key_types = {c.name: c.type for c in table.columns}
    lines: list[str] = []
    for row in first:
        key = _key_tuple(row.asDict(), keys)
        where = "(" + ", ".join(f"{k}={_render(row[k], key_types[k])}" for k in keys) + ")"
        if row["_n_expected"] == 0:
            lines.append(f"extra key {where}")
            continue
        if row["_in_lake"] is None:
            lines.append(f"missing key {where}")
        elif row["_differs"]:
            lines.append(f"differs at {where}: {details.get(key, '(values not shown)')}")
        if row["_n_expected"] > 1:
            lines.append(f"duplicate key {where}: {row['_n_expected']} rows in expected")
    return lines[:limit]


def _differences(
    spark: SparkSession, rows: list[dict[str, Any]], sides: _Sides, table: TableSpec
) -> dict[tuple[Any, ...], str]:
    """For a few keys: ``column lake=… expected=…`` for each differing column (of the first differing row)."""
    keys = table.primary_key
    key_schema = T.StructType([T.StructField(c.name, lake_type(c.type)) for c in table.columns if c.name in keys])
    wanted = F.broadcast(spark.createDataFrame([tuple(r[k] for k in keys) for r in rows], key_schema))
    values = [c for c in table.columns if c.name not in keys]
    expected_rows = sides.expected.join(wanted, on=keys, how="left_semi").select(
        *[quote(k) for k in keys], *[F.col(quote(c.name)).alias(f"_e_{c.name}") for c in values]
    )
    lake_rows = sides.lake.join(wanted, on=keys, how="left_semi").select(
        *[quote(k) for k in keys], *[F.col(quote(c.name)).alias(f"_l_{c.name}") for c in values]
    )
    differing = F.array_compact(
        F.array(*[F.when(~F.col(f"_e_{c.name}").eqNullSafe(F.col(f"_l_{c.name}")), F.lit(c.name)) for c in values])
    )
    joined = expected_rows.join(lake_rows, on=keys, how="inner").withColumn("_columns", differing)
    details: dict[tuple[Any, ...], str] = {}
    for row in joined.filter(F.size("_columns") > 0).collect():
        key = _key_tuple(row.asDict(), keys)
        if key in details:
            continue
        types = {c.name: c.type for c in values}
        details[key] = ", ".join(
            f"{name} lake={_render(row[f'_l_{name}'], types[name])} expected={_render(row[f'_e_{name}'], types[name])}"
            for name in row["_columns"]
        )
    return details


def _key_tuple(row: dict[str, Any], keys: list[str]) -> tuple[Any, ...]:
    return tuple(row[k] for k in keys)


def _render(value: Any, column_type: str) -> str:
    """A value as the JSON Lines form shows it; strings quoted so that "" and NULL read differently."""
    if value is None:
        return "NULL"
    shown = converter(column_type)(value)
    if column_type == "string":
        text = json.dumps(shown, ensure_ascii=False)
        return text if len(text) <= _VALUE_WIDTH else text[: _VALUE_WIDTH - 2] + '…"'
    return str(shown)


def _raise_first_problem(parsed: DataFrame, table: TableSpec, path: str | Path) -> None:
    row = (
        parsed.filter(F.col(_BAD).isNotNull())
        .select(_BAD, _FILE, _CORRUPT, *[_raw(i) for i in range(len(table.columns))])
        .limit(1)
        .collect()
    )
    if not row:
        raise CdcLakeError(f"{path}: holds values that do not parse (found once, not again)")
    first = row[0]
    where = first[_FILE] or str(path)
    if first[_BAD] < 0:
        text = str(first[_CORRUPT] or "")[:_VALUE_WIDTH]
        raise CdcLakeError(f"{where}: malformed line {text!r}")
    column = table.columns[first[_BAD]]
    raise CdcLakeError(f"{where}: column {column.name}: cannot parse {first[_raw(first[_BAD])]!r} as {column.type}")
