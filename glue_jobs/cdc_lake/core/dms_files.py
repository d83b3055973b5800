"""What a DMS object key means: which table, full load or CDC, and where it falls in DMS order.

Pure Python, shared by the Lambda's routing and the jobs' planning, so both read keys the same way.
Layout: ``[<bucket_folder>/]<schema>/<table>/[<date folders>/]<file>`` (see shared dms-format notes).
"""

from __future__ import annotations

import datetime as dt
import enum
import re
import zlib
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from cdc_lake.core.config import DmsSettings, PipelineConfig, TableSpec
from cdc_lake.core.exceptions import NotADmsFileError, OutsideDmsFolderError, UnknownTableError
from cdc_lake.core.formats import FORMATS, NAME_PATTERN, DmsFormat, FormatName
from cdc_lake.core.names import EXPIRED_MARK_PREFIX, WARM_MARKER_PREFIX, TriggeredJob
from cdc_lake.core.notices import Notice
from cdc_lake.core.storage import ObjectStore, StoredObject

# Full-load files: LOAD<counter>, or LOAD_<segment>_<counter> when a table is loaded in parallel segments (the
# naming of DMS's ancestor Qlik Replicate; unconfirmed for DMS). Counters are hexadecimal.
_LOAD_NAME = re.compile(
    r"^LOAD(?:_(?P<segment>[0-9A-Fa-f]{1,8})_)?(?P<counter>[0-9A-Fa-f]{8})"
    rf"\.(?P<format>{NAME_PATTERN})(?P<gzip>\.gz)?$"
)
# CDC names are a timestamp: date, dash, time digits; the digit count varies by DMS version.
_CDC_NAME = re.compile(rf"^(?P<date>\d{{8}})-(?P<time>\d{{6,}})\.(?P<format>{NAME_PATTERN})(?P<gzip>\.gz)?$")
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
JOB_FOR_FILE_KIND: Mapping[FileKind, TriggeredJob] = {FileKind.FULL_LOAD: "full_load", FileKind.CDC: "cdc_replay"}


@dataclass(frozen=True, order=False)
class DmsFile:
    """One DMS data file of a configured table."""

    key: str
    table: str
    kind: FileKind
    format: FormatName
    gzip: bool
    order_key: tuple[int, str, str]

    @property
    def file_format(self) -> DmsFormat:
        return FORMATS[self.format]

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


def load_counter(key: str) -> tuple[str, int] | None:
    """A LOAD file's key with its counter left out, and the counter (None: not a LOAD file's key). One load writes
    files whose keys differ only in consecutive counters."""
    folder, _, name = key.rpartition("/")
    load = _LOAD_NAME.match(name)
    if load is None:
        return None
    start, end = load.span("counter")
    return f"{folder}/{name[:start]}*{name[end:]}", int(load["counter"], 16)


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
        format=cast(FormatName, match["format"]),
        gzip=bool(match["gzip"]),
        order_key=order,
    )


def table_files(keys: list[str], table: TableSpec, config: PipelineConfig) -> list[DmsFile]:
    """The data files of one table among listed keys, in DMS order; other objects are skipped."""
    return _sorted_table_files(keys, table, config)[0]


def _sorted_table_files(keys: list[str], table: TableSpec, config: PipelineConfig) -> tuple[list[DmsFile], list[str]]:
    """The table's data files among ``keys`` in DMS order, and the keys in its folder that are no DMS data file."""
    prefix = config.table_prefix(table)
    files, foreign = [], []
    for key in keys:
        if not key.startswith(prefix):
            continue
        try:
            dms_file = parse_key(key, config)
        except NotADmsFileError:
            foreign.append(key)
            continue
        except UnknownTableError:
            continue
        if dms_file.table == table.name:
            files.append(dms_file)
    return sorted(files, key=lambda f: f.order_key), foreign


@dataclass(frozen=True)
class LandedFiles:
    """A table's data files as one listing of its folder showed them, in DMS order, with the object each was listed
    as (key, ETag, size); empty objects and other files are left out, and kept aside to be announced: ``empty``,
    objects with no content (0 bytes, or a CSV file of blank lines), and ``foreign``, keys in the table's folder
    that are no DMS data file. ``start_after``: where the listing started (S3's StartAfter; None for the whole
    folder)."""

    files: list[DmsFile] = field(default_factory=list)
    objects: Mapping[str, StoredObject] = field(default_factory=dict)
    start_after: str | None = None
    empty: tuple[str, ...] = ()
    foreign: tuple[str, ...] = ()

    @property
    def newest(self) -> DmsFile | None:
        return self.files[-1] if self.files else None

    @property
    def listed(self) -> list[StoredObject]:
        return [self.objects[f.key] for f in self.files]

    def notices(self) -> list[Notice]:
        """What the listing announces: its empty objects, and its objects whose name is no DMS file's."""
        empty = [
            Notice(
                "empty-object",
                key,
                "is empty (0 bytes, or blank lines): not applied and not recorded as applied. When DMS writes the "
                "file under this key, a run applies it; remove the object if nothing should be there",
            )
            for key in self.empty
        ]
        foreign = [
            Notice(
                "not-a-dms-file",
                key,
                "is in the table's folder, but its name is no DMS data file's (LOAD<hex8>, or a CDC timestamp): "
                "not applied. Move it out of the DMS folder",
            )
            for key in self.foreign
        ]
        return empty + foreign

    def covers(self, start_after: str | None) -> bool:
        """Whether this listing holds everything a listing from ``start_after`` would (it started no later)."""
        return self.start_after is None or (start_after is not None and self.start_after <= start_after)


def landed_files(
    listed: Iterable[StoredObject],
    table: TableSpec,
    config: PipelineConfig,
    start_after: str | None = None,
    blank: Collection[str] = (),
) -> LandedFiles:
    """The table's data files among ``listed`` objects: the one place that sets empty objects (0 bytes, or a key in
    ``blank``) aside and parses keys."""
    listed = list(listed)
    files, foreign = _sorted_table_files([o.key for o in listed], table, config)
    objects = {o.key: o for o in listed}
    empty = {f.key for f in files if objects[f.key].size == 0 or f.key in blank}
    kept = [f for f in files if f.key not in empty]
    return LandedFiles(
        kept, {f.key: objects[f.key] for f in kept}, start_after, tuple(sorted(empty)), tuple(sorted(foreign))
    )


# A CSV object this small may hold nothing but blank lines (gzip's own overhead is about 20 bytes): it is read
# to tell. A real DMS CSV file holds at least one record.
BLANK_PROBE_BYTES = 64


def is_blank(data: bytes, gzipped: bool) -> bool:
    """Whether a small CSV object's bytes hold no record: nothing but spaces and line breaks."""
    if gzipped:
        decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            data = decompressor.decompress(data)
        except zlib.error:
            return False  # not gzip at all: the read refuses it, naming the file
    return not data.strip(b" \t\r\n")


def _blank_object(store: ObjectStore, key: str) -> bool:
    try:
        return is_blank(store.read_head(key, BLANK_PROBE_BYTES), key.endswith(".gz"))
    except FileNotFoundError:
        return False  # gone since the listing: the batch finds it changed, and says so


def list_landed(
    store: ObjectStore, config: PipelineConfig, table: TableSpec, start_after: str | None = None
) -> LandedFiles:
    """List the table's folder (from ``start_after``) once: its landed data files."""
    listed = store.list(config.table_prefix(table), start_after=start_after)
    blank = []
    if config.dms.file_format.may_be_blank:
        small = [o for o in listed if 0 < o.size <= BLANK_PROBE_BYTES and order_key_for(o.key.rsplit("/", 1)[-1])]
        blank = [o.key for o in small if _blank_object(store, o.key)]
    return landed_files(listed, table, config, start_after, blank)


def unconfigured_folders(store: ObjectStore, config: PipelineConfig) -> list[str]:
    """Table folders under the DMS folder (``<schema>/<table>/``) of tables the configuration lacks: DMS replicates
    them, and nothing applies them. Costs a request per schema folder, not per file."""
    root = f"{config.dms.bucket_folder}/" if config.dms.bucket_folder else ""
    configured = {config.table_prefix(t) for t in config.tables}
    own = (WARM_MARKER_PREFIX, EXPIRED_MARK_PREFIX)  # the warm runs' markers, the expiry's marks
    schemas = [schema for schema in store.folders(root) if schema not in own]
    return [folder for schema in schemas for folder in store.folders(schema) if folder not in configured]
