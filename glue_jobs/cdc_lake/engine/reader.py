"""Reading DMS files into typed change rows, each tagged with its place in DMS order.

The result has the table's columns plus (named in ``core.shapes``):
  ``_op``          I / U / D (full-load rows are I),
  ``_phase``       0 for full-load rows, 1 for CDC rows,
  ``_file``        the file's key, ``_file_seq`` its position in the batch (DMS file order),
  ``_row``         a position inside the file that increases with row order (with ``split``, only a unique id),
  ``_change_seq``  the AR_H_CHANGE_SEQ value when configured (orders CDC rows), else NULL,
  ``_dms_ts``      the DMS timestamp column as written, when configured,
  ``_before_<i>``  the before-image of the i-th key column when DMS writes them (NULL unless the key changed),
  ``_problem``     NULL for a good row, else a struct naming the column, the fault and the raw value,
  ``_raw``         with ``keep_raw`` only: each field as read, as text (what a quarantined row keeps).
Rows are never dropped here: bad rows are flagged so the caller can refuse the whole batch.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple, Protocol, assert_never

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_lake.core.config import DmsSettings, TableSpec
from cdc_lake.core.dms_files import DmsFile
from cdc_lake.core.exceptions import OtherFormatError
from cdc_lake.core.formats import DmsFormat
from cdc_lake.core.shapes import (
    CHANGE_SEQ,
    DMS_TS,
    FILE,
    FILE_SEQ,
    OP,
    PHASE,
    PROBLEM,
    RAW,
    ROW,
    FileLayout,
    before_roles,
    csv_layouts,
    group_by_layout,
    named_layout,
)
from cdc_lake.core.sql import quote, sql_string
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.spark_types import config_type, parse_type, select_sql, staged_parse
from cdc_lake.engine.tables import quarantines

CORRUPT = "_corrupt_record"
PARSED = "_cdc_lake_parsed_"  # columns holding each cast once, before the checks read them
# Spark turns an unquoted empty CSV field into NULL whatever nullValue is; a sentinel that cannot occur
# in DMS output keeps the NULL marker ("NULL") apart from empty strings, which we then decode ourselves.
NO_NULL_SENTINEL = "\u0000cdc-lake-null\u0000"
OPS = ("I", "U", "D")
INSERT = "'I'"  # full-load files without an Op field hold inserts
# CSV is read as ISO-8859-1, each byte a character (DMS's delimiters, quotes and line ends are ASCII, never part of
# a UTF-8 sequence), and each value decoded from UTF-8 here: a decoder left to itself replaces invalid bytes by
# U+FFFD without a word, and a source value may hold U+FFFD itself. Only a value that does not come back to its
# own bytes was invalid.
BYTES_AS_TEXT = "ISO-8859-1"
UTF8_FAULT = "not valid UTF-8 (shown with U+FFFD where the bytes are)"
UTF8_PROBLEM = "_utf8_problem"
# Types whose cast reads ASCII digits and signs alone (bytewise): a 10M-row load spends seconds decoding values.
ASCII_PARSES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.DateType, T.TimestampType, T.TimestampNTZType)


class FormatReader(Protocol):
    """How the engine reads the files of one DMS format."""

    def layouts(self, context: ReplayContext, files: Sequence[DmsFile], table: TableSpec) -> dict[str, FileLayout]:
        """Each file's fields, by key."""
        ...

    def read(self, spark: SparkSession, group: _Group) -> DataFrame:
        """The group's rows as ``typed_changes`` gives them; ``_row`` locates a row in its file."""
        ...

    def whole_read(self, dms_file: DmsFile) -> tuple[str, str] | None:
        """What the file is, and the Spark source that fails on a cut-off one when it reads it to the end; None for
        a file a batch's own read already names the fault in (row and column)."""
        ...

    def as_written(self, fields: Column, table: TableSpec, dms: DmsSettings) -> Column:
        """A row's fields as read (``_raw``) as the text a person can find it by in its file."""
        ...


def format_reader(file_format: DmsFormat) -> FormatReader:
    """The reader of ``file_format``: the one place the engine chooses by format."""
    match file_format.name:
        case "csv":
            return _CsvReader()
        case "parquet":
            return _ParquetReader()
        case unhandled:
            assert_never(unhandled)


class _CsvReader:
    def layouts(self, context: ReplayContext, files: Sequence[DmsFile], table: TableSpec) -> dict[str, FileLayout]:
        # From each file's first record: its header, or its field count.
        return csv_layouts(context.store.read_head, files, table, context.config.dms)

    def read(self, spark: SparkSession, group: _Group) -> DataFrame:
        return _read_csv(spark, group)

    def whole_read(self, dms_file: DmsFile) -> tuple[str, str] | None:
        return ("gzip-compressed CSV", "text") if dms_file.gzip else None

    def as_written(self, fields: Column, table: TableSpec, dms: DmsSettings) -> Column:
        # The Op and the columns as DMS wrote them, quoted again.
        present = [fields[n].alias(n) for n in ["Op", *table.column_names]]
        return F.to_csv(F.struct(*present), {"sep": dms.csv_delimiter, "nullValue": dms.csv_null_value})


class _ParquetReader:
    def layouts(self, context: ReplayContext, files: Sequence[DmsFile], table: TableSpec) -> dict[str, FileLayout]:
        # From each file's footer.
        layouts = {}
        for dms_file in files:
            schema = context.spark.read.parquet(context.store.uri(dms_file.key)).schema
            names = [f.name for f in schema.fields]
            types = [config_type(f.dataType) for f in schema.fields]
            layouts[dms_file.key] = named_layout(names, types, dms_file, table, context.config.dms)
        return layouts

    def read(self, spark: SparkSession, group: _Group) -> DataFrame:
        return _read_parquet(spark, group)

    def whole_read(self, dms_file: DmsFile) -> tuple[str, str] | None:
        return "Parquet", "parquet"

    def as_written(self, fields: Column, table: TableSpec, dms: DmsSettings) -> Column:
        return F.to_json(fields)


class _Group(NamedTuple):
    """Files of one kind (LOAD or CDC) and one layout that a run reads, and how to read them."""

    files: Sequence[DmsFile]
    table: TableSpec
    dms: DmsSettings
    uri_of: Callable[[str], str]
    full_load: bool
    layout: FileLayout
    split: bool


def read_changes(
    context: ReplayContext,
    files: Sequence[DmsFile],
    table: TableSpec,
    layouts: Mapping[str, FileLayout],
    *,
    split: bool = False,
) -> DataFrame:
    """Typed change rows of ``files`` (already in DMS order), with ``_problem`` flags for bad rows.

    ``layouts`` (``file_layouts``) gives each file's fields; ``table`` holds every column any of them has.
    ``split`` reads CSV files in parallel parts, as lines: only for rows whose order does not matter, from files
    with no value spanning lines (``has_multiline_values``); ``_row`` then orders nothing, and ``_file`` and
    ``_file_seq`` are NULL. A table that quarantines bad rows gets ``_raw``.
    """
    if not files:
        raise ValueError("read_changes needs at least one file")
    dms, uri_of = context.config.dms, context.store.uri
    read = format_reader(dms.file_format).read
    parts = [
        read(
            context.spark,
            _Group(group, table, dms, uri_of, group[0].is_full_load, layouts[group[0].key], split),
        )
        for group in group_by_layout(files, layouts)
    ]
    frame = functools.reduce(DataFrame.unionByName, parts)
    if len(files) > LOOKUP_BY_JOIN:
        return _placed_by_join(context.spark, _fewer_tasks(context.spark, frame, len(files)), files)
    # Each file's place in the batch and its key, looked up by name in two arrays: the batch's file names and keys
    # are text of DMS's making, each array one JSON string literal (sql_string escapes it).
    names, keys = (sql_string(json.dumps(values)) for values in ([f.name for f in files], [f.key for f in files]))
    place = f"CAST(array_position(from_json({names}, 'array<string>'), `_metadata`.file_name) AS INT)"
    return select_sql(
        frame,
        [
            "*",
            f"{place} - 1 AS {FILE_SEQ}",
            f"element_at(from_json({keys}, 'array<string>'), {place}) AS {FILE}",
        ],
    )


# The arrays above are parsed for every row: a cost of files × rows, nothing for a small batch, but a catch-up of
# 100,000 one-row files would parse 10^10 names. Beyond this many files, the places come from a broadcast table.
LOOKUP_BY_JOIN = 1000
_PLACED_NAME = "_placed_name"


# Spark packs small files about 32 to a read task: a catch-up of 100,000 files made 3,125 tasks, and every stage
# after the read as many again (minutes of scheduling, no work). Many files are read this many to a task instead:
# a task keeps each file it read open until it ends, so not all of them.
FILES_PER_TASK = 500


def _fewer_tasks(spark: SparkSession, frame: DataFrame, files: int) -> DataFrame:
    tasks = max(spark.sparkContext.defaultParallelism * 4, -(-files // FILES_PER_TASK))
    return frame.coalesce(tasks) if frame.rdd.getNumPartitions() > tasks else frame


def _placed_by_join(spark: SparkSession, frame: DataFrame, files: Sequence[DmsFile]) -> DataFrame:
    """``frame`` with each row's file place and key joined by file name (the first file of a name, as above)."""
    first: dict[str, tuple[str, int, str]] = {}
    for place, dms_file in enumerate(files):
        first.setdefault(dms_file.name, (dms_file.name, place, dms_file.key))
    schema = T.StructType(
        [
            T.StructField(_PLACED_NAME, T.StringType()),
            T.StructField(FILE_SEQ, T.IntegerType()),
            T.StructField(FILE, T.StringType()),
        ]
    )
    places = F.broadcast(spark.createDataFrame(list(first.values()), schema))
    # A broadcast join keeps each part's rows where and as they are, so ``_row`` still orders them.
    joined = frame.join(places, frame["_metadata.file_name"] == places[_PLACED_NAME], "left")
    return joined.drop(_PLACED_NAME)


def file_layouts(context: ReplayContext, files: Sequence[DmsFile], table: TableSpec) -> dict[str, FileLayout]:
    """Each file's fields (``FormatReader.layouts``), once every file is of the configured format."""
    dms = context.config.dms
    other = next((f for f in files if f.format != dms.format), None)
    if other is not None:
        raise OtherFormatError(table.name, other.key, other.file_format.label, dms.format)
    return format_reader(dms.file_format).layouts(context, files, table)


def unreadable(context: ReplayContext, files: Sequence[DmsFile]) -> tuple[DmsFile, str, BaseException] | None:
    """The first of ``files`` that cannot be read whole, with what it should be and the failure, or None. Only a
    compressed or Parquet file can be: each is read alone to the end, after a batch's read failed."""
    for dms_file in files:
        whole = format_reader(dms_file.file_format).whole_read(dms_file)
        if whole is None:
            continue
        what, source = whole
        try:
            frame = context.spark.read.format(source).load(context.store.uri(dms_file.key))
            frame.write.format("noop").mode("overwrite").save()
        except Exception as error:  # whatever the codec or the footer reader raises
            return dms_file, what, error
    return None


def has_multiline_values(spark: SparkSession, uris: Sequence[str]) -> bool:
    """Whether a value in these CSV files spans lines, decided exactly from the text, in parallel.

    DMS quotes a value holding the delimiter, a quote or a line break, and doubles the quotes inside it, so
    the quotes of a record pair up within its line unless a line break falls inside a quoted value: some
    line then holds an odd number of quote characters.
    """
    # The quotes a line holds are the bytes replace() takes out: a byte search on the line as read, where a
    # regular expression turns each line into a Java string first (2.5 s against 0.4 s over a 10M-row LOAD file
    # whose lines are a quarter quoted; reading the lines takes 1.2 s).
    lines = spark.read.option("lineSep", "\n").text(list(uris))
    quotes = "octet_length(value) - octet_length(replace(value, '\"', ''))"
    odd = lines.where(f"contains(value, '\"') AND ({quotes}) % 2 = 1")
    return bool(odd.limit(1).count())


def _field(layout: FileLayout, role: str, value: Callable[[str], str] = lambda c: c) -> str:
    """The file's field playing ``role`` (through ``value``), or NULL text when the file lacks it."""
    return value(quote(role)) if layout.field(role) is not None else "CAST(NULL AS STRING)"


def _read_csv(spark: SparkSession, group: _Group) -> DataFrame:
    files, table, dms, uri_of, full_load, layout, split = group
    schema = T.StructType([T.StructField(n, T.StringType()) for n in [*layout.names, CORRUPT]])
    raw = (
        spark.read.schema(schema)
        .option("header", dms.add_column_name)
        .option("sep", dms.csv_delimiter)
        .option("quote", '"')
        .option("escape", '"')
        # Values may hold line breaks; a multi-line CSV file is read whole by one task, in order.
        .option("multiLine", not split)
        # DMS ends rows with "\n" (the stack sets CsvRowDelimiter); left to guess, Spark takes a CRLF inside
        # the file's first quoted value for the row separator and merges the rows after it.
        .option("lineSep", "\n")
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .option("nullValue", NO_NULL_SENTINEL)
        .option("encoding", BYTES_AS_TEXT)
        .csv([uri_of(f.key) for f in files])
    )
    # Spark reads a file's metadata for every row once ``_metadata`` is selected, used or not (2 s of a 10M-row
    # read). Split parts locate no row (``_row`` orders nothing), so they carry no file name either.
    if split:
        raw = select_sql(raw, ["*", "named_struct('file_name', CAST(NULL AS STRING)) AS _metadata"])
    else:
        raw = raw.select("*", "_metadata")

    # A column whose parse takes ASCII bytes alone is cast from the bytes as read: any other byte fails the cast
    # whatever its decoding, so only what a row shows (a fault, ``_raw``) decodes it (``as_text``).
    ascii_only = dms.csv_null_value.isascii()  # else the marker is compared with decoded text
    undecoded = {c.name for c in table.columns if ascii_only and isinstance(parse_type(c.type), ASCII_PARSES)}
    undecoded |= {b for b, k in zip(before_roles(dms, table), table.primary_key, strict=False) if k in undecoded}

    def decode(name: str, token: str) -> str:
        return _decode_csv_value(token if name in undecoded else _utf8(token), dms.csv_null_value)

    def as_text(name: str, sql: str) -> str:
        return _utf8(sql) if name in undecoded else sql

    text_columns = [c for c in table.columns if isinstance(parse_type(c.type), T.StringType)]
    invalid = [
        _flag(_not_utf8(quote(c.name)), c.source, UTF8_FAULT, _utf8(quote(c.name)))
        for c in text_columns
        if layout.field(c.name) is not None
    ]
    frame = select_sql(
        raw,
        [
            f"{_field(layout, OP) if layout.field(OP) is not None else INSERT} AS {OP}",
            f"{_field(layout, DMS_TS)} AS {DMS_TS}",
            f"{_field(layout, CHANGE_SEQ)} AS {CHANGE_SEQ}",
            *[f"{_field(layout, c, functools.partial(decode, c))} AS {quote(c)}" for c in table.column_names],
            *[f"{_field(layout, b, functools.partial(decode, b))} AS {quote(b)}" for b in before_roles(dms, table)],
            f"{_utf8(CORRUPT)} AS {CORRUPT}",
            f"{_coalesce(invalid) if invalid else 'NULL'} AS {UTF8_PROBLEM}",
            f"monotonically_increasing_id() AS {ROW}",
            "_metadata",
        ],
    )
    expected = f"malformed CSV row: expected {len(layout.names)} fields"
    malformed = _flag(f"{CORRUPT} IS NOT NULL", "(row)", expected, CORRUPT)
    checks = [malformed, UTF8_PROBLEM] if invalid else [malformed]
    return typed_changes(frame, table, dms, full_load, AsRead(checks, as_text))


def _coalesce(expressions: Sequence[str]) -> str:
    return expressions[0] if len(expressions) == 1 else f"coalesce({', '.join(expressions)})"


def _utf8(text: str) -> str:
    """A value read as bytes (BYTES_AS_TEXT) as the UTF-8 text it holds; invalid bytes become U+FFFD."""
    # A value of ASCII bytes alone (as many UTF-8 bytes as characters) is its own decoding: most values skip
    # the round trip, which cost a full load a sixth of its time on Spark 3.5 and a third on Spark 4.1.
    decoded = f"decode(encode({text}, '{BYTES_AS_TEXT}'), 'UTF-8')"
    return f"IF(octet_length({text}) = char_length({text}), {text}, {decoded})"


def _not_utf8(text: str) -> str:
    # The round trip is paid only by values holding U+FFFD once decoded.
    decoded = _utf8(text)
    return f"(contains({decoded}, '\ufffd') AND encode({decoded}, 'UTF-8') <> encode({text}, '{BYTES_AS_TEXT}'))"


def _decode_csv_value(token: str, null_marker: str) -> str:
    if null_marker == "":
        return token  # an unquoted empty field is the NULL marker; a quoted "" stays an empty string
    return f"CASE WHEN {token} = {sql_string(null_marker)} THEN NULL ELSE coalesce({token}, '') END"


def _read_parquet(spark: SparkSession, group: _Group) -> DataFrame:
    files, table, dms, uri_of, full_load, layout, _split = group
    raw = spark.read.option("mergeSchema", False).parquet(*[uri_of(f.key) for f in files]).select("*", "_metadata")

    def column(role: str) -> str:
        source = layout.field(role)
        return quote(source) if source is not None else "NULL"

    types = {c.name: c.type for c in table.columns}
    key_types = [types[k] for k in table.primary_key]
    frame = select_sql(
        raw,
        [
            f"{f'CAST({column(OP)} AS STRING)' if layout.field(OP) is not None else INSERT} AS {OP}",
            f"CAST({column(DMS_TS)} AS STRING) AS {DMS_TS}",
            f"CAST({column(CHANGE_SEQ)} AS STRING) AS {CHANGE_SEQ}",
            *[f"{_parquet_value(column(c.name), c.type)} AS {quote(c.name)}" for c in table.columns],
            *[
                f"{_parquet_value(column(b), key_type)} AS {quote(b)}"
                for b, key_type in zip(before_roles(dms, table), key_types, strict=False)
            ],
            f"CAST(NULL AS STRING) AS {CORRUPT}",
            f"_metadata.row_index AS {ROW}",
            "_metadata",
        ],
    )
    return typed_changes(frame, table, dms, full_load, AsRead([]))


def _parquet_value(value: str, column_type: str) -> str:
    # Parquet values are typed already; strings keep their text so a bad cast can be reported.
    return value if column_type != "string" else f"CAST({value} AS STRING)"


def _flag(condition: str, column: str, fault: str, value: str) -> str:
    """SQL: when ``condition`` holds, the struct naming the bad row's column and fault (configuration text) and the
    start of its ``value``; else NULL."""
    shown = f"substring(CAST({value} AS STRING), 1, 80)"
    problem = f"named_struct('column', {sql_string(column)}, 'fault', {sql_string(fault)}, 'value', {shown})"
    return f"CASE WHEN {condition} THEN {problem} END"


def raw_fields(table: TableSpec, dms: DmsSettings) -> list[tuple[str, str]]:
    """The fields ``_raw`` keeps, as (the reader's column, the name DMS gives it): the Op, the change sequence and
    the timestamp when configured, each column, each before-image."""
    fields = [(OP, "Op")]
    fields += [(CHANGE_SEQ, dms.change_sequence_column)] if dms.change_sequence_column else []
    fields += [(DMS_TS, dms.timestamp_column)] if dms.timestamp_column else []
    fields += [(c.name, c.source) for c in table.columns]
    return fields + list(zip(before_roles(dms, table), dms.before_image_columns(table), strict=True))


class AsRead(NamedTuple):
    """What a format's read hands ``typed_changes``: the faults it found itself (SQL, checked first), and a field's
    SQL as the text a row shows (a fault's value, ``_raw``), given the field's column."""

    faults: list[str]
    as_text: Callable[[str, str], str] = lambda _column, sql: sql


def typed_changes(frame: DataFrame, table: TableSpec, dms: DmsSettings, full_load: bool, read: AsRead) -> DataFrame:
    """Cast each column of ``frame`` (the fields as read, ``raw_fields``, with ``_row`` and ``_metadata``) to its
    configured type and flag the first fault of every row (``read.faults`` first). A table that quarantines bad
    rows keeps the fields as read in ``_raw``."""
    extra, as_text = read
    checks: list[str] = list(extra)
    valid_ops = ("I",) if full_load else OPS
    listed_ops = ", ".join(sql_string(op) for op in valid_ops)
    expected_ops = f"unknown Op; expected one of {'/'.join(valid_ops)}"
    checks.append(_flag(f"{OP} IS NULL OR {OP} NOT IN ({listed_ops})", "Op", expected_ops, OP))
    typed_columns = []
    types = {c.name: c.type for c in table.columns}
    befores = list(zip(before_roles(dms, table), dms.before_image_columns(table), table.primary_key, strict=False))
    if full_load:
        # Full-load rows change no key; a value here means the file lacks the before-image fields and a
        # table column was read in their place.
        fault = "before-image value on a full-load row"
        checks += [
            _flag(f"{quote(role)} IS NOT NULL", label, fault, as_text(role, quote(role)))
            for role, label, _key in befores
        ]
    casts: list[str] = []
    for name, label, column_type in [
        *[(c.name, c.source, c.type) for c in table.columns],
        *[(role, label, types[key]) for role, label, key in befores],
    ]:
        raw = quote(name)
        if isinstance(parse_type(column_type), T.StringType) and column_type != "timestamp_offset":
            typed_columns.append(raw)
        else:
            # Cast once, in a projection of its own: the value and its check both read the cast column.
            column_casts, typed, fault = staged_parse(name, column_type, f"{PARSED}{len(casts)}")
            casts += column_casts
            typed_columns.append(f"{typed} AS {raw}")
            checks.append(_flag(fault, label, f"cannot parse as {column_type}", as_text(name, raw)))
    if casts:
        frame = select_sql(frame, ["*", *casts])
    for spec in table.columns:
        raw = quote(spec.name)
        if spec.name in table.primary_key:
            checks.append(_flag(f"{raw} IS NULL", spec.source, "NULL primary key", raw))
        elif not spec.nullable and not spec.dropped:
            # A delete may carry only the key (PostgreSQL's default REPLICA IDENTITY).
            checks.append(_flag(f"{raw} IS NULL AND {OP} <> 'D'", spec.source, "NULL in a NOT NULL column", raw))
    if not full_load and dms.change_sequence_column is not None:
        not_number = f"{CHANGE_SEQ} IS NULL OR NOT {CHANGE_SEQ} RLIKE '^[0-9]+$'"
        checks.append(_flag(not_number, CHANGE_SEQ, "change sequence is not a number", CHANGE_SEQ))
    raw_map = ", ".join(
        f"{sql_string(name)}, CAST({as_text(role, quote(role))} AS STRING)" for role, name in raw_fields(table, dms)
    )
    return select_sql(
        frame,
        [
            f"{0 if full_load else 1} AS {PHASE}",
            OP,
            DMS_TS,
            CHANGE_SEQ,
            *typed_columns,
            ROW,
            "_metadata",
            f"{_coalesce(checks)} AS {PROBLEM}",
            *([f"map({raw_map}) AS {RAW}"] if quarantines(table) else []),
        ],
    )
