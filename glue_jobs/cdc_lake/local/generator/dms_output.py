"""DMS output: file names, date folders, CSV text and Parquet tables exactly as the S3 target writes them."""

from __future__ import annotations

import gzip
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, assert_never

import pyarrow as pa
import pyarrow.parquet as pq

from cdc_lake.core.config import DmsSettings, PipelineConfig
from cdc_lake.core.dms_files import date_folder
from cdc_lake.local.generator.source import CdcFile, LoadFile
from cdc_lake.local.generator.spec import GeneratorSpec
from cdc_lake.local.generator.values import Column, Row, Shape, TableModel, plain_text, timestamp_text


def write_csv_bytes(path: Path, data: bytes, gzip_compressed: bool) -> None:
    """Write a CSV file's bytes as DMS lands them: plain, or gzip (``.csv.gz``) with a fixed mtime."""
    if not gzip_compressed:
        path.write_bytes(data)
        return
    with path.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as packed:
        packed.write(data)


def csv_field(text: str, delimiter: str = ",") -> str:
    """Quote a string value as DMS does (RFC 4180): iff it holds the delimiter, a quote, CR, LF or edge spaces."""
    if delimiter in text or '"' in text or "\n" in text or "\r" in text or text != text.strip():
        return '"' + text.replace('"', '""') + '"'
    return text


@dataclass(frozen=True)
class _FileRows:
    """What one DMS file holds: its rows in one shape, whether it has an Op column, the string columns before the
    table's (Op, timestamp), each row's change sequence, and each row's old row (a key update's before-image)."""

    shape: Shape
    with_op: bool
    leading: list[list[str]]
    rows: list[Row]
    sequences: list[Any]
    old_rows: list[Row | None]


class _TextMemo(dict[Any, str]):
    """value -> CSV field, rendering each distinct value once."""

    def __init__(self, render: Callable[[Any], str], null_text: str) -> None:
        super().__init__()
        self.render = render
        self[None] = null_text

    def __missing__(self, value: Any) -> str:
        text = self[value] = self.render(value)
        return text


class CsvRenderer:
    """Turns rows of one table into CSV text the way the configured DMS endpoint writes it."""

    def __init__(self, columns: list[Column], dms: DmsSettings, boolean_style: str) -> None:
        self.delimiter = dms.csv_delimiter
        self.null_text = dms.csv_null_value
        self.columns = columns
        self.plain = [plain_text(c, boolean_style) for c in columns]

    def _field(self, position: int) -> Callable[[Any], str]:
        if self.columns[position].family != "string":
            return self.plain[position]
        empty = '""' if self.null_text == "" else ""
        delimiter = self.delimiter
        return lambda value: csv_field(value, delimiter) if value else empty

    def column(self, position: int, values: Sequence[Any]) -> list[str]:
        texts = list(map(_TextMemo(self._field(position), self.null_text).__getitem__, values))
        if self.columns[position].family == "string" and self.null_text != "":
            empties = [index for index, value in enumerate(values) if value == ""]
            for count, index in enumerate(empties):
                if count % 4 == 1:  # mostly bare, sometimes quoted: both mean the empty string
                    texts[index] = '""'
        return texts

    def text(
        self, header: list[str] | None, before: list[list[str]], rows: Sequence[Row], after: list[list[Any]]
    ) -> str:
        columns = list(zip(*rows, strict=True)) if rows else [() for _ in self.columns]
        fields = [*before, *(self.column(p, values) for p, values in enumerate(columns)), *after]
        lines = [self.delimiter.join(header)] if header else []
        lines.extend(map(self.delimiter.join, zip(*fields, strict=True)))
        return "\n".join(lines) + "\n" if lines else ""


class TableWriter:
    """Writes one table's LOAD and CDC files under the landing folder, named and laid out as DMS does."""

    def __init__(self, config: PipelineConfig, model: TableModel, landing: Path, spec: GeneratorSpec) -> None:
        self.dms = config.dms
        self.model = model
        self.landing = landing
        self.prefix = config.table_prefix(model.table)
        self.gzip = self.dms.compression == "gzip"
        self.extension = self.dms.file_format.file_suffix(self.gzip)
        self.boolean_style = spec.boolean_style
        self.renderers: dict[Shape, CsvRenderer] = {}

    def _renderer(self, shape: Shape) -> CsvRenderer:
        """The CSV renderer of the table's columns in one shape (types differ before a widening)."""
        if shape not in self.renderers:
            self.renderers[shape] = CsvRenderer(list(shape.columns), self.dms, self.boolean_style)
        return self.renderers[shape]

    def load_file(self, index: int, load: LoadFile) -> str:
        key = f"{self.prefix}LOAD{index + 1:08X}{self.extension}"
        count = len(load.rows)
        with_op = self.dms.include_op_for_full_load
        before = [["I"] * count] if with_op else []
        if self.dms.timestamp_column:
            before.append([timestamp_text(load.ts)] * count)
        # Full-load rows carry no change sequence.
        self._write(key, _FileRows(load.shape, with_op, before, load.rows, [None] * count, [None] * count))
        return key

    def cdc_file(self, cdc: CdcFile) -> str:
        written = cdc.written_at
        name = f"{written:%Y%m%d-%H%M%S}{written.microsecond // 1000:03d}{self.extension}"
        folder = ""
        if self.dms.date_partition_enabled:
            folder = date_folder(self.dms, written) + "/"
        key = f"{self.prefix}{folder}{name}"
        with_op = self.dms.cdc_has_op  # no Op in the insert(/update)-only modes, unless IncludeOpForFullLoad
        before = [[change.op for change in cdc.changes]] if with_op else []
        if self.dms.timestamp_column:
            before.append([timestamp_text(change.ts) for change in cdc.changes])
        rows = [change.row for change in cdc.changes]
        sequences = [change.seq for change in cdc.changes]
        old_rows = [change.before for change in cdc.changes]
        self._write(key, _FileRows(cdc.shape, with_op, before, rows, sequences, old_rows))
        return key

    def _header(self, with_op: bool, shape: Shape) -> list[str]:
        return [
            *(["Op"] if with_op else []),
            *([self.dms.timestamp_column] if self.dms.timestamp_column else []),
            *(self.model.table.source_name(column.name) for column in shape.columns),
            *([self.dms.change_sequence_column] if self.dms.change_sequence_column else []),
            *self.dms.before_image_columns(self.model.table),
        ]

    def _before_image(self, old_rows: list[Row | None]) -> list[list[Any]]:
        """One column per key column: the old key of a row whose key an UPDATE changed, else NULL."""
        if self.dms.before_image is None:
            return []
        return [[None if old is None else old[p] for old in old_rows] for p in self.model.key_positions]

    def _write(self, key: str, content: _FileRows) -> None:
        path = self.landing / key
        path.parent.mkdir(parents=True, exist_ok=True)
        shape, before = content.shape, content.leading
        after = [content.sequences] if self.dms.change_sequence_column else []
        old_keys = self._before_image(content.old_rows)
        written = shape.project(content.rows, len(self.model.columns))
        header = self._header(content.with_op, shape)
        match self.dms.file_format.name:
            case "parquet":
                table = self._arrow_table(header, shape, (before, after), written, old_keys)
                pq.write_table(table, path, compression="gzip" if self.gzip else "none", version="1.0")
            case "csv":
                csv = self._renderer(shape)
                after = [["" if v is None else v for v in values] for values in after]
                if old_keys:
                    after += [
                        csv.column(shape.positions.index(p), keys)
                        for p, keys in zip(self.model.key_positions, old_keys, strict=True)
                    ]
                data = csv.text(header if self.dms.add_column_name else None, before, written, after).encode("utf-8")
                write_csv_bytes(path, data, self.gzip)
            case unhandled:
                assert_never(unhandled)

    def _arrow_table(
        self,
        names: list[str],
        shape: Shape,
        strings: tuple[list[list[Any]], list[list[Any]]],
        rows: Sequence[Row],
        old_keys: list[list[Any]],
    ) -> pa.Table:
        """The string columns before the table's (Op, timestamp: ``strings[0]``), the typed columns of the shape,
        the string columns after them (the change sequence: ``strings[1]``), then the before-image key columns
        typed as the key columns."""
        columns = list(zip(*rows, strict=True)) if rows else [() for _ in shape.columns]
        typed = [pa.array(values, type=c.arrow_type) for c, values in zip(shape.columns, columns, strict=True)]
        leading, trailing = ([pa.array(values, type=pa.string()) for values in part] for part in strings)
        key_types = [self.model.columns[p].arrow_type for p in self.model.key_positions][: len(old_keys)]
        befores = [pa.array(values, type=t) for values, t in zip(old_keys, key_types, strict=True)]
        return pa.Table.from_arrays([*leading, *typed, *trailing, *befores], names=names)
