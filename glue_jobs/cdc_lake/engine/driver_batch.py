"""A small batch of CSV change files read, checked and reduced in the driver: no Spark job, one GET a file.

Each file is read as the run listed it (``ObjectStore.read_listed``: on S3 a GET on the listed ETag), so what the
batch applies is what its record names, without the listing again before the commit that Spark's reads need
(``steps.confirm_listed``).

The Spark path (``reader.read_changes``, then ``changes.last_change_per_key_in_one_task``) is the rule: Spark's CSV
parser splits the records, Spark's casts type the values, and its checks name every bad row by file, row and
column. This path applies a batch only where it can show that path would take the same values, and hands every
other batch to it whole:

- the files are split by pyarrow and by Python's strict csv reader, and both must find the same records, each of
  the layout's field count, in a file with no CR, NUL or byte-order mark (where Spark's ``lineSep`` and the
  readers could differ);
- each value is in a canonical form whose parse here equals Spark's cast (``CANONICAL``; ``test_driver_batch``
  checks it against Spark for every form the patterns admit); a value in any other form, valid or not, is Spark's
  to judge;
- every Op, key, NOT NULL column, before-image and change sequence passes the same checks.

A bad row therefore never passes here: it sends the batch to the Spark path, whose refusal names it. The refusal
texts are the Spark path's alone, one text for both paths (``test_driver_batch`` runs the damaged-input corpus
through both and compares every message). Reduction follows ``last_change_per_key_in_one_task``: key updates split
into a delete of the old key (``split_key_updates``), each key's last change in DMS order (``dms_order_sql``), the
batch's totals; ``test_write_paths_agree`` holds it to the MERGE's table.
"""

from __future__ import annotations

import builtins
import csv
import dataclasses
import datetime as dt
import io
import math
import re
import struct
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Context, Decimal
from fractions import Fraction
from typing import Any

import pyarrow as pa
import pyarrow.csv as pa_csv
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from cdc_lake.core.config import DECIMAL_TYPE, DmsSettings, TableSpec
from cdc_lake.core.dms_files import DmsFile
from cdc_lake.core.shapes import CHANGE_SEQ, DMS_TS, OP, FileLayout, before_roles
from cdc_lake.core.storage import ObjectStore, ReadAsListed, StoredObject
from cdc_lake.engine.changes import ChangeCounts
from cdc_lake.engine.commit import ChangedKeys, ranged_keys
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.iceberg_row_delta import RowDeltaTarget, wire_type
from cdc_lake.engine.spark_types import lake_type

# Beyond this many bytes a batch goes to Spark: Python's loop grows with the values (a file this size, 2,350 rows of
# 7 columns, took 80 ms to split, check and reduce, 2026-12-03), Spark's one-task job costs about 0.3 s at any size.
DRIVER_BATCH_BYTES = 256 * 1024
# A batch's small files are read this many at once: a warm run's batch of several files waits for one round trip.
READS_AT_ONCE = 8
_BOM = b"\xef\xbb\xbf"
_WIDE = Context(prec=80)  # the default 28 digits cannot hold a decimal(38, s)


class _NotCanonical(Exception):
    """A value, record or file this path does not judge: the Spark path does."""


def _integer(bits: int) -> Callable[[str], int]:
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    def parse(text: str) -> int:
        if not _INTEGER.fullmatch(text) or not low <= (value := int(text)) <= high:
            raise _NotCanonical
        return value

    return parse


def _decimal(precision: int, scale: int) -> Callable[[str], Decimal]:
    step = Decimal(1).scaleb(-scale)

    def parse(text: str) -> Decimal:
        match = _DECIMAL.fullmatch(text)
        if not match or len(match[1].lstrip("0")) > precision - scale or len(match[2] or "") > scale:
            raise _NotCanonical
        value = Decimal(text).quantize(step, context=_WIDE)
        return value if value else abs(value)  # Spark's decimals have no negative zero

    return parse


def _boolean(text: str) -> bool:
    value = _BOOLEANS.get(text)
    if value is None:
        raise _NotCanonical
    return value


def _double(text: str) -> float:
    if not _DOUBLE.fullmatch(text):
        raise _NotCanonical
    return float(text)  # correctly rounded, as Java's Double.parseDouble


def _float(text: str) -> float:
    """As Java's Float.parseFloat: the float nearest the decimal text. Python rounds to a double first, which can
    land a float away from it; a text whose nearest float is not clear-cut is Spark's to judge."""
    if not _DOUBLE.fullmatch(text):
        raise _NotCanonical
    exact = Fraction(text)
    try:
        nearest = _float32(float(text))
    except OverflowError:
        raise _NotCanonical from None
    if not math.isfinite(nearest) or (nearest == 0 and exact != 0):
        raise _NotCanonical
    (bits,) = struct.unpack("<i", struct.pack("<f", abs(nearest)))
    neighbours = [struct.unpack("<f", struct.pack("<i", b))[0] for b in (bits - 1, bits + 1) if 0 <= b < 0x7F800000]
    distance = abs(Fraction(abs(nearest)) - abs(exact))
    if any(abs(Fraction(n) - abs(exact)) <= distance for n in neighbours):
        raise _NotCanonical
    return nearest


def _float32(value: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def _date(text: str) -> dt.date:
    if not _DATE.fullmatch(text):
        raise _NotCanonical
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise _NotCanonical from None


def _timestamp(text: str) -> dt.datetime:
    match = _TIMESTAMP.fullmatch(text)
    if not match:
        raise _NotCanonical
    try:
        day = dt.date.fromisoformat(match[1])
        moment = dt.time(int(match[2]), int(match[3]), int(match[4]), int((match[5] or "").ljust(6, "0")))
    except ValueError:
        raise _NotCanonical from None
    return dt.datetime.combine(day, moment)


def _instant(text: str) -> int:
    """A timestamp with its zone (an offset or Z) as microseconds since the epoch, as Spark's TIMESTAMP holds it;
    one without a zone is read in the session's time zone: Spark's to judge."""
    match = _INSTANT.fullmatch(text)
    if not match:
        raise _NotCanonical
    local = _timestamp(match[1])
    zone = match[2]
    offset = dt.timedelta(0)
    if zone != "Z":
        hours, minutes = int(zone[1:3]), int(zone[-2:]) if len(zone) > 3 else 0
        if hours > 18 or minutes > 59:
            raise _NotCanonical
        offset = (1 if zone[0] == "+" else -1) * dt.timedelta(hours=hours, minutes=minutes)
    return (local - offset - _EPOCH) // dt.timedelta(microseconds=1)


def _offset_text(text: str) -> str:
    """``timestamp_offset``: the text is the value, once it holds an instant with its zone."""
    _instant(text)
    return text


_INTEGER = re.compile(r"-?[0-9]{1,19}")
_DECIMAL = re.compile(r"-?([0-9]{1,38})(?:\.([0-9]{1,38}))?")
_DOUBLE = re.compile(r"[+-]?[0-9]{1,20}(?:\.[0-9]{1,20})?(?:[eE][+-]?[0-9]{1,3})?")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_TIMESTAMP = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2})[ T]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,6}))?")
_INSTANT = re.compile(
    r"([0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?)(Z|[+-][0-9]{2}(?::?[0-9]{2})?)"
)
_EPOCH = dt.datetime(1970, 1, 1)
_BOOLEANS = {"true": True, "t": True, "1": True, "false": False, "f": False, "0": False}
# The configured types this path parses, each only in the forms its pattern admits. Keys take the types whose
# values group in Python as Spark groups them (no float: Spark folds -0.0 into 0.0; no instant: microseconds here).
CANONICAL: dict[str, Callable[[str], Any]] = {
    "string": str,
    "boolean": _boolean,
    "tinyint": _integer(8),
    "smallint": _integer(16),
    "int": _integer(32),
    "bigint": _integer(64),
    "float": _float,
    "double": _double,
    "date": _date,
    "timestamp": _timestamp,
    "timestamp_ltz": _instant,  # microseconds: the row delta's wire type of an instant
    "timestamp_offset": _offset_text,
}
_KEY_TYPES = {"string", "tinyint", "smallint", "int", "bigint", "date", "timestamp"}


def parser_of(column_type: str) -> Callable[[str], Any] | None:
    """How this path parses a value of the configured type, or None where only Spark does."""
    match = DECIMAL_TYPE.match(column_type)
    if match:
        return _decimal(int(match[1]), int(match[2]))
    return CANONICAL.get(column_type)


class _HeldStore:
    """A store whose small files of one batch were read whole once, each as listed (``read_listed``): their
    layout's read and this path's read are served from those bytes (one GET a file, where a head read and a whole
    read were two)."""

    def __init__(self, store: ObjectStore, held: Mapping[str, ReadAsListed]) -> None:
        self._store, self._held = store, held

    def held(self, key: str) -> bytes | None:
        """The file as listed, read whole; None when it was not (changed or gone since listed)."""
        held = self._held.get(key)
        return held.data if held is not None else None

    def read_listed(self, item: StoredObject) -> ReadAsListed | None:
        held = self._held.get(item.key)
        return held if held is not None else self._store.read_listed(item)

    def list(self, prefix: str, start_after: str | None = None) -> builtins.list[StoredObject]:
        return self._store.list(prefix, start_after)

    def uri(self, key: str) -> str:
        return self._store.uri(key)

    def read_head(self, key: str, size: int) -> bytes:
        held = self._held.get(key)
        return held.data[:size] if held is not None else self._store.read_head(key, size)

    def folders(self, prefix: str) -> builtins.list[str]:
        return self._store.folders(prefix)

    def put(self, key: str, data: bytes) -> None:
        self._store.put(key, data)

    def delete(self, key: str) -> None:
        self._store.delete(key)

    def delete_many(self, keys: Sequence[str]) -> None:
        self._store.delete_many(keys)


def holding_small_files(
    context: ReplayContext, listed: Mapping[str, StoredObject], files: Sequence[DmsFile]
) -> ReplayContext:
    """``context`` with a batch of files this path may take (``eligible_files``) read whole, once, before their
    layouts are read: every later read of them in the driver is served from memory. A file changed or gone since
    listed is not held: the batch is Spark's, whose reads and check of the listing name it."""
    if not eligible_files(listed, files, context.config.dms):
        return context
    reads = [listed[f.key] for f in files]
    with ThreadPoolExecutor(max_workers=min(len(reads), READS_AT_ONCE)) as pool:
        found = list(pool.map(context.store.read_listed, reads))
    held = {item.key: read for item, read in zip(reads, found, strict=True) if read is not None}
    return dataclasses.replace(context, store=_HeldStore(context.store, held))


@dataclass(frozen=True)
class DriverChanges:
    """A batch's changes reduced in the driver: each changed key and its last change (the Op and the run's
    columns by name), and the batch's counts and ``ChangedKeys``."""

    table: TableSpec
    counts: ChangeCounts
    changed: ChangedKeys
    last: Sequence[tuple[tuple[Any, ...], str, Mapping[str, Any]]]

    def fits(self, target: RowDeltaTarget) -> bool:
        """Whether each lake column the run has is typed as the run types it (else Spark's casts decide)."""
        types = {c.name.lower(): c.type for c in self.table.columns}
        return all(
            f.name.lower() not in types or lake_type(types[f.name.lower()]) == f.dataType for f in target.columns
        )

    def collected(self, target: RowDeltaTarget) -> pa.Table:
        """The keys, whether each keeps a row, and the row in the lake's order (``row_delta.commit_changes``)."""
        width = len(self.table.primary_key)
        names = {c.name.lower(): c.name for c in self.table.columns}
        arrays = [pa.array([key[i] for key, _op, _values in self.last]) for i in range(width)]
        arrays.append(pa.array([op != "D" for _key, op, _values in self.last], pa.bool_()))
        for field in target.columns:
            source = names.get(field.name.lower())
            values = [None if source is None else row[source] for _key, _op, row in self.last]
            arrays.append(pa.array(values, wire_type(field.dataType)))
        columns = [*(f"_key{i}" for i in range(width)), "_kept", *(f.name for f in target.columns)]
        return pa.Table.from_arrays(arrays, names=columns)

    def keys_frame(self, spark: SparkSession) -> DataFrame:
        """The changed keys as a DataFrame of the lake's key columns (``key_index.scanned_positions``)."""
        types = {c.name: lake_type(c.type) for c in self.table.columns}
        schema = T.StructType([T.StructField(k, types[k]) for k in self.table.primary_key])
        return spark.createDataFrame([key for key, _op, _values in self.last], schema)


def driver_changes(
    context: ReplayContext,
    listed: Mapping[str, StoredObject],
    files: Sequence[DmsFile],
    table: TableSpec,
    layouts: Mapping[str, FileLayout],
) -> DriverChanges | None:
    """``files`` (CDC files in DMS order, as ``listed``) checked and reduced here, or None: the Spark path's."""
    store, dms = context.store, context.config.dms
    if not eligible(listed, files, table, dms) or not isinstance(store, _HeldStore):
        return None
    try:
        rows: list[_Row] = []
        for place, dms_file in enumerate(files):
            data = store.held(dms_file.key)
            if data is None:
                return None  # changed since listed: Spark's read and the check of the listing name it
            layout = layouts[dms_file.key]
            rows += _typed_rows(_records(data, layout, dms), layout, place, table, dms)
    except _NotCanonical:
        return None
    return _reduced(rows, table) if rows else None


def eligible_files(listed: Mapping[str, StoredObject], files: Sequence[DmsFile], dms: DmsSettings) -> bool:
    """Whether this path may read the files: small uncompressed CSV change files."""
    if dms.format != "csv" or len(dms.csv_delimiter) != 1 or any(f.gzip or f.is_full_load for f in files):
        return False
    return sum(listed[f.key].size for f in files) <= DRIVER_BATCH_BYTES


def eligible(listed: Mapping[str, StoredObject], files: Sequence[DmsFile], table: TableSpec, dms: DmsSettings) -> bool:
    """Whether this path may take the batch at all: its files (``eligible_files``), of types it parses."""
    if not eligible_files(listed, files, dms):
        return False
    types = {c.name: c.type for c in table.columns}
    return all(parser_of(t) is not None for t in types.values()) and all(
        types[k] in _KEY_TYPES or DECIMAL_TYPE.match(types[k]) for k in table.primary_key
    )


@dataclass(frozen=True)
class _Row:
    order: tuple[Any, ...]  # the row's place in DMS order (``dms_order_sql``)
    op: str
    values: dict[str, Any]  # the run's columns, parsed
    befores: tuple[Any, ...]  # the key's before-image, when DMS writes it
    dms_ts: str | None


def _records(data: bytes, layout: FileLayout, dms: DmsSettings) -> list[list[bytes | None]]:
    """The file's records, each field's bytes (None: an unquoted empty field), when both readers agree."""
    if b"\r" in data or b"\x00" in data or data.startswith(_BOM):
        raise _NotCanonical
    if not data:
        return []
    width = len(layout.names)
    names = [f"f{i}" for i in range(width)]
    try:
        parsed = pa_csv.read_csv(
            io.BytesIO(data),
            read_options=pa_csv.ReadOptions(
                column_names=names, skip_rows=1 if dms.add_column_name else 0, use_threads=False
            ),
            parse_options=pa_csv.ParseOptions(
                delimiter=dms.csv_delimiter,
                quote_char='"',
                double_quote=True,
                escape_char=False,
                newlines_in_values=True,
                ignore_empty_lines=False,
            ),
            convert_options=pa_csv.ConvertOptions(
                column_types=dict.fromkeys(names, pa.binary()),
                strings_can_be_null=True,
                null_values=[""],
                quoted_strings_can_be_null=False,
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        raise _NotCanonical from None
    columns = [parsed.column(i).to_pylist() for i in range(width)]
    records = [list(fields) for fields in zip(*columns, strict=True)]
    text = io.StringIO(data.decode("latin-1"), newline="")
    try:
        strict = list(csv.reader(text, delimiter=dms.csv_delimiter, quotechar='"', doublequote=True, strict=True))
    except csv.Error:
        raise _NotCanonical from None
    strict = strict[1:] if dms.add_column_name else strict
    if len(strict) != len(records):
        raise _NotCanonical
    for fields, checked in zip(records, strict, strict=True):
        if [(f or b"").decode("latin-1") for f in fields] != checked:
            raise _NotCanonical
    return records


@dataclass(frozen=True)
class _Fields:
    """One record's fields, by role, as ``reader._read_csv`` reads them."""

    values: list[bytes | None]
    index: Mapping[str, int]  # each role's field
    null_marker: str

    def raw(self, role: str) -> str | None:
        """A DMS field as read (ISO-8859-1 text), None when unquoted and empty or absent; ASCII only here."""
        value = self.values[self.index[role]] if role in self.index else None
        if value is not None and not value.isascii():
            raise _NotCanonical
        return None if value is None else value.decode("ascii")

    def parsed(self, role: str, column_type: str) -> Any:
        """A column's field decoded from UTF-8, the NULL marker applied (``reader._decode_csv_value``), parsed."""
        if role not in self.index:
            return None
        value = self.values[self.index[role]]
        try:
            text = None if value is None else value.decode("utf-8")
        except UnicodeDecodeError:
            raise _NotCanonical from None
        if self.null_marker != "":
            text = None if text == self.null_marker else (text or "")
        parse = parser_of(column_type)
        assert parse is not None  # ``eligible``
        return None if text is None else parse(text)


def _typed_rows(
    records: list[list[bytes | None]], layout: FileLayout, place: int, table: TableSpec, dms: DmsSettings
) -> list[_Row]:
    """The records as ``typed_changes`` types them, when every check of it passes."""
    index = {role: i for i, role in enumerate(layout.names)}
    return [_typed(_Fields(r, index, dms.csv_null_value), (place, n), table, dms) for n, r in enumerate(records)]


def _typed(fields: _Fields, place: tuple[int, int], table: TableSpec, dms: DmsSettings) -> _Row:
    op = fields.raw(OP) if OP in fields.index else "I"
    if op not in ("I", "U", "D"):
        raise _NotCanonical
    values = {c.name: fields.parsed(c.name, c.type) for c in table.columns}
    for column in table.columns:
        required = column.name in table.primary_key or (not column.nullable and not column.dropped and op != "D")
        if required and values[column.name] is None:
            raise _NotCanonical
    types = {c.name: c.type for c in table.columns}
    befores = zip(before_roles(dms, table), table.primary_key, strict=False)
    old = tuple(fields.parsed(role, types[key]) for role, key in befores)
    order: tuple[Any, ...] = place
    if dms.change_sequence_column is not None:
        sequence = fields.raw(CHANGE_SEQ)
        if sequence is None or not sequence.isdigit() or len(sequence) > 40:
            raise _NotCanonical
        order = (sequence.rjust(40, "0"), *place)  # ``dms_order_sql``: lpad to 40
    return _Row(order, op, values, old, fields.raw(DMS_TS))


def _reduced(rows: list[_Row], table: TableSpec) -> DriverChanges:
    keys = table.primary_key
    changes: list[tuple[tuple[Any, ...], tuple[Any, ...], str, dict[str, Any]]] = []
    for row in rows:
        key = tuple(row.values[k] for k in keys)
        old = tuple(b if b is not None else k for b, k in zip(row.befores, key, strict=False))
        if row.op == "U" and row.befores and old != key:
            # A key update: a delete of the old key in the update's place (``split_key_updates``).
            changes.append((old, row.order, "D", dict.fromkeys(table.column_names)))
        changes.append((key, row.order, row.op, row.values))
    counts = {op: sum(1 for change in changes if change[2] == op) for op in ("I", "U", "D")}
    last: dict[tuple[Any, ...], tuple[tuple[Any, ...], str, dict[str, Any]]] = {}
    for key, order, op, values in changes:
        if key not in last or last[key][0] < order:
            last[key] = (order, op, values)
    newest = max((r.dms_ts for r in rows if r.dms_ts is not None), default=None)
    ranged = ranged_keys(table)
    bounds = {k: (min(key[keys.index(k)] for key in last), max(key[keys.index(k)] for key in last)) for k in ranged}
    upserts = sum(1 for _order, op, _values in last.values() if op != "D")
    reduced = [(key, op, values) for key, (_order, op, values) in last.items()]
    return DriverChanges(
        table,
        ChangeCounts(counts["I"], counts["U"], counts["D"], newest),
        ChangedKeys(len(last), bounds, upserts),
        reduced,
    )
