"""What each DMS file holds, field by field: the table's shape when DMS wrote it.

A source table changes shape while DMS writes it (``HandleSourceTableAltered``): files after an
``ADD COLUMN`` have one more field. Parquet files and CSV files with a header (``AddColumnName``) name their
fields; a headerless CSV file gives only its field count, and the configuration is then the only place
names can come from. A file's layout is resolved from its first record (or its Parquet footer) before any
row is read, so files of several shapes can be read in one batch, each by its own layout.

Field roles in a layout: the DMS columns (``_op``, ``_dms_ts``, ``_change_seq``, ``_before_<i>`` for the
i-th key column's before-image), the table's columns by their lake name, and columns the configuration does
not know, by the lake name of the file's own name (``identifiers.lake_name``).

A change row, a record as the engine reads it, carries the roles as its columns, beside the columns named here
that tag its place and its faults (``engine.reader`` tells what each holds).
"""

from __future__ import annotations

import csv
import io
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from cdc_lake.core.config import DmsSettings, TableSpec
from cdc_lake.core.dms_files import DmsFile
from cdc_lake.core.exceptions import SchemaChangeError
from cdc_lake.core.identifiers import lake_name

OP = "_op"
DMS_TS = "_dms_ts"
CHANGE_SEQ = "_change_seq"
BEFORE = "_before_"
# A change row's columns beside the roles: where the row stands in DMS order, its fault, the fields as read.
FILE = "_file"
FILE_SEQ = "_file_seq"
PHASE = "_phase"
ROW = "_row"
PROBLEM = "_problem"
RAW = "_raw"
_HEAD_BYTES = 64 * 1024
_MAX_HEAD_BYTES = 64 * 1024 * 1024
# The csv module refuses a field over 128 KiB by default; a first record may hold a value up to the head's size.
csv.field_size_limit(max(csv.field_size_limit(), _MAX_HEAD_BYTES))


@dataclass(frozen=True)
class FileLayout:
    """The fields of one file in order: ``names`` are roles (see module doc), ``source`` the file's own names
    (the roles again for headerless CSV), ``types`` the configured-type spelling of Parquet fields."""

    names: tuple[str, ...]
    source: tuple[str, ...]
    types: tuple[str | None, ...]

    def field(self, name: str) -> str | None:
        """The file's name for the field playing ``name``, or None when the file lacks it."""
        for role, source in zip(self.names, self.source, strict=True):
            if role == name:
                return source
        return None

    def type_of(self, name: str) -> str | None:
        for role, type_name in zip(self.names, self.types, strict=True):
            if role == name:
                return type_name
        return None

    def unknown(self, table: TableSpec) -> list[str]:
        """Table columns in this file that the configuration does not name."""
        known = {*table.column_names}
        return [n for n in self.names if not is_dms_role(n) and n not in known]


def before_role(index: int) -> str:
    return f"{BEFORE}{index}"


def before_roles(dms: DmsSettings, table: TableSpec) -> list[str]:
    """The before-image roles, one per key column, when DMS writes them."""
    return [before_role(i) for i in range(len(dms.before_image_columns(table)))]


def is_dms_role(name: str) -> bool:
    """Whether a layout's role is a DMS field rather than a table column (which may start with _ too)."""
    return name in (OP, DMS_TS, CHANGE_SEQ) or (name.startswith(BEFORE) and name[len(BEFORE) :].isdigit())


def has_op(dms: DmsSettings, full_load: bool) -> bool:
    return dms.include_op_for_full_load if full_load else dms.cdc_has_op


def dms_roles(dms: DmsSettings, table: TableSpec, full_load: bool) -> tuple[list[str], list[str]]:
    """The DMS fields before the table's columns and after them, as DMS orders them."""
    before = ([OP] if has_op(dms, full_load) else []) + ([DMS_TS] if dms.timestamp_column else [])
    after = [CHANGE_SEQ] if dms.change_sequence_column else []
    after += before_roles(dms, table)
    return before, after


def _dms_source_names(dms: DmsSettings, table: TableSpec) -> dict[str, str]:
    """Lower-cased names DMS gives its own fields in a header or a Parquet schema -> their role."""
    return {name.lower(): role for name, role in _dms_names(dms, table).items()}


def _dms_names(dms: DmsSettings, table: TableSpec) -> dict[str, str]:
    """The names DMS gives its own fields -> their role."""
    names = {"Op": OP}
    if dms.timestamp_column:
        names[dms.timestamp_column] = DMS_TS
    if dms.change_sequence_column:
        names[dms.change_sequence_column] = CHANGE_SEQ
    for index, column in enumerate(dms.before_image_columns(table)):
        names[column] = before_role(index)
    return names


def headerless_layout(field_count: int, dms_file: DmsFile, table: TableSpec, dms: DmsSettings) -> FileLayout:
    """The layout of a headerless CSV file from its field count and the configured columns.

    Added columns are appended (MySQL cannot add them anywhere else), so a file written before an
    ``ADD COLUMN`` holds a prefix of the configured columns; one written after a column was dropped holds
    the columns not marked ``dropped``. A count that fits neither, or fits both differently, is refused.
    """
    before, after = dms_roles(dms, table, dms_file.is_full_load)
    width = field_count - len(before) - len(after)
    everything = table.column_names
    kept = [c.name for c in table.columns if not c.dropped]
    shapes = {tuple(cols[:width]) for cols in (everything, kept) if 0 < width <= len(cols)}
    shapes = {s for s in shapes if set(table.primary_key) <= set(s)}
    shown = {role: name for name, role in _dms_names(dms, table).items()}
    layout_text = ", ".join([*(shown[r] for r in before), *table.source_column_names, *(shown[r] for r in after)])
    if len(shapes) == 1:
        (columns,) = shapes
        names = (*before, *columns, *after)
        return FileLayout(names, names, (None,) * len(names))
    if len(shapes) > 1:
        raise SchemaChangeError(
            f"{dms_file.key}: {field_count} fields fit two shapes of {table.name}: "
            + " and ".join(f"({', '.join(s)})" for s in sorted(shapes))
            + ". A headerless CSV file cannot say which; write headers (DMS AddColumnName: true, "
            "dms.add_column_name: true) or reload the table"
        )
    if width > len(everything):
        extra = width - len(everything)
        example = "\n".join(f"        - {{name: <new column {i + 1}>, type: <type>}}" for i in range(extra))
        raise SchemaChangeError(
            f"{dms_file.key}: {field_count} fields, but the configuration of {table.name} accounts for "
            f"{len(before) + len(everything) + len(after)} fields ({layout_text}): "
            f"the source table gained {extra} column(s)? Headerless CSV carries no names, so add them at the "
            f"end of `columns` of {table.name} in the configuration, in the source's column order:\n{example}\n"
            "then deploy the configuration and run this file again (docs/schema-changes.md)"
        )
    raise SchemaChangeError(
        f"{dms_file.key}: {field_count} fields do not fit {table.name} ({layout_text}): too few for its "
        f"primary key {table.primary_key}. A source column was "
        "renamed or dropped without the configuration saying so (mark dropped columns `dropped: true`), or "
        "the file is not this table's; see docs/schema-changes.md"
    )


def named_layout(
    names: Sequence[str], types: Sequence[str | None], dms_file: DmsFile, table: TableSpec, dms: DmsSettings
) -> FileLayout:
    """The layout of a file that names its fields (Parquet, or CSV with a header); names match case-blind, and
    a field the configuration lacks plays its lake name."""
    dms_names = _dms_source_names(dms, table)
    configured = {c.source.lower(): c.name for c in table.columns}
    roles = []
    for name in names:
        lowered = name.lower()
        roles.append(dms_names.get(lowered) or configured.get(lowered) or lake_name(name))
    for role in {r for r in roles if roles.count(r) > 1}:
        fields = [n for n, r in zip(names, roles, strict=True) if r == role]
        raise SchemaChangeError(
            f"{dms_file.key}: fields {' and '.join(repr(f) for f in fields)} both map to the lake column {role!r} "
            f"of {table.name} (Glue and Athena take lower-case names only). Declare them in its `columns` with "
            f"a `lake_name` each, e.g. {{name: {fields[-1]!r}, lake_name: {role}_2, type: ...}}, then run the "
            "file again"
        )
    missing_keys = [table.source_name(k) for k in table.primary_key if k not in roles]
    if missing_keys:
        raise SchemaChangeError(
            f"{dms_file.key}: no field for the primary key column(s) {missing_keys} of {table.name} "
            f"(fields: {', '.join(names)}); the key columns must keep their names"
        )
    if has_op(dms, dms_file.is_full_load) and OP not in roles:
        raise SchemaChangeError(
            f"{dms_file.key}: no Op field (fields: {', '.join(names)}); if the endpoint runs with "
            "CdcInsertsOnly or CdcInsertsAndUpdates, set dms.cdc_inserts_only or dms.cdc_inserts_and_updates"
        )
    layout = FileLayout(tuple(roles), tuple(names), tuple(types))
    unknown = layout.unknown(table)
    gone = [c.name for c in table.columns if c.name not in roles and not c.dropped]
    if unknown and gone:
        raise SchemaChangeError(
            f"{dms_file.key}: {table.name} column(s) {gone} are missing and {unknown} are new in the same file: "
            "the source renamed a column? A rename cannot be followed safely (rows before it keep the old "
            "name). Reload the table into a lake table configured with the new names (cdc-lake reload), or, "
            f"if {gone} were dropped and {unknown} added, declare the new column(s) in the configuration of "
            f"{table.name} and mark the dropped one(s) `dropped: true`"
        )
    return layout


def first_record(head: bytes, delimiter: str, complete: bool) -> list[str] | None:
    """The first CSV record of a file's first bytes, or None when they may not hold all of it."""
    text = head.decode("utf-8", errors="replace")
    if not complete:
        cut = text.rfind("\n")
        if cut < 0:
            return None
        text = text[: cut + 1]
    try:
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, quotechar='"', strict=True)
        return next(reader, [])
    except csv.Error:
        return None


def _head(read_head: Callable[[str, int], bytes], dms_file: DmsFile, size: int) -> tuple[bytes, bool]:
    raw = read_head(dms_file.key, size)
    complete = len(raw) < size
    if dms_file.gzip:
        decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
        return decompressor.decompress(raw), complete and decompressor.eof
    return raw, complete


def csv_first_record(read_head: Callable[[str, int], bytes], dms_file: DmsFile, delimiter: str) -> list[str]:
    """The first record of a CSV file, read from its first bytes (more while one value spans them)."""
    size = _HEAD_BYTES
    while True:
        head, complete = _head(read_head, dms_file, size)
        record = first_record(head, delimiter, complete)
        if record is not None:
            return record
        if complete or size >= _MAX_HEAD_BYTES:
            raise SchemaChangeError(
                f"{dms_file.key}: the first record is not valid CSV within its first {size} bytes; "
                "is it a CSV file of this endpoint (delimiter, quoting)?"
            )
        size *= 4


def csv_layouts(
    read_head: Callable[[str, int], bytes], files: Sequence[DmsFile], table: TableSpec, dms: DmsSettings
) -> dict[str, FileLayout]:
    """Each CSV file's layout from its first record: its header, or the field count of its first row."""
    layouts = {}
    for dms_file in files:
        record = csv_first_record(read_head, dms_file, dms.csv_delimiter)
        if dms.add_column_name:
            layouts[dms_file.key] = named_layout(record, [None] * len(record), dms_file, table, dms)
        elif record:
            layouts[dms_file.key] = headerless_layout(len(record), dms_file, table, dms)
        else:  # an empty file: nothing to read, any layout reads it
            before, after = dms_roles(dms, table, dms_file.is_full_load)
            names = (*before, *table.column_names, *after)
            layouts[dms_file.key] = FileLayout(names, names, (None,) * len(names))
    return layouts


def group_by_layout(files: Sequence[DmsFile], layouts: Mapping[str, FileLayout]) -> list[list[DmsFile]]:
    """Files sharing a layout (and a kind), each group in DMS order, groups in order of their first file."""
    groups: dict[tuple[bool, FileLayout], list[DmsFile]] = {}
    for dms_file in files:
        groups.setdefault((dms_file.is_full_load, layouts[dms_file.key]), []).append(dms_file)
    return list(groups.values())
