"""Which source a URL names, and the check of a table configuration against the live source.

``cdc-lake config-check-source`` runs it from a laptop; the stack's source-check Glue job
(``cdc_lake.jobs.source_check``) runs it on a schedule, with the source's URL made from the DMS source
endpoint's secret (``secret_url``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from cdc_lake.core.config import PipelineConfig
from cdc_lake.core.exceptions import CdcLakeError, JobArgumentError
from cdc_lake.core.formats import FormatName
from cdc_lake.ops import mysql_catalog, source_catalog
from cdc_lake.ops.source_catalog import CatalogTable, Difference, differences
from cdc_lake.ops.source_tls import CHECKED, SourceTls

# The stack's sourceEngine -> the URL scheme of its catalog reader.
ENGINE_SCHEMES = {"postgres": "postgresql", "mysql": "mysql", "aurora": "mysql", "mariadb": "mysql"}


@dataclass(frozen=True)
class Dialect:
    """How to reach a source's catalog: PostgreSQL (libpq URL or conninfo), or MySQL/MariaDB (``mysql://``)."""

    connect: Callable[[str, SourceTls], Any]
    read_catalog: Callable[[Any, Sequence[str], Sequence[str], FormatName], list[CatalogTable]]
    mapping: str


def dialect(url: str) -> Dialect:
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
    scheme = ENGINE_SCHEMES.get(engine)
    if scheme is None:
        raise JobArgumentError(f"--source_engine {engine!r}: use one of {', '.join(ENGINE_SCHEMES)}")
    missing = [k for k in ("host", "username", "password") if not secret.get(k)]
    if missing:
        raise CdcLakeError(f"the source secret lacks {', '.join(missing)}: DMS needs them too (docs/deploy.md)")
    name = database or secret.get("dbname") or ""
    user, password = quote(str(secret["username"]), safe=""), quote(str(secret["password"]), safe="")
    port = f":{int(secret['port'])}" if secret.get("port") else ""
    return f"{scheme}://{user}:{password}@{secret['host']}{port}/{quote(str(name), safe='')}"
