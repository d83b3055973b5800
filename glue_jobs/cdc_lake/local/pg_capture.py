"""A local stand-in for AWS DMS with a PostgreSQL source: LOAD and CDC files as DMS's S3 target writes them.

Not a replacement for DMS (docs/postgres-source.md): it exists to prove the lake equals a real database,
and to let a user try the pipeline on their own PostgreSQL. Like DMS it decodes the write-ahead log with
the ``test_decoding`` plugin through a logical replication slot:

1. ``start``: create the slot, exporting its snapshot, then write every configured table's LOAD files
   (``SELECT *`` in that snapshot) while the database keeps changing. Changes committed after the slot
   appear later in CDC files, repeating those the LOAD rows already show (DMS's cached changes).
2. ``capture``: decode the slot up to the current WAL position and write each table's changes in commit
   order into a few CDC files named by write time (``YYYYMMDD-HHMMSSmmm``); the slot then moves past them.
3. ``reload``: what DMS's "Reload table" does: the changes so far, then the table's LOAD files again
   (the old ones removed first), then CDC as before.

Values are written with DMS's defaults: ``Op`` first (then the commit time as ``TimestampColumnName``),
minimal RFC 4180 quoting, NULL as an unquoted empty field and the empty string as ``""``, floats in
exponent form (``+3.23800011e+01``), booleans as ``true``/``false``; Parquet files carry the timestamp
column first. Deletes carry only the key (the default REPLICA IDENTITY). An UPDATE that changes the key
fills the before-image key columns when ``dms.before_image`` is configured.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any, TypedDict, Unpack

from cdc_lake.core.config import DECIMAL_TYPE, PipelineConfig, TableSpec
from cdc_lake.core.exceptions import CaptureError, UnchangedToastError
from cdc_lake.local.capture_files import CaptureBase, CaptureStats, FileOptions, RowChange, Shape, SourceColumn
from cdc_lake.ops.source_catalog import EXACT_TYPES, read_catalog
from cdc_lake.ops.source_tls import CHECKED, SourceTls, masked, postgres_conninfo

log = logging.getLogger(__name__)

DEFAULT_SLOT = "cdc_lake_capture"
# test_decoding formats values with the output functions of the decoding session: pin what they depend on.
SESSION_SETTINGS = {"DateStyle": "ISO, YMD", "TimeZone": "UTC", "extra_float_digits": "3", "IntervalStyle": "postgres"}
DECODING_OPTIONS = ("include-xids", "1", "include-timestamp", "1", "skip-empty-xacts", "1")

# PostgreSQL type names (as format_type_be prints them) -> configuration types; numeric takes (p,s) elsewhere.
PG_TYPES = {**EXACT_TYPES, "numeric": "decimal"}
_TYPE_OIDS = {
    21: "smallint",
    23: "integer",
    20: "bigint",
    700: "real",
    701: "double precision",
    16: "boolean",
    25: "text",
    1043: "character varying",
    1042: "character",
    1082: "date",
    1114: "timestamp without time zone",
    1700: "numeric",
}
UNCHANGED_TOAST = object()  # test_decoding's ``unchanged-toast-datum``: the value is not in the WAL record


def table_entry(connection: Any, name: str, primary_key: Sequence[str] | None = None) -> dict[str, Any]:
    """A configuration entry for the source table ``<schema>.<table>``, read from the catalog as
    ``cdc-lake config-from-source`` reads it (``source_catalog``); raises CaptureError for a column the capture
    cannot write as DMS would."""

    found = read_catalog(connection, (), [name])
    if not found:
        raise CaptureError(f"{name}: no such table in the source database")
    [table] = found
    for column in table.columns:
        base = column.base_type
        if base not in PG_TYPES or column.note is not None:
            hint = " (how DMS writes bytea in CSV is unconfirmed; the capture leaves it out)" if base == "bytea" else ""
            why = f": {column.note}" if column.note and not hint else ""
            raise CaptureError(
                f"{name}.{column.name}: PostgreSQL type {column.source_type!r} is not supported by the capture"
                f"{hint}{why}; supported: {', '.join(sorted(PG_TYPES))} (numeric with precision and scale)"
            )
    entry = table.entry()
    entry["columns"] = [{"nullable": True, **c} for c in entry["columns"]]
    if primary_key is not None:
        entry["primary_key"] = list(primary_key)
    return entry


def config_type(table: str, column: str, pg_type: str, precision_scale: tuple[int, int] | None) -> str:
    """The configuration type of a PostgreSQL column; raises CaptureError naming unsupported ones."""
    mapped = PG_TYPES.get(pg_type)
    if mapped is None:
        hint = " (how DMS writes bytea in CSV is unconfirmed; the capture leaves it out)" if pg_type == "bytea" else ""
        raise CaptureError(
            f"{table}.{column}: PostgreSQL type {pg_type!r} is not supported by the capture{hint}; "
            f"supported: {', '.join(sorted(PG_TYPES))}"
        )
    if mapped == "decimal":
        if precision_scale is None:
            raise CaptureError(
                f"{table}.{column}: numeric without precision and scale has no Iceberg decimal type; "
                "declare it numeric(p,s)"
            )
        return f"decimal({precision_scale[0]},{precision_scale[1]})"
    return mapped


# --- test_decoding output ---------------------------------------------------------------------------------

_CHANGE_LINE = re.compile(r"^table (?P<table>.+?): (?P<op>INSERT|UPDATE|DELETE|TRUNCATE):(?P<rest>.*)$", re.S)
_COMMIT_LINE = re.compile(r"^COMMIT (?P<xid>\d+)(?: \(at (?P<ts>[^)]+)\))?$")


def parse_tuple(text: str) -> tuple[list[tuple[str, str, Any]], list[tuple[str, str, Any]] | None]:
    """The columns of a test_decoding change line after ``OP:``: the new tuple and the old key (or None).

    Each column is (name, pg type, raw value): a str for a literal, None for ``null``, UNCHANGED_TOAST.
    """
    sections: dict[str, list[tuple[str, str, Any]]] = {"new": []}
    current = sections["new"]
    position, end = 0, len(text)
    while position < end:
        if text[position] == " ":
            position += 1
            continue
        for marker, section in (("old-key:", "old"), ("new-tuple:", "new")):
            if text.startswith(marker, position):
                current = sections[section] = []
                position += len(marker)
                break
        else:
            if text.startswith("(no-tuple-data)", position):
                raise CaptureError("a change without tuple data (REPLICA IDENTITY NOTHING?): the key is unknown")
            name, position = _identifier(text, position)
            close = text.index("]:", position)
            pg_type = text[position + 1 : close]
            value, position = _literal(text, close + 2)
            current.append((name, pg_type, value))
    return sections["new"], sections.get("old")


def _quoted(text: str, position: int) -> tuple[str, int]:
    """The value quoted at ``position`` (by ``"`` or ``'``, the quote doubled inside) and the position after it."""
    quote = text[position]
    out, index = [], position + 1
    while (end := text.index(quote, index)) + 1 < len(text) and text[end + 1] == quote:
        out.append(text[index : end + 1])
        index = end + 2
    out.append(text[index:end])
    return "".join(out), end + 1


def _identifier(text: str, position: int) -> tuple[str, int]:
    if text[position] == '"':
        return _quoted(text, position)
    bracket = text.index("[", position)
    return text[position:bracket], bracket


def _literal(text: str, position: int) -> tuple[Any, int]:
    if position < len(text) and text[position] == "'":
        return _quoted(text, position)
    space = text.find(" ", position)
    token = text[position:] if space < 0 else text[position:space]
    following = len(text) if space < 0 else space
    if token == "null":
        return None, following
    if token == "unchanged-toast-datum":
        return UNCHANGED_TOAST, following
    return token, following


def parse_value(pg_type: str, raw: Any) -> Any:
    """A test_decoding literal as a Python value of the column's type."""
    if raw is None or raw is UNCHANGED_TOAST:
        return raw
    kind = PG_TYPES.get(pg_type)
    if kind in ("smallint", "int", "bigint"):
        return int(raw)
    if kind == "decimal":
        return Decimal(raw)
    if kind in ("float", "double"):
        return float(raw)
    if kind == "boolean":
        return raw == "true"
    if kind == "date":
        return dt.date.fromisoformat(raw)
    if kind == "timestamp":
        return dt.datetime.fromisoformat(raw)
    if kind == "string":
        return raw
    raise CaptureError(f"PostgreSQL type {pg_type!r} is not supported by the capture")


def commit_time(text: str) -> dt.datetime:
    """A COMMIT line's ``(at …)`` time (the session's TimeZone is UTC) as a naive UTC datetime."""
    moment = dt.datetime.fromisoformat(text)
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC).replace(tzinfo=None)
    return moment


# --- the capture ---------------------------------------------------------------------------------------


class CaptureOptions(FileOptions, total=False):
    """PgCapture's options: how it writes files (``FileOptions``), its replication ``slot`` (default
    ``cdc_lake_capture``), the ``tls`` its connections are checked with (default: ``sslmode=verify-full``,
    ``source_tls``), and for tests ``connect`` (``psycopg.connect``)."""

    slot: str
    tls: SourceTls
    connect: Callable[..., Any]


class PgCapture(CaptureBase):
    """DMS's full load and change capture for the configured tables of one PostgreSQL database.

    ``config`` may be replaced between rounds (a user adding an ALTERed column to the configuration).
    ``connect`` builds psycopg connections (``psycopg.connect`` by default) from ``conninfo``; both the session's
    and the replication connection check the server's certificate and name as every source connection does
    (``source_tls.postgres_conninfo``), unless ``tls`` allows less.
    """

    def __init__(
        self, conninfo: str, config: PipelineConfig, landing: str | Path, **options: Unpack[CaptureOptions]
    ) -> None:
        files: FileOptions = {k: v for k, v in options.items() if k in FileOptions.__annotations__}  # type: ignore[assignment]
        super().__init__(config, landing, **files)
        slot = options.get("slot", DEFAULT_SLOT)
        connect = options.get("connect")
        if not re.fullmatch(r"[a-z0-9_]{1,63}", slot):
            raise CaptureError(f"slot name {slot!r}: PostgreSQL allows lower-case letters, digits and _ only")
        if connect is None:
            import psycopg

            connect = psycopg.connect
        self.conninfo = postgres_conninfo(conninfo, options.get("tls", CHECKED), masked(conninfo))
        self.slot = slot
        self._connect = connect
        self._session = self._open()

    def _open(self, **options: Any) -> Any:
        connection = self._connect(self.conninfo, autocommit=True, **options)
        if not options.get("replication"):
            for name, value in SESSION_SETTINGS.items():
                connection.execute("SELECT set_config(%s, %s, false)", (name, value))
        return connection

    def close(self, *, drop_slot: bool = False) -> None:
        if drop_slot:
            self._session.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = %s",
                (self.slot,),
            )
        self._session.close()

    # -- full load --

    def start(self, between_files: Callable[[], None] | None = None) -> list[str]:
        """Create the slot (exporting its snapshot) and write every table's LOAD files in that snapshot.

        ``between_files`` runs after each LOAD file is written (a test changes the source meanwhile).
        """
        import psycopg

        replication = self._connect(
            self.conninfo, autocommit=True, replication="database", cursor_factory=psycopg.ClientCursor
        )
        try:
            cursor = replication.cursor()
            cursor.execute(f"CREATE_REPLICATION_SLOT {self.slot} LOGICAL test_decoding EXPORT_SNAPSHOT")
            created = cursor.fetchone()
            if created is None:
                raise CaptureError(f"CREATE_REPLICATION_SLOT {self.slot} returned nothing")
            snapshot = created[2]
            log.info("slot %s created; full load in snapshot %s", self.slot, snapshot)
            keys = []
            for table in self.config.tables:
                keys += self._load_table(table, snapshot, between_files)
        finally:
            replication.close()  # the exported snapshot lives as long as this connection
        return keys

    def slot_exists(self) -> bool:
        row = self._session.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", (self.slot,)).fetchone()
        return row is not None

    def resume(self) -> None:
        """Go on from an existing slot (no full load): the tables' current shapes come from the catalog."""
        if not self.slot_exists():
            raise CaptureError(f"no replication slot {self.slot!r} to resume from; start() creates it")
        for table in self.config.tables:
            cursor = self._session.execute(f"SELECT * FROM {_qualified(table.name)} LIMIT 0")
            self._shapes[table.name] = self._description_shape(table, cursor.description)

    def reload(self, table_name: str, between_files: Callable[[], None] | None = None) -> list[str]:
        """DMS's "Reload table": the changes so far as CDC files, then the table's LOAD files written again
        (the old ones removed first: the target folder emptied), in a snapshot taken now."""
        keys = self.capture()
        table = self.config.table(table_name)
        removed = self._table_files(table).remove_load_files()
        log.info("%s: reload; removed %d old LOAD file(s)", table.name, len(removed))
        return keys + self._load_table(table, None, between_files)

    def _load_table(
        self, table: TableSpec, snapshot: str | None, between_files: Callable[[], None] | None
    ) -> list[str]:
        connection = self._open()
        try:
            connection.autocommit = False
            connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            if snapshot is not None:
                connection.execute(f"SET TRANSACTION SNAPSHOT '{snapshot}'")
            with connection.cursor(name="cdc_lake_load") as cursor:
                cursor.itersize = 2000
                cursor.execute(f"SELECT * FROM {_qualified(table.name)}")
                first = cursor.fetchmany(self.load_file_rows)  # the description comes with the first rows
                shape = self._description_shape(table, cursor.description)
                keys = self._write_load(table, shape, first, cursor.fetchmany, between_files)
            connection.rollback()
        finally:
            connection.close()
        return keys

    def _description_shape(self, table: TableSpec, description: Sequence[Any]) -> Shape:
        columns = []
        for column in description:
            pg_type = _TYPE_OIDS.get(column.type_code, f"type oid {column.type_code}")
            scale = (column.precision, column.scale) if column.precision is not None else None
            columns.append(SourceColumn(column.name, pg_type, config_type(table.name, column.name, pg_type, scale)))
        return tuple(columns)

    # -- change capture --

    def capture(self) -> list[str]:
        """Decode every change committed so far and write it as CDC files, per table in commit order."""
        upto = self._session.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
        rows = self._session.execute(
            "SELECT lsn, data FROM pg_logical_slot_peek_changes(%s, %s, NULL" + ", %s" * len(DECODING_OPTIONS) + ")",
            (self.slot, upto, *DECODING_OPTIONS),
        ).fetchall()
        per_table: dict[str, list[RowChange]] = {}
        last_commit = None
        pending: list[tuple[str, str]] = []
        for lsn, data in rows:
            if data.startswith("BEGIN"):
                pending = []
            elif data.startswith("COMMIT"):
                match = _COMMIT_LINE.match(data)
                if match is None or match["ts"] is None:
                    raise CaptureError(f"unexpected COMMIT line from test_decoding: {data!r}")
                moment = commit_time(match["ts"])
                for table_name, change_line in pending:
                    per_table.setdefault(table_name, []).append(self._change(table_name, change_line, moment))
                self.stats.transactions += 1 if pending else 0
                last_commit = lsn
            else:
                match = _CHANGE_LINE.match(data)
                if match is None:
                    raise CaptureError(f"unexpected line from test_decoding: {data[:200]!r}")
                if match["op"] == "TRUNCATE":  # one line may name several tables: "table a, b: TRUNCATE: …"
                    truncated = [_unquote_table(p) for p in match["table"].split(", ")]
                    if any(self.config.has_table(t) for t in truncated):
                        raise CaptureError(f"TRUNCATE of {truncated}: DMS does not carry it to S3 targets: reload")
                    continue
                name = _unquote_table(match["table"])
                if self.config.has_table(name):
                    pending.append((name, data))
        keys: list[str] = []
        for table in self.config.tables:
            keys += self._write_changes(table, per_table.get(table.name, []))
        if last_commit is not None:
            self._session.execute("SELECT pg_replication_slot_advance(%s, %s)", (self.slot, last_commit))
        self.stats.cdc_files += keys
        return keys

    def _change(self, table_name: str, line: str, moment: dt.datetime) -> RowChange:
        match = _CHANGE_LINE.match(line)
        assert match is not None
        op = {"INSERT": "I", "UPDATE": "U", "DELETE": "D"}[match["op"]]
        new, old = parse_tuple(match["rest"])
        table = self.config.table(table_name)
        if op == "D":
            new, old = old if old is not None else new, None
        values = {name: parse_value(pg_type, raw) for name, pg_type, raw in new}
        old_values = {name: parse_value(pg_type, raw) for name, pg_type, raw in old or []}
        for name, value in list(values.items()):
            if value is UNCHANGED_TOAST:
                if name not in old_values or old_values[name] is UNCHANGED_TOAST:
                    key = {k: values.get(k) for k in table.source_primary_key}
                    raise UnchangedToastError(
                        f"{table_name}: an UPDATE of {key} left the TOASTed value of column {name!r} out of the WAL "
                        f"(unchanged-toast-datum) and no old row image holds it. Set ALTER TABLE {table_name} "
                        "REPLICA IDENTITY FULL so the capture can take it from the old row (docs/postgres-source.md)"
                    )
                values[name] = old_values[name]  # unchanged: the old row's value is the new one
        old_key = None
        if op == "U" and old_values:
            candidate = tuple(old_values.get(k) for k in table.source_primary_key)
            if candidate != tuple(values.get(k) for k in table.source_primary_key):
                old_key = candidate
        shape_names = tuple((name, pg_type) for name, pg_type, _ in new) if op != "D" else ()
        return RowChange(op, values, old_key, moment, shape_names)

    def _shape(self, table: TableSpec, names: Iterable[tuple[str, str]]) -> Shape:
        configured = {c.source: c.type for c in table.columns}
        columns = []
        for name, pg_type in names:
            if PG_TYPES.get(pg_type) == "decimal":
                known = configured.get(name, "")
                match = DECIMAL_TYPE.match(known)
                scale = (int(match[1]), int(match[2])) if match else self._catalog_scale(table, name)
                columns.append(SourceColumn(name, pg_type, config_type(table.name, name, pg_type, scale)))
            else:
                columns.append(SourceColumn(name, pg_type, config_type(table.name, name, pg_type, None)))
        return tuple(columns)

    def _catalog_scale(self, table: TableSpec, column: str) -> tuple[int, int] | None:
        row = self._session.execute(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = %s::regclass AND attname = %s",
            (_qualified(table.name), column),
        ).fetchone()
        if row is None or row[0] < 4:
            return None
        return ((row[0] - 4) >> 16, (row[0] - 4) & 0xFFFF)


def _qualified(name: str) -> str:
    return ".".join('"' + part.replace('"', '""') + '"' for part in name.split("."))


def _unquote_table(printed: str) -> str:
    """``public.t`` or ``"My Schema"."T"`` as test_decoding prints it -> ``schema.table``."""
    parts, position = [], 0
    while position < len(printed):
        if printed[position] == '"':
            name, position = _identifier(printed, position)
        else:
            dot = printed.find(".", position)
            end = len(printed) if dot < 0 else dot
            name, position = printed[position:end], end
        parts.append(name)
        position += 1  # the dot
    return ".".join(parts)


class RunCaptureOptions(TypedDict, total=False):
    """run_capture's options: the replication ``slot``, the ``tls`` its connections are checked with (PgCapture's),
    ``interval_s`` between rounds (default the configured CdcMaxBatchInterval), how many ``rounds`` (default: until
    interrupted), ``on_files`` told the keys each round wrote, and ``sleep`` (for tests)."""

    slot: str
    tls: SourceTls
    interval_s: float | None
    rounds: int | None
    on_files: Callable[[list[str]], None] | None
    sleep: Callable[[float], None] | None


def run_capture(
    conninfo: str, config: PipelineConfig, landing: str | Path, **options: Unpack[RunCaptureOptions]
) -> CaptureStats:
    """Stand in for a DMS full-load-and-CDC task: the full load (or resume from an existing slot), then one
    capture round every ``interval_s`` seconds, ``rounds`` times or until interrupted."""
    import time

    slot, rounds, on_files = options.get("slot", DEFAULT_SLOT), options.get("rounds"), options.get("on_files")
    interval_s = options.get("interval_s")
    pause = options.get("sleep") or time.sleep
    capture = PgCapture(conninfo, config, landing, slot=slot, tls=options.get("tls", CHECKED))
    try:
        if capture.slot_exists():
            capture.resume()
        else:
            keys = capture.start()
            if on_files is not None:
                on_files(keys)
        done = 0
        while rounds is None or done < rounds:
            pause(interval_s if interval_s is not None else config.dms.cdc_max_batch_interval)
            keys = capture.capture()
            if on_files is not None and keys:
                on_files(keys)
            done += 1
    except KeyboardInterrupt:
        log.info("capture stopped; the slot %s keeps the changes not written yet", slot)
    finally:
        capture.close()
    return capture.stats
