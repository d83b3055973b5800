"""The two places cdc-lake reaches past Iceberg's Spark SQL surface into its Java API, kept in one module.

Checked against Apache Iceberg 1.10 (``iceberg-spark-runtime-3.5``), the version Glue 5.1 and the local
runtime load. ``tests/functional/test_iceberg_java.py`` exercises both, so an upgrade that breaks them
fails there first, by name:

- ``CommitMetadata.COMMIT_PROPERTIES``: a private static thread-local that Iceberg's Spark writes read
  snapshot summary properties from (the public ``CommitMetadata.withCommitProperties`` takes a Java
  ``Callable``, which Python could only provide through py4j's callback server).
- ``Spark3Util.loadIcebergTable`` and ``Table.newAppend``: an append with no files, the only way to make a
  snapshot that changes no data but carries properties (SQL has no such statement).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import SparkSession

ICEBERG_VERSION = "1.10"
COMMIT_METADATA_CLASS = "org.apache.iceberg.spark.CommitMetadata"
COMMIT_PROPERTIES_FIELD = "COMMIT_PROPERTIES"


class commit_properties:
    """Attach snapshot summary properties to Iceberg commits made by this thread's next SQL statements.

    PySpark pins each Python thread to its own JVM thread, so concurrent runs in one session keep their
    properties apart.
    """

    def __init__(self, spark: SparkSession, properties: Mapping[str, str]) -> None:
        self._spark = spark
        self._properties = properties
        self._thread_local: Any = None

    def __enter__(self) -> commit_properties:
        jvm = _jvm(self._spark)
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        holder = jvm.java.lang.Class.forName(COMMIT_METADATA_CLASS, True, loader)
        field_ = holder.getDeclaredField(COMMIT_PROPERTIES_FIELD)
        field_.setAccessible(True)
        self._thread_local = field_.get(None)
        java_map = jvm.java.util.HashMap()
        for key, value in self._properties.items():
            java_map.put(key, value)
        self._thread_local.set(java_map)
        return self

    def __exit__(self, *exc: object) -> None:
        self._thread_local.remove()


def empty_commit(spark: SparkSession, dotted_name: str, properties: Mapping[str, str], branch: str | None) -> int:
    """A snapshot with no data change carrying only ``properties``, on ``branch`` or main; returns its id."""
    iceberg_table = _jvm(spark).org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, dotted_name)
    append = iceberg_table.newAppend()
    if branch is not None:
        append = append.toBranch(branch)
    for key, value in properties.items():
        append = append.set(key, value)
    append.commit()
    iceberg_table.refresh()
    snapshot = iceberg_table.snapshot(branch) if branch is not None else iceberg_table.currentSnapshot()
    return int(snapshot.snapshotId())


def _jvm(spark: SparkSession) -> Any:
    jvm = spark.sparkContext._jvm
    if jvm is None:
        raise RuntimeError("the Spark session has no JVM gateway (stopped?)")
    return jvm
