"""The JSON Lines form of a table, shared by ``cdc-lake export`` and the generator's oracle.

One JSON object per row with keys in column order; NULL is null; integers and booleans are JSON numbers
and booleans; doubles are JSON numbers (Python's shortest round-trip repr); decimals are strings with
exactly the column's scale; dates are ``YYYY-MM-DD``; timestamps ``YYYY-MM-DD HH:MM:SS.ffffff``; binary
is base64. Rows are sorted by primary key, so two exports of equal tables are byte-identical.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

from cdc_lake.core.config import DECIMAL_TYPE, TableSpec


def converter(column_type: str) -> Callable[[Any], Any]:
    """The function rendering a non-NULL typed value (as Spark or the generator holds it) in export form."""
    match = DECIMAL_TYPE.match(column_type)
    if match:
        quantum = decimal.Decimal(1).scaleb(-int(match[2]))
        exact = decimal.Context(prec=int(match[1]) + 1)  # the default context's 28 digits cannot hold decimal(38,s)
        return lambda value: format(decimal.Decimal(value).quantize(quantum, context=exact), "f")
    if column_type in ("timestamp", "timestamp_ltz"):
        return _timestamp
    if column_type == "date":
        return lambda value: value.isoformat() if isinstance(value, dt.date) else str(value)
    if column_type == "binary":
        return lambda value: base64.b64encode(bytes(value)).decode("ascii")
    if column_type in ("float", "double"):
        return _number
    if column_type == "boolean":
        return bool
    if column_type in ("tinyint", "smallint", "int", "bigint"):
        return int
    return lambda value: value


def _timestamp(value: Any) -> str:
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value.isoformat(sep=" ", timespec="microseconds")
    return str(value)


def _number(value: Any) -> Any:
    number = float(value)
    return str(number) if math.isnan(number) or math.isinf(number) else number


def json_value(value: Any, column_type: str) -> Any:
    """Render one typed value in export form."""
    return None if value is None else converter(column_type)(value)


def row_encoder(table: TableSpec) -> Callable[[Mapping[str, Any]], str]:
    """A function turning a typed row into its JSON line (without newline); converters chosen once."""
    columns = [(c.name, converter(c.type)) for c in table.columns]
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

    def encode(row: Mapping[str, Any]) -> str:
        values = {}
        for name, convert in columns:
            value = row.get(name)
            values[name] = None if value is None else convert(value)
        return dumps(values)

    return encode


def json_row(row: Mapping[str, Any], table: TableSpec) -> dict[str, Any]:
    return {c.name: json_value(row.get(c.name), c.type) for c in table.columns}


def sort_key(row: Mapping[str, Any], table: TableSpec) -> tuple[Any, ...]:
    """Primary-key order with NULL-safe, type-stable components."""
    return tuple((row[k] is None, row[k] if row[k] is not None else 0) for k in table.primary_key)


def write_jsonl(rows: Iterable[Mapping[str, Any]], table: TableSpec, out: TextIO) -> int:
    """Write already-typed rows sorted by primary key; returns the row count."""
    encode = row_encoder(table)
    count = 0
    for row in sorted(rows, key=lambda r: sort_key(r, table)):
        out.write(encode(row))
        out.write("\n")
        count += 1
    return count


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
