"""Which source a URL names, and the check of a table configuration against the live source.

``cdc-lake config-check-source`` runs it from a laptop. The stack's source-check Glue job runs it on a
schedule: it reads the DMS source endpoint's secret, reaches the source through the job's network connection,
logs each difference and publishes their count as the ``SourceDifferences`` metric, which is alarmed.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from cdc_lake.core.config import PipelineConfig, load_config_uri
from cdc_lake.core.exceptions import CdcLakeError, JobArgumentError
from cdc_lake.core.names import METRICS_NAMESPACE, PIPELINE_DIMENSION, SOURCE_DIFFERENCES_METRIC
from cdc_lake.ops import mysql_catalog, source_catalog
from cdc_lake.ops.source_catalog import CatalogTable, Difference, differences
from cdc_lake.ops.source_tls import CHECKED, SourceTls, job_tls

log = logging.getLogger(__name__)

# The stack's sourceEngine -> the URL scheme of its catalog reader.
ENGINE_SCHEMES = {"postgres": "postgresql", "mysql": "mysql", "aurora": "mysql", "mariadb": "mysql"}
JOB_REQUIRED = ("config_uri", "source_secret", "source_engine")
JOB_OPTIONAL = ("source_database", "source_without_tls", "source_ca")


@dataclass(frozen=True)
class Dialect:
    """How to reach a source's catalog: PostgreSQL (libpq URL or conninfo), or MySQL/MariaDB (``mysql://``)."""

    connect: Callable[[str, SourceTls], Any]
    read_catalog: Callable[[Any, Sequence[str], Sequence[str], str], list[CatalogTable]]
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


def run_source_check(options: Mapping[str, str], secrets: Any, cloudwatch: Any, s3: Any) -> list[Difference]:
    """The Glue job's check: the configuration from ``--config_uri``, the source from the secret
    ``--source_secret``; logs each difference and puts their count (0 too: the alarm sees the job ran)."""
    plain = {k.removeprefix("--"): v for k, v in options.items()}
    missing = [name for name in JOB_REQUIRED if not plain.get(name)]
    if missing:
        raise JobArgumentError(f"missing job argument(s): {', '.join('--' + m for m in missing)}")
    config = load_config_uri(plain["config_uri"], s3_client=s3)
    secret = json.loads(secrets.get_secret_value(SecretId=plain["source_secret"])["SecretString"])
    url = secret_url(secret, plain["source_engine"], plain.get("source_database") or None)
    _, found = check_source(config, url, job_tls(plain))
    for difference in found:
        log.warning("SOURCE DIFFERENCE %s", difference)
    log.info("%d table(s) checked against the source: %d difference(s)", len(config.tables), len(found))
    cloudwatch.put_metric_data(
        Namespace=METRICS_NAMESPACE,
        MetricData=[
            {
                "MetricName": SOURCE_DIFFERENCES_METRIC,
                "Dimensions": [{"Name": PIPELINE_DIMENSION, "Value": config.lake.database}],
                "Timestamp": dt.datetime.now(dt.UTC),
                "Value": float(len(found)),
                "Unit": "Count",
            }
        ],
    )
    return found


def glue_main(argv: Sequence[str] | None = None) -> list[Difference]:
    """Entry point of the source-check Glue script."""
    import boto3

    from cdc_lake.engine.jobs import resolve_glue_arguments

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    options = resolve_glue_arguments(list(argv if argv is not None else sys.argv), JOB_REQUIRED, JOB_OPTIONAL)
    clients = {name: boto3.client(name) for name in ("secretsmanager", "cloudwatch", "s3")}
    return run_source_check(options, clients["secretsmanager"], clients["cloudwatch"], clients["s3"])
