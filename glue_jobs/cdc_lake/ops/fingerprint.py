"""A row's fingerprint, computed alike inside PostgreSQL, MySQL/MariaDB and Spark: what ``verify`` sums per key
range on each side, so that only ranges whose sums differ are looked at row by row.

Each compared column becomes a canonical text, the same in every engine for the same value:

- integers: decimal digits; decimals: plain digits with exactly the configured scale (no exponent);
- floats: the 16 hex digits of the value's IEEE 754 double bits (a REAL widens exactly), zero as ``0``;
  MySQL has no bit access, so the bits are rebuilt from ``LOG2`` and powers of two, which are exact for
  normal numbers;
- booleans ``1``/``0``; dates ``YYYY-MM-DD``; timestamps ``YYYY-MM-DD HH:MM:SS.ffffff`` (UTC sessions);
  binary as lower-case hex; strings as they are.

A field is ``N`` for NULL; a string is ``V<length>:<text>``, any other value ``V<text>;`` (its text never holds
``;``, and is computed once: a length would compute it twice), so no two rows share a text by moving a separator. The
fingerprint is the first 60 bits of the MD5 of the UTF-8 text, a non-negative BIGINT. A sum of fingerprints
may be equal for different rows only by chance (about 2^-60); rows found equal by their sums are equal, and
rows found different are compared value by value before anything is reported. Identifiers are quoted, and
no data value is ever part of the SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from cdc_lake.core.config import DECIMAL_TYPE, ColumnSpec
from cdc_lake.core.sql import quote as spark_quote

Dialect = Literal["postgres", "mysql"]
INTEGERS = ("tinyint", "smallint", "int", "integer", "bigint")
FLOATS = ("float", "double")
# Types whose canonical text every engine can produce; a column of another type is not compared.
COMPARABLE = (*INTEGERS, *FLOATS, "boolean", "string", "date", "timestamp", "binary")
TWO_TO_52 = "4503599627370496"


def comparable(column: ColumnSpec) -> bool:
    return column.type in COMPARABLE or column.type.startswith("varchar") or DECIMAL_TYPE.match(column.type) is not None


def quote(name: str, dialect: Dialect) -> str:
    mark = '"' if dialect == "postgres" else "`"
    return mark + name.replace(mark, mark * 2) + mark


# Per dialect: how a field wraps its canonical text ({name} the column, {text} the text), a string's sized and any
# other value's ended; and each type family's canonical text ({p}, {s}: a decimal's precision and scale). "string"
# serves every other comparable type.
_SIZED = {
    "postgres": "(CASE WHEN {name} IS NULL THEN 'N' ELSE 'V' || char_length({text}) || ':' || {text} END)",
    "mysql": "IF({name} IS NULL, 'N', CONCAT('V', CHAR_LENGTH({text}), ':', {text}))",
    "spark": "CASE WHEN {name} IS NULL THEN 'N' ELSE concat('V', length({text}), ':', {text}) END",
}
_ENDED = {
    "postgres": "(CASE WHEN {name} IS NULL THEN 'N' ELSE 'V' || {text} || ';' END)",
    "mysql": "IF({name} IS NULL, 'N', CONCAT('V', {text}, ';'))",
    "spark": "CASE WHEN {name} IS NULL THEN 'N' ELSE concat('V', {text}, ';') END",
}
_ENDED_FAMILIES = ("decimal", "float", "boolean", "date", "timestamp", "binary")  # texts without a ';'
# Spark prints a decimal of scale 7 or more in exponent form (1.000E-7), and format_number is exact but slow:
# below that scale a cast gives the plain digits.
PLAIN_CAST_SCALE = 6
_TEXTS: dict[str, dict[str, str]] = {
    "postgres": {
        "decimal": "CAST({name} AS numeric({p},{s}))::text",
        "float": "(CASE WHEN {name} = 0 THEN '0' ELSE encode(float8send({name}::float8), 'hex') END)",
        "boolean": "(CASE WHEN {name} THEN '1' ELSE '0' END)",
        "date": "to_char({name}, 'YYYY-MM-DD')",
        "timestamp": "to_char({name}, 'YYYY-MM-DD HH24:MI:SS.US')",
        "binary": "encode({name}, 'hex')",
        "string": "concat({name})",  # the output function's text: a cast to text would drop char(n)'s padding
    },
    "mysql": {
        "decimal": "CAST(CAST({name} AS DECIMAL({p},{s})) AS CHAR)",
        "float": "",  # _mysql_double_bits
        "boolean": "IF({name} <> 0, '1', '0')",
        "date": "DATE_FORMAT({name}, '%Y-%m-%d')",
        "timestamp": "DATE_FORMAT({name}, '%Y-%m-%d %H:%i:%s.%f')",
        "binary": "LOWER(HEX({name}))",
        "string": "CAST({name} AS CHAR)",
    },
    "spark": {
        "decimal": "replace(format_number({name}, {s}), ',', '')",  # exact and plain (a cast prints 1.000E-7)
        "float": "(CASE WHEN {name} = 0 THEN '0' ELSE lower(lpad(hex(CAST(reflect('java.lang.Double', "
        "'doubleToLongBits', CAST({name} AS DOUBLE)) AS BIGINT)), 16, '0')) END)",
        "boolean": "(CASE WHEN {name} THEN '1' ELSE '0' END)",
        "date": "date_format({name}, 'yyyy-MM-dd')",
        "timestamp": "date_format({name}, 'yyyy-MM-dd HH:mm:ss.SSSSSS')",
        "binary": "lower(hex({name}))",
        "string": "CAST({name} AS STRING)",
    },
}


def source_fingerprint(columns: Sequence[ColumnSpec], dialect: Dialect) -> str:
    """A SQL expression giving each row's fingerprint (BIGINT) at the source."""
    fields = [_field(c, dialect) for c in columns]
    if dialect == "postgres":
        return f"('x' || substr(md5({' || '.join(fields)}), 1, 15))::bit(60)::bigint"
    text = "CONCAT(" + ", ".join(fields) + ")"
    return f"CAST(CONV(SUBSTRING(MD5(CONVERT({text} USING utf8mb4)), 1, 15), 16, 10) AS UNSIGNED)"


def spark_fingerprint(columns: Sequence[ColumnSpec]) -> str:
    """The same fingerprint as a Spark SQL expression over the lake table's columns."""
    text = "concat(" + ", ".join(_field(c, "spark") for c in columns) + ")"
    return f"CAST(conv(substr(md5({text}), 1, 15), 16, 10) AS BIGINT)"


def _field(column: ColumnSpec, engine: Dialect | Literal["spark"]) -> str:
    name = spark_quote(column.name) if engine == "spark" else quote(column.source, engine)
    decimal = DECIMAL_TYPE.match(column.type)
    family = "decimal" if decimal else "float" if column.type in FLOATS else column.type
    template = _TEXTS[engine].get(family, _TEXTS[engine]["string"])
    precision, scale = (decimal[1], decimal[2]) if decimal else ("", "")
    if engine == "mysql" and family == "float":
        text = _mysql_double_bits(name)
    elif engine == "spark" and decimal and int(scale) <= PLAIN_CAST_SCALE:
        text = f"CAST({name} AS STRING)"
    else:
        text = template.format(name=name, p=precision, s=scale)
    wrap = _ENDED if column.type in INTEGERS or family in _ENDED_FAMILIES else _SIZED
    return wrap[engine].format(name=name, text=text)


def _mysql_double_bits(name: str) -> str:
    """The IEEE 754 bits of a double, rebuilt with exact operations: for a normal number the exponent from LOG2
    (kept within the normal range, then corrected by one either way) and the 52-bit fraction scaled by powers of
    two; for a subnormal one the fraction alone, scaled by 2^1074 in two exact steps."""
    magnitude = f"ABS({name})"
    guess = f"LEAST(GREATEST(FLOOR(LOG2({magnitude})), -1022), 1023)"
    exponent = f"({guess} + ({magnitude} / POW(2, {guess}) >= 2) - ({magnitude} / POW(2, {guess}) < 1))"
    fraction = f"CAST(({magnitude} / POW(2, {exponent}) - 1) * {TWO_TO_52} AS UNSIGNED)"
    normal = f"(CAST({exponent} + 1023 AS UNSIGNED) << 52) | {fraction}"
    subnormal = f"CAST({magnitude} * POW(2, 1022) * {TWO_TO_52} AS UNSIGNED)"
    bits = f"((({name} < 0) << 63) | IF({magnitude} < POW(2, -1022), {subnormal}, {normal}))"
    return f"IF({name} = 0, '0', LOWER(LPAD(HEX({bits}), 16, '0')))"
