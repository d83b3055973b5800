"""The DMS output formats (the S3 endpoint's ``DataFormat``), and every fact about each that cdc-lake relies on.

The configuration's ``dms.format`` names one and a file's name says its own (``DmsFile.file_format``). Code elsewhere
asks the format's facts; where it must act differently per format (reading with Spark, writing as the generator), it
matches on ``DmsFormat.name`` with ``assert_never`` after the last case, so that mypy refuses a format left unhandled.
The S3 endpoint settings a format's files are written with live here too, so the CDK app sets the endpoint the way
the reader expects and a new format cannot be added without its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from cdc_lake.core.config import DmsSettings

FormatName = Literal["csv", "parquet"]
# ``AWS::DMS::Endpoint.S3Settings`` (CloudFormation and DMS API names) and their values.
EndpointSettings = dict[str, str | bool]
PARQUET_VERSION = "PARQUET_2_0"


@dataclass(frozen=True)
class DmsFormat:
    """One DMS output format."""

    name: FormatName
    label: str  # as messages name it
    # A file with no rows may still hold blank lines: it is probed before it is counted as data (a Parquet file
    # with no rows still has a footer).
    may_be_blank: bool
    # Each file names and types its own columns (a footer); otherwise a header names them, when DMS writes one.
    describes_itself: bool
    # A record takes one line unless a value spans lines: such files can be read in parallel parts, by line.
    splits_by_line: bool
    # Whether binary source values arrive as bytes; how DMS renders them in CSV is unconfirmed.
    keeps_binary: bool
    # Compression is inside the file (the name stays ``.parquet``), not over it (``.csv.gz``).
    compresses_inside: bool
    # The S3 endpoint settings of this format alone, from the configuration (``DataFormat`` is the name).
    endpoint_settings: Callable[[DmsSettings], EndpointSettings]

    def file_suffix(self, gzip: bool) -> str:
        """The suffix DMS gives this format's data files."""
        return f".{self.name}.gz" if gzip and not self.compresses_inside else f".{self.name}"

    def names_columns(self, add_column_name: bool) -> bool:
        """Whether files name their columns, given DMS's ``AddColumnName``: headerless CSV tells them by place only."""
        return self.describes_itself or add_column_name


def _csv_endpoint(dms: DmsSettings) -> EndpointSettings:
    """RFC 4180 quoting and ``\\n`` rows, as the reader parses them. ``CsvNullValue`` is left unset for
    ``csv_null_value: ""``: DMS's own default then writes NULL as an unquoted empty field (every real sample, none of
    which set it), whereas the API documents an explicit empty value only as "treat the empty string as the null
    value" and rejects empty strings for other S3 settings (``TimestampColumnName``)."""
    settings: EndpointSettings = {
        "CsvDelimiter": dms.csv_delimiter,
        "CsvRowDelimiter": "\n",
        "AddColumnName": dms.add_column_name,
        "Rfc4180": True,
    }
    if dms.csv_null_value:
        settings["CsvNullValue"] = dms.csv_null_value
    return settings


def _parquet_endpoint(dms: DmsSettings) -> EndpointSettings:
    """Timestamps in microseconds (the lake's precision) and column statistics; nothing here is configured."""
    return {"ParquetVersion": PARQUET_VERSION, "ParquetTimestampInMillisecond": False, "EnableStatistics": True}


CSV = DmsFormat(
    "csv",
    "CSV",
    may_be_blank=True,
    describes_itself=False,
    splits_by_line=True,
    keeps_binary=False,
    compresses_inside=False,
    endpoint_settings=_csv_endpoint,
)
PARQUET = DmsFormat(
    "parquet",
    "Parquet",
    may_be_blank=False,
    describes_itself=True,
    splits_by_line=False,
    keeps_binary=True,
    compresses_inside=True,
    endpoint_settings=_parquet_endpoint,
)
FORMATS: Mapping[FormatName, DmsFormat] = {f.name: f for f in (CSV, PARQUET)}
# The file-name alternation for the key patterns: every format, no other.
NAME_PATTERN = "|".join(FORMATS)
