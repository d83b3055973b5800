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
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

from cdc_lake.config import DECIMAL_TYPE, TableSpec


def json_value(value: Any, column_type: str) -> Any:
    """Render one typed value (as Spark or the generator holds it) in the export form."""
    if value is None:
        return None
    if column_type.startswith("decimal"):
        match = DECIMAL_TYPE.match(column_type)
        assert match is not None
        scale = int(match[2])
        quantum = decimal.Decimal(1).scaleb(-scale)
        return format(decimal.Decimal(value).quantize(quantum), "f")
    if column_type in ("timestamp", "timestamp_ltz"):
        if isinstance(value, dt.datetime):
            if value.tzinfo is not None:
                value = value.astimezone(dt.UTC).replace(tzinfo=None)
            return value.strftime("%Y-%m-%d %H:%M:%S.%f")
        return str(value)
    if column_type == "date":
        return value.isoformat() if isinstance(value, dt.date) else str(value)
    if column_type == "binary":
        return base64.b64encode(bytes(value)).decode("ascii")
    if column_type in ("float", "double"):
        number = float(value)
        if math.isnan(number) or math.isinf(number):
            return str(number)
        return number
    if column_type == "boolean":
        return bool(value)
    if column_type in ("tinyint", "smallint", "int", "bigint"):
        return int(value)
    return value


def json_row(row: Mapping[str, Any], table: TableSpec) -> dict[str, Any]:
    return {c.name: json_value(row.get(c.name), c.type) for c in table.columns}


def sort_key(row: Mapping[str, Any], table: TableSpec) -> tuple[Any, ...]:
    """Primary-key order with NULL-safe, type-stable components."""
    return tuple((row[k] is None, row[k] if row[k] is not None else 0) for k in table.primary_key)


def write_jsonl(rows: Iterable[Mapping[str, Any]], table: TableSpec, out: TextIO) -> int:
    """Write already-typed rows sorted by primary key; returns the row count."""
    count = 0
    for row in sorted(rows, key=lambda r: sort_key(r, table)):
        out.write(json.dumps(json_row(row, table), ensure_ascii=False, separators=(",", ":")))
        out.write("\n")
        count += 1
    return count


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
