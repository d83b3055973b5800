"""A MySQL or MariaDB source: its connection (``mysql://`` or ``mariadb://`` URLs) and its catalog read as
``cdc-lake config-from-source`` reads it, with the types DMS's MySQL mapping gives (docs/source-types.md).

DMS maps each MySQL type to one of its own (``TINYINT`` to INT1, ``INT UNSIGNED`` to UINT4, ``TIME`` to STRING,
``JSON`` to CLOB, ...) and writes that to S3. Integers get the smallest lake type that holds every value,
unsigned ones one size up (``BIGINT UNSIGNED`` a ``decimal(20,0)``). ``BOOLEAN`` is ``TINYINT(1)`` and arrives
as 1/0. ``TIMESTAMP`` is read in UTC. Everything DMS writes as text is a string marked with a comment. Every
query binds its values; only the ``IN`` list's length is spelled in SQL.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from cdc_lake.core.exceptions import CdcLakeError
from cdc_lake.core.formats import FORMATS, FormatName
from cdc_lake.ops.source_catalog import MAX_DECIMAL_PRECISION, CatalogColumn, CatalogTable
from cdc_lake.ops.source_tls import CHECKED, SourceTls, explained, masked, mysql_ssl, redacted

SCHEMES = ("mysql", "mariadb")
SYSTEM_SCHEMAS = ("mysql", "information_schema", "performance_schema", "sys")
MYSQL_MAPPING = "Types follow DMS's MySQL mapping (docs/source-types.md)."
PASSWORD_ENV = "MYSQL_PWD"  # the MySQL clients' own variable

# DATA_TYPE -> configuration type, for signed integers and the other types kept as they are.
EXACT_TYPES = {
    "tinyint": "tinyint",
    "smallint": "smallint",
    "mediumint": "int",
    "int": "int",
    "bigint": "bigint",
    "float": "float",
    "double": "double",
    "char": "string",
    "varchar": "string",
    "tinytext": "string",
    "text": "string",
    "mediumtext": "string",
    "longtext": "string",
    "date": "date",
    "datetime": "timestamp",
    "timestamp": "timestamp",
    "year": "smallint",
}
# The unsigned integers, one size up: DMS's UINT1..UINT8.
UNSIGNED_TYPES = {
    "tinyint": "smallint",
    "smallint": "int",
    "mediumint": "int",
    "int": "bigint",
    "bigint": "decimal(20,0)",
}
BINARY_TYPES = ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob")
TEXT_TYPES = {
    "time": "no lake time type: DMS writes TIME as text",
    "enum": "an enum: DMS writes its label as text",
    "set": "a SET: DMS writes its members as comma-separated text",
    "json": "DMS writes JSON as text (a LOB)",
    "bit": "DMS maps BIT to BOOLEAN or bytes by width; how it appears in CSV is unconfirmed here: kept as text",
    "uuid": "DMS writes a UUID as text",
    "inet4": "DMS writes an address as text",
    "inet6": "DMS writes an address as text",
}


def is_mysql_url(url: str) -> bool:
    return urlsplit(url).scheme.split("+")[0] in SCHEMES


def connection_settings(url: str, tls: SourceTls = CHECKED) -> dict[str, Any]:
    """PyMySQL's connection arguments for ``url`` (password from the URL or $MYSQL_PWD), over checked TLS
    (``source_tls``: ``ssl_ca`` in the URL names the CA); a malformed URL is refused without its password."""
    try:
        parts = urlsplit(url)
        port = parts.port or 3306
    except ValueError as error:  # a malformed URL: its message may quote the part it stumbled on
        raise CdcLakeError(f"cannot connect to the source {masked(url)}: {redacted(str(error), url)}") from None
    options = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    password = unquote(parts.password) if parts.password is not None else os.environ.get(PASSWORD_ENV, "")
    return {
        "host": parts.hostname or "127.0.0.1",
        "port": port,
        "user": unquote(parts.username or ""),
        "password": password.encode("utf-8"),  # PyMySQL would send a str as Latin-1
        "database": unquote(parts.path.lstrip("/")) or None,
        "ssl": mysql_ssl(options, tls, masked(url)),
    }


def connect(url: str, tls: SourceTls = CHECKED) -> Any:
    """A read-only connection to the source in UTC (``connection_settings``), refused with the reason, never
    with the password."""
    import pymysql

    settings = connection_settings(url, tls)
    try:
        connection = pymysql.connect(**settings, connect_timeout=10, autocommit=True)
    except (pymysql.Error, OSError) as error:  # OSError: a CA file that cannot be read
        reason = error.args[1] if isinstance(error, pymysql.Error) and len(error.args) > 1 else str(error)
        reason = explained(redacted(str(reason), url), tls)
        raise CdcLakeError(f"cannot connect to the source {masked(url)}: {reason}") from None
    with connection.cursor() as cursor:
        cursor.execute("SET time_zone = '+00:00'")  # TIMESTAMP values in UTC, as DMS writes them
        cursor.execute("SET SESSION TRANSACTION READ ONLY")
    return connection


def read_catalog(
    connection: Any, schemas: Sequence[str] = (), patterns: Sequence[str] = (), dms_format: FormatName = "csv"
) -> list[CatalogTable]:
    """The source's base tables in ``schemas`` (MySQL databases; default: every non-system one) whose
    ``<schema>.<table>`` matches one of ``patterns``, with their columns in source order and primary keys."""
    chosen = tuple(schemas) or None
    where = "c.TABLE_SCHEMA NOT IN %(system)s" + (" AND c.TABLE_SCHEMA IN %(chosen)s" if chosen else "")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.TABLE_SCHEMA, c.TABLE_NAME, c.COLUMN_NAME, c.COLUMN_TYPE, c.DATA_TYPE, c.NUMERIC_PRECISION, "
            "c.NUMERIC_SCALE, c.IS_NULLABLE FROM information_schema.COLUMNS c JOIN information_schema.TABLES t "
            "ON t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = c.TABLE_NAME "
            f"WHERE t.TABLE_TYPE = 'BASE TABLE' AND {where} "
            "ORDER BY c.TABLE_SCHEMA, c.TABLE_NAME, c.ORDINAL_POSITION",
            {"system": SYSTEM_SCHEMAS, "chosen": chosen},
        )
        rows = cursor.fetchall()
        cursor.execute(
            "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE "
            "WHERE CONSTRAINT_NAME = 'PRIMARY' AND TABLE_SCHEMA NOT IN %(system)s "
            "ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION",
            {"system": SYSTEM_SCHEMAS},
        )
        keys: dict[str, list[str]] = {}
        for schema, table, column in cursor.fetchall():
            keys.setdefault(f"{schema}.{table}", []).append(column)
    tables: dict[str, CatalogTable] = {}
    for schema, table, column, full_type, data_type, precision, scale, nullable in rows:
        name = f"{schema}.{table}"
        if patterns and not any(fnmatch.fnmatchcase(name, p) for p in patterns):
            continue
        if name not in tables:
            tables[name] = CatalogTable(name, keys.get(name, []))
        config_type, note = column_type(full_type, data_type, (precision, scale), dms_format)
        tables[name].columns.append(CatalogColumn(column, full_type, data_type, config_type, nullable == "YES", note))
    return list(tables.values())


def column_type(
    full_type: str, data_type: str, precision_scale: tuple[int | None, int | None], dms_format: FormatName
) -> tuple[str, str | None]:
    """The configuration type DMS's mapping gives a MySQL column (``COLUMN_TYPE``, ``DATA_TYPE``), and why it is
    text when it is (or a remark on a faithful but surprising mapping)."""
    full_type, data_type = full_type.lower(), data_type.lower()
    if data_type in UNSIGNED_TYPES and "unsigned" in full_type:
        return UNSIGNED_TYPES[data_type], None
    if full_type.startswith("tinyint(1)"):
        return "tinyint", "BOOLEAN is TINYINT(1): DMS writes 1 or 0, kept as a number"
    if data_type in ("decimal", "numeric"):
        precision, scale = precision_scale
        if precision is None or scale is None:
            return "string", f"{full_type}: no precision in the catalog; kept as text"
        if precision > MAX_DECIMAL_PRECISION:
            return "string", f"{full_type}: above precision {MAX_DECIMAL_PRECISION} DMS writes the value as text"
        return f"decimal({precision},{scale})", None
    if data_type in BINARY_TYPES:
        if FORMATS[dms_format].keeps_binary:
            return "binary", None
        return "string", "DMS writes binary data as bytes; how it appears in CSV is unconfirmed here: kept as text"
    if data_type in EXACT_TYPES:
        return EXACT_TYPES[data_type], None
    if data_type in TEXT_TYPES:
        return "string", TEXT_TYPES[data_type]
    return "string", f"{full_type}: no mapping of its own; DMS writes it as text"
