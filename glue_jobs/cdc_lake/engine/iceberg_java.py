"""Where cdc-lake reaches past Iceberg's Spark SQL surface into its Java API, in three modules: this one (tables,
their metadata, lineage, branches and properties), ``iceberg_row_delta`` and ``iceberg_errors``.

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
- ``Table.properties`` and ``Table.updateProperties``: a refusal recorded on the table for ``cdc-lake status``
  (``ALTER TABLE … SET TBLPROPERTIES`` would plan a Spark command for one key).
- ``Table.sortOrder``: whether compaction can sort (no metadata table shows the write order).
- ``TableOperations.commit`` with ``TableMetadata.Builder.setRef``/``setBranchSnapshot``/``removeRef``: the
  run's branch created, and main moved to it as a true compare-and-swap (``_commit_refs`` says why the SQL
  branch statements and ``ManageSnapshots`` are not safe for this); ``setProperties`` in that same commit keeps
  the table's record of applied files (``record.RECORD``) with the snapshot it describes.
- ``TableOperations.current`` (``Metadata``): one immutable version of the table's metadata, so the reads that
  decide the record of applied files and the replay's upkeep agree; ``Snapshot.sequenceNumber``/``parentId``:
  where main's lineage begins once expiry removed its oldest part.
- A small batch's row delta: ``iceberg_row_delta``.

Java failures are told apart by the classes in their cause chain, never by their text: ``iceberg_errors``.
"""

from __future__ import annotations

import json
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from py4j.java_gateway import JavaClass
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from cdc_lake.core.exceptions import ConcurrentCommitError, TableMovedError
from cdc_lake.core.retry import RetryPolicy, retried
from cdc_lake.engine.iceberg_errors import class_names, conflicts_raised, is_concurrent, java_causes

ICEBERG_VERSION = "1.10"
COMMIT_METADATA_CLASS = "org.apache.iceberg.spark.CommitMetadata"
COMMIT_PROPERTIES_FIELD = "COMMIT_PROPERTIES"
# A metadata commit (refs, an ALTER) beaten by a concurrent one is made again from the new metadata: cheap, so
# soon and often; concurrent runs make a few each.
METADATA_COMMIT_RETRIES = RetryPolicy(attempts=20, first_delay=0.02, max_delay=0.5)

# Spark's own Jackson, one writer per JVM gateway: ObjectMapper is thread-safe once configured.
_JSON_WRITERS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
# Tables each thread keeps loaded (``loaded_table``): the drain's threads each apply one table at a time.
_LOADED = threading.local()
_LOADED_PER_THREAD = 16
# The metadata of a row delta this process committed, per session and table (``kept_commit``): what the table's next
# batch plans from without asking the catalog. Trusted for this long after the commit: a table this process alone
# writes is read again only by its commits, whose compare-and-swap refuses a plan made on what someone else moved.
KEPT_COMMIT_SECONDS = 300.0
_KEPT_COMMITS_MOST = 1024  # a warm run's shard is 100 tables; each entry holds one version of a table's metadata
_KEPT_COMMITS: OrderedDict[tuple[int, int, str], tuple[float, Any]] = OrderedDict()
_KEPT_COMMITS_LOCK = threading.Lock()


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
        loader = java_class(self._spark, "java.lang.Thread").currentThread().getContextClassLoader()
        holder = java_class(self._spark, "java.lang.Class").forName(COMMIT_METADATA_CLASS, True, loader)
        field_ = holder.getDeclaredField(COMMIT_PROPERTIES_FIELD)
        field_.setAccessible(True)
        self._thread_local = field_.get(None)
        self._thread_local.set(_java_map(self._spark, self._properties))
        return self

    def __exit__(self, *exc: object) -> None:
        self._thread_local.remove()


def branch_lineage(
    spark: SparkSession, dotted_name: str, branch: str = "main"
) -> Iterator[tuple[int, Mapping[str, str]]]:
    """The branch's snapshots from its head back through its ancestors, as (id, summary), from one metadata read.

    Empty when the branch does not exist; ends where history was expired.
    """
    table = loaded_table(spark, dotted_name)
    ref = table.refs().get(branch)
    snapshot = table.snapshot(ref.snapshotId()) if ref is not None else None
    while snapshot is not None:
        yield int(snapshot.snapshotId()), snapshot.summary()
        parent = snapshot.parentId()
        snapshot = table.snapshot(parent) if parent is not None else None


@dataclass(frozen=True)
class LineageStart:
    """Where a branch's lineage begins: the ids it holds, whether it reaches back to the table's first snapshot
    (False: expiry removed older ancestors), and the sequence number of its oldest snapshot still there."""

    snapshot_ids: frozenset[int]
    complete: bool
    oldest_sequence: int | None
    oldest_parent: int | None = None  # the parent id of its oldest snapshot left (expired), when not complete


class Metadata:
    """One version of a table's metadata (immutable): what several reads must see alike, whatever commits land
    meanwhile (every ``loaded_table`` may return the table refreshed by another thread)."""

    def __init__(self, spark: SparkSession, dotted_name: str, *, own_commit: bool = False) -> None:
        """``own_commit``: the metadata of this process's own last row delta when it holds one (``kept_commit``)."""
        self._spark = spark
        self._metadata = _reading(spark, dotted_name, own_commit=own_commit).operations().current()

    def lineage(self, branch: str = "main", at: int | None = None) -> Iterator[tuple[int, Mapping[str, str]]]:
        """``branch_lineage`` in this version; from snapshot ``at`` instead of the branch's head when given."""
        for snapshot in self._snapshots(branch, at):
            yield int(snapshot.snapshotId()), snapshot.summary()

    def start(self, branch: str = "main", at: int | None = None) -> LineageStart:
        ids: set[int] = set()
        oldest, complete, parent = None, True, None
        for snapshot in self._snapshots(branch, at):
            ids.add(int(snapshot.snapshotId()))
            oldest = int(snapshot.sequenceNumber())
            parent = snapshot.parentId()
            complete = parent is None
        return LineageStart(frozenset(ids), complete, oldest, int(parent) if parent is not None else None)

    def has_snapshot(self, snapshot_id: int) -> bool:
        return self._metadata.snapshot(snapshot_id) is not None

    def snapshot_count(self) -> int:
        return int(self._metadata.snapshots().size())

    def snapshot_times(self) -> list[int]:
        """Every snapshot's commit time (epoch ms), newest first."""
        return sorted((int(s.timestampMillis()) for s in self._metadata.snapshots()), reverse=True)

    def oldest_ms(self) -> int | None:
        """The first snapshot's commit time (epoch ms): the table's snapshots are kept in commit order."""
        snapshots = self._metadata.snapshots()
        return int(snapshots.get(0).timestampMillis()) if snapshots.size() else None

    def head_summary(self, branch: str = "main") -> dict[str, str]:
        head = next(self._snapshots(branch), None)
        return as_dict(self._spark, head.summary()) if head is not None else {}

    def properties(self) -> dict[str, str]:
        return as_dict(self._spark, self._metadata.properties())

    def summary(self, snapshot_id: int) -> dict[str, str]:
        """One snapshot's summary in this version (empty when expired)."""
        snapshot = self._metadata.snapshot(snapshot_id)
        return as_dict(self._spark, snapshot.summary()) if snapshot is not None else {}

    def spark_fields(self) -> list[T.StructField]:
        """The table's columns as Spark reads them (``spark.table(...).schema``), without loading it again."""
        converted = java_class(self._spark, "org.apache.iceberg.spark.SparkSchemaUtil").convert(self._metadata.schema())
        return list(T.StructType.fromJson(json.loads(converted.json())).fields)

    def head_sequence(self, branch: str = "main") -> int:
        head = next(self._snapshots(branch), None)
        return int(head.sequenceNumber()) if head is not None else 0

    def _snapshots(self, branch: str, at: int | None = None) -> Iterator[Any]:
        ref = self._metadata.ref(branch)
        head = at if at is not None else (ref.snapshotId() if ref is not None else None)
        snapshot = self._metadata.snapshot(head) if head is not None else None
        while snapshot is not None:
            yield snapshot
            parent = snapshot.parentId()
            snapshot = self._metadata.snapshot(parent) if parent is not None else None


def snapshot_summary(spark: SparkSession, dotted_name: str, snapshot_id: int) -> dict[str, str]:
    """One snapshot's summary (empty when expired)."""
    return Metadata(spark, dotted_name).summary(snapshot_id)


def timed_lineage(spark: SparkSession, dotted_name: str) -> Iterator[tuple[int, int, Mapping[str, str]]]:
    """``branch_lineage`` of main with each snapshot's commit time: (id, epoch ms, summary), newest first."""
    table = loaded_table(spark, dotted_name)
    snapshot = table.currentSnapshot()
    while snapshot is not None:
        yield int(snapshot.snapshotId()), int(snapshot.timestampMillis()), as_dict(spark, snapshot.summary())
        parent = snapshot.parentId()
        snapshot = table.snapshot(parent) if parent is not None else None


def table_properties(spark: SparkSession, dotted_name: str, *, as_kept: bool = False) -> dict[str, str]:
    return as_dict(spark, _reading(spark, dotted_name, own_commit=as_kept, as_kept=as_kept).properties())


def set_table_property(spark: SparkSession, dotted_name: str, name: str, value: str | None) -> None:
    """Set (or with None, remove) one table property: a metadata commit, no snapshot."""
    set_table_properties(spark, dotted_name, {name: value})


def set_table_properties(spark: SparkSession, dotted_name: str, values: Mapping[str, str | None]) -> None:
    """Set (or where None, remove) table properties in one metadata commit, no snapshot."""
    forget_commit(spark, dotted_name)
    update = loaded_table(spark, dotted_name).updateProperties()
    for name, value in values.items():
        update = update.set(name, value) if value is not None else update.remove(name)
    update.commit()


@dataclass(frozen=True)
class BranchHead:
    """A branch and the snapshot it points at: when that was committed (epoch ms), and its summary."""

    name: str
    committed_ms: int
    summary: Mapping[str, str]


def branches(spark: SparkSession, dotted_name: str, prefix: str, *, as_kept: bool = False) -> list[BranchHead]:
    """The branches whose name starts with ``prefix``, from one metadata read (``as_kept``: ``loaded_table``'s)."""
    table = _reading(spark, dotted_name, own_commit=as_kept, as_kept=as_kept)
    refs = table.refs()
    heads = []
    for name in _as_json(spark, refs.keySet()):
        ref = refs.get(name) if name.startswith(prefix) else None
        if ref is None or not ref.isBranch():
            continue
        snapshot = table.snapshot(ref.snapshotId())
        if snapshot is not None:
            summary = as_dict(spark, snapshot.summary())
            heads.append(BranchHead(name, int(snapshot.timestampMillis()), summary))
    return heads


def empty_commit(spark: SparkSession, dotted_name: str, properties: Mapping[str, str], branch: str | None) -> int:
    """A snapshot with no data change carrying only ``properties``, on ``branch`` or main; returns its id."""
    forget_commit(spark, dotted_name)
    iceberg_table = loaded_table(spark, dotted_name)
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
    """Create ``branch`` at ``snapshot_id``. The table is read first, never taken as kept: a Hadoop table dropped
    meanwhile would take the commit and come back broken, where the read finds it gone."""
    ref = java_class(spark, "org.apache.iceberg.SnapshotRef").branchBuilder(snapshot_id).build()
    _commit_refs(spark, dotted_name, lambda base, builder: builder.setRef(branch, ref))


def remove_branch(spark: SparkSession, dotted_name: str, branch: str) -> None:
    """Remove ``branch`` if it exists."""
    _commit_refs(
        spark, dotted_name, lambda base, builder: builder.removeRef(branch) if base.ref(branch) is not None else None
    )


def fast_forward(
    spark: SparkSession,
    dotted_name: str,
    branch: str,
    expected_main: int,
    properties: Callable[[int, int], Mapping[str, str]] | None = None,
) -> None:
    """Move main from ``expected_main`` to ``branch``'s head and remove the branch, in one metadata commit;
    raises TableMovedError when main is no longer at ``expected_main``. ``properties``, given the head's id and
    sequence number, are table properties set by the same commit. The first try starts from the table as kept
    (``_commit_refs``): a caller reads the branch's head before it moves main there."""

    def change(base: Any, builder: Any) -> Any:
        main, head = base.ref("main"), base.ref(branch)
        if main is None or head is None or int(main.snapshotId()) != expected_main:
            raise TableMovedError(f"{dotted_name}: main moved on since snapshot {expected_main}")
        builder = builder.setBranchSnapshot(head.snapshotId(), "main").removeRef(branch)
        if properties is not None:
            snapshot = base.snapshot(head.snapshotId())
            values = properties(int(snapshot.snapshotId()), int(snapshot.sequenceNumber()))
            builder = builder.setProperties(_java_map(spark, values))
        return builder

    _commit_refs(spark, dotted_name, change, as_kept=True)


def move_main(
    spark: SparkSession,
    dotted_name: str,
    expected_main: int,
    snapshot_id: int,
    properties: Callable[[int, int], Mapping[str, str]],
) -> None:
    """Set main from ``expected_main`` back to ``snapshot_id``, with the table properties ``properties`` gives for
    it (its id and sequence number), in one metadata commit: a stop can leave either both or neither. Raises
    TableMovedError when main is no longer at ``expected_main``."""

    def change(base: Any, builder: Any) -> Any:
        main = base.ref("main")
        if main is None or int(main.snapshotId()) != expected_main:
            raise TableMovedError(f"{dotted_name}: main moved on since snapshot {expected_main}")
        snapshot = base.snapshot(snapshot_id)
        values = properties(int(snapshot.snapshotId()), int(snapshot.sequenceNumber()))
        return builder.setBranchSnapshot(snapshot_id, "main").setProperties(_java_map(spark, values))

    _commit_refs(spark, dotted_name, change)


def set_head_properties(
    spark: SparkSession,
    dotted_name: str,
    properties: Callable[[int, int], Mapping[str, str]],
    expected_head: int | None = None,
) -> None:
    """Set table properties that describe main's head, given its id and sequence number: made anew from the
    current metadata at every try, so they always describe the head they land with; only while main is at
    ``expected_head`` when given (a commit that moved it on set its own)."""

    def change(base: Any, builder: Any) -> Any:
        main = base.ref("main")
        if main is None or (expected_head is not None and int(main.snapshotId()) != expected_head):
            return None
        snapshot = base.snapshot(main.snapshotId())
        values = properties(int(snapshot.snapshotId()), int(snapshot.sequenceNumber()))
        return builder.setProperties(_java_map(spark, values))

    _commit_refs(spark, dotted_name, change)


def _java_map(spark: SparkSession, values: Mapping[str, str]) -> Any:
    java_map = java_class(spark, "java.util.HashMap")()
    for key, value in values.items():
        java_map.put(key, value)
    return java_map


def java_list(spark: SparkSession, values: Iterable[Any]) -> Any:
    java_list = java_class(spark, "java.util.ArrayList")()
    for value in values:
        java_list.add(value)
    return java_list


def _commit_refs(
    spark: SparkSession, dotted_name: str, change: Callable[[Any, Any], Any], *, as_kept: bool = False
) -> None:
    """Commit a change of the table's refs, made anew from the current metadata at every try.

    ``ManageSnapshots`` (and the SQL branch statements and procedures built on it) keeps a copy of every ref
    from when it was created and, when its commit is retried after a concurrent one, writes those copies
    back: a retried branch creation can move main back and undo another run's commit. A metadata commit
    through ``TableOperations`` is not retried: it lands on the metadata it was made from, or fails and is
    made again here from the newer metadata, touching only the refs this change names.

    ``as_kept``: the first try makes its change from the table as this thread last saw it (``loaded_table``), for a
    caller that just read it: the commit is a compare-and-swap, so a stale base fails it and the retry reads.
    """
    forget_commit(spark, dotted_name)
    operations = loaded_table(spark, dotted_name, as_kept=as_kept).operations()
    builders = java_class(spark, "org.apache.iceberg.TableMetadata")
    tries = 0

    def commit() -> None:
        nonlocal tries
        tries += 1
        # The table was just loaded: the first try makes its change from that; a retry from a fresh read.
        base = operations.current() if tries == 1 else operations.refresh()
        try:
            builder = change(base, builders.buildFrom(base))
        except TableMovedError as moved:
            if as_kept and tries == 1:  # judged on what may be stale: judged again on a fresh read
                raise ConcurrentCommitError(f"{dotted_name}: the table as kept was stale") from moved
            raise
        if builder is not None:
            with conflicts_raised():
                operations.commit(base, builder.build())

    retried(commit, METADATA_COMMIT_RETRIES, is_concurrent, what=f"{dotted_name}: concurrent metadata commit")


def has_write_order(spark: SparkSession, dotted_name: str) -> bool:
    """Whether the table has a sort order (its write order), which a sorting compaction needs."""
    return not bool(loaded_table(spark, dotted_name).sortOrder().isUnsorted())


_NO_SUCH_TABLE = (
    "org.apache.spark.sql.catalyst.analysis.NoSuchTableException",
    "org.apache.iceberg.exceptions.NoSuchTableException",
)


def loaded_table(spark: SparkSession, dotted_name: str, *, as_kept: bool = False) -> Any:
    """The table, as of now. Loaded once per thread and session, and refreshed after: a refresh asks the catalog
    where the table's metadata is (on Glue a GetTable) and reads the file only when it moved, where a load reads
    it every time, and a busy table's metadata grows with its snapshots. A table dropped or made anew under a
    kept one is loaded again (a Hadoop table's refresh fails there instead).

    ``as_kept``: the kept table as this thread last saw it, without asking the catalog, for a caller that saw it
    refresh (or commit through it) a moment ago, and only where a stale answer costs no more than a retry."""
    tables = _loaded_tables(spark)
    table = tables.pop(dotted_name, None)
    if table is not None and not as_kept:
        try:
            table.refresh()
        except Py4JJavaError:
            table = None
    if table is None:
        # Spark finds a catalog's settings in the session active on the calling JVM thread, and py4j may serve this
        # Python thread on one where none is: a catalog not loaded yet would then be looked for in no settings.
        java_class(spark, "org.apache.spark.sql.SparkSession").setActiveSession(spark._jsparkSession)
        spark3_util = java_class(spark, "org.apache.iceberg.spark.Spark3Util")
        table = spark3_util.loadIcebergTable(spark._jsparkSession, dotted_name)
    tables[dotted_name] = table  # the most recent last
    while len(tables) > _LOADED_PER_THREAD:
        tables.popitem(last=False)
    return table


def has_table(spark: SparkSession, dotted_name: str, *, own_commit: bool = False) -> bool:
    """Whether the table exists, asked through the kept tables (``loaded_table``): a kept table's refresh (on Glue a
    GetTable) and no metadata read, where Spark's catalog loads the table anew each time. ``own_commit``: yes without
    asking when this process's own row delta made it what it is (``kept_commit``); a drop since fails the batch's
    commit, whose refusal then asks again."""
    if own_commit and kept_commit(spark, dotted_name) is not None:
        return True
    try:
        loaded_table(spark, dotted_name)
    except (Py4JJavaError, PySparkException) as error:  # Spark's NoSuchTableException arrives as PySpark's
        if any(name in class_names(cause) for cause in java_causes(error) for name in _NO_SUCH_TABLE):
            return False
        raise
    return True


def _reading(spark: SparkSession, dotted_name: str, *, own_commit: bool, as_kept: bool = False) -> Any:
    """The table to read: with ``own_commit``, the metadata of this process's own last row delta when it holds one
    (read-only: never commit through it); else ``loaded_table``'s."""
    kept = kept_commit(spark, dotted_name) if own_commit else None
    return kept if kept is not None else loaded_table(spark, dotted_name, as_kept=as_kept)


def kept_commit(spark: SparkSession, dotted_name: str) -> Any | None:
    """The table as this process's last row delta left it (a read-only table over the metadata it committed), while
    ``KEPT_COMMIT_SECONDS`` young and no other write of this process touched the table since; else None."""
    key = _kept_key(spark, dotted_name)
    with _KEPT_COMMITS_LOCK:
        kept = _KEPT_COMMITS.get(key)
        if kept is None:
            return None
        if time.monotonic() - kept[0] > KEPT_COMMIT_SECONDS:
            del _KEPT_COMMITS[key]
            return None
        return kept[1]


def forget_commit(spark: SparkSession, dotted_name: str) -> None:
    """Stop trusting the kept commit of the table: this process writes it otherwise, or its commit failed."""
    with _KEPT_COMMITS_LOCK:
        _KEPT_COMMITS.pop(_kept_key(spark, dotted_name), None)


def keep_commit(spark: SparkSession, dotted_name: str, table: Any, metadata: Any) -> None:
    kept = _static_table(spark, table, metadata)
    key = _kept_key(spark, dotted_name)
    with _KEPT_COMMITS_LOCK:
        _KEPT_COMMITS.pop(key, None)
        _KEPT_COMMITS[key] = (time.monotonic(), kept)  # the most recent last
        while len(_KEPT_COMMITS) > _KEPT_COMMITS_MOST:
            _KEPT_COMMITS.popitem(last=False)


def _static_table(spark: SparkSession, table: Any, metadata: Any) -> Any:
    """A read-only table over one version of ``table``'s metadata: its refresh asks nothing."""
    locations = java_class(spark, "org.apache.iceberg.LocationProviders").locationsFor(
        metadata.location(), metadata.properties()
    )
    static = java_class(spark, "org.apache.iceberg.StaticTableOperations")(metadata, table.io(), locations)
    return java_class(spark, "org.apache.iceberg.BaseTable")(static, table.name())


def _kept_key(spark: SparkSession, dotted_name: str) -> tuple[int, int, str]:
    return id(_gateway_client(spark)), int(spark._jsparkSession.hashCode()), dotted_name


def _loaded_tables(spark: SparkSession) -> OrderedDict[str, Any]:
    """This thread's loaded tables of ``spark``'s session: a thread keeps to its own, so none refreshes a table
    under another's reads."""
    sessions = getattr(_LOADED, "sessions", None)
    if sessions is None:
        sessions = _LOADED.sessions = weakref.WeakKeyDictionary()
    client = _gateway_client(spark)
    by_session = sessions.setdefault(client, {})
    return by_session.setdefault(int(spark._jsparkSession.hashCode()), OrderedDict())


def as_dict(spark: SparkSession, java_map: Any) -> dict[str, str]:
    """A Java ``Map<String, String>`` as a dict, in one round trip: read through py4j, each entry costs several."""
    return {str(k): str(v) for k, v in _as_json(spark, java_map).items()}


def _as_json(spark: SparkSession, java_value: Any) -> Any:
    """A Java collection of strings as Python's, through JSON: one round trip."""
    client = _gateway_client(spark)
    writer = _JSON_WRITERS.get(client)
    if writer is None:
        writer = _JSON_WRITERS[client] = java_class(spark, "com.fasterxml.jackson.databind.ObjectMapper")()
    return json.loads(writer.writeValueAsString(java_value))


def java_class(spark: SparkSession, name: str) -> Any:
    """The Java class of this full name. ``spark._jvm.org.apache…`` would look up each package on the way as a
    class first, and a class that is not there is searched for in every jar on the classpath, each time."""
    return JavaClass(name, _gateway_client(spark))


def _gateway_client(spark: SparkSession) -> Any:
    gateway = spark.sparkContext._gateway
    if gateway is None:
        raise RuntimeError("the Spark session has no JVM gateway (stopped?)")
    return gateway._gateway_client
