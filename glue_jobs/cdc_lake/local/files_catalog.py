"""The table configuration proposed from landed DMS files (``cdc-lake config-from-files``), when the source
cannot be reached: Parquet files name and type their fields (a STRING field whose values are timestamps with a
zone is proposed as ``timestamp_offset``); CSV files with a header (``AddColumnName``) name them, and each
column's type is proposed from its values in the file's first rows (``propose_type``), marked to be confirmed.

A table's newest data file in DMS order is read (its footer, or its header and first rows, up to ``SAMPLE_BYTES``):
it has the table's current columns. Keys cannot be seen in files, so they are given by name (``--key
shop.orders=order_id``); a table without one is listed in a comment, as are folders whose files are not DMS's.
"""

from __future__ import annotations

import csv
import datetime as dt
import functools
import io
import re
import zlib
import zoneinfo
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import assert_never

from pyspark.sql import SparkSession

from cdc_lake.core.config import DmsSettings
from cdc_lake.core.dms_files import order_key_for
from cdc_lake.core.exceptions import CdcLakeError
from cdc_lake.core.storage import ObjectStore
from cdc_lake.engine.spark_types import config_type
from cdc_lake.ops.source_catalog import CatalogColumn, CatalogTable

SAMPLE_BYTES = 1 << 20  # of a CSV file (and of its text, once gunzipped): its header and its first whole rows
FILES_MAPPING = (
    "Types are the files' own (Parquet), or proposed from the values of each table's newest file (CSV with a "
    "header): confirm each."
)
MAX_PRECISION = 38  # of a decimal (Spark, Iceberg, Athena)
_INT64 = range(-(1 << 63), 1 << 63)
# DMS writes numbers without leading zeros: "007" is text (a code), not 7.
_INTEGER = re.compile(r"[+-]?(?:0|[1-9][0-9]*)")
_DECIMAL = re.compile(r"[+-]?(?P<whole>0|[1-9][0-9]*)\.(?P<fraction>[0-9]+)")
# DMS's REAL4 is "%.8e" with a sign (+3.23800011e+01), its REAL8 "%.16e" (+2.1804858784530072e+04).
_FLOATING = re.compile(r"[+-]?[0-9]\.(?P<fraction>[0-9]+)[eE][+-]?[0-9]{1,3}")
_REAL4_FRACTION = 8
_TIMESTAMP = r"(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2}) (?P<time>[0-9]{2}:[0-9]{2}:[0-9]{2})(?:\.(?P<fraction>[0-9]{1,9}))?"
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_LOCAL_TIMESTAMP = re.compile(_TIMESTAMP)
# Oracle's TIMESTAMP WITH TIME ZONE and SQL Server's DATETIMEOFFSET: an offset, Z, or a zone's name (UTC,
# Europe/Paris) after the timestamp; a name must be one the time zone database knows, as the replay's check of
# the value (Spark's, Java's database) refuses another, say CEST.
_ZONED_TIMESTAMP = re.compile(_TIMESTAMP + r"(?: ?Z| [+-][0-9]{2}(?::?[0-9]{2})?| (?P<zone>[A-Za-z][A-Za-z0-9_/+-]*))")
_MICROSECOND_DIGITS = 6  # the lake's timestamps: Spark and Iceberg keep microseconds


@dataclass(frozen=True)
class FileField:
    """A field of a landed file: its name, the type its file gives or its values suggest, and a note for the
    configuration's comment when the type was proposed from values (None: the file's own)."""

    name: str
    type: str
    note: str | None = None


@dataclass(frozen=True)
class FileColumns:
    """What a landed file says of its table: its data file, and its fields."""

    key: str
    fields: list[FileField]

    @property
    def file_name(self) -> str:
        return self.key.rsplit("/", 1)[-1]


def read_landing(
    spark: SparkSession, store: ObjectStore, dms: DmsSettings, keys: Mapping[str, list[str]]
) -> list[CatalogTable]:
    """A table entry for each ``<schema>/<table>/`` folder under the DMS folder holding a DMS data file, typed from
    its newest one; ``keys`` gives primary keys by table name."""
    root = f"{dms.bucket_folder}/" if dms.bucket_folder else ""
    tables = []
    for schema_prefix in store.folders(root):
        for table_prefix in store.folders(schema_prefix):
            name = ".".join(table_prefix[len(root) :].strip("/").split("/"))
            newest = _newest_data_file(store, table_prefix)
            if newest is None:
                continue
            found = _file_columns(spark, store, dms, newest)
            tables.append(_table(name, found, dms, keys.get(name)))
    unknown = sorted(set(keys) - {t.name for t in tables})
    if unknown:
        raise CdcLakeError(f"--key names table(s) with no DMS files under {root or 'the landing root'}: {unknown}")
    return tables


def _newest_data_file(store: ObjectStore, prefix: str) -> str | None:
    data = []
    for item in store.list(prefix):
        order = order_key_for(item.key.rsplit("/", 1)[-1])
        if order is not None and item.size > 0:
            data.append((order, item.key))
    # The newest CDC file (CDC files sort after LOAD files in order_key's phase), else the newest LOAD file.
    return max(data)[1] if data else None


def _file_columns(spark: SparkSession, store: ObjectStore, dms: DmsSettings, key: str) -> FileColumns:
    match dms.file_format.name:
        case "parquet":
            return _parquet_columns(spark, store, key)
        case "csv":
            return _csv_columns(store, dms, key)
        case unhandled:
            assert_never(unhandled)


PARQUET_SAMPLE_ROWS = 1000


def _parquet_columns(spark: SparkSession, store: ObjectStore, key: str) -> FileColumns:
    """A Parquet file's fields as typed; a STRING field whose values are all timestamps with a zone (Oracle's
    TIMESTAMP WITH TIME ZONE, SQL Server's DATETIMEOFFSET: DMS writes both as text) proposed as timestamp_offset."""
    frame = spark.read.parquet(store.uri(key))
    schema = frame.schema
    texts = [f.name for f in schema.fields if config_type(f.dataType) == "string"]
    sample = frame.select(*texts).limit(PARQUET_SAMPLE_ROWS).collect() if texts else []
    file_name = key.rsplit("/", 1)[-1]
    fields = []
    for field in schema.fields:
        kind, note = config_type(field.dataType), None
        if field.name in texts:
            values = [row[field.name] for row in sample if row[field.name] is not None]
            if values and propose_type(values)[0] == "timestamp_offset":
                kind, note = proposal_with_note(values, file_name, len(sample))
        fields.append(FileField(field.name, kind, note))
    return FileColumns(key, fields)


def _csv_columns(store: ObjectStore, dms: DmsSettings, key: str) -> FileColumns:
    if not dms.add_column_name:
        raise CdcLakeError(
            "CSV files without a header name no columns: propose from Parquet files, or from CSV files written with "
            "AddColumnName (dms.add_column_name: true), or write the configuration from the source "
            "(cdc-lake config-from-source)"
        )
    header, rows = csv_sample(store.read_head(key, SAMPLE_BYTES), key.endswith(".gz"), dms)
    file_name = key.rsplit("/", 1)[-1]
    fields = []
    for index, name in enumerate(header):
        values = [row[index] for row in rows if not _is_null(row[index], dms)]
        fields.append(FileField(name, *proposal_with_note(values, file_name, len(rows))))
    return FileColumns(key, fields)


def csv_sample(head: bytes, gzipped: bool, dms: DmsSettings) -> tuple[list[str], list[list[str]]]:
    """A CSV file's header and its whole rows of the header's width, from the file's first bytes ``head``
    (``SAMPLE_BYTES`` of it, or all of it when it is shorter; gzipped as DMS's ``CompressionType=GZIP`` writes)."""
    truncated = len(head) >= SAMPLE_BYTES
    if gzipped:
        inflate = zlib.decompressobj(zlib.MAX_WBITS | 16)
        head = inflate.decompress(head, SAMPLE_BYTES)
        truncated = not inflate.eof or bool(inflate.unused_data)  # cut short, or more gzip members follow
    records: list[list[str]] = []
    reader = csv.reader(io.StringIO(head.decode("utf-8", "replace"), newline=""), delimiter=dms.csv_delimiter)
    try:
        records.extend(reader)
    except csv.Error:  # a NUL byte, a field past csv's size limit: the rows before it are whole, it is not read
        truncated = False
    if truncated and len(records) > 1:
        records.pop()  # the last row may be cut anywhere, even inside a quoted field
    header = records[0] if records else []
    return header, [r for r in records[1:] if len(r) == len(header)]


def _is_null(field: str, dms: DmsSettings) -> bool:
    # A quoted "" is an empty string, not NULL, when csv_null_value is empty; the csv module reads both as "",
    # so an empty field counts as NULL here: it tells nothing of the column's type either way.
    return field in ("", dms.csv_null_value)


def proposal_with_note(values: Sequence[str], file_name: str, rows: int) -> tuple[str, str]:
    """A CSV column's proposed type from its non-NULL ``values`` in ``rows`` rows of ``file_name``, and the note
    that says so in the configuration."""
    if not values:
        return "string", f"NULL in all {rows} row(s) read of {file_name}: set this column's type"
    proposed, remark = propose_type(values)
    note = f"{proposed} proposed from {len(values)} value(s) of {file_name}: confirm it"
    return proposed, f"{note}; {remark}" if remark else note


def propose_type(values: Sequence[str]) -> tuple[str, str | None]:
    """The configured type of a CSV column whose non-NULL values, as DMS writes them, are ``values`` (at least
    one), and a remark on it (None: nothing to add). ``string`` when no one type reads them all exactly."""
    if all(_INTEGER.fullmatch(v) for v in values):
        return _integer_type(values)
    decimals = [_DECIMAL.fullmatch(v) for v in values]
    if all(d or _INTEGER.fullmatch(v) for d, v in zip(decimals, values, strict=True)):
        return _decimal_type(values, [d for d in decimals if d])
    floating = [_FLOATING.fullmatch(v) for v in values]
    if all(floating):
        real4 = all(len(f["fraction"]) == _REAL4_FRACTION for f in floating if f)
        return ("float", None) if real4 else ("double", None)
    if all(v in ("true", "false") for v in values):
        return "boolean", None
    if all(_DATE.fullmatch(v) and _valid_date(v) for v in values):
        return "date", None
    local = [_LOCAL_TIMESTAMP.fullmatch(v) for v in values]
    if all(m and _valid_timestamp(m) for m in local):
        return "timestamp", _lost_digits(local)
    if all((m := _ZONED_TIMESTAMP.fullmatch(v)) and _valid_timestamp(m) and _known_zone(m["zone"]) for v in values):
        return "timestamp_offset", "kept as DMS wrote it, zone and all"
    return "string", None


def _integer_type(values: Sequence[str]) -> tuple[str, str | None]:
    numbers = [int(v) for v in values]
    if all(n in _INT64 for n in numbers):
        if set(numbers) <= {0, 1}:
            return (
                "bigint",
                "only 1 and 0 seen, as DMS writes a MySQL BOOLEAN or a SQL Server BIT: boolean if it is one",
            )
        return "bigint", None
    if max(len(str(abs(n))) for n in numbers) <= MAX_PRECISION:
        return f"decimal({MAX_PRECISION},0)", "integers beyond bigint"
    return "string", f"integers of more than {MAX_PRECISION} digits: no decimal holds them"


def _decimal_type(values: Sequence[str], decimals: Sequence[re.Match[str]]) -> tuple[str, str | None]:
    # DMS writes a NUMERIC(p,s) value with exactly s fraction digits: the most seen is the scale. The precision
    # cannot be seen (a sample's largest value is rarely the column's), and one too small would refuse a later
    # batch, so the proposal takes the most a decimal holds, 38: it reads any value of the source's column as
    # long as its integer digits fit in 38 - s, at the cost of 16 bytes per value where 8 might have done.
    scales = {len(d["fraction"]) for d in decimals} | ({0} if len(decimals) < len(values) else set())
    scale = max(scales)
    whole = max(len(v.lstrip("+-").split(".")[0].lstrip("0")) for v in values)
    if whole + scale > MAX_PRECISION:
        return "string", f"{whole} integer and {scale} fraction digits: more than a decimal's {MAX_PRECISION}"
    if len(scales) > 1:
        varied = f"{min(scales)} to {scale} fraction digits, as a NUMBER without a scale is written"
        return f"decimal({MAX_PRECISION},{scale})", f"{varied}: a later value with more is refused"
    return f"decimal({MAX_PRECISION},{scale})", None


def _valid_date(text: str) -> bool:
    try:
        dt.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _valid_timestamp(match: re.Match[str]) -> bool:
    try:
        dt.time.fromisoformat(match["time"])
    except ValueError:
        return False
    return _valid_date(match["date"])


def _known_zone(name: str | None) -> bool:
    return name is None or name in _zone_names()


@functools.cache
def _zone_names() -> set[str]:
    return zoneinfo.available_timezones()


def _lost_digits(matches: Sequence[re.Match[str] | None]) -> str | None:
    lost = sum(1 for m in matches if m and (m["fraction"] or "")[_MICROSECOND_DIGITS:].strip("0"))
    if not lost:
        return None
    return f"{lost} value(s) with digits beyond microseconds, which the lake's timestamp drops: string keeps them"


def _table(name: str, found: FileColumns, dms: DmsSettings, key: list[str] | None) -> CatalogTable:
    dms_fields = {"op", *(c.lower() for c in (dms.timestamp_column, dms.change_sequence_column) if c)}
    if dms.before_image is not None:
        prefix = dms.before_image.column_prefix.lower()
        dms_fields |= {f.name.lower() for f in found.fields if f.name.lower().startswith(prefix)}
    columns = [
        CatalogColumn(
            field.name,
            ("Parquet STRING" if dms.format == "parquet" else "CSV text")
            if field.note
            else f"{found.file_name}: {field.type}",
            field.type,
            field.type,
            True,
            field.note,
        )
        for field in found.fields
        if field.name.lower() not in dms_fields
    ]
    names = [c.name for c in columns]
    if key is not None:
        missing = [k for k in key if k not in names]
        if missing:
            raise CdcLakeError(f"--key {name}={','.join(key)}: {missing} not among its fields {names}")
    return CatalogTable(
        name,
        list(key or []),
        columns,
        no_key=f"files name no key: give it, e.g. --key {name}={names[0] if names else '<column>'}",
    )
