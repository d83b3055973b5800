"""Configured column types as Spark types (the type a value is parsed as, and the type the lake stores), and
projections over them written as Spark SQL (``select_sql``)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator, Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_lake.core.config import DECIMAL_TYPE
from cdc_lake.core.sql import quote
from cdc_lake.engine.iceberg_java import java_class

JOB_DESCRIPTION = "spark.job.description"  # SparkContext's local property (setJobDescription)
_SEPARATOR = "\x1f"  # ASCII's unit separator, between the columns ``select_sql`` sends as one text
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
    # Oracle's TIMESTAMP WITH TIME ZONE and SQL Server's DATETIMEOFFSET arrive as text with their zone; Iceberg's
    # timestamptz would keep the instant only, so the lake keeps the text, checked to be a timestamp with a zone.
    "timestamp_offset": T.StringType(),
}
# A date, a time, up to 9 fractional digits, then a zone: an offset, Z, or a name (UTC, Europe/Paris).
OFFSET_TEXT = (
    "^[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]{1,9})? ?"
    "(Z|[+-][0-9]{1,2}(:?[0-9]{2})?|[A-Za-z][A-Za-z0-9_/+-]*)$"
)


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


def try_cast(expression: str, target: T.DataType) -> str:
    """SQL: NULL when the value does not fit, whatever spark.sql.ansi.enabled says ("1.5" is no int, 300 no
    tinyint). Only configured names and types go into the text, never a value."""
    return f"try_cast({expression} AS {target.simpleString()})"


def strict_parse(column_name: str, column_type: str) -> tuple[Column, Column]:
    """The named text (or typed) column as the configured type, and whether that failed.

    A value is never silently truncated or rounded: "1.5" is no bigint, "1.005" no decimal(12,2).
    """
    _casts, value, fault = staged_parse(column_name, column_type, None)
    return F.expr(value), F.expr(fault)


def staged_parse(column_name: str, column_type: str, stem: str | None) -> tuple[list[str], str, str]:
    """``strict_parse`` as SQL, in two steps so that each value is cast once: the casts (to select first, named
    from ``stem``), then the parsed value and whether parsing failed, both reading those columns.

    With ``stem`` None the casts are not named and the value and fault hold them inline (one step).
    """
    raw = quote(column_name)
    if column_type == "timestamp_offset":
        # The text is the value; the cast (to an instant) only checks that the text holds one.
        instant = f"try_cast({raw} AS TIMESTAMP)"
        casts = [instant if stem is None else f"{instant} AS {quote(stem + '_value')}"]
        parsed = instant if stem is None else quote(stem + "_value")
        bad = f"({raw} IS NOT NULL AND ({parsed} IS NULL OR NOT {raw} RLIKE '{OFFSET_TEXT}'))"
        return casts, raw, bad
    cast = try_cast(raw, parse_type(column_type))
    casts = [cast if stem is None else f"{cast} AS {quote(stem + '_value')}"]
    value = cast if stem is None else quote(stem + "_value")
    fault = f"({raw} IS NOT NULL AND {value} IS NULL)"
    match = DECIMAL_TYPE.match(column_type)
    if match:
        # A cast rounds extra decimal places; parse with more of them too, so rounding shows up as a fault. That
        # parse is a 38-digit decimal, slow (3 s of a 10M-row load), so only a text with more fractional digits
        # than the scale, or an exponent, pays it: no other text can round. The CASE keeps it from being computed
        # for every row.
        precision, scale = int(match[1]), int(match[2])
        wide = try_cast(raw, T.DecimalType(38, scale + 38 - precision))
        text = f"CAST({raw} AS STRING)"
        point = f"instr({text}, '.')"
        fits = f"({point} = 0 OR octet_length({text}) - {point} <= {scale})"
        fits += f" AND instr({text}, 'e') = 0 AND instr({text}, 'E') = 0"
        rounded = f"CASE WHEN {fits} THEN false ELSE coalesce({wide} <> {value}, true) END"
        fault = f"({fault} OR ({value} IS NOT NULL AND {rounded}))"
    return casts, value, fault


def select_sql(frame: DataFrame, columns: Sequence[str]) -> DataFrame:
    """``frame.select`` of columns written as Spark SQL (``selectExpr``), sent to the JVM as one text.

    A column built with ``pyspark.sql.functions`` costs a round trip to the JVM per function, and another when
    Python drops it; a list of texts costs one per item as py4j copies it: a table's read came to about a
    thousand. One text, split in the JVM, costs three. Identifiers go in through ``quote``, text through
    ``sql_string``; never a row's value.
    """
    spark = frame.sparkSession
    if any(_SEPARATOR in column for column in columns):  # only a configured text could hold it: the list it is
        return frame.selectExpr(*columns)
    texts = java_class(spark, "java.util.regex.Pattern").compile(_SEPARATOR).split(_SEPARATOR.join(columns))
    return DataFrame(frame._jdf.selectExpr(texts), spark)


@contextlib.contextmanager
def temp_view(frame: DataFrame, purpose: str) -> Iterator[str]:
    """``frame`` as a temporary view whose name no other query uses, for Spark SQL text; dropped after. A plan made
    from the text meanwhile keeps the frame's plan, not the view."""
    view = f"cdc_lake_{purpose}_{uuid.uuid4().hex}"
    frame._jdf.createOrReplaceTempView(view)
    try:
        yield view
    finally:
        frame.sparkSession._jsparkSession.catalog().dropTempView(view)


@contextlib.contextmanager
def described(spark: SparkSession, description: str) -> Iterator[None]:
    """The Spark jobs this thread starts inside, named ``description`` in the Spark UI (Glue's too) and the status
    store, where ``make bench`` finds each phase of a full load by it."""
    context = spark.sparkContext
    previous = context.getLocalProperty(JOB_DESCRIPTION)
    context.setLocalProperty(JOB_DESCRIPTION, description)
    try:
        yield
    finally:
        context.setLocalProperty(JOB_DESCRIPTION, previous)  # type: ignore[arg-type]  # None unsets it


def sql_over(frame: DataFrame, query: Callable[[str], str], purpose: str) -> DataFrame:
    """The Spark SQL text ``query(view)`` over ``frame`` as ``view``: one text and a handful of JVM round trips,
    where the same query built of ``pyspark.sql.functions`` costs some per function (``select_sql``)."""
    spark = frame.sparkSession
    with temp_view(frame, purpose) as view:
        return DataFrame(spark._jsparkSession.sql(query(view)), spark)


def local_relation(frame: DataFrame) -> DataFrame:
    """``frame``'s rows collected to the driver's JVM, as a local relation: one job, and the rows never pass through
    Python. Plans over it read no file and shuffle nothing; Spark folds projections and limits of it on the driver,
    without a job, and broadcasts it as it is."""
    rows = frame._jdf.collectAsList()
    return DataFrame(frame.sparkSession._jsparkSession.createDataFrame(rows, frame._jdf.schema()), frame.sparkSession)
