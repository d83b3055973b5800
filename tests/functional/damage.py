"""The corpus of damaged and unexpected DMS input: each kind of damage as a table of its own, its files as DMS would
have written them with the damage done, the outcome the product promises (docs/bad-input.md), and the fix a user
makes, after which a rerun gives the oracle's table.

Every kind starts from the same applied full load and the same good CDC file; the oracle is computed here, in
Python, from the rows the files were written from.
"""

from __future__ import annotations

import csv
import datetime as dt
import gzip
import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from cdc_lake.core.notices import NoticeKind

Format = Literal["csv", "csv-header", "csv-gzip", "parquet"]
FORMATS: tuple[Format, ...] = ("csv", "csv-header", "csv-gzip", "parquet")
CSV_FORMATS: tuple[Format, ...] = ("csv", "csv-header", "csv-gzip")
Outcome = Literal["refused", "announced", "accepted"]

SCHEMA = "corpus"
COLUMNS: list[dict[str, Any]] = [
    {"name": "id", "type": "bigint"},
    {"name": "label", "type": "string"},
    {"name": "price", "type": "decimal(6,2)"},
    {"name": "qty", "type": "int"},
    {"name": "at", "type": "timestamp"},
    {"name": "day", "type": "date"},
    {"name": "ok", "type": "boolean"},
    {"name": "score", "type": "double"},
]
NAMES = [c["name"] for c in COLUMNS]
ARROW_TYPES: dict[str, pa.DataType] = {
    "Op": pa.string(),
    "id": pa.int64(),
    "label": pa.string(),
    "price": pa.decimal128(6, 2),
    "qty": pa.int32(),
    "at": pa.timestamp("us"),
    "day": pa.date32(),
    "ok": pa.bool_(),
    "score": pa.float64(),
}

Row = dict[str, Any]


def _row(key: int, label: str, op: str | None = None, **values: Any) -> Row:
    row: Row = {
        "id": key,
        "label": label,
        "price": Decimal(f"{key}.25"),
        "qty": key * 10,
        "at": dt.datetime(2025, 3, 1, 12, key, 0, 123456),
        "day": dt.date(2025, 3, key),
        "ok": key % 2 == 0,
        "score": key / 4,
    }
    row.update(values)
    return row if op is None else {"Op": op, **row}


BASE: list[Row] = [_row(1, "one"), _row(2, "two"), _row(3, "three")]
CHANGES: list[Row] = [_row(2, "two, changed", "U", qty=21), _row(4, "four", "I"), _row(3, "three", "D")]
LOAD = "LOAD00000001"
CDC = "20250301-120000000"
LATER = "20250301-120100000"
MORE: list[Row] = [_row(5, "five", "I")]


def replayed(*batches: Sequence[Row], base: Sequence[Row] = BASE) -> list[Row]:
    """The table after the full load ``base`` and these CDC rows, in order: the oracle."""
    table = {row["id"]: {n: row.get(n) for n in NAMES} for row in base}
    for rows in batches:
        for row in rows:
            if row["Op"] == "D":
                table.pop(row["id"], None)
            else:
                table[row["id"]] = {n: row.get(n) for n in NAMES}
    return [table[k] for k in sorted(table)]


# --- writing files as DMS writes them -------------------------------------------------------------------------


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    return str(value)


@dataclass(frozen=True)
class Writer:
    """Writes rows as one of the corpus' formats; raw CSV ``lines`` are taken as they are (damage by hand)."""

    format: Format

    @property
    def suffix(self) -> str:
        return {"csv": ".csv", "csv-header": ".csv", "csv-gzip": ".csv.gz", "parquet": ".parquet"}[self.format]

    @property
    def is_csv(self) -> bool:
        return self.format != "parquet"

    def name(self, stem: str) -> str:
        return stem + self.suffix

    def fields(self, rows: Sequence[Row], names: Sequence[str] | None = None) -> list[str]:
        """The file's field names: Op (CDC files) and the table's columns, or ``names``."""
        if names is not None:
            return list(names)
        return (["Op"] if rows and "Op" in rows[0] else []) + NAMES

    def lines(self, rows: Sequence[Row], names: Sequence[str] | None = None) -> list[str]:
        """CSV lines (no line ends) of ``rows``, header first when the format has one."""
        fields = self.fields(rows, names)
        buffer = io.StringIO()
        out = csv.writer(buffer, lineterminator="\n")
        if self.format == "csv-header":
            out.writerow(fields)
        for row in rows:
            out.writerow(["" if (v := _text(row.get(f))) is None else v for f in fields])
        return buffer.getvalue().splitlines()

    def plain(self, lines: Sequence[str]) -> bytes:
        """CSV text of ``lines``, uncompressed."""
        return "".join(line + "\n" for line in lines).encode("utf-8", "surrogateescape")

    def csv_bytes(self, lines: Sequence[str]) -> bytes:
        return self.finish(self.plain(lines))

    def finish(self, data: bytes) -> bytes:
        """Raw bytes as the format stores them (gzip compresses them)."""
        return gzip.compress(data, mtime=0) if self.format == "csv-gzip" else data

    def write(
        self, rows: Sequence[Row], names: Sequence[str] | None = None, types: Mapping[str, pa.DataType] | None = None
    ) -> bytes:
        if self.is_csv:
            return self.csv_bytes(self.lines(rows, names))
        fields = self.fields(rows, names)
        arrow = {**ARROW_TYPES, **(types or {})}
        schema = pa.schema([(f, arrow[f]) for f in fields])
        table = pa.Table.from_pylist([{f: row.get(f) for f in fields} for row in rows], schema=schema)
        sink = io.BytesIO()
        pq.write_table(table, sink)
        return sink.getvalue()


# --- the kinds --------------------------------------------------------------------------------------------------

Files = dict[str, bytes | None]  # file name in the table's folder → content (None: remove it)


@dataclass(frozen=True)
class Fault:
    """One bad row in a group's change file: ``raw`` written as the text of ``column`` (None: NULL), or the row's
    CSV text edited by ``line``. ``group``: the table whose change file holds the bad row (a row per kind)."""

    group: str
    column: str
    raw: str | None = None
    line: Callable[[str], str] | None = None


def good_cdc(w: Writer) -> Files:
    return {w.name(CDC): w.write(CHANGES)}


def _lines_with(w: Writer, row_index: int, edit: Callable[[str], str], rows: Sequence[Row] = CHANGES) -> Files:
    """The good CDC file with its ``row_index``-th data row's text edited."""
    lines = w.lines(rows)
    at = row_index + (1 if w.format == "csv-header" else 0)
    lines[at] = edit(lines[at])
    return {w.name(CDC): w.csv_bytes(lines)}


def _value(w: Writer, row_index: int, column: str, raw: str) -> Files:
    """The good CDC file with one value written as ``raw`` text (CSV) or stored as a string (Parquet)."""
    if w.is_csv:
        fields = w.fields(CHANGES)
        position = fields.index(column)

        def edit(line: str) -> str:
            values = next(csv.reader([line]))
            values[position] = raw
            buffer = io.StringIO()
            csv.writer(buffer, lineterminator="").writerow(values)
            return buffer.getvalue()

        return _lines_with(w, row_index, edit)
    rows = [dict(r) for r in CHANGES]
    for index, row in enumerate(rows):
        row[column] = raw if index == row_index else _text(row[column])
    return {w.name(CDC): w.write(rows, types={column: pa.string()})}


@dataclass(frozen=True)
class Damage:
    """One kind of damage: what lands (``files``), the promised ``outcome``, what its message must name
    (``names``: file, row, column, what to do; for an announced kind, its ``notice``), the fix (``fix``: what
    lands before the rerun) and the oracle after it (``final``).

    ``load``: whether the full load is applied before the damage lands (False: the damage is in the full load, or
    it is the table's first file). ``prior``: files applied with the full load, beyond it. ``configured``: whether
    the table is in the configuration while the damage lands (False: a table DMS replicates that the
    configuration lacks; the fix adds it). ``reload``: the fix is a DMS reload (new LOAD files) and
    ``cdc-lake reload``. ``columns``: the table's columns once fixed (the fix adds a column to the configuration).
    """

    kind: str
    formats: tuple[Format, ...]
    outcome: Outcome
    files: Callable[[Writer], Files] = lambda w: {}
    names: Callable[[Writer], tuple[str, ...]] = lambda w: ()
    fix: Callable[[Writer], Files] = good_cdc
    final: list[Row] = field(default_factory=lambda: replayed(CHANGES))
    notice: NoticeKind | None = None
    load: bool = True
    prior: Callable[[Writer], Files] | None = None
    configured: bool = True
    reload: bool = False
    columns: list[dict[str, Any]] = field(default_factory=lambda: COLUMNS)
    fault: Fault | None = None  # a bad row: the kind shares its group's table (``Table``)


def _other(w: Writer) -> Writer:
    """A writer of the other DMS format: its file lands in a table configured for ``w``'s."""
    return Writer("csv" if w.format == "parquet" else "parquet")


def _at(row: int, column: str, *more: str, stem: str = CDC) -> Callable[[Writer], tuple[str, ...]]:
    return lambda w: (w.name(stem), f"row {row}", f"column {column}", *more)


def _file(*more: str, stem: str = CDC) -> Callable[[Writer], tuple[str, ...]]:
    return lambda w: (w.name(stem), *more)


FIX_FILE = "Fix the file"
WRITE_AGAIN = "Have DMS write the file again"
RELOAD = "cdc-lake reload"


def _bad_row(kind: str, fault: Fault, formats: tuple[Format, ...] = CSV_FORMATS) -> Damage:
    return Damage(kind, formats, "refused", fault=fault)


def _bad_value(kind: str, column: str, raw: str | None, formats: tuple[Format, ...] = CSV_FORMATS) -> Damage:
    return _bad_row(kind, Fault("bad_values", column, raw), formats)


def _without(rows: Sequence[Row], column: str) -> list[Row]:
    return [{k: v for k, v in row.items() if k != column} for row in rows]


def _load(rows: Sequence[Row]) -> Callable[[Writer], Files]:
    return lambda w: {w.name(LOAD): w.write(rows)}


def _as_load(rows: Sequence[Row]) -> list[Row]:
    return [{n: row[n] for n in NAMES} for row in rows]


DUPLICATE = _row(2, "two, again")
HUGE = "x" * (3 << 20)
NOTE = {"name": "note", "type": "string"}


def _bad_load_value(w: Writer) -> Files:
    lines = w.lines(BASE)
    at = 1 + (1 if w.format == "csv-header" else 0)
    lines[at] = lines[at].replace("2.25", "2.2.5")
    return {w.name(LOAD): w.csv_bytes(lines)}


def _empty(kind: str, formats: tuple[Format, ...], content: Callable[[Writer], bytes]) -> Damage:
    """An object with no rows where a CDC file lands; its fix is the real file under the same key."""
    announced = _file("empty", "not recorded as applied")
    return Damage(kind, formats, "announced", lambda w: {w.name(CDC): content(w)}, announced, notice="empty-object")


LATE = _file("landed late, or rewritten", RELOAD)


def _reload_load(w: Writer) -> Files:
    """The LOAD file a DMS reload writes: the source as it is after every change."""
    return {w.name(LOAD): w.write(_as_load(replayed(CHANGES, MORE)))}


def _needs_reload(
    kind: str, files: Callable[[Writer], Files], prior: Callable[[Writer], Files], reloaded: bool = False
) -> Damage:
    """A file against DMS order, after ``prior`` was applied: refused; fixed by a DMS reload (new LOAD files, already
    landed when ``reloaded``) and ``cdc-lake reload``."""
    names = _file("LOAD files changed", RELOAD, stem=LOAD) if reloaded else LATE
    fix = (lambda w: {}) if reloaded else _reload_load
    return Damage(
        kind, FORMATS, "refused", files, names, fix=fix, final=replayed(CHANGES, MORE), prior=prior, reload=True
    )


CORPUS: list[Damage] = [
    # Cut-off files and bad bytes.
    Damage(
        "cut_mid_row",
        CSV_FORMATS,
        "refused",
        lambda w: {w.name(CDC): w.finish(w.plain(w.lines(CHANGES))[:-40])},
        _at(3, "(row)", FIX_FILE),
    ),
    Damage(
        "cut_in_quote",
        CSV_FORMATS,
        "refused",
        lambda w: _lines_with(w, 2, lambda line: line.replace("three", '"thr')),
        _at(3, "(row)", FIX_FILE),
    ),
    Damage(
        "gzip_cut_off",
        ("csv-gzip",),
        "refused",
        lambda w: {w.name(CDC): w.write(CHANGES)[:-12]},
        _file(WRITE_AGAIN),
    ),
    Damage(
        "not_gzip",
        ("csv-gzip",),
        "refused",
        lambda w: {w.name(CDC): w.plain(w.lines(CHANGES))},
        _file(WRITE_AGAIN),
    ),
    Damage(
        "parquet_cut_off",
        ("parquet",),
        "refused",
        lambda w: {w.name(CDC): w.write(CHANGES)[:-100]},
        _file(WRITE_AGAIN),
    ),
    Damage(
        "not_parquet",
        ("parquet",),
        "refused",
        lambda w: {w.name(CDC): b"Op,id\nI,9\n"},
        _file(WRITE_AGAIN),
    ),
    Damage(
        "other_format",
        FORMATS,
        "refused",
        lambda w: {_other(w).name(CDC): _other(w).write(CHANGES)},
        lambda w: (_other(w).name(CDC), "dms.format", "DataFormat"),
        fix=lambda w: {_other(w).name(CDC): None, **good_cdc(w)},
    ),
    _bad_row("invalid_utf8", Fault("bad_rows", "label", "fo\udcffr")),
    # Empty objects.
    _empty("empty_object", FORMATS, lambda w: b""),
    _empty("newline_only", CSV_FORMATS, lambda w: w.finish(b"\n")),
    _empty("whitespace_only", CSV_FORMATS, lambda w: w.finish(b" \n\n  \n")),
    # Field counts.
    _bad_row("extra_field_in_row", Fault("bad_rows", "(row)", line=lambda line: line + ",surplus")),
    _bad_row("missing_field_in_row", Fault("bad_rows", "(row)", line=lambda line: line.rsplit(",", 1)[0])),
    # Bad values of every configured type.
    _bad_value("bad_bigint_key", "id", "12x"),
    _bad_value("bad_int", "qty", "1.5"),
    _bad_value("bad_decimal", "price", "oops"),
    _bad_value("decimal_too_precise", "price", "1.005"),
    _bad_value("decimal_too_large", "price", "123456.78"),
    _bad_value("bad_timestamp", "at", "2025-13-45 25:00:00"),
    _bad_value("bad_date", "day", "2025-02-30"),
    _bad_value("bad_boolean", "ok", "maybe"),
    _bad_value("bad_double", "score", "1.2.3"),
    _bad_value("int_overflow", "qty", "3000000000"),
    # Keys and ops.
    _bad_row("null_key", Fault("bad_rows", "id", None), FORMATS),
    _bad_row("unknown_op", Fault("bad_rows", "Op", "X"), FORMATS),
    _bad_row("empty_op", Fault("bad_rows", "Op", ""), FORMATS),
    # Values Parquet holds as text where the configuration says otherwise.
    Damage(
        "parquet_text_for_number",
        ("parquet",),
        "refused",
        lambda w: _value(w, 1, "qty", "1.5"),
        _file("column 'qty'", "changed type from int to string", "Reload"),
    ),
    _bad_row("parquet_bad_text_timestamp", Fault("bad_rows", "at", "2025-13-45 25:00:00"), ("parquet",)),
    # Files that lack a column or carry an extra one; wider and narrower types.
    Damage(
        "file_lacks_column",
        ("csv-header", "parquet"),
        "announced",
        lambda w: {w.name(CDC): w.write(CHANGES, names=[n for n in w.fields(CHANGES) if n != "qty"])},
        _file("qty", "dropped: true"),
        fix=lambda w: {},
        final=replayed(_without(CHANGES, "qty")),
        notice="column-missing",
    ),
    Damage(
        "file_brings_column",
        ("csv-header", "parquet"),
        "announced",
        lambda w: {
            w.name(CDC): w.write(
                [{**r, "note": "new"} for r in CHANGES], names=[*w.fields(CHANGES), "note"], types={"note": pa.string()}
            )
        },
        lambda w: ("note",),
        fix=lambda w: {},
        notice="column-added",
    ),
    Damage(
        "headerless_extra_column",
        ("csv", "csv-gzip"),
        "refused",
        lambda w: {w.name(CDC): w.write([{**r, "note": "new"} for r in CHANGES], names=[*w.fields(CHANGES), "note"])},
        _file("at the end of `columns`"),
        fix=lambda w: {},
        columns=[*COLUMNS, NOTE],
    ),
    Damage(
        "parquet_wider_decimal",
        ("parquet",),
        "announced",
        lambda w: {w.name(CDC): w.write(CHANGES, types={"price": pa.decimal128(9, 2)})},
        lambda w: ("price", "decimal(9,2)"),
        fix=lambda w: {},
        notice="type-widened",
    ),
    Damage(
        "parquet_narrower_int",
        ("parquet",),
        "accepted",
        lambda w: {w.name(CDC): w.write(CHANGES, types={"qty": pa.int16()})},
        lambda w: (),
        fix=lambda w: {},
    ),
    # Order: late files, rewritten files.
    _needs_reload("late_cdc_file", good_cdc, lambda w: {w.name(LATER): w.write(MORE)}),
    _needs_reload("rewritten_cdc_file", lambda w: {w.name(CDC): w.write([*CHANGES, *MORE])}, good_cdc),
    _needs_reload("rewritten_load_file", _reload_load, good_cdc, reloaded=True),
    # Objects outside the configuration.
    Damage(
        "unknown_table",
        FORMATS,
        "announced",
        lambda w: {w.name(LOAD): w.write(BASE), **good_cdc(w)},
        lambda w: ("corpus/unknown_table/", "not in the configuration"),
        fix=lambda w: {},
        notice="unknown-table",
        load=False,
        configured=False,
    ),
    Damage(
        "not_a_dms_name",
        FORMATS,
        "announced",
        lambda w: {"notes.txt": b"not from DMS\n", **good_cdc(w)},
        lambda w: ("notes.txt", "Move it out"),
        fix=lambda w: {"notes.txt": None},
        notice="not-a-dms-file",
    ),
    # Sizes and repeats.
    Damage(
        "huge_field",
        FORMATS,
        "accepted",
        lambda w: {w.name(CDC): w.write([{**CHANGES[0], "label": HUGE}, *CHANGES[1:]])},
        lambda w: (),
        fix=lambda w: {},
        final=replayed([{**CHANGES[0], "label": HUGE}, *CHANGES[1:]]),
    ),
    Damage(
        "load_repeats_a_key",
        FORMATS,
        "announced",
        _load([*BASE, DUPLICATE]),
        lambda w: (w.name(LOAD), "last row in DMS order"),
        fix=lambda w: {},
        final=replayed(base=[BASE[0], DUPLICATE, BASE[2]]),
        notice="load-duplicate-keys",
        load=False,
    ),
    # Damage in the full load itself.
    Damage(
        "bad_value_in_load",
        CSV_FORMATS,
        "refused",
        _bad_load_value,
        _at(2, "price", FIX_FILE, stem=LOAD),
        fix=_load(BASE),
        final=replayed(),
        load=False,
    ),
    Damage(
        "invalid_utf8_in_load",
        CSV_FORMATS,
        "refused",
        lambda w: {w.name(LOAD): w.finish(w.plain(w.lines(BASE)).replace(b"three", b"th\xe9ree"))},
        _at(3, "label", FIX_FILE, stem=LOAD),
        fix=_load(BASE),
        final=replayed(),
        load=False,
    ),
]


def applicable(fmt: Format) -> list[Damage]:
    return [d for d in CORPUS if fmt in d.formats]


# A group's change file: the good changes, then an insert per further bad row; row i (0-based) is kind i's.
GROUP_ROWS: list[Row] = [*CHANGES, *(_row(10 + i, f"row {10 + i}", "I") for i in range(8))]


@dataclass(frozen=True)
class Table:
    """One table of the corpus: a kind of its own, or a group of bad-row kinds, each damaging one row of the same
    change file (a refusal names up to ten bad rows)."""

    name: str
    kinds: list[Damage]

    @property
    def table(self) -> str:
        return f"{SCHEMA}.{self.name}"

    @property
    def grouped(self) -> bool:
        return self.kinds[0].fault is not None

    @property
    def damage(self) -> Damage:
        """The table's settings (base, prior, configuration, fix): those of its kind, or any bad row's."""
        return self.kinds[0]

    def files(self, w: Writer) -> Files:
        if not self.grouped:
            return self.damage.files(w)
        return {w.name(CDC): _with_faults(w, [k.fault for k in self.kinds if k.fault is not None])}

    def names(self, w: Writer, kind: Damage) -> tuple[str, ...]:
        """What the kind's message must name."""
        if kind.fault is None:
            return kind.names(w)
        return (w.name(CDC), f"row {self.kinds.index(kind) + 1}", f"column {kind.fault.column}", FIX_FILE)

    def fix(self, w: Writer) -> Files:
        return {w.name(CDC): w.write(GROUP_ROWS)} if self.grouped else self.damage.fix(w)

    @property
    def final(self) -> list[Row]:
        return replayed(GROUP_ROWS) if self.grouped else self.damage.final


def _with_faults(w: Writer, faults: Sequence[Fault]) -> bytes:
    """The group's change file with fault i in row i."""
    assert len(faults) <= len(GROUP_ROWS)
    if not w.is_csv:
        rows = [dict(r) for r in GROUP_ROWS]
        texts = {f.column for f in faults if f.raw is not None and f.column != "Op"}
        for row in rows:
            row.update({c: _text(row[c]) for c in texts})
        for row, fault in zip(rows, faults, strict=False):
            row[fault.column] = fault.raw
        return w.write(rows, types=dict.fromkeys(texts, pa.string()))
    lines = w.lines(GROUP_ROWS)
    header = 1 if w.format == "csv-header" else 0
    position = w.fields(GROUP_ROWS).index
    for index, fault in enumerate(faults):
        if fault.line is not None:
            lines[header + index] = fault.line(lines[header + index])
            continue
        values = next(csv.reader([lines[header + index]]))
        values[position(fault.column)] = "" if fault.raw is None else fault.raw
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="").writerow(values)
        lines[header + index] = buffer.getvalue()
    return w.csv_bytes(lines)


def tables(fmt: Format, *, grouped: bool = True) -> list[Table]:
    """The corpus of one format as tables: each kind alone, bad rows in their groups (``grouped``) or alone too."""
    kinds = applicable(fmt)
    groups: dict[str, list[Damage]] = {}
    for kind in kinds:
        groups.setdefault(kind.fault.group if kind.fault is not None and grouped else kind.kind, []).append(kind)
    return [Table(name, members) for name, members in groups.items()]
