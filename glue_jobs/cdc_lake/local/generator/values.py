"""Column values: realistic ones by name and type, boundary ones, primary-key ones, and their CSV text."""

from __future__ import annotations

import operator
import random
import struct
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Context, Decimal
from typing import Any

import pyarrow as pa

from cdc_lake.core.config import DECIMAL_TYPE, DmsSettings, TableSpec
from cdc_lake.core.exceptions import ConfigError
from cdc_lake.local.generator.spec import GeneratorSpec, SchemaChange

Row = tuple[Any, ...]
_EXACT = Context(prec=40)  # the default context's 28 digits would round a decimal(38,s) value


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
    "timestamp_offset": pa.string(),
}
_UNSIGNED = {"UINT1": pa.uint8(), "UINT2": pa.uint16(), "UINT4": pa.uint32(), "UINT8": pa.uint64()}
# Offsets as SQL Server and Oracle write them: whole hours, half and quarter hours, both ends of the range.
_OFFSETS = ["+00:00", "+02:00", "-05:30", "+05:45", "+14:00", "-12:00", "+09:00", "-03:00"]


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # canonical spelling from config.normalize_type
    nullable: bool
    is_key: bool
    dms: str | None = None  # the DMS type its source type arrives as, when the configuration names it
    digits: int | None = None  # the fractional digits DMS writes of its timestamps, when fixed

    @property
    def int_range(self) -> tuple[int, int]:
        """The values the column can hold: its lake type's, or an unsigned DMS type's (a UINT fits a wider type)."""
        if self.dms in _UNSIGNED and self.dms != "UINT8":
            return 0, 2 ** (8 * int(self.dms[4:])) - 1
        return _INT_RANGES[self.type]

    @property
    def decimal_units(self) -> tuple[int, int]:
        """The smallest and largest unscaled value of a decimal column (UINT8 arrives as decimal(20,0))."""
        if self.dms == "UINT8":
            return 0, 2**64 - 1
        top = 10 ** self.precision_scale[0] - 1
        return -top, top

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
        if self.dms in _UNSIGNED:
            return _UNSIGNED[self.dms]
        if self.family == "decimal":
            return pa.decimal128(*self.precision_scale)
        return _ARROW_TYPES[self.type]


@dataclass(frozen=True)
class Shape:
    """The source table's columns when DMS wrote a file: positions in the (lake-wide) row and their types then."""

    positions: tuple[int, ...]
    columns: tuple[Column, ...]

    def project(self, rows: Sequence[Row], width: int) -> Sequence[Row]:
        """The rows cut to this shape's fields (the rows themselves when the shape has every column)."""
        if self.positions == tuple(range(width)):
            return rows
        pick = operator.itemgetter(*self.positions)
        if len(self.positions) == 1:
            return [(pick(row),) for row in rows]
        return [pick(row) for row in rows]


@dataclass(frozen=True)
class ValueContext:
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


def _string_factory(column: Column, context: ValueContext) -> ValueFactory:
    factory = _hinted(column.name.lower(), _STRING_HINTS)
    return factory or (lambda rng: f"{rng.choice(_WORDS)}-{rng.randint(1, 9999)}")


def _int_factory(column: Column, context: ValueContext) -> ValueFactory:
    name = column.name.lower()
    bounds = (1, max(1, context.id_range)) if name == "id" or name.endswith("_id") else _hinted(name, _INT_HINTS)
    low, high = bounds or _INT_DEFAULTS[column.type]
    type_low, type_high = column.int_range
    low, high = max(low, type_low), min(high, type_high)
    return lambda rng: rng.randint(low, high)


def _decimal_factory(column: Column, context: ValueContext) -> ValueFactory:
    _precision, scale = column.precision_scale
    min_units, max_units = column.decimal_units
    if any(word in column.name.lower() for word in _MONEY_WORDS):
        low, high = max(1, 10**scale // 2), min(max_units, 5000 * 10**scale)
        low = min(low, high)
    else:
        high = min(max_units, 100_000 * 10**scale)
        low = max(-high, min_units)
    return lambda rng: Decimal(rng.randint(low, high)).scaleb(-scale, _EXACT)


def _double_factory(column: Column, context: ValueContext) -> ValueFactory:
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


def _boolean_factory(column: Column, context: ValueContext) -> ValueFactory:
    name = column.name.lower()
    likely = name.startswith(("is_", "has_")) or "active" in name or "enabled" in name
    chance = 0.8 if likely else 0.5
    return lambda rng: rng.random() < chance


def _date_factory(column: Column, context: ValueContext) -> ValueFactory:
    name = column.name.lower()
    if "birth" in name or "dob" in name:
        return lambda rng: date(1940, 1, 1) + timedelta(days=rng.randint(0, 66 * 365))
    today = context.now.date()
    return lambda rng: today - timedelta(days=rng.randint(1, 3650))


def _timestamp_factory(column: Column, context: ValueContext) -> ValueFactory:
    now = context.now
    if column.digits == 0:  # Oracle's DATE: whole seconds
        return lambda rng: now.replace(microsecond=0) - timedelta(seconds=rng.randint(1, 400 * 86_400))
    return lambda rng: now - timedelta(microseconds=rng.randint(1, 400 * 86_400 * 10**6))


def _binary_factory(column: Column, context: ValueContext) -> ValueFactory:
    return lambda rng: rng.randbytes(rng.randint(1, 16))


def offset_text(moment: datetime, offset: str, digits: int) -> str:
    """A timestamp with its offset as DMS writes Oracle's TIMESTAMP WITH TIME ZONE and SQL Server's
    DATETIMEOFFSET: ``2024-01-15 10:30:00.1234567 +02:00`` (``digits`` fractional digits)."""
    fraction = f"{moment.microsecond:06d}{'0' * 3}"[:digits]
    return f"{moment:%Y-%m-%d %H:%M:%S}{'.' + fraction if digits else ''} {offset}"


def _offset_digits(column: Column) -> int:
    return 6 if column.digits is None else column.digits


def _offset_factory(column: Column, context: ValueContext) -> ValueFactory:
    stamp = _timestamp_factory(column, context)
    digits = _offset_digits(column)
    return lambda rng: offset_text(stamp(rng), rng.choice(_OFFSETS), digits)


_FACTORIES: dict[str, Callable[[Column, ValueContext], ValueFactory]] = {
    "string": _string_factory,
    "int": _int_factory,
    "decimal": _decimal_factory,
    "double": _double_factory,
    "float": _double_factory,
    "boolean": _boolean_factory,
    "date": _date_factory,
    "timestamp": _timestamp_factory,
    "binary": _binary_factory,
    "timestamp_offset": _offset_factory,
}


def _boundary_values(column: Column, delimiter: str) -> list[Any]:
    """Values at the edges of the column's type (and the CSV format), NULL last when nullable."""
    if column.dms == "NULL":
        return [None]
    family = column.family
    values: list[Any]
    if family == "int":
        low, high = column.int_range
        values = [low, high, 0, -1] if low < 0 else [low, high, 1]
    elif family == "decimal":
        scale = column.precision_scale[1]
        low, top = column.decimal_units
        units = (top, low, 0, 1, -1, 123 % (top + 1)) if low < 0 else (top, 0, 1, 123)
        values = [Decimal(unit).scaleb(-scale, _EXACT) for unit in units]
    elif family == "timestamp_offset":
        digits = _offset_digits(column)
        edges = [datetime(1970, 1, 1, 0, 0, 0, 1), datetime(2099, 12, 31, 23, 59, 59, 999999)]
        values = [offset_text(moment, offset, digits) for moment in edges for offset in ("+14:00", "-12:00")]
    elif family in ("double", "float"):
        biggest = 3.4028234663852886e38 if family == "float" else 1.7976931348623157e308
        tiny = [0.5] if family == "float" else [1e-300, 0.1, -2.5e-05, 123456789.123456]
        values = [0.0, -1.5, biggest, -biggest, *tiny]
    elif family == "timestamp" and column.digits == 0:
        values = list(dict.fromkeys(v.replace(microsecond=0) for v in _FIXED_BOUNDARIES[family]))
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


def _key_maker(column: Column) -> tuple[Callable[[int], Any], int | None]:
    """How the n-th value (n >= 0) of a primary-key column is made, and how many such values the type holds."""
    family = column.family
    if family == "int":
        return (lambda n: n + 1), column.int_range[1]
    if family == "decimal":
        precision, scale = column.precision_scale
        return (lambda n: Decimal(n + 1).scaleb(-scale, _EXACT)), 10**precision - 1
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


class KeyCodec:
    """Maps a key ordinal (0, 1, 2, ...) to distinct primary-key values, in primary-key order.

    Composite keys fan out like (order_id, line_no): later columns take a few values each, the first the rest.
    """

    def __init__(self, columns: list[Column], table: str) -> None:
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


def timestamp_text(value: datetime) -> str:
    return value.isoformat(" ", "microseconds")


def real_text(value: float) -> str:
    """A REAL (float32) as DMS writes it: signed exponent form, 9 significant digits (``+3.23800011e+01``)."""
    return format(struct.unpack("<f", struct.pack("<f", value))[0], "+.8e")


def double_text(value: float) -> str:
    """A DOUBLE as DMS writes it: signed exponent form, 17 significant digits (``+2.1804858784530072e+04``)."""
    return format(value, "+.16e")


_PLAIN_TEXT: dict[str, Callable[[Any], str]] = {
    "int": str,
    "decimal": lambda value: format(Decimal(value), "f"),  # an int stays exact (a BIGINT UNSIGNED source)
    "double": double_text,
    "float": real_text,
    "date": date.isoformat,
    "timestamp": timestamp_text,
    "string": str,
    "timestamp_offset": str,
}
_BOOLEAN_TEXT = {"mysql": {True: "1", False: "0"}, "postgres": {True: "true", False: "false"}}


def plain_text(column: Column, boolean_style: str) -> Callable[[Any], str]:
    """A value's text before CSV quoting."""
    if column.family == "boolean":
        return _BOOLEAN_TEXT[boolean_style].__getitem__
    if column.family == "binary":
        raise ConfigError(f"column {column.name}: binary columns can be generated for Parquet only")
    if column.family == "timestamp" and column.digits == 0:
        return lambda value: value.isoformat(" ", "seconds")
    return _PLAIN_TEXT[column.family]


class TableModel:
    """One table's columns, value pools and rows; rows are as wide as the configured (lake) columns.

    With scripted schema changes the model starts in the source's first shape (added columns absent, widened
    columns narrow) and ``apply`` moves it on; absent columns are NULL in every row the source writes.
    """

    def __init__(self, table: TableSpec, dms: DmsSettings, spec: GeneratorSpec) -> None:
        self.table = table
        changes = [c for c in spec.schema_changes if c.table == table.name]
        first_types = {c.column: c.from_type for c in changes if c.from_type is not None}
        self.columns = [
            Column(
                c.name,
                first_types.get(c.name) or c.type,
                c.nullable,
                c.name in table.primary_key,
                mapped.dms if (mapped := dms.source_mapping(c)) else None,
                mapped.digits if mapped else None,
            )
            for c in table.columns
        ]
        position = {c.name: index for index, c in enumerate(self.columns)}
        self.position = position
        self.absent = {position[c.column] for c in changes if c.kind == "add"}  # not in the source (yet, or now)
        self.key_positions = [position[name] for name in table.primary_key]
        self.value_positions = [index for index, c in enumerate(self.columns) if not c.is_key]
        self.string_positions = [p for p in self.value_positions if self.columns[p].family == "string"]
        self.codec = KeyCodec([self.columns[p] for p in self.key_positions], table.name)
        self.key_of = operator.itemgetter(*self.key_positions)
        self._null_text = dms.csv_null_value
        self.before_image = dms.before_image is not None
        self._boolean_style = spec.boolean_style
        self._context = ValueContext(id_range=max(1, spec.initial_rows), now=spec.start_time)
        self._pool_size = min(
            20_000, max(64, spec.initial_rows + spec.cdc_files * spec.changes_per_file + spec.cached_changes)
        )
        self._pool_rng = random.Random(f"{spec.seed}/{table.name}/values")
        self.pools = [self._pool(c, self._context, self._pool_rng, self._pool_size) for c in self.columns]
        boundaries = {p: self._acceptable(self.columns[p], _boundary_values(self.columns[p], dms.csv_delimiter))
                      for p in self.value_positions}  # fmt: skip
        width = max((len(values) for values in boundaries.values()), default=0)
        # Shift each column by its position so that rows mix different edge values (NULL here, empty there).
        self.boundary_rows = [
            {p: values[(i + p) % len(values)] for p, values in boundaries.items()} for i in range(width)
        ]
        if any(self.columns[p].nullable for p in self.value_positions):
            self.boundary_rows.append({p: None if self.columns[p].nullable else boundaries[p][0] for p in boundaries})

    @property
    def shape(self) -> Shape:
        """The source's columns now, as DMS writes them."""
        positions = tuple(p for p in range(len(self.columns)) if p not in self.absent)
        return Shape(positions, tuple(self.columns[p] for p in positions))

    @property
    def live_value_positions(self) -> list[int]:
        return [p for p in self.value_positions if p not in self.absent]

    def conform(self, row: Row) -> Row:
        """The row as the source holds it now: NULL in the columns it lacks (not added yet, or dropped)."""
        if not self.absent or all(row[p] is None for p in self.absent):
            return row
        return tuple(None if p in self.absent else value for p, value in enumerate(row))

    def apply(self, change: SchemaChange) -> None:
        """The source runs ``change`` (ALTER TABLE): the files written from now on have the new shape."""
        position = self.position[change.column]
        if change.kind == "add":
            self.absent.discard(position)
        elif change.kind == "drop":
            self.absent.add(position)
        else:
            old = self.columns[position]
            wide = Column(old.name, self.table.columns[position].type, old.nullable, old.is_key)
            self.columns[position] = wide
            self.pools[position] = self._pool(wide, self._context, self._pool_rng, self._pool_size)

    def beyond_narrow(self, change: SchemaChange) -> Any:
        """A value of a widened column that its type before ``change`` could not hold."""
        column = self.columns[self.position[change.column]]
        narrow = Column(column.name, change.from_type or column.type, column.nullable, column.is_key)
        if column.family == "int":
            return _INT_RANGES[narrow.type][1] + 1
        if column.family == "decimal":
            precision, scale = narrow.precision_scale
            return Decimal(10 ** (precision - scale))
        return 123456789.123456  # a double no float holds

    def _acceptable(self, column: Column, values: list[Any]) -> list[Any]:
        """Drop values DMS would write as the NULL marker: nobody could tell them from NULL."""
        if column.family == "binary":
            return values
        plain = plain_text(column, self._boolean_style)
        keep_empty = column.family == "string"  # written quoted when the NULL marker is the empty string
        return [v for v in values if v is None or plain(v) != self._null_text or (keep_empty and v == "")]

    def _pool(self, column: Column, context: ValueContext, rng: random.Random, size: int) -> list[Any]:
        if column.is_key:
            return []
        if column.dms == "NULL":  # a type DMS replicates as NULL (Oracle's BFILE, ROWID, ...)
            return [None]
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
        columns = [
            keys[p] if p in keys else [None] * count if p in self.absent else rng.choices(self.pools[p], k=count)
            for p in range(len(self.columns))
        ]
        return list(zip(*columns, strict=True))

    def new_row(self, ordinal: int, rng: random.Random) -> Row:
        row = [pool[rng.randrange(len(pool))] if pool else None for pool in self.pools]
        for position, value in zip(self.key_positions, self.codec.values(ordinal), strict=True):
            row[position] = value
        return self.conform(tuple(row))

    def changed_row(self, row: Row, rng: random.Random) -> Row:
        """The row with one or two non-key values changed (when the table has any)."""
        positions = self.live_value_positions
        if not positions:
            return row
        for _ in range(8):
            changed = list(row)
            for position in rng.sample(positions, min(2, len(positions))):
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
