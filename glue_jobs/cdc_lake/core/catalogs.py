"""Spark settings of the lake's Iceberg catalog as Glue runs it, and of the AWS endpoint a run talks to.

The Glue jobs register the Glue Data Catalog with S3FileIO under ``glue_catalog``: the stack passes these
settings as the jobs' single ``--conf`` value, and a local run of the same job reads them back from the
template. When ``AWS_ENDPOINT_URL`` (the AWS SDKs' own variable) names another endpoint, such as a local moto
server, the catalog's Glue and S3 clients follow it too; that is decided at run time, from the environment,
so no endpoint ever reaches a deployed template. Pure: the CDK app imports it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from cdc_lake.core.names import GLUE_CATALOG

AWS_ENDPOINT_ENV = "AWS_ENDPOINT_URL"
CONF_SEPARATOR = " --conf "
GLUE_CATALOG_IMPL = "org.apache.iceberg.aws.glue.GlueCatalog"
# S3FileIO, keeping in memory the metadata files a run wrote, which Iceberg reads back (jvm/, shipped as the jobs'
# --extra-jars): a warm batch's metadata.json and two manifest lists, 5 of its S3 requests.
LAKE_IO = "cdclake.iceberg.WrittenMetadataFileIO"
ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
_CATALOG_PREFIX = "spark.sql.catalog."
_CONF_SPLIT = re.compile(r"\s+--conf\s+")


def glue_catalog_conf(warehouse_uri: str, catalog: str = GLUE_CATALOG) -> dict[str, str]:
    """The Iceberg settings of a Glue job: the Glue Data Catalog, S3FileIO (through ``LAKE_IO``), the warehouse,
    UTC."""
    prefix = f"{_CATALOG_PREFIX}{catalog}"
    return {
        "spark.sql.extensions": ICEBERG_EXTENSIONS,
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.warehouse": warehouse_uri,
        f"{prefix}.catalog-impl": GLUE_CATALOG_IMPL,
        f"{prefix}.io-impl": LAKE_IO,
        # Concurrent runs for one table must each plan from the latest commit, never a cached table.
        f"{prefix}.cache-enabled": "false",
        "spark.sql.session.timeZone": "UTC",
    }


def render_conf(settings: Mapping[str, str]) -> str:
    """Settings as ONE ``--conf`` job argument (Glue accepts the key only once): ``k=v --conf k=v …``."""
    return CONF_SEPARATOR.join(f"{key}={value}" for key, value in settings.items())


def parse_conf(value: str) -> dict[str, str]:
    """The settings of a ``--conf`` job argument, as Glue hands them to Spark."""
    settings: dict[str, str] = {}
    for item in _CONF_SPLIT.split(value.strip()):
        key, equals, setting = item.partition("=")
        if not equals or not key.strip():
            raise ValueError(f"--conf {value!r}: {item!r} is not key=value")
        settings[key.strip()] = setting.strip()
    return settings


def glue_catalogs(conf: Mapping[str, str]) -> list[str]:
    """The Spark catalogs that ``conf`` backs with the Glue Data Catalog."""
    suffix = ".catalog-impl"
    return [
        key[len(_CATALOG_PREFIX) : -len(suffix)]
        for key, value in conf.items()
        if key.startswith(_CATALOG_PREFIX) and key.endswith(suffix) and value == GLUE_CATALOG_IMPL
    ]


def endpoint_conf(endpoint: str, catalogs: list[str]) -> dict[str, str]:
    """Point the catalogs' Glue and S3 clients at ``endpoint``; path-style, as local S3 servers need."""
    settings: dict[str, str] = {}
    for catalog in catalogs:
        prefix = f"{_CATALOG_PREFIX}{catalog}"
        settings |= {
            f"{prefix}.glue.endpoint": endpoint,
            f"{prefix}.s3.endpoint": endpoint,
            f"{prefix}.s3.path-style-access": "true",
        }
    return settings
