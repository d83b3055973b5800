"""The local Spark session: Glue's Spark with the jars a Glue version runs, a Hadoop catalog on a folder (the
quick path), and, when given, the Glue job's own catalog settings against an AWS endpoint (the deployed path)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict, Unpack

import pyspark
from pyspark.sql import SparkSession

from cdc_lake.core.catalogs import endpoint_conf, glue_catalogs
from cdc_lake.core.exceptions import CdcLakeError
from cdc_lake.engine.session import CODING_ERRORS_REPLACED, LISTING_TASKS, import_pyspark_short_names
from cdc_lake.local.aws_endpoint import aws_region
from cdc_lake.local.jars import installed_glue_version, spark_jars

LOCAL_CATALOG = "lake"
SHUFFLE_PARTITIONS_ENV = "CDC_LAKE_SHUFFLE_PARTITIONS"
LOOPBACK = "127.0.0.1"
# Spark's own logging defaults, then what cdc_lake.local's log4j2.properties changes in them.
LOG4J2_CONFIGURATION = ("org/apache/spark/log4j2-defaults.properties", Path(__file__).with_name("log4j2.properties"))


class SessionOptions(TypedDict, total=False):
    """A local session's options: its ``app_name`` (default ``cdc-lake``), ``cores`` (default all), the catalogs
    of ``conf`` (a Glue job's ``--conf`` settings) and the ``aws_endpoint`` their clients reach, and the
    ``glue_version`` it runs (default: the one this environment's pyspark is; another is refused)."""

    app_name: str
    cores: int | str
    conf: Mapping[str, str] | None
    aws_endpoint: str | None
    glue_version: str


def local_spark_session(warehouse: str | Path | None = None, **options: Unpack[SessionOptions]) -> SparkSession:
    """A local Spark session with Iceberg: a Hadoop catalog named ``lake`` at ``warehouse`` when given, and the
    catalogs of ``conf`` (a Glue job's ``--conf`` settings), whose Glue and S3 clients reach ``aws_endpoint``.

    ``s3://`` is read through S3A, as Glue reads it through EMRFS. Spark allows one session per process: a
    second call returns the first session, whose warehouse and ``conf`` must match.
    """
    conf, aws_endpoint = options.get("conf"), options.get("aws_endpoint")
    installed = installed_glue_version()
    glue_version = options.get("glue_version") or installed
    if glue_version != installed:
        raise CdcLakeError(
            f"this environment runs Glue {installed}'s Spark, not Glue {glue_version}'s: "
            f"run with GLUE_VERSION={glue_version} (make setup installs that runtime beside this one)"
        )
    warehouse_uri = Path(warehouse).resolve().as_posix() if warehouse is not None else None
    active = SparkSession.getActiveSession()
    if active is not None:
        current = active.conf.get(f"spark.sql.catalog.{LOCAL_CATALOG}.warehouse", None)
        if warehouse_uri is not None and current != warehouse_uri:
            raise RuntimeError(f"a Spark session with warehouse {current} is already running in this process")
        differing = sorted(key for key, value in (conf or {}).items() if active.conf.get(key, None) != value)
        if differing:
            raise RuntimeError(f"a Spark session with other {', '.join(differing)} is already running in this process")
        return active
    # Python workers (mapInArrow) run this interpreter, with this environment's packages and cdc_lake.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # The address Spark takes for this machine, as the session's own is (below): without it Spark looks up the host
    # name and warns when that resolves to loopback, as it does on many laptops and containers.
    os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    settings = {
        "spark.driver.extraClassPath": _driver_class_path(glue_version),
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": os.environ.get(SHUFFLE_PARTITIONS_ENV, "8"),
        # The session holds production rows (verify, repair) and serves them without authentication: it listens on
        # loopback only, never on the machine's network interfaces.
        "spark.driver.bindAddress": LOOPBACK,
        "spark.driver.host": LOOPBACK,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": os.environ.get("CDC_LAKE_DRIVER_MEMORY", "4g"),
        "spark.sql.adaptive.enabled": "true",
        # A laptop session lives long and meets many tables: Spark's default of 100 compiled query classes made
        # it compile the same code again and again.
        "spark.sql.codegen.cache.maxEntries": "2000",
        # ... and its JIT-compiled code outgrows the JVM's default 240 MB code cache over a long session (Spark 4.1
        # then dies with "Out of space in CodeCache for method handle intrinsic").
        "spark.driver.extraJavaOptions": f"-XX:ReservedCodeCacheSize=512m {_log4j2_configuration_option()}",
        "spark.sql.ansi.enabled": "false",
        CODING_ERRORS_REPLACED: "true",
        LISTING_TASKS[0]: LISTING_TASKS[1],
        "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
    }
    if warehouse_uri is not None:
        settings |= {
            f"spark.sql.catalog.{LOCAL_CATALOG}": "org.apache.iceberg.spark.SparkCatalog",
            f"spark.sql.catalog.{LOCAL_CATALOG}.type": "hadoop",
            f"spark.sql.catalog.{LOCAL_CATALOG}.warehouse": warehouse_uri,
            # Each run must see the latest commit of a concurrent run, never a cached table.
            f"spark.sql.catalog.{LOCAL_CATALOG}.cache-enabled": "false",
        }
    settings |= conf or {}
    if aws_endpoint:
        settings |= endpoint_conf(aws_endpoint, glue_catalogs(settings)) | _s3a_endpoint_conf(aws_endpoint)
    cores, app_name = options.get("cores", "*"), options.get("app_name", "cdc-lake")
    builder = SparkSession.builder.master(f"local[{cores}]").appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    import_pyspark_short_names(spark)
    return spark


def _driver_class_path(glue_version: str) -> str:
    """The Glue runtime's jars, behind Spark's own log4j: iceberg-aws-bundle 1.10.0 carries a copy of log4j without
    its multi-release manifest (apache/iceberg#14207), and ahead of Spark's that copy's Java 8 code prints
    "WARNING: sun.reflect.Reflection.getCallerClass is not supported" at every start."""
    spark_jar_dir = Path(pyspark.__file__).parent / "jars"
    spark_log4j = [jar for part in ("api", "core") for jar in sorted(spark_jar_dir.glob(f"log4j-{part}-*.jar"))]
    return os.pathsep.join(str(jar) for jar in [*spark_log4j, *spark_jars(glue_version)])


def _log4j2_configuration_option() -> str:
    """The driver's log4j configuration: Spark's defaults with our changes merged in (a list of files is merged)."""
    spark_defaults, ours = LOG4J2_CONFIGURATION
    return f"-Dlog4j2.configurationFile={spark_defaults},{ours.resolve().as_uri()}"


def _s3a_endpoint_conf(endpoint: str) -> dict[str, str]:
    region = aws_region()
    return {
        "spark.hadoop.fs.s3a.endpoint": endpoint,
        "spark.hadoop.fs.s3a.endpoint.region": region,
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": str(endpoint.startswith("https://")).lower(),
    }
