"""The DMS output formats (the S3 endpoint's ``DataFormat``), and every fact about each that cdc-lake relies on.

The configuration's ``dms.format`` names one and a file's name says its own (``DmsFile.file_format``). Code elsewhere
asks the format's facts; where it must act differently per format (reading with Spark, writing as the generator), it
matches on ``DmsFormat.name`` with ``assert_never`` after the last case, so that mypy refuses a format left unhandled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

FormatName = Literal["csv", "parquet"]


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

    def file_suffix(self, gzip: bool) -> str:
        """The suffix DMS gives this format's data files."""
        return f".{self.name}.gz" if gzip and not self.compresses_inside else f".{self.name}"

    def names_columns(self, add_column_name: bool) -> bool:
        """Whether files name their columns, given DMS's ``AddColumnName``: headerless CSV tells them by place only."""
        return self.describes_itself or add_column_name


CSV = DmsFormat(
    "csv",
    "CSV",
    may_be_blank=True,
    describes_itself=False,
    splits_by_line=True,
    keeps_binary=False,
    compresses_inside=False,
)
PARQUET = DmsFormat(
    "parquet",
    "Parquet",
    may_be_blank=False,
    describes_itself=True,
    splits_by_line=False,
    keeps_binary=True,
    compresses_inside=True,
)
FORMATS: Mapping[FormatName, DmsFormat] = {f.name: f for f in (CSV, PARQUET)}
# The file-name alternation for the key patterns: every format, no other.
NAME_PATTERN = "|".join(FORMATS)
