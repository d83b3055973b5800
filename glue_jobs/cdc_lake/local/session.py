"""The local Spark session: Iceberg with a Hadoop catalog on a folder, the laptop's stand-in for Glue's."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from cdc_lake.local.jars import spark_jars

LOCAL_CATALOG = "lake"
SHUFFLE_PARTITIONS_ENV = "CDC_LAKE_SHUFFLE_PARTITIONS"


def local_spark_session(warehouse: str | Path, *, app_name: str = "cdc-lake", cores: int | str = "*") -> SparkSession:
    """A local Spark session with Iceberg and a Hadoop catalog named ``lake`` at ``warehouse``.

    Spark allows one session per process: a second call returns the first session, whose warehouse
    must match.
    """
    warehouse_uri = Path(warehouse).resolve().as_posix()
    active = SparkSession.getActiveSession()
    if active is not None:
        current = active.conf.get(f"spark.sql.catalog.{LOCAL_CATALOG}.warehouse", None)
        if current != warehouse_uri:
            raise RuntimeError(f"a Spark session with warehouse {current} is already running in this process")
        return active
    # Python workers (mapInArrow) run this interpreter, with this environment's packages and cdc_lake.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    classpath = os.pathsep.join(str(j) for j in spark_jars())
    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.driver.extraClassPath", classpath)
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config(f"spark.sql.catalog.{LOCAL_CATALOG}", "org.apache.iceberg.spark.SparkCatalog")
        .config(f"spark.sql.catalog.{LOCAL_CATALOG}.type", "hadoop")
        .config(f"spark.sql.catalog.{LOCAL_CATALOG}.warehouse", warehouse_uri)
        # Each run must see the latest commit of a concurrent run, never a cached table.
        .config(f"spark.sql.catalog.{LOCAL_CATALOG}.cache-enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", os.environ.get(SHUFFLE_PARTITIONS_ENV, "8"))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", os.environ.get("CDC_LAKE_DRIVER_MEMORY", "4g"))
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.ansi.enabled", "false")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
