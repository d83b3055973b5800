"""Glue's Spark session (Iceberg and the Glue catalog come from the job's --conf); the local one is in ``local``."""

from __future__ import annotations

import os

from py4j.java_gateway import java_import
from pyspark.sql import SparkSession

from cdc_lake.core.catalogs import AWS_ENDPOINT_ENV, endpoint_conf
from cdc_lake.core.names import GLUE_CATALOG

__all__ = [
    "CODING_ERRORS_REPLACED",
    "GLUE_CATALOG",
    "LISTING_TASKS",
    "glue_spark_session",
    "import_pyspark_short_names",
]

# Classes PySpark reaches by short name on every column expression (``functions``) or conversion. A short name is
# looked up as a class in each package PySpark imports with ``.*``, and every miss searches all the classpath's jars
# (a sixth of a small run's driver time). Imported by full name, it is found at the first try.
_PYSPARK_SHORT_NAMES = (
    "org.apache.spark.sql.functions",
    "org.apache.spark.sql.SparkSession",
    "org.apache.spark.api.python.PythonUtils",
)


# Spark 4 refuses bytes that are no UTF-8 in decode(); the reader decodes them to U+FFFD, as Spark 3.5 does, to
# name the bad value's file, row and column itself (a setting Spark 3.5 does not know, and ignores).
CODING_ERRORS_REPLACED = "spark.sql.legacy.codingErrorAction"

# A batch's read names each of its files: beyond 32 paths Spark checks them in a job of one task per path, up to
# 10,000. A catch-up of 10,000 one-row files spent 35 of its 50 s scheduling those tasks; 64 take 2 s.
LISTING_TASKS = ("spark.sql.sources.parallelPartitionDiscovery.parallelism", "64")


def glue_spark_session(catalog: str = GLUE_CATALOG) -> SparkSession:
    """Glue's session: Iceberg and the Glue catalog come from the job's --datalake-formats and --conf.

    When ``AWS_ENDPOINT_URL`` names another endpoint (a run reproduced on a laptop), the catalog follows it;
    a catalog is loaded on first use, so setting it here still counts. On Glue the variable is never set.
    """
    spark = SparkSession.builder.getOrCreate()
    import_pyspark_short_names(spark)
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    spark.conf.set("spark.sql.ansi.enabled", "false")
    spark.conf.set(CODING_ERRORS_REPLACED, "true")
    spark.conf.set(*LISTING_TASKS)
    endpoint = os.environ.get(AWS_ENDPOINT_ENV)
    if endpoint:
        for key, value in endpoint_conf(endpoint, [catalog]).items():
            spark.conf.set(key, value)
    return spark


def import_pyspark_short_names(spark: SparkSession) -> None:
    """Import the classes PySpark names most by their full names into its gateway's view."""
    for name in _PYSPARK_SHORT_NAMES:
        java_import(spark.sparkContext._jvm, name)
