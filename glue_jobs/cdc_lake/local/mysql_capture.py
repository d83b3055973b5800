"""A local stand-in for AWS DMS with a MariaDB source: LOAD and CDC files as DMS's S3 target writes them.

Like DMS it reads the binary log (row format, full row images, full row metadata: docs/source-types.md), here
through ``mysql-replication``:

1. ``start``: open a consistent snapshot and note the binary log position it stands at (MariaDB's
   ``binlog_snapshot_file``/``_position``), then write every configured table's LOAD files (``SELECT *`` in that
   snapshot) while the database keeps changing.
2. ``capture``: read the binary log from that position to its end and write each table's changes in commit
   order into a few CDC files named by write time; the position then moves past them.

Values are written as DMS writes a MySQL source's: a delete carries the whole row (``binlog_row_image=FULL``),
``BOOLEAN`` (``TINYINT(1)``) is 1/0, ``TIMESTAMP`` is UTC. Types the capture cannot write as DMS would are
refused by name.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Unpack

from cdc_lake.core.config import PipelineConfig, TableSpec
from cdc_lake.core.exceptions import CaptureError
from cdc_lake.local.capture_files import CaptureBase, FileOptions, RowChange, Shape, SourceColumn
from cdc_lake.ops import mysql_catalog

log = logging.getLogger(__name__)

# DATA_TYPEs the capture writes as DMS does; the rest (TIME, ENUM, JSON, BIT, binary, ...) it refuses.
CAPTURED = {*mysql_catalog.EXACT_TYPES, "decimal", "numeric"}
CLIENT_SERVER_ID = 4242  # the binary log client's id: any but the server's own


class MysqlCapture(CaptureBase):
    """DMS's full load and change capture for the configured tables of one MariaDB server (``url``:
    ``mysql://user@host:port/database``)."""

    boolean_style = "mysql"

    def __init__(self, url: str, config: PipelineConfig, landing: str | Path, **options: Unpack[FileOptions]) -> None:
        super().__init__(config, landing, **options)
        self.url = url
        self.position: tuple[str, int] | None = None
        self._logged_shapes: dict[tuple[str, tuple[tuple[str, str], ...]], Shape] = {}
        self._session = mysql_catalog.connect(url)

    def close(self) -> None:
        self._session.close()

    def table_shape(self, table: TableSpec) -> Shape:
        """The table's columns now, from the catalog; raises CaptureError for one the capture cannot write."""
        found = mysql_catalog.read_catalog(self._session, (), [table.name])
        if not found:
            raise CaptureError(f"{table.name}: no such table in the source database")
        columns = []
        for column in found[0].columns:
            if column.base_type not in CAPTURED or (column.config_type == "string" and column.note):
                raise CaptureError(
                    f"{table.name}.{column.name}: MySQL type {column.source_type!r} is not supported by the capture"
                    f" ({column.note or 'kept as text'}); supported: {', '.join(sorted(CAPTURED))}"
                )
            columns.append(SourceColumn(column.name, column.base_type, column.config_type))
        return tuple(columns)

    # -- full load --

    def start(self, between_files: Callable[[], None] | None = None) -> list[str]:
        """Write every table's LOAD files in one consistent snapshot, and remember the binary log position it
        stands at. ``between_files`` runs after each LOAD file is written (a test changes the source meanwhile)."""
        import pymysql.cursors

        shapes = {table.name: self.table_shape(table) for table in self.config.tables}
        connection = mysql_catalog.connect(self.url)
        keys: list[str] = []
        try:
            with connection.cursor() as cursor:
                cursor.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
                cursor.execute("SHOW STATUS LIKE 'binlog_snapshot_%%'")
                status = dict(cursor.fetchall())
            if not status.get("Binlog_snapshot_file"):
                raise CaptureError(
                    "the source reports no binlog_snapshot_file: the capture needs MariaDB with the binary log on "
                    "(log_bin, binlog_format=ROW)"
                )
            self.position = (status["Binlog_snapshot_file"], int(status["Binlog_snapshot_position"]))
            log.info("full load in a snapshot at binary log %s:%d", *self.position)
            for table in self.config.tables:
                with connection.cursor(pymysql.cursors.SSCursor) as cursor:
                    cursor.execute(f"SELECT * FROM {_qualified(table.name)}")
                    first = cursor.fetchmany(self.load_file_rows)
                    keys += self._write_load(table, shapes[table.name], first, cursor.fetchmany, between_files)
            connection.rollback()
        finally:
            connection.close()
        return keys

    # -- change capture --

    def capture(self) -> list[str]:
        """Read every change logged since the last position and write it as CDC files, per table in commit order."""
        from pymysqlreplication import BinLogStreamReader
        from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

        if self.position is None:
            raise CaptureError("no binary log position yet: start() writes the full load first")
        connection = mysql_catalog.connect(self.url)  # fails with the reason, before the stream would
        connection.close()
        # The binary log over the same checked TLS and credentials; the stream names its schemas itself.
        settings = mysql_catalog.connection_settings(self.url)
        del settings["database"]
        schemas = sorted({t.name.split(".", 1)[0] for t in self.config.tables})
        stream = BinLogStreamReader(
            connection_settings=settings,
            server_id=CLIENT_SERVER_ID,
            log_file=self.position[0],
            log_pos=self.position[1],
            resume_stream=True,
            blocking=False,
            only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
            only_schemas=schemas,
        )
        per_table: dict[str, list[RowChange]] = {}
        current = dict(self._shapes)
        try:
            for event in stream:
                name = f"{event.schema}.{event.table}"
                if not self.config.has_table(name) or not event.rows:
                    continue
                table = self.config.table(name)
                logged = tuple(_values(event.rows[0]))
                if name not in current or logged != tuple(c.name for c in current[name]):
                    current[name] = self._catalog_shape(table, logged)
                moment = dt.datetime.fromtimestamp(event.timestamp, dt.UTC).replace(tzinfo=None)
                per_table.setdefault(name, []).extend(_changes(table, event, moment, current[name]))
            position = (stream.log_file, stream.log_pos)
        finally:
            stream.close()
        keys: list[str] = []
        for table in self.config.tables:
            keys += self._write_changes(table, per_table.get(table.name, []))
        self.stats.transactions += sum(len(c) for c in per_table.values())
        if position[0] is not None and position[1] is not None:
            self.position = position
        self.stats.cdc_files += keys
        return keys

    def _catalog_shape(self, table: TableSpec, logged: tuple[str, ...]) -> Shape:
        """The shape of changes logging the columns ``logged``, typed from the catalog (read when a table's
        logged columns change: an ALTER TABLE between rounds)."""
        by_name = {c.name: c for c in self.table_shape(table)}
        missing = [name for name in logged if name not in by_name]
        if missing:
            raise CaptureError(
                f"{table.name}: logged columns {missing} are no longer in the source's catalog: capture before an "
                "ALTER TABLE drops or renames a column"
            )
        shape = tuple(by_name[name] for name in logged)
        self._logged_shapes[(table.name, _typed(shape))] = shape
        return shape

    def _shape(self, table: TableSpec, names: Iterable[tuple[str, str]]) -> Shape:
        return self._logged_shapes[(table.name, tuple(names))]


def _typed(shape: Shape) -> tuple[tuple[str, str], ...]:
    return tuple((c.name, c.pg_type) for c in shape)


def _values(row: dict[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = row.get("values") or row["after_values"]
    return values


def _changes(table: TableSpec, event: Any, moment: dt.datetime, shape: Shape) -> list[RowChange]:
    """A row event's changes; an update that changed the key carries the old key (a before-image)."""
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent

    typed = _typed(shape)
    out = []
    for row in event.rows:
        if isinstance(event, UpdateRowsEvent):
            values, before = row["after_values"], row["before_values"]
            old = tuple(before[k] for k in table.source_primary_key)
            old_key = old if old != tuple(values[k] for k in table.source_primary_key) else None
            op = "U"
        else:
            values, old_key = row["values"], None
            op = "D" if isinstance(event, DeleteRowsEvent) else "I"
        out.append(RowChange(op, dict(values), old_key, moment, typed))
    return out


def _qualified(name: str) -> str:
    return ".".join("`" + part.replace("`", "``") + "`" for part in name.split("."))
