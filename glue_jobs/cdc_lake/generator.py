"""Generate AWS DMS full-load and CDC files for configured tables, together with the expected final tables.

The generator simulates each source table over time: its rows before the full load, the changes made
while the full load runs (DMS's cached changes: visible in the LOAD files *and* repeated at the head of
the first CDC file with older commit timestamps), then CDC files of I/U/D changes. It writes the files
exactly as the DMS S3 target names and formats them, then replays the rows it wrote in DMS order
(LOAD files, CDC files by name, row position) into a dict: that replay is the oracle, written with
``cdc_lake.jsonl``, and checked against the simulated source database.

Choices where DMS is silent or unconfirmed (see the shared dms-format notes):
- Parquet with ``compression: gzip`` keeps the ``.parquet`` name and compresses inside the file (codec
  GZIP); CSV with gzip is ``.csv.gz``. Parquet files are written as Parquet 1.0, DMS's default version.
- CDC files are named ``YYYYMMDD-HHMMSSmmm`` by the time DMS wrote them; the change sequence is
  ``YYYYMMDDHHMMSS`` + hundredths of the commit time + a 19-digit task-wide counter.
- An empty string is written unquoted, except every fourth one per column and file, which is quoted
  ``""``; when ``csv_null_value`` is the empty string, empty strings are always quoted.
"""

from __future__ import annotations

import gzip
import logging
import operator
import random
import unicodedata
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from cdc_lake.config import DECIMAL_TYPE, DmsSettings, PipelineConfig, TableSpec
from cdc_lake.dms_files import order_key_for
from cdc_lake.exceptions import ConfigError
from cdc_lake.jsonl import write_jsonl

__all__ = ["DEFAULT_SPEC", "GenerationResult", "GeneratorSpec", "TableResult", "csv_field", "generate", "land_order"]

logger = logging.getLogger(__name__)

Row = tuple[Any, ...]

_DEFAULT_START = datetime(2025, 3, 1, 12, 0, 0)
# Timeline of one table, relative to GeneratorSpec.start_time (when the full load and change capture start).
_CACHED_FROM = timedelta(seconds=1)  # cached changes commit in [1 s, 9 s) ...
_CACHED_SPAN_US = 8_000_000
_LOAD_FROM = timedelta(seconds=10)  # ... before DMS transfers LOAD file j at 10 s + j s
_LOAD_FILE_GAP = timedelta(seconds=1)
_TABLE_NAME_OFFSET_MS = 211  # CDC file names of different tables differ by this much per table index


@dataclass(frozen=True)
class GeneratorSpec:
    """How much to generate and which DMS behaviours to exercise; defaults make a small source with every edge case."""

    seed: int = 7
    initial_rows: int = 1000
    cdc_files: int = 5
    changes_per_file: int = 200
    load_file_rows: int | None = None
    insert_ratio: float = 0.3
    update_ratio: float = 0.5
    edge_cases: bool = True
    timestamp_ties: bool = True
    cached_changes: int = 20
    boolean_style: Literal["mysql", "postgres"] = "mysql"
    start_time: datetime = _DEFAULT_START

    def __post_init__(self) -> None:
        for name in ("initial_rows", "cdc_files", "changes_per_file", "cached_changes"):
            if getattr(self, name) < 0:
                raise ValueError(f"GeneratorSpec.{name} must be >= 0, got {getattr(self, name)}")
        if self.load_file_rows is not None and self.load_file_rows < 1:
            raise ValueError(f"GeneratorSpec.load_file_rows must be >= 1 or None, got {self.load_file_rows}")
        ratios_ok = 0 <= self.insert_ratio <= 1 and 0 <= self.update_ratio <= 1
        if not ratios_ok or self.insert_ratio + self.update_ratio > 1:
            raise ValueError("GeneratorSpec insert_ratio and update_ratio must be in [0, 1] and sum to at most 1")
        if self.boolean_style not in ("mysql", "postgres"):
            raise ValueError(f"GeneratorSpec.boolean_style must be 'mysql' or 'postgres', got {self.boolean_style!r}")
        if self.start_time.tzinfo is not None:
            raise ValueError("GeneratorSpec.start_time must be naive (DMS timestamps carry no zone)")


DEFAULT_SPEC = GeneratorSpec()


@dataclass
class TableResult:
    """What was generated for one table; keys are relative to the landing folder, in DMS order."""

    table: str
    load_files: list[str]
    cdc_files: list[str]
    expected_rows: int
    changes: dict[str, int]  # CDC rows written per Op: {"I": .., "U": .., "D": ..}


@dataclass
class GenerationResult:
    landing: Path
    expected: Path
    tables: list[TableResult]


# --------------------------------------------------------------------------------------------------
# Column types: realistic values, boundary values, key values, CSV text and Arrow types
# --------------------------------------------------------------------------------------------------

_INT_RANGES = {
    "tinyint": (-(2**7), 2**7 - 1),
    "smallint": (-(2**15), 2**15 - 1),
    "int": (-(2**31), 2**31 - 1),
    "bigint": (-(2**63), 2**63 - 1),
}
_ARROW_TYPES = {
    "tinyint": pa.int8(),
    "smallint": pa.int16(),
    "int": pa.int32(),
    "bigint": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "string": pa.string(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us"),
    "timestamp_ltz": pa.timestamp("us"),
    "binary": pa.binary(),
}


@dataclass(frozen=True)
class _Column:
    name: str
    type: str  # canonical spelling from config.normalize_type
    nullable: bool
    is_key: bool

    @property
    def family(self) -> str:
        if self.type.startswith("decimal"):
            return "decimal"
        if self.type in _INT_RANGES:
            return "int"
        return "timestamp" if self.type == "timestamp_ltz" else self.type

    @property
    def precision_scale(self) -> tuple[int, int]:
        match = DECIMAL_TYPE.match(self.type)
        if match is None:
            raise TypeError(f"column {self.name} is not a decimal")
        return int(match[1]), int(match[2])

    @property
    def arrow_type(self) -> pa.DataType:
        if self.family == "decimal":
            return pa.decimal128(*self.precision_scale)
        return _ARROW_TYPES[self.type]


@dataclass(frozen=True)
class _Context:
    """What realistic values depend on besides the column: the range of referenced ids and 'now'."""

    id_range: int
    now: datetime


ValueFactory = Callable[[random.Random], Any]

_FIRST_NAMES = [
    "Alice", "Bob", "Chloé", "Dmitri", "Emma", "François", "Grace", "Hiroshi", "Ingrid", "José", "Kwame",
    "Léa", "Mohammed", "Nora", "Øyvind", "Priya", "Quentin", "Renée", "Sven", "Tomás", "Wei", "Yuki", "Zoë",
]  # fmt: skip
_LAST_NAMES = [
    "Anderson", "Berg", "Chen", "Dubois", "Eriksson", "García", "Huang", "Ivanova", "Jensen", "Kowalski",
    "López", "Müller", "Nakamura", "O'Brien", "Petrov", "Rossi", "Schmidt", "Tanaka", "van der Berg", "Yılmaz",
]  # fmt: skip
_DOMAINS = ["example.com", "mail.example.org", "shop.example.net"]
_STATUSES = ["pending", "paid", "shipped", "delivered", "cancelled", "refunded"]
_COUNTRIES = ["US", "DE", "FR", "JP", "BR", "IN", "GB", "ES", "NG", "SE"]
_CITIES = ["Berlin", "São Paulo", "Zürich", "東京", "Lagos", "New York", "Kraków", "Montréal", "Mumbai"]
_CURRENCIES = ["USD", "EUR", "JPY", "GBP", "BRL", "INR"]
_STREETS = ["Main", "Oak", "Station", "Lindenstraße", "Rue de la Paix", "High"]
_WORDS = ["alpha", "bravo", "delta", "echo", "kilo", "lima", "oscar", "sierra", "tango", "zulu"]
_NOTES = [
    "", "Leave at the front door", "Call before delivery, please", 'Customer said "ASAP"',
    "Gift wrap\nNo invoice in the box", "VIP — handle with care", "Rückruf erbeten", "配達前に電話してください",
    "Fragile 📦", "Second attempt, 10:00-12:00",
]  # fmt: skip
# Strings that stress CSV writers and readers; every one must come back unchanged.
_EDGE_STRINGS = [
    "", "café é", "日本語テキスト", "emoji 🎉🚀 mix", "comma, inside", 'quote " inside', '"quoted"',
    "line1\nline2", "crlf1\r\nline2\r\n", 'multi, "all"\r\nof\nthem', " leading space", "trailing space ",
    "   ", "tab\tinside", "pipe|semi;colon", "back\\slash\\", 'escaped \\"quote\\"', "null", "x" * 600,
]  # fmt: skip


def _ascii(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


def _full_name(rng: random.Random) -> str:
    return f"{rng.choice(_FIRST_NAMES)} {rng.choice(_LAST_NAMES)}"


def _email(rng: random.Random) -> str:
    local = _ascii(f"{rng.choice(_FIRST_NAMES)}.{rng.choice(_LAST_NAMES)}").lower()
    return f"{local.replace(' ', '').replace(chr(39), '')}{rng.randint(1, 9999)}@{rng.choice(_DOMAINS)}"


def _chooser(options: Sequence[Any]) -> ValueFactory:
    return lambda rng: rng.choice(options)


_STRING_HINTS: list[tuple[tuple[str, ...], ValueFactory]] = [
    (("email",), _email),
    (("first_name", "firstname", "given_name"), _chooser(_FIRST_NAMES)),
    (("last_name", "lastname", "surname", "family_name"), _chooser(_LAST_NAMES)),
    (("status", "state"), _chooser(_STATUSES)),
    (("sku",), lambda rng: f"SKU-{rng.randint(0, 999_999):06d}"),
    (("country",), _chooser(_COUNTRIES)),
    (("city",), _chooser(_CITIES)),
    (("phone",), lambda rng: f"+1-555-{rng.randint(0, 9999):04d}"),
    (("currency",), _chooser(_CURRENCIES)),
    (("note", "comment", "description", "remark", "memo"), _chooser(_NOTES)),
    (("address", "street"), lambda rng: f"{rng.randint(1, 300)} {rng.choice(_STREETS)}, Apt {rng.randint(1, 40)}"),
    (("url", "link"), lambda rng: f"https://example.com/{rng.choice(_WORDS)}/{rng.randint(1, 9999)}"),
    (("name",), _full_name),
]
_INT_HINTS: list[tuple[tuple[str, ...], tuple[int, int]]] = [
    (("quantity", "qty"), (1, 10)),
    (("age",), (18, 90)),
    (("year",), (1990, 2025)),
    (("line", "position", "rank"), (1, 20)),
    (("count", "num", "stock"), (0, 500)),
]
_INT_DEFAULTS = {"tinyint": (0, 100), "smallint": (0, 10_000), "int": (0, 1_000_000), "bigint": (0, 10**12)}
_MONEY_WORDS = ("amount", "price", "total", "cost", "balance", "fee", "salary")


def _hinted(name: str, hints: Sequence[tuple[tuple[str, ...], Any]]) -> Any:
    for needles, value in hints:
        if any(needle in name for needle in needles):
            return value
    return None


def _string_factory(column: _Column, context: _Context) -> ValueFactory:
    factory = _hinted(column.name.lower(), _STRING_HINTS)
    return factory or (lambda rng: f"{rng.choice(_WORDS)}-{rng.randint(1, 9999)}")


def _int_factory(column: _Column, context: _Context) -> ValueFactory:
    name = column.name.lower()
    bounds = (1, max(1, context.id_range)) if name == "id" or name.endswith("_id") else _hinted(name, _INT_HINTS)
    low, high = bounds or _INT_DEFAULTS[column.type]
    type_low, type_high = _INT_RANGES[column.type]
    low, high = max(low, type_low), min(high, type_high)
    return lambda rng: rng.randint(low, high)


def _decimal_factory(column: _Column, context: _Context) -> ValueFactory:
    precision, scale = column.precision_scale
    max_units = 10**precision - 1
    if any(word in column.name.lower() for word in _MONEY_WORDS):
        low, high = max(1, 10**scale // 2), min(max_units, 5000 * 10**scale)
        low = min(low, high)
    else:
        high = min(max_units, 100_000 * 10**scale)
        low = -high
    return lambda rng: Decimal(rng.randint(low, high)).scaleb(-scale)


def _double_factory(column: _Column, context: _Context) -> ValueFactory:
    name = column.name.lower()
    if column.type == "float":  # multiples of 1/4 are exact in float32 and print the same as doubles
        return (lambda rng: rng.randint(1, 160) / 4) if "weight" in name else (lambda rng: rng.randint(-4000, 4000) / 4)
    hints: list[tuple[tuple[str, ...], ValueFactory]] = [
        (("weight", "kg", "mass"), lambda rng: round(rng.uniform(0.05, 40), 3)),
        (_MONEY_WORDS, lambda rng: round(rng.uniform(1, 500), 2)),
        (("lat",), lambda rng: round(rng.uniform(-90, 90), 6)),
        (("lon", "lng"), lambda rng: round(rng.uniform(-180, 180), 6)),
        (("rate", "ratio", "pct", "percent", "score"), lambda rng: round(rng.random(), 4)),
    ]
    return _hinted(name, hints) or (lambda rng: round(rng.uniform(-1000, 1000), 3))


def _boolean_factory(column: _Column, context: _Context) -> ValueFactory:
    name = column.name.lower()
    likely = name.startswith(("is_", "has_")) or "active" in name or "enabled" in name
    chance = 0.8 if likely else 0.5
    return lambda rng: rng.random() < chance


def _date_factory(column: _Column, context: _Context) -> ValueFactory:
    name = column.name.lower()
    if "birth" in name or "dob" in name:
        return lambda rng: date(1940, 1, 1) + timedelta(days=rng.randint(0, 66 * 365))
    today = context.now.date()
    return lambda rng: today - timedelta(days=rng.randint(1, 3650))


def _timestamp_factory(column: _Column, context: _Context) -> ValueFactory:
    now = context.now
    return lambda rng: now - timedelta(microseconds=rng.randint(1, 400 * 86_400 * 10**6))


def _binary_factory(column: _Column, context: _Context) -> ValueFactory:
    return lambda rng: rng.randbytes(rng.randint(1, 16))


_FACTORIES: dict[str, Callable[[_Column, _Context], ValueFactory]] = {
    "string": _string_factory,
    "int": _int_factory,
    "decimal": _decimal_factory,
    "double": _double_factory,
    "float": _double_factory,
    "boolean": _boolean_factory,
    "date": _date_factory,
    "timestamp": _timestamp_factory,
    "binary": _binary_factory,
}


def _boundary_values(column: _Column, delimiter: str) -> list[Any]:
    """Values at the edges of the column's type (and the CSV format), NULL last when nullable."""
    family = column.family
    values: list[Any]
    if family == "int":
        low, high = _INT_RANGES[column.type]
        values = [low, high, 0, -1]
    elif family == "decimal":
        precision, scale = column.precision_scale
        top = 10**precision - 1
        values = [Decimal(units).scaleb(-scale) for units in (top, -top, 0, 1, -1, 123 % (top + 1))]
    elif family in ("double", "float"):
        biggest = 3.4028234663852886e38 if family == "float" else 1.7976931348623157e308
        tiny = [0.5] if family == "float" else [1e-300, 0.1, -2.5e-05, 123456789.123456]
        values = [0.0, -1.5, biggest, -biggest, *tiny]
    else:
        values = list(_FIXED_BOUNDARIES[family])
        if family == "string" and delimiter not in "".join(values):
            values.append(f"delimiter{delimiter}inside")
    return [*values, None] if column.nullable else values


_FIXED_BOUNDARIES: dict[str, list[Any]] = {
    "boolean": [True, False],
    "date": [date(1970, 1, 1), date(2099, 12, 31), date(2024, 2, 29), date(2000, 1, 1)],
    "timestamp": [
        datetime(1970, 1, 1, 0, 0, 0, 1),
        datetime(2099, 12, 31, 23, 59, 59, 999999),
        datetime(2024, 2, 29, 23, 59, 59, 1),
        datetime(2025, 1, 1, 0, 0, 0, 0),
    ],
    "string": _EDGE_STRINGS,
    "binary": [b"", b"\x00\xff\x10", bytes(range(32))],
}


def _key_maker(column: _Column) -> tuple[Callable[[int], Any], int | None]:
    """How the n-th value (n >= 0) of a primary-key column is made, and how many such values the type holds."""
    family = column.family
    if family == "int":
        return (lambda n: n + 1), _INT_RANGES[column.type][1]
    if family == "decimal":
        precision, scale = column.precision_scale
        return (lambda n: Decimal(n + 1).scaleb(-scale)), 10**precision - 1
    if family == "string":
        prefix = _ascii(column.name[:3]).upper() or "K"
        return (lambda n: f"{prefix}-{n + 1:07d}"), None
    makers: dict[str, tuple[Callable[[int], Any], int | None]] = {
        "date": (lambda n: date(2000, 1, 1) + timedelta(days=n), (date.max - date(2000, 1, 1)).days),
        "timestamp": (lambda n: datetime(2020, 1, 1) + timedelta(seconds=n, microseconds=n * 7919 % 10**6), 10**11),
        "double": (lambda n: float(n + 1), 2**53),
        "float": (lambda n: float(n + 1), 2**24),
        "boolean": (bool, 2),
        "binary": (lambda n: n.to_bytes(8, "big"), 2**63),
    }
    return makers[family]


class _KeyCodec:
    """Maps a key ordinal (0, 1, 2, ...) to distinct primary-key values, in primary-key order.

    Composite keys fan out like (order_id, line_no): later columns take a few values each, the first the rest.
    """

    def __init__(self, columns: list[_Column], table: str) -> None:
        self.columns = columns
        self.table = table
        self.radices = [2 if c.family == "boolean" else 4 if c.family == "int" else 3 for c in columns[1:]]
        made = [_key_maker(c) for c in columns]
        self.makers = [maker for maker, _ in made]
        self.capacity = made[0][1]

    def digits(self, ordinal: int) -> list[int]:
        rest: list[int] = []
        quotient = ordinal
        for radix in reversed(self.radices):
            quotient, digit = divmod(quotient, radix)
            rest.append(digit)
        if self.capacity is not None and quotient >= self.capacity:
            raise ConfigError(
                f"table {self.table}: primary key column {self.columns[0].name} ({self.columns[0].type}) cannot hold "
                f"{ordinal + 1} distinct keys; use fewer rows and changes or a wider key type"
            )
        return [quotient, *reversed(rest)]

    def values(self, ordinal: int) -> Row:
        return tuple(make(digit) for make, digit in zip(self.makers, self.digits(ordinal), strict=True))

    def bulk(self, count: int) -> list[list[Any]]:
        """Key values of ordinals 0..count-1, one list per key column."""
        if count == 0:
            return [[] for _ in self.columns]
        self.digits(count - 1)
        if len(self.columns) == 1:
            return [list(map(self.makers[0], range(count)))]
        return [list(values) for values in zip(*map(self.values, range(count)), strict=True)]


# --------------------------------------------------------------------------------------------------
# CSV and Parquet rendering
# --------------------------------------------------------------------------------------------------


def csv_field(text: str, delimiter: str = ",") -> str:
    """Quote a string value as DMS does (RFC 4180): iff it holds the delimiter, a quote, CR, LF or edge spaces."""
    if delimiter in text or '"' in text or "\n" in text or "\r" in text or text != text.strip():
        return '"' + text.replace('"', '""') + '"'
    return text


def _timestamp_text(value: datetime) -> str:
    return value.isoformat(" ", "microseconds")


_PLAIN_TEXT: dict[str, Callable[[Any], str]] = {
    "int": str,
    "decimal": lambda value: format(value, "f"),
    "double": repr,
    "float": repr,
    "date": date.isoformat,
    "timestamp": _timestamp_text,
    "string": str,
}
_BOOLEAN_TEXT = {"mysql": {True: "1", False: "0"}, "postgres": {True: "true", False: "false"}}


def _plain_text(column: _Column, boolean_style: str) -> Callable[[Any], str]:
    """A value's text before CSV quoting."""
    if column.family == "boolean":
        return _BOOLEAN_TEXT[boolean_style].__getitem__
    if column.family == "binary":
        raise ConfigError(f"column {column.name}: binary columns can be generated for Parquet only")
    return _PLAIN_TEXT[column.family]


class _TextMemo(dict[Any, str]):
    """value -> CSV field, rendering each distinct value once."""

    def __init__(self, render: Callable[[Any], str], null_text: str) -> None:
        super().__init__()
        self.render = render
        self[None] = null_text

    def __missing__(self, value: Any) -> str:
        text = self[value] = self.render(value)
        return text


class _CsvRenderer:
    """Turns rows of one table into CSV text the way the configured DMS endpoint writes it."""

    def __init__(self, columns: list[_Column], dms: DmsSettings, boolean_style: str) -> None:
        self.delimiter = dms.csv_delimiter
        self.null_text = dms.csv_null_value
        self.columns = columns
        self.plain = [_plain_text(c, boolean_style) for c in columns]

    def _field(self, position: int) -> Callable[[Any], str]:
        if self.columns[position].family != "string":
            return self.plain[position]
        empty = '""' if self.null_text == "" else ""
        delimiter = self.delimiter
        return lambda value: csv_field(value, delimiter) if value else empty

    def column(self, position: int, values: Sequence[Any]) -> list[str]:
        texts = list(map(_TextMemo(self._field(position), self.null_text).__getitem__, values))
        if self.columns[position].family == "string" and self.null_text != "":
            empties = [index for index, value in enumerate(values) if value == ""]
            for count, index in enumerate(empties):
                if count % 4 == 1:  # mostly bare, sometimes quoted: both mean the empty string
                    texts[index] = '""'
        return texts

    def text(self, header: list[str] | None, before: list[list[str]], rows: list[Row], after: list[list[Any]]) -> str:
        columns = list(zip(*rows, strict=True)) if rows else [() for _ in self.columns]
        fields = [*before, *(self.column(p, values) for p, values in enumerate(columns)), *after]
        lines = [self.delimiter.join(header)] if header else []
        lines.extend(map(self.delimiter.join, zip(*fields, strict=True)))
        return "\n".join(lines) + "\n" if lines else ""


# --------------------------------------------------------------------------------------------------
# The table model: columns, key codec, value pools and boundary rows
# --------------------------------------------------------------------------------------------------


class _TableModel:
    def __init__(self, table: TableSpec, dms: DmsSettings, spec: GeneratorSpec) -> None:
        self.table = table
        self.columns = [_Column(c.name, c.type, c.nullable, c.name in table.primary_key) for c in table.columns]
        position = {c.name: index for index, c in enumerate(self.columns)}
        self.key_positions = [position[name] for name in table.primary_key]
        self.value_positions = [index for index, c in enumerate(self.columns) if not c.is_key]
        self.string_positions = [p for p in self.value_positions if self.columns[p].family == "string"]
        self.codec = _KeyCodec([self.columns[p] for p in self.key_positions], table.name)
        self.key_of = operator.itemgetter(*self.key_positions)
        self._null_text = dms.csv_null_value
        self._boolean_style = spec.boolean_style
        context = _Context(id_range=max(1, spec.initial_rows), now=spec.start_time)
        size = min(20_000, max(64, spec.initial_rows + spec.cdc_files * spec.changes_per_file + spec.cached_changes))
        rng = random.Random(f"{spec.seed}/{table.name}/values")
        self.pools = [self._pool(c, context, rng, size) for c in self.columns]
        boundaries = {p: self._acceptable(self.columns[p], _boundary_values(self.columns[p], dms.csv_delimiter))
                      for p in self.value_positions}  # fmt: skip
        width = max((len(values) for values in boundaries.values()), default=0)
        # Shift each column by its position so that rows mix different edge values (NULL here, empty there).
        self.boundary_rows = [
            {p: values[(i + p) % len(values)] for p, values in boundaries.items()} for i in range(width)
        ]
        if any(self.columns[p].nullable for p in self.value_positions):
            self.boundary_rows.append({p: None if self.columns[p].nullable else boundaries[p][0] for p in boundaries})

    def _acceptable(self, column: _Column, values: list[Any]) -> list[Any]:
        """Drop values DMS would write as the NULL marker: nobody could tell them from NULL."""
        if column.family == "binary":
            return values
        plain = _plain_text(column, self._boolean_style)
        keep_empty = column.family == "string"  # written quoted when the NULL marker is the empty string
        return [v for v in values if v is None or plain(v) != self._null_text or (keep_empty and v == "")]

    def _pool(self, column: _Column, context: _Context, rng: random.Random, size: int) -> list[Any]:
        if column.is_key:
            return []
        make = _FACTORIES[column.family](column, context)
        values = [make(rng) for _ in range(size)]
        if column.nullable:
            values += [None] * max(1, size // 20)
        pool = self._acceptable(column, values)
        if not pool:
            raise ConfigError(f"table {self.table.name}, column {column.name}: every generated value prints as NULL")
        return pool

    def initial_rows(self, count: int, rng: random.Random) -> list[Row]:
        keys = dict(zip(self.key_positions, self.codec.bulk(count), strict=True))
        columns = [keys[p] if p in keys else rng.choices(self.pools[p], k=count) for p in range(len(self.columns))]
        return list(zip(*columns, strict=True))

    def new_row(self, ordinal: int, rng: random.Random) -> Row:
        row = [pool[rng.randrange(len(pool))] if pool else None for pool in self.pools]
        for position, value in zip(self.key_positions, self.codec.values(ordinal), strict=True):
            row[position] = value
        return tuple(row)

    def changed_row(self, row: Row, rng: random.Random) -> Row:
        """The row with one or two non-key values changed (when the table has any)."""
        if not self.value_positions:
            return row
        for _ in range(8):
            changed = list(row)
            for position in rng.sample(self.value_positions, min(2, len(self.value_positions))):
                pool = self.pools[position]
                changed[position] = pool[rng.randrange(len(pool))]
            if tuple(changed) != row:
                break
        return tuple(changed)

    @staticmethod
    def with_values(row: Row, values: dict[int, Any]) -> Row:
        return tuple(values.get(position, value) for position, value in enumerate(row))

    def nulled(self, row: Row) -> Row:
        return self.with_values(row, {p: None for p in self.value_positions if self.columns[p].nullable})

    def emptied(self, row: Row) -> Row:
        return self.with_values(row, dict.fromkeys(self.string_positions, ""))


# --------------------------------------------------------------------------------------------------
# Simulating one source table: initial rows, cached changes, LOAD files, CDC files with edge cases
# --------------------------------------------------------------------------------------------------


@dataclass
class _Change:
    op: str
    row: Row
    ts: datetime = _DEFAULT_START  # commit time, set when the file's transactions get their timestamps
    seq: str = ""


@dataclass
class _Step:
    """A scripted part of an edge case, run at a random place inside CDC file ``file``."""

    file: int
    size: int
    run: Callable[[], list[_Change]]
    one_commit: bool = False  # its changes share one commit timestamp (when timestamp_ties)


@dataclass
class _LoadFile:
    ts: datetime
    rows: list[Row]


@dataclass
class _CdcFile:
    written_at: datetime
    changes: list[_Change]


@dataclass
class _TablePlan:
    load_files: list[_LoadFile]
    cdc_files: list[_CdcFile]
    source_rows: dict[int, Row]  # the simulated source table at the end
    ghost_rows: list[Row]  # after-images of updates to keys the source never had: the replay upserts them


class _Simulation:
    """One source table over time. Source operations are strict (like the database); edge cases are scripted."""

    def __init__(self, model: _TableModel, spec: GeneratorSpec, batch_interval_s: int, table_index: int) -> None:
        self.model = model
        self.spec = spec
        self.rng = random.Random(f"{spec.seed}/{model.table.name}/changes")
        self.interval = timedelta(seconds=batch_interval_s)
        self.table_index = table_index
        self.rows: dict[int, Row] = {}
        self.reserved: set[int] = set()  # live keys that random changes leave alone (scripted edge cases own them)
        self.recent: deque[int] = deque(maxlen=32)
        self.ghost_rows: list[Row] = []
        self.next_ordinal = 0

    # -- the source database ------------------------------------------------------------------------

    def _new_ordinal(self) -> int:
        self.next_ordinal += 1
        return self.next_ordinal - 1

    def _insert(self, ordinal: int, row: Row | None = None) -> _Change:
        if ordinal in self.rows:
            raise AssertionError(f"generator bug: insert of existing key {ordinal}")
        self.rows[ordinal] = row if row is not None else self.model.new_row(ordinal, self.rng)
        return _Change("I", self.rows[ordinal])

    def _update(self, ordinal: int, row: Row | None = None) -> _Change:
        if ordinal not in self.rows:
            raise AssertionError(f"generator bug: update of missing key {ordinal}")
        self.rows[ordinal] = row if row is not None else self.model.changed_row(self.rows[ordinal], self.rng)
        return _Change("U", self.rows[ordinal])

    def _delete(self, ordinal: int) -> _Change:
        return _Change("D", self.rows.pop(ordinal))

    def _pick(self) -> int | None:
        """A random live key that no edge case holds; recently touched keys are favoured, as in real workloads."""
        rng = self.rng
        if self.recent and rng.random() < 0.25:
            candidate = rng.choice(self.recent)
            if candidate in self.rows and candidate not in self.reserved:
                return candidate
        for _ in range(32 if self.next_ordinal else 0):
            candidate = rng.randrange(self.next_ordinal)
            if candidate in self.rows and candidate not in self.reserved:
                return candidate
        live = [key for key in self.rows if key not in self.reserved]
        return rng.choice(live) if live else None

    def _pick_or_insert(self, changes: list[_Change]) -> int:
        ordinal = self._pick()
        if ordinal is None:
            ordinal = self._new_ordinal()
            changes.append(self._insert(ordinal))
        return ordinal

    def _random_change(self) -> _Change:
        draw = self.rng.random()
        if draw >= self.spec.insert_ratio:
            ordinal = self._pick()
            if ordinal is not None:
                self.recent.append(ordinal)
                if draw < self.spec.insert_ratio + self.spec.update_ratio:
                    return self._update(ordinal)
                return self._delete(ordinal)
        ordinal = self._new_ordinal()
        self.recent.append(ordinal)
        return self._insert(ordinal)

    # -- the timeline ---------------------------------------------------------------------------------

    def run(self) -> _TablePlan:
        start = self.spec.start_time
        self._initial_state()
        cached = self._stamp(self._cached_transactions(), start + _CACHED_FROM, _CACHED_SPAN_US)
        load_files = self._load_files()
        load_end = start + _LOAD_FROM + len(load_files) * _LOAD_FILE_GAP
        steps = self._edge_steps() if self.spec.edge_cases and self.spec.cdc_files else []
        span_us = self.interval // timedelta(microseconds=1)
        name_offset = timedelta(milliseconds=_TABLE_NAME_OFFSET_MS * self.table_index)
        cdc_files = []
        for index in range(self.spec.cdc_files):
            window = load_end + index * self.interval
            transactions = self._file_transactions([s for s in steps if s.file == index])
            changes = self._stamp(transactions, window, span_us)
            if index == 0:
                changes = cached + changes
            jitter = timedelta(milliseconds=self.rng.randint(0, 99))
            cdc_files.append(_CdcFile(window + self.interval + name_offset + jitter, changes))
        return _TablePlan(load_files, cdc_files, self.rows, self.ghost_rows)

    def _initial_state(self) -> None:
        count = self.spec.initial_rows
        rows = self.model.initial_rows(count, self.rng)
        if self.spec.edge_cases:  # boundary values go through the full load too
            for ordinal, values in enumerate(self.model.boundary_rows[:count]):
                rows[ordinal] = self.model.with_values(rows[ordinal], values)
                self.reserved.add(ordinal)
        self.rows = dict(enumerate(rows))
        self.next_ordinal = count

    def _cached_transactions(self) -> list[list[_Change]]:
        """Changes made during the full load: the LOAD files show their result, the first CDC file repeats them."""
        count = self.spec.cached_changes
        forced: list[_Change] = []
        if self.spec.edge_cases and count:
            # I then U of a new key (re-applied I hits an existing key), U then D of a loaded key (re-applied U
            # hits a missing key), D of a loaded key (re-applied D is a no-op).
            fresh = self._new_ordinal()
            script: list[Callable[[], _Change]] = [partial(self._insert, fresh), partial(self._update, fresh)]
            updated = self._pick()
            if updated is not None:
                script += [partial(self._update, updated), partial(self._delete, updated)]
                self.reserved.add(updated)
            deleted = self._pick()
            if updated is not None:
                self.reserved.discard(updated)
            if deleted is not None:
                script.append(partial(self._delete, deleted))
            forced = [make() for make in script[:count]]
        transactions = [[change] for change in forced]
        return transactions + self._random_transactions(count - len(forced))

    def _random_transactions(self, count: int) -> list[list[_Change]]:
        return [[self._random_change() for _ in range(size)] for size in self._transaction_sizes(count)]

    def _transaction_sizes(self, total: int) -> list[int]:
        if not self.spec.timestamp_ties:
            return [1] * total
        sizes = []
        while total > 0:
            draw = self.rng.random()
            size = 1 if draw < 0.55 else self.rng.randint(2, 5) if draw < 0.9 else self.rng.randint(6, 30)
            sizes.append(min(size, total))
            total -= sizes[-1]
        return sizes

    def _stamp(self, transactions: list[list[_Change]], start: datetime, span_us: int) -> list[_Change]:
        """Give each transaction an increasing commit time within [start, start + span); return its changes."""
        count = len(transactions)
        if count <= span_us:
            offsets = sorted(self.rng.sample(range(span_us), count))
        else:  # more commits than microseconds: some must share one
            offsets = sorted(self.rng.randrange(span_us) for _ in range(count))
        changes = []
        for offset, transaction in zip(offsets, transactions, strict=True):
            ts = start + timedelta(microseconds=offset)
            for change in transaction:
                change.ts = ts
                changes.append(change)
        return changes

    def _load_files(self) -> list[_LoadFile]:
        rows = [self.rows[ordinal] for ordinal in sorted(self.rows)]  # DMS reads the table in key order
        size = self.spec.load_file_rows or max(1, len(rows))
        start = self.spec.start_time + _LOAD_FROM
        chunks = [rows[i : i + size] for i in range(0, len(rows), size)]
        return [_LoadFile(start + index * _LOAD_FILE_GAP, chunk) for index, chunk in enumerate(chunks)]

    def _file_transactions(self, steps: list[_Step]) -> list[list[_Change]]:
        """One CDC file: random transactions with the file's edge-case steps at random places, in step order."""
        budget = max(0, self.spec.changes_per_file - sum(step.size for step in steps))
        slots: list[int | _Step] = list(self._transaction_sizes(budget))
        places = sorted(self.rng.sample(range(len(slots) + len(steps)), len(steps)))
        for place, step in zip(places, steps, strict=True):
            slots.insert(place, step)
        transactions: list[list[_Change]] = []
        for slot in slots:
            if isinstance(slot, int):
                transactions.append([self._random_change() for _ in range(slot)])
                continue
            changes = slot.run()
            if slot.one_commit and self.spec.timestamp_ties:
                transactions.append(changes)
            else:
                transactions.extend([change] for change in changes)
        return [t for t in transactions if t]

    # -- scripted edge cases ------------------------------------------------------------------------

    def _edge_steps(self) -> list[_Step]:
        last = self.spec.cdc_files - 1
        first, second, third = 0, min(1, last), min(2, last)
        return [
            *self._boundary_steps(first, second, third),
            _Step(second, 9, self._same_commit_changes, one_commit=True),
            *self._insert_delete_insert(third),
            *self._update_delete_reinsert(first, second, third),
            *self._delete_for_good(first, last),
            _Step(second, 1, self._ghost_update),
            _Step(third, 1, self._ghost_delete),
            *self._null_then_empty(first, last),
        ]

    def _boundary_steps(self, first: int, second: int, third: int) -> list[_Step]:
        """Insert rows of boundary values (kept to the end), update three loaded rows to them, delete one."""
        inserted: list[int] = []
        boundary_rows = self.model.boundary_rows

        def insert_all() -> list[_Change]:
            changes = []
            for values in boundary_rows:
                ordinal = self._new_ordinal()
                self.reserved.add(ordinal)
                inserted.append(ordinal)
                row = self.model.with_values(self.model.new_row(ordinal, self.rng), values)
                changes.append(self._insert(ordinal, row))
            return changes

        def update_some() -> list[_Change]:
            changes: list[_Change] = []
            for values in boundary_rows[-3:]:
                ordinal = self._pick_or_insert(changes)
                self.reserved.add(ordinal)
                changes.append(self._update(ordinal, self.model.with_values(self.rows[ordinal], values)))
            return changes

        def delete_one() -> list[_Change]:  # a before-image full of multi-line and unicode text
            return [self._delete(inserted[0])] if inserted else []

        count = len(boundary_rows)
        return [_Step(first, count, insert_all), _Step(second, min(3, count), update_some), _Step(third, 1, delete_one)]

    def _same_commit_changes(self) -> list[_Change]:
        """Several changes to single keys within one commit: only row order tells their outcome."""
        changes: list[_Change] = []
        updated = self._pick_or_insert(changes)
        self.reserved.add(updated)
        changes += [self._update(updated) for _ in range(3)]
        fresh = self._new_ordinal()
        changes += [self._insert(fresh), self._update(fresh)]
        removed = self._pick_or_insert(changes)
        changes += [self._update(removed), self._delete(removed)]
        reinserted = self._pick_or_insert(changes)
        changes += [self._delete(reinserted), self._insert(reinserted)]
        self.reserved.discard(updated)
        return changes

    def _insert_delete_insert(self, file: int) -> list[_Step]:
        """insert -> delete -> insert of one new key inside one file: it ends inserted with the second values."""
        fresh = self._new_ordinal()
        self.reserved.add(fresh)

        def reinsert() -> list[_Change]:
            self.reserved.discard(fresh)
            return [self._insert(fresh)]

        return [
            _Step(file, 1, lambda: [self._insert(fresh)]),
            _Step(file, 1, lambda: [self._delete(fresh)]),
            _Step(file, 1, reinsert),
        ]

    def _update_delete_reinsert(self, first: int, second: int, third: int) -> list[_Step]:
        held: list[int] = []

        def update() -> list[_Change]:
            changes: list[_Change] = []
            held.append(self._pick_or_insert(changes))
            self.reserved.add(held[0])
            return [*changes, self._update(held[0])]

        def reinsert() -> list[_Change]:
            self.reserved.discard(held[0])
            return [self._insert(held[0])]

        return [
            _Step(first, 1, update),
            _Step(second, 1, lambda: [self._delete(held[0])]),
            _Step(third, 1, reinsert),
        ]

    def _delete_for_good(self, first: int, last: int) -> list[_Step]:
        """A key deleted and never re-inserted; a later repeated delete of it is a no-op."""
        deleted: list[_Change] = []

        def delete() -> list[_Change]:
            changes: list[_Change] = []
            ordinal = self._pick_or_insert(changes)
            deleted.append(self._delete(ordinal))
            return [*changes, deleted[0]]

        return [_Step(first, 1, delete), _Step(last, 1, lambda: [_Change("D", deleted[0].row)])]

    def _ghost_update(self) -> list[_Change]:
        """U of a key the source never had (e.g. a row DMS missed): the replay upserts it."""
        row = self.model.new_row(self._new_ordinal(), self.rng)
        self.ghost_rows.append(row)
        return [_Change("U", row)]

    def _ghost_delete(self) -> list[_Change]:
        """D of a key that never existed: a no-op."""
        return [_Change("D", self.model.new_row(self._new_ordinal(), self.rng))]

    def _null_then_empty(self, first: int, last: int) -> list[_Step]:
        """A row whose nullable values become NULL, then whose strings become empty (and stay so)."""
        held: list[int] = []

        def nulls() -> list[_Change]:
            changes: list[_Change] = []
            held.append(self._pick_or_insert(changes))
            self.reserved.add(held[0])
            return [*changes, self._update(held[0], self.model.nulled(self.rows[held[0]]))]

        def empties() -> list[_Change]:
            return [self._update(held[0], self.model.emptied(self.rows[held[0]]))]

        return [_Step(first, 1, nulls), _Step(last, 1, empties)]


def _assign_change_sequences(plans: list[_TablePlan]) -> None:
    """AR_H_CHANGE_SEQ-like values: commit time to the hundredth + a task-wide counter in commit order."""
    entries = [
        (change.ts, table_index, position, change)
        for table_index, plan in enumerate(plans)
        for position, change in enumerate(c for cdc in plan.cdc_files for c in cdc.changes)
    ]
    entries.sort(key=operator.itemgetter(0, 1, 2))
    for counter, (ts, _, _, change) in enumerate(entries, start=1):
        change.seq = f"{ts:%Y%m%d%H%M%S}{ts.microsecond // 10_000:02d}{counter:019d}"


# --------------------------------------------------------------------------------------------------
# Writing DMS files and the oracle
# --------------------------------------------------------------------------------------------------

_DATE_PARTS = {
    "YYYYMMDD": ("%Y", "%m", "%d"),
    "YYYYMMDDHH": ("%Y", "%m", "%d", "%H"),
    "YYYYMM": ("%Y", "%m"),
    "MMYYYYDD": ("%m", "%Y", "%d"),
    "DDMMYYYY": ("%d", "%m", "%Y"),
}
_DATE_DELIMITERS = {"SLASH": "/", "DASH": "-", "UNDERSCORE": "_", "NONE": ""}


class _TableWriter:
    """Writes one table's LOAD and CDC files under the landing folder, named and laid out as DMS does."""

    def __init__(self, config: PipelineConfig, model: _TableModel, landing: Path, spec: GeneratorSpec) -> None:
        self.dms = config.dms
        self.model = model
        self.landing = landing
        self.prefix = config.table_prefix(model.table)
        self.gzip = self.dms.compression == "gzip"
        self.parquet = self.dms.format == "parquet"
        self.extension = ".parquet" if self.parquet else ".csv.gz" if self.gzip else ".csv"
        self.csv = None if self.parquet else _CsvRenderer(model.columns, self.dms, spec.boolean_style)

    def load_file(self, index: int, load: _LoadFile) -> str:
        key = f"{self.prefix}LOAD{index + 1:08X}{self.extension}"
        count = len(load.rows)
        with_op = self.dms.include_op_for_full_load
        before = [["I"] * count] if with_op else []
        if self.dms.timestamp_column:
            before.append([_timestamp_text(load.ts)] * count)
        no_sequence = None if self.parquet else ""  # full-load rows carry no change sequence
        self._write(key, with_op, before, load.rows, [no_sequence] * count)
        return key

    def cdc_file(self, cdc: _CdcFile) -> str:
        written = cdc.written_at
        name = f"{written:%Y%m%d-%H%M%S}{written.microsecond // 1000:03d}{self.extension}"
        folder = ""
        if self.dms.date_partition_enabled:
            parts = _DATE_PARTS[self.dms.date_partition_sequence]
            folder = _DATE_DELIMITERS[self.dms.date_partition_delimiter].join(written.strftime(p) for p in parts) + "/"
        key = f"{self.prefix}{folder}{name}"
        before = [[change.op for change in cdc.changes]]
        if self.dms.timestamp_column:
            before.append([_timestamp_text(change.ts) for change in cdc.changes])
        self._write(key, True, before, [change.row for change in cdc.changes], [change.seq for change in cdc.changes])
        return key

    def _header(self, with_op: bool) -> list[str]:
        return [
            *(["Op"] if with_op else []),
            *([self.dms.timestamp_column] if self.dms.timestamp_column else []),
            *self.model.table.column_names,
            *([self.dms.change_sequence_column] if self.dms.change_sequence_column else []),
        ]

    def _write(self, key: str, with_op: bool, before: list[list[str]], rows: list[Row], sequences: list[Any]) -> None:
        path = self.landing / key
        path.parent.mkdir(parents=True, exist_ok=True)
        after = [sequences] if self.dms.change_sequence_column else []
        if self.csv is None:
            table = self._arrow_table(self._header(with_op), [*before, *after], rows, len(before))
            pq.write_table(table, path, compression="gzip" if self.gzip else "none", version="1.0")
            return
        header = self._header(with_op) if self.dms.add_column_name else None
        data = self.csv.text(header, before, rows, after).encode("utf-8")
        if self.gzip:
            with path.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as packed:
                packed.write(data)
        else:
            path.write_bytes(data)

    def _arrow_table(self, names: list[str], extra: list[list[Any]], rows: list[Row], split: int) -> pa.Table:
        """Op and timestamp strings (extra[:split]), the typed columns, then the change sequence (extra[split:])."""
        columns = list(zip(*rows, strict=True)) if rows else [() for _ in self.model.columns]
        typed = [pa.array(values, type=c.arrow_type) for c, values in zip(self.model.columns, columns, strict=True)]
        strings = [pa.array(values, type=pa.string()) for values in extra]
        return pa.Table.from_arrays([*strings[:split], *typed, *strings[split:]], names=names)


def _replay(plan: _TablePlan, key_of: Callable[[Row], Any]) -> dict[Any, Row]:
    """The replay contract on the rows as written: LOAD rows, then CDC rows in file and row order."""
    table: dict[Any, Row] = {}
    for load in plan.load_files:
        table.update(zip(map(key_of, load.rows), load.rows, strict=True))
    for cdc in plan.cdc_files:
        for change in cdc.changes:
            if change.op == "D":
                table.pop(key_of(change.row), None)
            else:  # I on an existing key and U on a missing key are upserts
                table[key_of(change.row)] = change.row
    return table


def _check_against_source(table: str, replayed: dict[Any, Row], plan: _TablePlan, key_of: Callable[[Row], Any]) -> None:
    expected = {key_of(row): row for row in plan.source_rows.values()}
    expected.update((key_of(row), row) for row in plan.ghost_rows)
    if replayed != expected:
        missing = len(expected.keys() - replayed.keys())
        extra = len(replayed.keys() - expected.keys())
        raise AssertionError(
            f"generator bug: replaying the files of {table} does not give the simulated source "
            f"({missing} key(s) missing, {extra} extra, {len(replayed)} replayed rows)"
        )


def _check_supported(config: PipelineConfig, tables: list[TableSpec], landing: Path) -> None:
    for table in tables:
        if config.dms.format == "csv":
            for column in table.columns:
                if column.type == "binary":
                    raise ConfigError(
                        f"table {table.name}, column {column.name}: the generator writes binary columns to Parquet "
                        "only (how DMS renders binary in CSV is unconfirmed); use dms.format: parquet"
                    )
        folder = landing / config.table_prefix(table)
        if folder.exists() and any(folder.iterdir()):
            raise FileExistsError(f"{folder} already holds files; generate into an empty output folder")


def generate(
    config: PipelineConfig, out_dir: Path, spec: GeneratorSpec = DEFAULT_SPEC, *, tables: list[str] | None = None
) -> GenerationResult:
    """Write DMS files for the tables under ``out_dir/landing`` and the oracle under ``out_dir/expected``.

    ``tables`` selects tables by ``<schema>.<table>`` name (default: all configured). The oracle holds one
    ``<schema>.<table>.jsonl`` per table: the replay of exactly the written rows, in DMS order.
    """
    out_dir = Path(out_dir)
    selected = [config.table(name) for name in tables] if tables is not None else list(config.tables)
    landing, expected = out_dir / "landing", out_dir / "expected"
    _check_supported(config, selected, landing)
    expected.mkdir(parents=True, exist_ok=True)
    work: list[tuple[TableResult, _TableWriter, _TablePlan]] = []
    for index, table in enumerate(selected):
        model = _TableModel(table, config.dms, spec)
        plan = _Simulation(model, spec, config.dms.cdc_max_batch_interval, index).run()
        writer = _TableWriter(config, model, landing, spec)
        load_keys = [writer.load_file(i, load) for i, load in enumerate(plan.load_files)]
        replayed = _replay(plan, model.key_of)
        _check_against_source(table.name, replayed, plan, model.key_of)
        names = table.column_names
        with (expected / f"{table.name}.jsonl").open("w", encoding="utf-8", newline="\n") as out:
            write_jsonl((dict(zip(names, row, strict=True)) for row in replayed.values()), table, out)
        counts = dict.fromkeys("IUD", 0)
        for cdc in plan.cdc_files:
            for change in cdc.changes:
                counts[change.op] += 1
        work.append((TableResult(table.name, load_keys, [], len(replayed), counts), writer, plan))
        plan.source_rows = {}  # the oracle is written: free the source's copy
    _assign_change_sequences([plan for _, _, plan in work])
    for result, writer, plan in work:
        result.cdc_files = [writer.cdc_file(cdc) for cdc in plan.cdc_files if cdc.changes]
        logger.info(
            "generated %s: %d LOAD file(s), %d CDC file(s) with %s changes, %d expected rows",
            result.table, len(result.load_files), len(result.cdc_files), result.changes, result.expected_rows,
        )  # fmt: skip
    return GenerationResult(landing=landing, expected=expected, tables=[result for result, _, _ in work])


def _cdc_time(key: str) -> str:
    order = order_key_for(key.rsplit("/", 1)[-1])
    if order is None:
        raise ValueError(f"{key} is not a CDC file name")
    return order[1]


def land_order(result: GenerationResult) -> list[str]:
    """Every generated key in the order DMS wrote them: LOAD files per table, then all CDC files by time."""
    keys = [key for table in result.tables for key in table.load_files]
    cdc = sorted((_cdc_time(key), index, key) for index, table in enumerate(result.tables) for key in table.cdc_files)
    return keys + [key for _, _, key in cdc]
