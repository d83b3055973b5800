"""Glue's Spark session (Iceberg and the Glue catalog come from the job's --conf); the local one is in ``local``."""

from __future__ import annotations

from pyspark.sql import SparkSession

from cdc_lake.names import GLUE_CATALOG

__all__ = ["GLUE_CATALOG", "glue_spark_session"]


def glue_spark_session() -> SparkSession:
    """Glue's session: Iceberg and the Glue catalog come from the job's --datalake-formats and --conf."""
    spark = SparkSession.builder.getOrCreate()
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    spark.conf.set("spark.sql.ansi.enabled", "false")
    return spark
