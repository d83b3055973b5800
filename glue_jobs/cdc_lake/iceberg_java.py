"""Where cdc-lake reaches past Iceberg's Spark SQL surface into its Java API, kept in one module.

Checked against Apache Iceberg 1.10 (``iceberg-spark-runtime-3.5``), the version Glue 5.1 and the local
runtime load. ``tests/functional/test_iceberg_java.py`` exercises each, so an upgrade that breaks them
fails there first, by name:

- ``CommitMetadata.COMMIT_PROPERTIES``: a private static thread-local that Iceberg's Spark writes read
  snapshot summary properties from (the public ``CommitMetadata.withCommitProperties`` takes a Java
  ``Callable``, which Python could only provide through py4j's callback server).
- ``Spark3Util.loadIcebergTable`` and ``Table.newAppend``: an append with no files, the only way to make a
  snapshot that changes no data but carries properties (SQL has no such statement).
- ``Table.refs``, ``Table.snapshot``, ``Snapshot.summary``: a branch's head and its ancestors' summaries with
  no Spark job, where the ``refs``/``history``/``snapshots`` metadata tables take one each (every run reads
  them: most of a small run's planning time).
- ``Table.sortOrder``: whether compaction can sort (no metadata table shows the write order).
- ``TableOperations.commit`` with ``TableMetadata.Builder.setRef``/``setBranchSnapshot``/``removeRef``: the
  run's branch created, and main moved to it as a true compare-and-swap (``_commit_refs`` says why the SQL
  branch statements and ``ManageSnapshots`` are not safe for this).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from cdc_lake.exceptions import TableMovedError

ICEBERG_VERSION = "1.10"
COMMIT_METADATA_CLASS = "org.apache.iceberg.spark.CommitMetadata"
COMMIT_PROPERTIES_FIELD = "COMMIT_PROPERTIES"
_REF_COMMIT_ATTEMPTS = 20


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


def branch_lineage(
    spark: SparkSession, dotted_name: str, branch: str = "main"
) -> Iterator[tuple[int, Mapping[str, str]]]:
    """The branch's snapshots from its head back through its ancestors, as (id, summary), from one metadata read.

    Empty when the branch does not exist; ends where history was expired.
    """
    table = _load(spark, dotted_name)
    ref = table.refs().get(branch)
    snapshot = table.snapshot(ref.snapshotId()) if ref is not None else None
    while snapshot is not None:
        yield int(snapshot.snapshotId()), snapshot.summary()
        parent = snapshot.parentId()
        snapshot = table.snapshot(parent) if parent is not None else None


def empty_commit(spark: SparkSession, dotted_name: str, properties: Mapping[str, str], branch: str | None) -> int:
    """A snapshot with no data change carrying only ``properties``, on ``branch`` or main; returns its id."""
    iceberg_table = _load(spark, dotted_name)
    append = iceberg_table.newAppend()
    if branch is not None:
        append = append.toBranch(branch)
    for key, value in properties.items():
        append = append.set(key, value)
    append.commit()
    iceberg_table.refresh()
    snapshot = iceberg_table.snapshot(branch) if branch is not None else iceberg_table.currentSnapshot()
    return int(snapshot.snapshotId())


def create_branch(spark: SparkSession, dotted_name: str, branch: str, snapshot_id: int) -> None:
    """Create ``branch`` at ``snapshot_id``."""
    jvm = _jvm(spark)
    ref = jvm.org.apache.iceberg.SnapshotRef.branchBuilder(snapshot_id).build()
    _commit_refs(spark, dotted_name, lambda base, builder: builder.setRef(branch, ref))


def remove_branch(spark: SparkSession, dotted_name: str, branch: str) -> None:
    """Remove ``branch`` if it exists."""
    _commit_refs(
        spark, dotted_name, lambda base, builder: builder.removeRef(branch) if base.ref(branch) is not None else None
    )


def fast_forward(spark: SparkSession, dotted_name: str, branch: str, expected_main: int) -> None:
    """Move main from ``expected_main`` to ``branch``'s head and remove the branch, in one metadata commit;
    raises TableMovedError when main is no longer at ``expected_main``."""

    def change(base: Any, builder: Any) -> Any:
        main, head = base.ref("main"), base.ref(branch)
        if main is None or head is None or int(main.snapshotId()) != expected_main:
            raise TableMovedError(f"{dotted_name}: main moved on since snapshot {expected_main}")
        return builder.setBranchSnapshot(head.snapshotId(), "main").removeRef(branch)

    _commit_refs(spark, dotted_name, change)


def _commit_refs(spark: SparkSession, dotted_name: str, change: Callable[[Any, Any], Any]) -> None:
    """Commit a change of the table's refs, made anew from the current metadata at every try.

    ``ManageSnapshots`` (and the SQL branch statements and procedures built on it) keeps a copy of every ref
    from when it was created and, when its commit is retried after a concurrent one, writes those copies
    back: a retried branch creation can move main back and undo another run's commit. A metadata commit
    through ``TableOperations`` is not retried: it lands on the metadata it was made from, or fails and is
    made again here from the newer metadata, touching only the refs this change names.
    """
    operations = _load(spark, dotted_name).operations()
    builders = _jvm(spark).org.apache.iceberg.TableMetadata
    for attempt in range(1, _REF_COMMIT_ATTEMPTS + 1):
        base = operations.refresh()
        builder = change(base, builders.buildFrom(base))
        if builder is None:
            return
        try:
            operations.commit(base, builder.build())
            return
        except Py4JJavaError as error:
            if "CommitFailedException" not in str(error) or attempt == _REF_COMMIT_ATTEMPTS:
                raise
            time.sleep(random.uniform(0.01, 0.05) * attempt)


def has_write_order(spark: SparkSession, dotted_name: str) -> bool:
    """Whether the table has a sort order (its write order), which a sorting compaction needs."""
    return not bool(_load(spark, dotted_name).sortOrder().isUnsorted())


def _load(spark: SparkSession, dotted_name: str) -> Any:
    return _jvm(spark).org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, dotted_name)


def _jvm(spark: SparkSession) -> Any:
    jvm = spark.sparkContext._jvm
    if jvm is None:
        raise RuntimeError("the Spark session has no JVM gateway (stopped?)")
    return jvm
