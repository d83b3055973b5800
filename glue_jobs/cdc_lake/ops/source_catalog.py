"""The table configuration read from a source's catalog (``cdc-lake config-from-source``), and the
differences between a configuration and the live source (``cdc-lake config-check-source``). This module reads
PostgreSQL; ``mysql_catalog`` reads MySQL and MariaDB into the same ``CatalogTable``, and ``source_check`` chooses
between them by the source's URL.

Each column gets the type DMS's PostgreSQL mapping gives it (docs/source-types.md): integers, exact numerics
up to precision 38, floats, booleans, dates and timestamps keep their kind; everything DMS writes as text
(JSON, UUID, arrays, intervals, times, network types, enums, numerics above precision 38, ...) is a string,
marked with a comment saying so. A table without a primary key cannot be replayed exactly (a change names no
row) and is listed in a comment with what to do. Every query binds its values; no name is pasted into SQL.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from cdc_lake.core.config import PipelineConfig, TableSpec, parse_config
from cdc_lake.core.exceptions import CdcLakeError
from cdc_lake.core.formats import FORMATS, FormatName
from cdc_lake.core.identifiers import lake_name
from cdc_lake.ops.source_tls import CHECKED, SourceTls, explained, masked, postgres_conninfo, redacted

SYSTEM_SCHEMAS = ("pg_catalog", "information_schema", "pg_toast")
MAX_DECIMAL_PRECISION = 38  # Iceberg's and DMS's NUMERIC limit: above it DMS writes the value as text
# DMS maps NUMERIC without precision and scale to NUMERIC(28,6) (its PostgreSQL source default).
UNBOUNDED_NUMERIC = (28, 6)
# PostgreSQL type (format_type without modifiers) -> (configuration type, why it is not faithful, or None).
EXACT_TYPES = {
    "smallint": "smallint",
    "integer": "int",
    "bigint": "bigint",
    "real": "float",
    "double precision": "double",
    "boolean": "boolean",
    "text": "string",
    "character varying": "string",
    "character": "string",
    "date": "date",
    "timestamp without time zone": "timestamp",
}
TEXT_TYPES = {
    "timestamp with time zone": "DMS writes it as a UTC timestamp without zone; configured as text to keep the offset",
    "time without time zone": "no lake time type: DMS writes it as text (HH:MM:SS)",
    "time with time zone": "no lake time type: DMS writes it as text",
    "interval": "DMS writes an interval as text",
    "uuid": "DMS writes a UUID as text",
    "json": "DMS writes JSON as text (a LOB)",
    "jsonb": "DMS writes JSON as text (a LOB)",
    "xml": "DMS writes XML as text (a LOB)",
    "money": "DMS maps money to NUMERIC(38,4) but its text form carries a currency sign: kept as text",
    "bytea": "DMS writes bytea as a BLOB; how it appears in CSV is unconfirmed here: kept as text",
}


class PgType(NamedTuple):
    """A column's type as the catalog gives it: ``format_type`` with and without modifiers, the modifier, and
    ``pg_type``'s ``typtype`` (e: enum, d: domain) and ``typcategory`` (A: array)."""

    full: str
    base: str
    modifier: int
    kind: str
    category: str


@dataclass(frozen=True)
class CatalogColumn:
    name: str
    source_type: str  # as PostgreSQL's format_type prints it, e.g. ``numeric(12,2)``, ``integer[]``
    base_type: str  # without modifiers, e.g. ``numeric``
    config_type: str
    nullable: bool
    note: str | None = None  # why the mapping is not the source type's own


@dataclass(frozen=True)
class CatalogTable:
    name: str  # <schema>.<table>
    primary_key: list[str]
    columns: list[CatalogColumn] = field(default_factory=list)
    # Why a table without a key is left out, and what to do (shown in the file's closing comment).
    no_key: str = "no primary key at the source: add one, or add the table with primary_key naming a unique index"

    @property
    def target(self) -> str | None:
        """The lake table's name when it is not ``<schema>_<table>`` as the source spells it (None: the same)."""
        default = self.name.replace(".", "_", 1)
        return None if lake_name(default) == default else lake_name(default)

    def entry(self) -> dict[str, Any]:
        """The table as the configuration holds it; a lake name that is not the source's own is written out, so
        the file shows the mapping and keeps it if the default mapping ever changes."""
        columns = [{"name": c.name, **_lake_name(c.name), "type": c.config_type,
                    **({} if c.nullable else {"nullable": False})} for c in self.columns]  # fmt: skip
        entry: dict[str, Any] = {"name": self.name, "primary_key": self.primary_key, "columns": columns}
        if self.target:
            entry["target"] = self.target
        return entry


def _lake_name(source: str) -> dict[str, str]:
    lake = lake_name(source)
    return {} if lake == source else {"lake_name": lake}


def connect(url: str, tls: SourceTls = CHECKED) -> Any:
    """A read-only connection to the source (libpq URL or conninfo; the password from the URL, PGPASSWORD or
    .pgpass) over checked TLS (``source_tls``); refused with the reason, never with the password."""
    import psycopg

    where = masked(url)
    try:
        connection = psycopg.connect(postgres_conninfo(url, tls, where), connect_timeout=10, autocommit=True)
    except psycopg.Error as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise CdcLakeError(f"cannot connect to the source {where}: {explained(redacted(reason, url), tls)}") from None
    connection.execute("SET default_transaction_read_only = on")
    return connection


def read_catalog(
    connection: Any, schemas: Sequence[str] = (), patterns: Sequence[str] = (), dms_format: FormatName = "csv"
) -> list[CatalogTable]:
    """The source's tables in ``schemas`` (default: every non-system one) whose ``<schema>.<table>`` matches one of
    ``patterns`` (shell-style; default: all), with their columns in source order and primary keys."""
    rows = connection.execute(
        "SELECT n.nspname, c.relname, a.attname, format_type(a.atttypid, a.atttypmod), "
        "format_type(a.atttypid, NULL), a.atttypmod, a.attnotnull, t.typtype, t.typcategory "
        "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
        "JOIN pg_type t ON t.oid = a.atttypid "
        "WHERE c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped AND NOT c.relispartition "
        "AND n.nspname <> ALL(%s) AND (cardinality(%s::text[]) = 0 OR n.nspname = ANY(%s)) "
        "ORDER BY n.nspname, c.relname, a.attnum",
        (list(SYSTEM_SCHEMAS), list(schemas), list(schemas)),
    ).fetchall()
    keys: dict[str, list[str]] = {}
    for schema, table, column in connection.execute(
        "SELECT n.nspname, c.relname, a.attname FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_attribute a ON a.attrelid = i.indrelid "
        "AND a.attnum = ANY(i.indkey) WHERE i.indisprimary AND n.nspname <> ALL(%s) "
        "ORDER BY n.nspname, c.relname, array_position(i.indkey, a.attnum)",
        (list(SYSTEM_SCHEMAS),),
    ).fetchall():
        keys.setdefault(f"{schema}.{table}", []).append(column)
    tables: dict[str, CatalogTable] = {}
    for schema, table, column, full_type, base_type, typmod, not_null, kind, category in rows:
        name = f"{schema}.{table}"
        if patterns and not any(fnmatch.fnmatchcase(name, p) for p in patterns):
            continue
        if name not in tables:
            tables[name] = CatalogTable(name, keys.get(name, []))
        config_type, note = column_type(PgType(full_type, base_type, typmod, kind, category), dms_format)
        tables[name].columns.append(CatalogColumn(column, full_type, base_type, config_type, not not_null, note))
    return list(tables.values())


def column_type(pg_type: PgType, dms_format: FormatName) -> tuple[str, str | None]:
    """The configuration type DMS's mapping gives a PostgreSQL column, and why it is text when it is."""
    full_type, base_type, typmod, kind, category = pg_type
    if category == "A":
        return "string", "DMS writes an array as text"
    if kind == "e":
        return "string", "an enum: DMS writes its label as text"
    if kind == "d":
        return "string", f"a domain ({full_type}): DMS writes it as text; configure its base type if it is one"
    if base_type == "numeric":
        if typmod < 4:
            precision, scale = UNBOUNDED_NUMERIC
            return f"decimal({precision},{scale})", (
                "numeric without precision: DMS maps it to NUMERIC(28,6), so a value with more digits is refused; "
                "declare numeric(p,s) at the source or configure string"
            )
        precision, scale = (typmod - 4) >> 16, (typmod - 4) & 0xFFFF
        if precision > MAX_DECIMAL_PRECISION:
            return "string", f"{full_type}: above precision {MAX_DECIMAL_PRECISION} DMS writes the value as text"
        return f"decimal({precision},{scale})", None
    if base_type == "bytea" and FORMATS[dms_format].keeps_binary:
        return "binary", None
    if base_type in EXACT_TYPES:
        return EXACT_TYPES[base_type], None
    if base_type in TEXT_TYPES:
        return "string", TEXT_TYPES[base_type]
    return "string", f"{full_type}: no mapping of its own; DMS writes it as text"


@dataclass(frozen=True)
class Origin:
    """Where a configuration was read from, as its header says, and the DMS settings it starts with."""

    source: str  # masked before it is written
    mapping: str  # how types were chosen
    dms: dict[str, str]
    database: str = ""


def config_text(tables: Sequence[CatalogTable], origin: Origin) -> str:
    """The configuration as YAML with comments, checked by the configuration's own parser before it is returned."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"# Written by cdc-lake from {masked(origin.source)} on {stamp}.",
        f"# {origin.mapping} A comment marks each column whose type is not the source's own.",
        "# Check the dms: settings against the DMS endpoint the stack creates from them (docs/deploy.md).",
        "dms:",
        *[f"  {name}: {json.dumps(value)}" for name, value in origin.dms.items()],
        "lake:",
        f"  database: {json.dumps(origin.database or 'cdc_lake')}",
        "tables:",
    ]
    skipped = [t for t in tables if not t.primary_key]
    for table in tables:
        if not table.primary_key:
            continue
        entry = table.entry()
        lines.append(f"  - name: {json.dumps(entry['name'])}")
        if "target" in entry:
            lines.append(f"    target: {json.dumps(entry['target'])}  # Glue and Athena take lower-case names only")
        lines.append(f"    primary_key: {json.dumps(entry['primary_key'])}")
        lines.append("    columns:")
        for spec, column in zip(entry["columns"], table.columns, strict=True):
            note = f"  # {column.source_type}: {column.note}" if column.note else ""
            lines.append(f"      - {json.dumps(spec)}{note}")
    if skipped:
        lines.append("# Not replicable exactly without a key (a change could not name its row):")
        lines += [f"#   {t.name}: {t.no_key}" for t in skipped]
    text = "\n".join(lines) + "\n"
    if len(skipped) < len(tables):
        parse_config(_yaml(text))  # what is written must load
    return text


POSTGRES_MAPPING = "Types follow DMS's PostgreSQL mapping (docs/source-types.md)."


STACK_DMS = {"format": "csv", "bucket_folder": "dms", "timestamp_column": "dms_timestamp"}


def _yaml(text: str) -> dict[str, Any]:
    import yaml

    data = yaml.safe_load(text)
    assert isinstance(data, dict)
    return data


@dataclass(frozen=True)
class Difference:
    table: str
    kind: str  # table-missing, column-added, column-dropped, type-changed, key-changed, no-key
    detail: str

    def __str__(self) -> str:
        return f"{self.table}: {self.kind}: {self.detail}"


def differences(config: PipelineConfig, tables: Sequence[CatalogTable]) -> list[Difference]:
    """Every difference between the configured tables and the source's catalog (``tables``)."""
    found = {t.name: t for t in tables}
    out: list[Difference] = []
    for spec in config.tables:
        source = found.get(spec.name)
        if source is None:
            out.append(Difference(spec.name, "table-missing", "not in the source (dropped or renamed?)"))
            continue
        out += _table_differences(spec, source)
    return out


def _table_differences(spec: TableSpec, source: CatalogTable) -> list[Difference]:
    out = []
    if not source.primary_key:
        out.append(Difference(spec.name, "no-key", f"the source has no primary key; configured {spec.primary_key}"))
    elif source.primary_key != spec.source_primary_key:
        configured_key = spec.source_primary_key
        out.append(Difference(spec.name, "key-changed", f"source {source.primary_key}, configured {configured_key}"))
    columns = {c.name: c for c in source.columns}
    configured = {c.source for c in spec.columns}
    for column in source.columns:
        if column.name not in configured:
            out.append(Difference(spec.name, "column-added", f"{column.name} {column.source_type} (add it at the end "
                                  f"of columns as {{name: {column.name}, type: {column.config_type}}})"))  # fmt: skip
    for column_spec in spec.columns:
        at_source = columns.get(column_spec.source)
        if at_source is None:
            if not column_spec.dropped:
                out.append(Difference(spec.name, "column-dropped", f"{column_spec.source} (mark it dropped: true)"))
        elif at_source.config_type != column_spec.type:
            out.append(
                Difference(
                    spec.name,
                    "type-changed",
                    f"{column_spec.source}: source {at_source.source_type} ({at_source.config_type}), configured "
                    f"{column_spec.type}",
                )
            )
    return out
