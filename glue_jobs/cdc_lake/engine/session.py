"""Glue's Spark session (Iceberg and the Glue catalog come from the job's --conf); the local one is in ``local``."""

from __future__ import annotations

import os

from pyspark.sql import SparkSession

from cdc_lake.core.catalogs import AWS_ENDPOINT_ENV, endpoint_conf
from cdc_lake.core.names import GLUE_CATALOG

__all__ = ["GLUE_CATALOG", "glue_spark_session"]


def glue_spark_session(catalog: str = GLUE_CATALOG) -> SparkSession:
    """Glue's session: Iceberg and the Glue catalog come from the job's --datalake-formats and --conf.

    When ``AWS_ENDPOINT_URL`` names another endpoint (a run reproduced on a laptop), the catalog follows it;
    a catalog is loaded on first use, so setting it here still counts. On Glue the variable is never set.
    """
    spark = SparkSession.builder.getOrCreate()
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    spark.conf.set("spark.sql.ansi.enabled", "false")
    endpoint = os.environ.get(AWS_ENDPOINT_ENV)
    if endpoint:
        for key, value in endpoint_conf(endpoint, [catalog]).items():
            spark.conf.set(key, value)
    return spark
