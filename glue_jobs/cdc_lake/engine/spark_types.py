"""Configured column types as Spark types: the type a value is parsed as, and the type the lake stores."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_lake.core.config import DECIMAL_TYPE

_SIMPLE: dict[str, T.DataType] = {
    "boolean": T.BooleanType(),
    "tinyint": T.ByteType(),
    "smallint": T.ShortType(),
    "int": T.IntegerType(),
    "bigint": T.LongType(),
    "float": T.FloatType(),
    "double": T.DoubleType(),
    "string": T.StringType(),
    "date": T.DateType(),
    # DMS DATETIME carries no zone: an Iceberg `timestamp` (Spark TIMESTAMP_NTZ) keeps it unshifted.
    "timestamp": T.TimestampNTZType(),
    "timestamp_ltz": T.TimestampType(),
    "binary": T.BinaryType(),
}


def parse_type(column_type: str) -> T.DataType:
    """The Spark type a DMS value of this configured type is parsed into (range checks included)."""
    match = DECIMAL_TYPE.match(column_type)
    if match:
        return T.DecimalType(int(match[1]), int(match[2]))
    return _SIMPLE[column_type]


def config_type(data_type: T.DataType) -> str:
    """The configuration's spelling of a Spark type (as a Parquet file's field reads), e.g. ``decimal(15,2)``."""
    if isinstance(data_type, T.DecimalType):
        return f"decimal({data_type.precision},{data_type.scale})"
    if isinstance(data_type, T.TimestampNTZType):
        return "timestamp"
    for name, simple in _SIMPLE.items():
        if simple == data_type:
            return name
    return "string"  # structs, arrays, intervals: kept as their text


def lake_type(column_type: str) -> T.DataType:
    """The Spark type of the Iceberg column; Iceberg has no 8- or 16-bit integers."""
    if column_type in ("tinyint", "smallint"):
        return T.IntegerType()
    return parse_type(column_type)


def try_cast(column_name: str, target: T.DataType) -> Column:
    """NULL when the value does not fit, whatever spark.sql.ansi.enabled says ("1.5" is no int, 300 no tinyint).

    Only a configured column name and type go into the expression, never a value.
    """
    quoted = "`" + column_name.replace("`", "``") + "`"
    return F.expr(f"try_cast({quoted} AS {target.simpleString()})")


def strict_parse(column_name: str, column_type: str) -> tuple[Column, Column]:
    """The named text (or typed) column as the configured type, and whether that failed.

    A value is never silently truncated or rounded: "1.5" is no bigint, "1.005" no decimal(12,2).
    """
    _casts, value, fault = staged_parse(column_name, column_type, None)
    return value, fault


def staged_parse(column_name: str, column_type: str, stem: str | None) -> tuple[list[Column], Column, Column]:
    """``strict_parse`` in two steps, so that each value is cast once: the casts (to select first, named from
    ``stem``), then the parsed value and whether parsing failed, both reading those columns.

    With ``stem`` None the casts are not named and the value and fault hold them inline (one step).
    """
    quoted = "`" + column_name.replace("`", "``") + "`"
    raw = F.col(quoted)
    cast = try_cast(column_name, parse_type(column_type))
    casts = [cast if stem is None else cast.alias(f"{stem}_value")]
    value = cast if stem is None else F.col(f"`{stem}_value`")
    fault = raw.isNotNull() & value.isNull()
    match = DECIMAL_TYPE.match(column_type)
    if match:
        # A cast rounds extra decimal places; parse with more of them too, so rounding shows up as a fault.
        precision, scale = int(match[1]), int(match[2])
        wide_cast = try_cast(column_name, T.DecimalType(38, scale + 38 - precision))
        casts.append(wide_cast if stem is None else wide_cast.alias(f"{stem}_wide"))
        wide = wide_cast if stem is None else F.col(f"`{stem}_wide`")
        fault = fault | (value.isNotNull() & (wide.isNull() | (wide != value)))
    return casts, value, fault
