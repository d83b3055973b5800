"""Which source a URL names, and the check of a table configuration against the live source.

``cdc-lake config-check-source`` runs it from a laptop; the stack's source-check Glue job
(``cdc_lake.jobs.source_check``) runs it on a schedule, with the source's URL made from the DMS source
endpoint's secret (``secret_url``). A URL or engine naming Oracle or SQL Server is refused here, before any
connection (``refuse_unreachable``, ``engine_scheme``): verify, repair and both catalog commands reach PostgreSQL,
MySQL and MariaDB only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from cdc_lake.core.config import PipelineConfig
from cdc_lake.core.exceptions import CdcLakeError, JobArgumentError, UnreachableSourceError
from cdc_lake.core.formats import FormatName
from cdc_lake.core.source_types import TYPED_ENGINES
from cdc_lake.ops import mysql_catalog, source_catalog
from cdc_lake.ops.source_catalog import CatalogTable, Difference, differences
from cdc_lake.ops.source_tls import CHECKED, SourceTls

# The stack's sourceEngine (DMS's EngineName) -> the URL scheme of its catalog reader.
ENGINE_SCHEMES = {
    "postgres": "postgresql",
    "aurora-postgresql": "postgresql",
    "mysql": "mysql",
    "aurora": "mysql",
    "mariadb": "mysql",
}
# Engines DMS reads but the source commands cannot reach: no real server of theirs runs in this project's tests,
# so no code for them ships (their configuration names its types instead). sourceEngine -> the engine's name.
UNREACHABLE_ENGINES = TYPED_ENGINES
# A URL's scheme (before any ``+driver``, after any ``jdbc:``) -> the unreachable engine it names.
UNREACHABLE_SCHEMES = {"oracle": "oracle", "sqlserver": "sqlserver", "mssql": "sqlserver"}
_SCHEME = re.compile(r"\s*((?:jdbc:)?([a-z][a-z0-9_.-]*)(?:\+[a-z0-9_.-]*)?):", re.IGNORECASE)
# An ODBC connection string's driver: ``Driver={ODBC Driver 18 for SQL Server};Server=...``.
_ODBC_DRIVER = re.compile(r"(?:^|;)\s*driver\s*=\s*\{?([^};]*)", re.IGNORECASE)
_ODBC_ENGINES = {"sql server": "sqlserver", "oracle": "oracle"}


@dataclass(frozen=True)
class Dialect:
    """How to reach a source's catalog: PostgreSQL (libpq URL or conninfo), or MySQL/MariaDB (``mysql://``)."""

    connect: Callable[[str, SourceTls], Any]
    read_catalog: Callable[[Any, Sequence[str], Sequence[str], FormatName], list[CatalogTable]]
    mapping: str


def unreachable(named: str, engine: str) -> UnreachableSourceError:
    """The refusal of an Oracle or SQL Server source, ``named`` saying where it was named (never with a password),
    with what works for it instead."""
    name = UNREACHABLE_ENGINES[engine]
    return UnreachableSourceError(
        f"{named} names {name}: cdc-lake verify, repair, config-from-source and config-check-source (and the "
        f"stack's source-check and drift jobs) cannot reach {name}: no real {name} database runs in this project's "
        "tests, so no code for it ships. What works: `cdc-lake config-from-files` writes the table configuration "
        "from the files DMS landed, and the replay applies them as from any source; check the database's CDC "
        f"settings by hand (docs/sources.md#{name.lower().replace(' ', '-')})"
    )


def refuse_unreachable(url: str) -> None:
    """Refuse a source URL, JDBC URL or ODBC connection string that names Oracle or SQL Server, naming only its
    scheme (or ODBC driver): the rest may hold the password."""
    scheme = _SCHEME.match(url)
    if scheme and scheme.group(2).lower() in UNREACHABLE_SCHEMES:
        raise unreachable(f"--source ({scheme.group(1)}:…)", UNREACHABLE_SCHEMES[scheme.group(2).lower()])
    driver = _ODBC_DRIVER.search(url)
    named = driver.group(1).lower() if driver else ""
    for word, engine in _ODBC_ENGINES.items():
        if word in named:
            raise unreachable("--source (an ODBC connection string)", engine)


def engine_scheme(engine: str) -> str:
    """The URL scheme of the stack's sourceEngine ``engine`` (a Glue job's --source_engine); Oracle and SQL Server
    are refused."""
    if engine in UNREACHABLE_ENGINES:
        raise unreachable(f"--source_engine {engine}", engine)
    scheme = ENGINE_SCHEMES.get(engine)
    if scheme is None:
        raise JobArgumentError(f"--source_engine {engine!r}: use one of {', '.join(ENGINE_SCHEMES)}")
    return scheme


def dialect(url: str) -> Dialect:
    """The dialect of ``url``: MySQL/MariaDB by its scheme, else PostgreSQL; Oracle and SQL Server refused."""
    refuse_unreachable(url)
    if mysql_catalog.is_mysql_url(url):
        return Dialect(mysql_catalog.connect, mysql_catalog.read_catalog, mysql_catalog.MYSQL_MAPPING)
    return Dialect(source_catalog.connect, source_catalog.read_catalog, source_catalog.POSTGRES_MAPPING)


def check_source(
    config: PipelineConfig, url: str, tls: SourceTls = CHECKED
) -> tuple[list[CatalogTable], list[Difference]]:
    """The configured tables as the source's catalog has them, and every difference with the configuration."""
    source = dialect(url)
    with source.connect(url, tls) as connection:
        tables = source.read_catalog(connection, (), [t.name for t in config.tables], config.dms.format)
    return tables, differences(config, tables)


def secret_url(secret: Mapping[str, Any], engine: str, database: str | None = None) -> str:
    """The source's URL from a DMS source secret (``host``, ``port``, ``username``, ``password``, and
    ``dbname`` as RDS writes it), for the stack's ``engine``. It holds the password: never print it unmasked."""
    scheme = engine_scheme(engine)
    missing = [k for k in ("host", "username", "password") if not secret.get(k)]
    if missing:
        raise CdcLakeError(f"the source secret lacks {', '.join(missing)}: DMS needs them too (docs/deploy.md)")
    name = database or secret.get("dbname") or ""
    user, password = quote(str(secret["username"]), safe=""), quote(str(secret["password"]), safe="")
    port = f":{int(secret['port'])}" if secret.get("port") else ""
    return f"{scheme}://{user}:{password}@{secret['host']}{port}/{quote(str(name), safe='')}"
