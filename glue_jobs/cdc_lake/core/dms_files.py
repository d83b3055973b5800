"""What a DMS object key means: which table, full load or CDC, and where it falls in DMS order.

Pure Python, shared by the Lambda's routing and the jobs' planning, so both read keys the same way.
Layout: ``[<bucket_folder>/]<schema>/<table>/[<date folders>/]<file>`` (see shared dms-format notes).
"""

from __future__ import annotations

import datetime as dt
import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from cdc_lake.core.config import DmsSettings, PipelineConfig, TableSpec
from cdc_lake.core.exceptions import NotADmsFileError, OutsideDmsFolderError, UnknownTableError
from cdc_lake.core.names import JobKind
from cdc_lake.core.storage import ObjectStore, StoredObject

# Full-load files: LOAD<counter>, or LOAD_<segment>_<counter> when a table is loaded in parallel segments (the
# naming of DMS's ancestor Qlik Replicate; unconfirmed for DMS). Counters are hexadecimal.
_LOAD_NAME = re.compile(
    r"^LOAD(?:_(?P<segment>[0-9A-Fa-f]{1,8})_)?(?P<counter>[0-9A-Fa-f]{8})\.(?P<format>csv|parquet)(?P<gzip>\.gz)?$"
)
# CDC names are a timestamp: date, dash, time digits; the digit count varies by DMS version.
_CDC_NAME = re.compile(r"^(?P<date>\d{8})-(?P<time>\d{6,})\.(?P<format>csv|parquet)(?P<gzip>\.gz)?$")
_DATE_FOLDER = re.compile(r"^\d{2,10}(?:[-_]\d{2,4}){0,3}$")
_TIME_WIDTH = 24
# How DMS names its date folders (DatePartitionSequence, DatePartitionDelimiter): strftime parts, joined.
DATE_FOLDER_PARTS: Mapping[str, tuple[str, ...]] = {
    "YYYYMMDD": ("%Y", "%m", "%d"),
    "YYYYMMDDHH": ("%Y", "%m", "%d", "%H"),
    "YYYYMM": ("%Y", "%m"),
    "MMYYYYDD": ("%m", "%Y", "%d"),
    "DDMMYYYY": ("%d", "%m", "%Y"),
}
DATE_FOLDER_DELIMITERS: Mapping[str, str] = {"SLASH": "/", "DASH": "-", "UNDERSCORE": "_", "NONE": ""}


def date_folder(dms: DmsSettings, moment: dt.datetime, parts: Sequence[str] | None = None) -> str:
    """The date folder DMS writes a file into at ``moment`` (no trailing slash); ``parts`` narrows the parts."""
    chosen = DATE_FOLDER_PARTS[dms.date_partition_sequence] if parts is None else parts
    return DATE_FOLDER_DELIMITERS[dms.date_partition_delimiter].join(moment.strftime(p) for p in chosen)


class FileKind(enum.Enum):
    FULL_LOAD = "full_load"
    CDC = "cdc"


# The Glue job that applies each kind of file: the Lambda routes by it and each job checks its file against it.
JOB_FOR_FILE_KIND: Mapping[FileKind, JobKind] = {FileKind.FULL_LOAD: "full_load", FileKind.CDC: "cdc_replay"}


@dataclass(frozen=True, order=False)
class DmsFile:
    """One DMS data file of a configured table."""

    key: str
    table: str
    kind: FileKind
    format: str
    gzip: bool
    order_key: tuple[int, str, str]

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    @property
    def is_full_load(self) -> bool:
        return self.kind is FileKind.FULL_LOAD


def order_key_for(file_name: str) -> tuple[int, str, str] | None:
    """DMS order of a file name: LOAD files, then CDC files by timestamp; None if not a data file.

    LOAD files sort by segment (none = 0), then hex counter. Every LOAD file holds each of its keys once and all of
    them precede the CDC files, so their order among themselves only has to be deterministic, not meaningful:
    parallel-load segments are accepted rather than refused.
    """
    load = _LOAD_NAME.match(file_name)
    if load:
        segment = int(load["segment"] or "0", 16)  # decimal digits read as hex keep their order
        return (0, f"{segment:012d}{int(load['counter'], 16):012d}", file_name)
    cdc = _CDC_NAME.match(file_name)
    if cdc:
        # Right-pad the time digits so names with different fraction widths still compare as times.
        return (1, cdc["date"] + cdc["time"].ljust(_TIME_WIDTH, "0"), file_name)
    return None


def parse_key(key: str, config: PipelineConfig) -> DmsFile:
    """Interpret a decoded object key; raises NotADmsFileError or UnknownTableError with the reason."""
    relative = key
    folder = config.dms.bucket_folder
    if folder:
        if not key.startswith(folder + "/"):
            raise OutsideDmsFolderError(f"{key}: outside the DMS folder {folder!r}/")
        relative = key[len(folder) + 1 :]
    parts = relative.split("/")
    if len(parts) < 3 or not all(parts):
        raise NotADmsFileError(f"{key}: not <schema>/<table>/<file> under the DMS folder")
    schema, table, *middle, file_name = parts
    order = order_key_for(file_name)
    if order is None:
        raise NotADmsFileError(
            f"{key}: {file_name!r} is neither a LOAD file (LOAD<hex8>, LOAD_<segment>_<hex8>) "
            "nor a timestamp-named CDC file"
        )
    kind = FileKind.FULL_LOAD if order[0] == 0 else FileKind.CDC
    if middle and (kind is FileKind.FULL_LOAD or not all(_DATE_FOLDER.match(m) for m in middle)):
        raise NotADmsFileError(f"{key}: unexpected sub-folder(s) {'/'.join(middle)!r} between table and file")
    table_name = f"{schema}.{table}"
    if not config.has_table(table_name):
        raise UnknownTableError(f"{key}: table {table_name!r} is not in the configuration")
    match = _LOAD_NAME.match(file_name) or _CDC_NAME.match(file_name)
    assert match is not None
    return DmsFile(
        key=key,
        table=table_name,
        kind=kind,
        format=match["format"],
        gzip=bool(match["gzip"]),
        order_key=order,
    )


def table_files(keys: list[str], table: TableSpec, config: PipelineConfig) -> list[DmsFile]:
    """The data files of one table among listed keys, in DMS order; other objects are skipped."""
    prefix = config.table_prefix(table)
    files = []
    for key in keys:
        if not key.startswith(prefix):
            continue
        try:
            dms_file = parse_key(key, config)
        except (NotADmsFileError, UnknownTableError):
            continue
        if dms_file.table == table.name:
            files.append(dms_file)
    return sorted(files, key=lambda f: f.order_key)


@dataclass(frozen=True)
class LandedFiles:
    """A table's data files as one listing of its folder showed them, in DMS order, with the object each was listed
    as (key, ETag, size); empty objects and other files are left out. ``start_after``: where the listing started
    (S3's StartAfter; None for the whole folder)."""

    files: list[DmsFile] = field(default_factory=list)
    objects: Mapping[str, StoredObject] = field(default_factory=dict)
    start_after: str | None = None

    @property
    def newest(self) -> DmsFile | None:
        return self.files[-1] if self.files else None

    @property
    def listed(self) -> list[StoredObject]:
        return [self.objects[f.key] for f in self.files]

    def covers(self, start_after: str | None) -> bool:
        """Whether this listing holds everything a listing from ``start_after`` would (it started no later)."""
        return self.start_after is None or (start_after is not None and self.start_after <= start_after)


def landed_files(
    listed: Iterable[StoredObject], table: TableSpec, config: PipelineConfig, start_after: str | None = None
) -> LandedFiles:
    """The table's data files among ``listed`` objects: the one place that drops empty objects and parses keys."""
    objects = {o.key: o for o in listed if o.size > 0}
    files = table_files(list(objects), table, config)
    return LandedFiles(files, {f.key: objects[f.key] for f in files}, start_after)


def list_landed(
    store: ObjectStore, config: PipelineConfig, table: TableSpec, start_after: str | None = None
) -> LandedFiles:
    """List the table's folder (from ``start_after``) once: its landed data files."""
    return landed_files(store.list(config.table_prefix(table), start_after=start_after), table, config, start_after)
