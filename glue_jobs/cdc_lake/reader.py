"""Reading DMS files into typed change rows, each tagged with its place in DMS order.

The result has the table's columns plus:
  ``_op``          I / U / D (full-load rows are I),
  ``_phase``       0 for full-load rows, 1 for CDC rows,
  ``_file``        the file's key, ``_file_seq`` its position in the batch (DMS file order),
  ``_row``         a position inside the file that increases with row order,
  ``_change_seq``  the AR_H_CHANGE_SEQ value when configured (orders CDC rows), else NULL,
  ``_dms_ts``      the DMS timestamp column as written, when configured,
  ``_problem``     NULL for a good row, else a struct naming the column, the fault and the raw value.
Rows are never dropped here: bad rows are flagged so the caller can refuse the whole batch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_lake.config import DmsSettings, TableSpec
from cdc_lake.dms_files import DmsFile
from cdc_lake.spark_types import parse_type, strict_parse

OP = "_op"
FILE = "_file"
FILE_SEQ = "_file_seq"
PHASE = "_phase"
ROW = "_row"
CHANGE_SEQ = "_change_seq"
DMS_TS = "_dms_ts"
PROBLEM = "_problem"
CORRUPT = "_corrupt_record"
# Spark turns an unquoted empty CSV field into NULL whatever nullValue is; a sentinel that cannot occur
# in DMS output keeps the NULL marker ("NULL") apart from empty strings, which we then decode ourselves.
NO_NULL_SENTINEL = "\u0000cdc-lake-null\u0000"
OPS = ("I", "U", "D")


class _Group(NamedTuple):
    """The files of one kind (LOAD or CDC) that a run reads, and how to read them."""

    files: Sequence[DmsFile]
    table: TableSpec
    dms: DmsSettings
    uri_of: Callable[[str], str]
    full_load: bool


def read_changes(
    spark: SparkSession,
    files: Sequence[DmsFile],
    table: TableSpec,
    dms: DmsSettings,
    uri_of: Callable[[str], str],
) -> DataFrame:
    """Typed change rows of ``files`` (already in DMS order), with ``_problem`` flags for bad rows."""
    if not files:
        raise ValueError("read_changes needs at least one file")
    parts = []
    for full_load in (True, False):
        group = [f for f in files if f.is_full_load == full_load]
        if not group:
            continue
        read = _read_parquet if dms.format == "parquet" else _read_csv
        parts.append(read(spark, _Group(group, table, dms, uri_of, full_load)))
    frame = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    sequence = {f.name: index for index, f in enumerate(files)}
    keys = {f.name: f.key for f in files}
    file_name = F.col("_metadata.file_name")
    return frame.withColumn(FILE_SEQ, _lookup(sequence, file_name)).withColumn(FILE, _lookup(keys, file_name))


def _lookup(mapping: Mapping[str, object], key: Column) -> Column:
    pairs: list[Column] = []
    for name, value in mapping.items():
        pairs += [F.lit(name), F.lit(value)]
    return F.create_map(*pairs)[key]


def _dms_columns(dms: DmsSettings, has_op: bool) -> tuple[list[str], list[str]]:
    """Names of the extra DMS columns before and after the table's columns."""
    before = ([OP] if has_op else []) + ([DMS_TS] if dms.timestamp_column else [])
    after = [CHANGE_SEQ] if dms.change_sequence_column else []
    return before, after


def _read_csv(spark: SparkSession, group: _Group) -> DataFrame:
    files, table, dms, uri_of, full_load = group
    has_op = not full_load or dms.include_op_for_full_load
    before, after = _dms_columns(dms, has_op)
    names = before + table.column_names + after
    schema = T.StructType([T.StructField(n, T.StringType()) for n in [*names, CORRUPT]])
    raw = (
        spark.read.schema(schema)
        .option("header", dms.add_column_name)
        .option("sep", dms.csv_delimiter)
        .option("quote", '"')
        .option("escape", '"')
        # Values may hold line breaks; a multi-line CSV file is read whole by one task, in order.
        .option("multiLine", True)
        # DMS ends rows with "\n" (the stack sets CsvRowDelimiter); left to guess, Spark takes a CRLF inside
        # the file's first quoted value for the row separator and merges the rows after it.
        .option("lineSep", "\n")
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .option("nullValue", NO_NULL_SENTINEL)
        .option("encoding", "UTF-8")
        .csv([uri_of(f.key) for f in files])
    )
    row = F.monotonically_increasing_id()
    decoded = [_decode_csv_value(F.col(c), dms.csv_null_value).alias(c) for c in table.column_names]
    frame = raw.select(
        (F.col(OP) if has_op else F.lit("I")).alias(OP),
        (F.col(DMS_TS) if dms.timestamp_column else F.lit(None).cast("string")).alias(DMS_TS),
        (F.col(CHANGE_SEQ) if dms.change_sequence_column else F.lit(None).cast("string")).alias(CHANGE_SEQ),
        *decoded,
        F.col(CORRUPT),
        row.alias(ROW),
        F.col("_metadata"),
    )
    expected_fields = len(names)
    malformed = F.when(
        F.col(CORRUPT).isNotNull(),
        _problem(F.lit("(row)"), F.lit(f"malformed CSV row: expected {expected_fields} fields"), F.col(CORRUPT)),
    )
    return _typed(frame, table, full_load, malformed, dms.change_sequence_column is not None)


def _decode_csv_value(token: Column, null_marker: str) -> Column:
    if null_marker == "":
        return token  # an unquoted empty field is the NULL marker; a quoted "" stays an empty string
    return F.when(token == F.lit(null_marker), F.lit(None)).otherwise(F.coalesce(token, F.lit("")))


def _read_parquet(spark: SparkSession, group: _Group) -> DataFrame:
    files, table, dms, uri_of, full_load = group
    raw = spark.read.option("mergeSchema", False).parquet(*[uri_of(f.key) for f in files])
    present = {c.lower(): c for c in raw.columns}

    def column(name: str | None, required: bool) -> Column:
        if name and name.lower() in present:
            return F.col(f"`{present[name.lower()]}`")
        if required:
            return F.raise_error(F.lit(f"Parquet file(s) of {table.name} lack the column {name!r}"))
        return F.lit(None)

    has_op = not full_load or dms.include_op_for_full_load
    frame = raw.select(
        (column("Op", True).cast("string") if has_op else F.lit("I")).alias(OP),
        column(dms.timestamp_column, False).cast("string").alias(DMS_TS),
        column(dms.change_sequence_column, False).cast("string").alias(CHANGE_SEQ),
        *[_parquet_value(column(c.name, True), c.type).alias(c.name) for c in table.columns],
        F.lit(None).cast("string").alias(CORRUPT),
        F.col("_metadata.row_index").alias(ROW),
        F.col("_metadata"),
    )
    return _typed(frame, table, full_load, None, dms.change_sequence_column is not None)


def _parquet_value(value: Column, column_type: str) -> Column:
    # Parquet values are typed already; strings keep their text so a bad cast can be reported.
    return value if column_type != "string" else value.cast("string")


def _problem(column: Column, fault: Column, value: Column) -> Column:
    return F.struct(
        column.alias("column"), fault.alias("fault"), F.substring(value.cast("string"), 1, 80).alias("value")
    )


def _typed(
    frame: DataFrame, table: TableSpec, full_load: bool, extra_problem: Column | None, table_has_change_seq: bool
) -> DataFrame:
    """Cast each column to its configured type and flag the first fault of every row."""
    checks: list[Column] = []
    if extra_problem is not None:
        checks.append(extra_problem)
    valid_ops = ("I",) if full_load else OPS
    checks.append(
        F.when(
            F.col(OP).isNull() | ~F.col(OP).isin(*valid_ops),
            _problem(F.lit("Op"), F.lit(f"unknown Op; expected one of {'/'.join(valid_ops)}"), F.col(OP)),
        )
    )
    typed_columns = []
    for spec in table.columns:
        raw = F.col(f"`{spec.name}`")
        if isinstance(parse_type(spec.type), T.StringType):
            typed_columns.append(raw.alias(spec.name))
        else:
            typed, fault = strict_parse(spec.name, spec.type)
            typed_columns.append(typed.alias(spec.name))
            checks.append(F.when(fault, _problem(F.lit(spec.name), F.lit(f"cannot parse as {spec.type}"), raw)))
        if spec.name in table.primary_key:
            checks.append(F.when(raw.isNull(), _problem(F.lit(spec.name), F.lit("NULL primary key"), raw)))
        elif not spec.nullable:
            checks.append(F.when(raw.isNull(), _problem(F.lit(spec.name), F.lit("NULL in a NOT NULL column"), raw)))
    if not full_load and table_has_change_seq:
        checks.append(
            F.when(
                F.col(CHANGE_SEQ).isNull() | ~F.col(CHANGE_SEQ).rlike(r"^[0-9]+$"),
                _problem(F.lit(CHANGE_SEQ), F.lit("change sequence is not a number"), F.col(CHANGE_SEQ)),
            )
        )
    return frame.select(
        F.lit(0 if full_load else 1).alias(PHASE),
        F.col(OP),
        F.col(DMS_TS),
        F.col(CHANGE_SEQ),
        *typed_columns,
        F.col(ROW),
        F.col("_metadata"),
        F.coalesce(*checks).alias(PROBLEM) if len(checks) > 1 else checks[0].alias(PROBLEM),
    )
