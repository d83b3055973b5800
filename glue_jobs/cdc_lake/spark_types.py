"""Configured column types as Spark types: the type a value is parsed as, and the type the lake stores."""

from __future__ import annotations

from pyspark.sql import types as T

from cdc_lake.config import DECIMAL_TYPE

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


def lake_type(column_type: str) -> T.DataType:
    """The Spark type of the Iceberg column; Iceberg has no 8- or 16-bit integers."""
    if column_type in ("tinyint", "smallint"):
        return T.IntegerType()
    return parse_type(column_type)
