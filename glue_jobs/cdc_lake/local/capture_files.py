"""The files a local stand-in for DMS writes: each table's LOAD and CDC files under the landing folder, as the
configured S3 endpoint writes them (CSV or Parquet, DMS's defaults and settings). The PostgreSQL and MariaDB
captures decode their source's log into ``RowChange`` values and leave the files to ``CaptureBase``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict, Unpack, assert_never

import pyarrow as pa
import pyarrow.parquet as pq

from cdc_lake.core.config import DmsSettings, PipelineConfig, TableSpec
from cdc_lake.core.exceptions import CaptureError
from cdc_lake.local.generator.dms_output import CsvRenderer, write_csv_bytes
from cdc_lake.local.generator.values import Column, timestamp_text


@dataclass(frozen=True)
class SourceColumn:
    name: str
    pg_type: str  # as format_type_be prints it, e.g. ``integer``, ``numeric``
    config_type: str  # the configuration's spelling, e.g. ``int``, ``decimal(12,2)``


Shape = tuple[SourceColumn, ...]


@dataclass
class RowChange:
    """One decoded change: ``I``/``U``/``D``, the after-image (the key only for a delete), the old key."""

    op: str
    values: dict[str, Any]
    old_key: tuple[Any, ...] | None
    commit_ts: dt.datetime
    shape_names: tuple[tuple[str, str], ...]  # (name, pg type) of the printed columns, for shape tracking


@dataclass
class CaptureStats:
    """What the capture wrote so far."""

    transactions: int = 0
    changes: int = 0
    load_rows: int = 0
    load_files: list[str] = field(default_factory=list)
    cdc_files: list[str] = field(default_factory=list)
    per_op: dict[str, int] = field(default_factory=lambda: {"I": 0, "U": 0, "D": 0})


# --- writing DMS files ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _FileRows:
    """What one file of a table holds: its rows in one shape, the named string columns before the table's (Op,
    timestamp), each row's change sequence, and each row's old key (a key update's before-image)."""

    shape: Shape
    leading: list[tuple[str, list[Any]]]
    rows: Sequence[tuple[Any, ...]]
    sequences: list[Any]
    old_keys: Sequence[tuple[Any, ...] | None]


class TableFiles:
    """Writes one table's files under the landing folder as the configured DMS endpoint does."""

    def __init__(self, capture: CaptureBase, table: TableSpec) -> None:
        self.capture = capture
        self.table = table
        self.last_name = ""

    @property
    def dms(self) -> DmsSettings:
        return self.capture.config.dms

    @property
    def extension(self) -> str:
        return self.dms.file_format.file_suffix(self.dms.compression == "gzip")

    @property
    def folder(self) -> Path:
        return self.capture.landing / self.capture.config.table_prefix(self.table)

    def columns(self, shape: Shape) -> list[Column]:
        return [Column(c.name, c.config_type, True, c.name in self.table.source_primary_key) for c in shape]

    def key_columns(self, shape: Shape) -> list[Column]:
        by_name = {c.name: c for c in self.columns(shape)}
        return [by_name[k] for k in self.table.source_primary_key]

    def remove_load_files(self) -> list[str]:
        removed = []
        for path in sorted(self.folder.glob("LOAD*")) if self.folder.is_dir() else []:
            path.unlink()
            removed.append(path.name)
        return removed

    def load_file(self, index: int, shape: Shape, rows: Sequence[tuple[Any, ...]], transferred: dt.datetime) -> str:
        count = len(rows)
        fields: list[tuple[str, list[Any]]] = []
        if self.dms.include_op_for_full_load:
            fields.append(("Op", ["I"] * count))
        if self.dms.timestamp_column:
            fields.append((self.dms.timestamp_column, [timestamp_text(transferred)] * count))
        name = f"LOAD{index:08X}{self.extension}"
        self._write(name, _FileRows(shape, fields, rows, [None] * count, [None] * count))
        return self.capture.config.table_prefix(self.table) + name

    def cdc_file(self, shape: Shape, changes: Sequence[RowChange], sequences: Sequence[str]) -> str:
        now = self.capture.clock()
        name = f"{now:%Y%m%d-%H%M%S}{now.microsecond // 1000:03d}"
        if name <= self.last_name:  # strictly increasing names, as DMS writes them one after another
            later = dt.datetime.strptime(self.last_name, "%Y%m%d-%H%M%S%f") + dt.timedelta(milliseconds=1)
            name = f"{later:%Y%m%d-%H%M%S}{later.microsecond // 1000:03d}"
        self.last_name = name
        fields: list[tuple[str, list[Any]]] = []
        if self.dms.cdc_has_op:
            fields.append(("Op", [c.op for c in changes]))
        if self.dms.timestamp_column:
            fields.append((self.dms.timestamp_column, [timestamp_text(c.commit_ts) for c in changes]))
        rows = [tuple(c.values.get(column.name) for column in shape) for c in changes]
        old_keys = [c.old_key for c in changes]
        self._write(name + self.extension, _FileRows(shape, fields, rows, list(sequences), old_keys))
        return self.capture.config.table_prefix(self.table) + name + self.extension

    def _write(self, name: str, content: _FileRows) -> None:
        dms = self.dms
        path = self.folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        befores = dms.before_image_columns(self.table)
        key_count = len(self.table.primary_key)
        old_columns = [[None if old is None else old[i] for old in content.old_keys] for i in range(key_count)]
        old_columns = old_columns if befores else []
        trailing: list[tuple[str, list[Any]]] = []
        if dms.change_sequence_column:
            trailing.append((dms.change_sequence_column, content.sequences))
        old = list(zip(befores, old_columns, strict=True))
        match dms.file_format.name:
            case "parquet":
                self._parquet(path, content, trailing, old)
            case "csv":
                self._csv(path, content, trailing, old)
            case unhandled:
                assert_never(unhandled)

    def _csv(
        self,
        path: Path,
        content: _FileRows,
        trailing: list[tuple[str, list[Any]]],
        befores: list[tuple[str, list[Any]]],
    ) -> None:
        dms, shape, leading, rows = self.dms, content.shape, content.leading, content.rows
        style = self.capture.boolean_style
        renderer = CsvRenderer(self.columns(shape), dms, style)
        key_renderer = CsvRenderer(self.key_columns(shape), dms, style)
        after = [[("" if v is None else str(v)) for v in values] for _, values in trailing]
        after += [key_renderer.column(i, values) for i, (_, values) in enumerate(befores)]
        header = None
        if dms.add_column_name:
            header = [n for n, _ in leading] + [c.name for c in shape] + [n for n, _ in [*trailing, *befores]]
        data = renderer.text(header, [values for _, values in leading], rows, after).encode("utf-8")
        write_csv_bytes(path, data, dms.compression == "gzip")

    def _parquet(
        self,
        path: Path,
        content: _FileRows,
        trailing: list[tuple[str, list[Any]]],
        befores: list[tuple[str, list[Any]]],
    ) -> None:
        shape, rows, columns = content.shape, content.rows, self.columns(content.shape)
        # DMS puts its timestamp column first in Parquet files.
        timestamp = self.dms.timestamp_column
        leading = sorted(content.leading, key=lambda item: item[0] != timestamp)
        values = list(zip(*rows, strict=True)) if rows else [() for _ in shape]
        arrays = [pa.array(list(v), type=pa.string()) for _, v in leading]
        arrays += [pa.array(list(v), type=c.arrow_type) for c, v in zip(columns, values, strict=True)]
        arrays += [pa.array(v, type=pa.string()) for _, v in trailing]
        key_types = [c.arrow_type for c in self.key_columns(shape)] if befores else []
        arrays += [pa.array(v, type=t) for (_, v), t in zip(befores, key_types, strict=True)]
        names = [n for n, _ in leading] + [c.name for c in shape] + [n for n, _ in trailing] + [n for n, _ in befores]
        compression = "gzip" if self.dms.compression == "gzip" else "none"
        pq.write_table(pa.Table.from_arrays(arrays, names=names), path, compression=compression, version="1.0")


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


class FileOptions(TypedDict, total=False):
    """How a capture writes files: the CDC files a round writes per table (``files_per_round``, default 3), the
    rows of a LOAD file (``load_file_rows``, default 100,000), and for tests the ``clock`` (UTC now)."""

    files_per_round: int
    load_file_rows: int
    clock: Callable[[], dt.datetime]


class CaptureBase:
    """A capture's configuration, landing folder and clock, and the writing of its tables' files: LOAD files in
    batches, CDC files per table in commit order, cut where the table's shape changed."""

    boolean_style = "postgres"  # how the source's booleans print in CSV: "postgres" (true/false), "mysql" (1/0)

    def __init__(self, config: PipelineConfig, landing: str | Path, **options: Unpack[FileOptions]) -> None:
        if config.dms.date_partition_enabled or config.dms.csv_delimiter != ",":
            raise CaptureError("the capture writes DMS's default layout: no date partition folders, ',' delimiter")
        self.config = config
        self.landing = Path(landing)
        self.files_per_round = max(1, options.get("files_per_round", 3))
        self.load_file_rows = max(1, options.get("load_file_rows", 100_000))
        self.clock = options.get("clock", _utc_now)
        self.stats = CaptureStats()
        self._files: dict[str, TableFiles] = {}
        self._shapes: dict[str, Shape] = {}
        self._sequence_prefix = ""
        self._sequence_counter = 0

    def _shape(self, table: TableSpec, names: Iterable[tuple[str, str]]) -> Shape:
        """The shape of a change printing ``names`` ((name, source type) pairs)."""
        raise NotImplementedError

    def _table_files(self, table: TableSpec) -> TableFiles:
        if table.name not in self._files:
            self._files[table.name] = TableFiles(self, table)
        files = self._files[table.name]
        files.table = table  # the configuration may have been replaced
        return files

    # -- full load --

    def _write_load(
        self,
        table: TableSpec,
        shape: Shape,
        first: Sequence[Any],
        fetch: Callable[[int], Sequence[Any]],
        between_files: Callable[[], None] | None,
    ) -> list[str]:
        """The table's LOAD files: the ``first`` rows, then ``fetch(n)`` (the next n rows, none at the end) until
        it is done; one empty file for an empty table."""
        files = self._table_files(table)
        self._shapes[table.name] = shape
        keys: list[str] = []
        batch = first
        index = 1
        while batch or index == 1:
            keys.append(files.load_file(index, shape, [tuple(r) for r in batch], self.clock()))
            self.stats.load_rows += len(batch)
            if between_files is not None:
                between_files()
            batch = fetch(self.load_file_rows)
            index += 1
        self.stats.load_files += keys
        return keys

    def _write_changes(self, table: TableSpec, changes: list[RowChange]) -> list[str]:
        dms = self.config.dms
        if dms.cdc_inserts_only or dms.cdc_inserts_and_updates:  # DMS leaves the other changes out
            kept = ("I",) if dms.cdc_inserts_only else ("I", "U")
            changes = [c for c in changes if c.op in kept]
        if not changes:
            return []
        files = self._table_files(table)
        # A file never mixes shapes: cut where an ALTER TABLE changed the printed columns.
        runs: list[tuple[Shape, list[RowChange]]] = []
        shape = self._shapes.get(table.name)
        for change in changes:
            if change.shape_names and (shape is None or change.shape_names != _names(shape)):
                shape = self._shape(table, change.shape_names)
                self._shapes[table.name] = shape
            if shape is None:
                raise CaptureError(f"{table.name}: a delete before any known shape of the table; run start() first")
            if runs and runs[-1][0] == shape:
                runs[-1][1].append(change)
            else:
                runs.append((shape, [change]))
        keys = []
        for run_shape, run in runs:
            size = max(1, -(-len(run) // self.files_per_round))
            for start in range(0, len(run), size):
                chunk = run[start : start + size]
                keys.append(files.cdc_file(run_shape, chunk, [self._next_sequence(c) for c in chunk]))
                for change in chunk:
                    self.stats.per_op[change.op] += 1
                self.stats.changes += len(chunk)
        return keys

    def _next_sequence(self, change: RowChange) -> str:
        """An AR_H_CHANGE_SEQ-like 35-digit number: 16 digits of commit time (never going back, as commit
        times of concurrent transactions may), then a 19-digit change counter."""
        moment = change.commit_ts
        prefix = f"{moment:%Y%m%d%H%M%S}{moment.microsecond // 10000:02d}"
        self._sequence_prefix = max(self._sequence_prefix, prefix)
        self._sequence_counter += 1
        return f"{self._sequence_prefix}{self._sequence_counter:019d}"


def _names(shape: Shape) -> tuple[tuple[str, str], ...]:
    return tuple((c.name, c.pg_type) for c in shape)
