"""The commit protocol: one run's changes land in one Iceberg commit, only on the snapshot it planned from.

A commit is a ``Transaction``, in the spirit of pyiceberg's: the updates it writes, the record it leaves in the
snapshot summary, and the requirements it checks before main moves. ``commit_transaction`` is the one place
that makes it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import logging
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_lake.core.config import TableSpec
from cdc_lake.core.names import RUN_BRANCH_PREFIX
from cdc_lake.core.plan import ReplayState
from cdc_lake.core.shapes import OP
from cdc_lake.core.sql import quote
from cdc_lake.engine.context import LakeContext
from cdc_lake.engine.iceberg_java import (
    BranchHead,
    branch_lineage,
    branches,
    commit_properties,
    create_branch,
    empty_commit,
    fast_forward,
    remove_branch,
    snapshot_summary,
)
from cdc_lake.engine.record import (
    PART,
    REJECTS_REPLAYED,
    RUN_ID,
    STATE,
    TableRecord,
    divergence_mark,
    table_record,
)
from cdc_lake.engine.spark_types import lake_type, select_sql, temp_view
from cdc_lake.engine.tables import Lake

log = logging.getLogger(__name__)

_RANGED_TYPES = (T.IntegerType, T.LongType, T.DecimalType, T.StringType, T.DateType)
# A batch's keys alone, broadcast to every task that scans the table: a million keys of a few columns stay within
# tens of MB, which Glue's workers hold; a larger batch is joined by shuffling both sides.
BROADCAST_KEYS = 1_000_000
# A copy-on-write MERGE first finds the files that hold a changed key (Spark's runtime group filter: three jobs,
# a scan and a join of its own), then rewrites those. Into a table of at most this many bytes, rewriting every file
# in the batch's key range in one task costs less than that search.
WHOLE_RANGE_BYTES = 8 << 20
GROUP_FILTER = "spark.sql.optimizer.runtime.rowLevelOperationGroupFilter.enabled"
# Spark writes an integer literal into the code it generates, so a key range that moves at every batch made it
# compile the MERGE's join again at every batch (two classes, 5% of a small batch's CPU). The range it matches on is
# widened onto a grid of powers of two, at least this wide: it repeats from batch to batch, and still prunes a large
# table's files to a range at most four times the batch's (or twice this).
RANGE_GRID_MIN = 1 << 10
_INTEGER_BITS: dict[type[T.DataType], int] = {T.IntegerType: 31, T.LongType: 63}


class Record(Protocol):
    """What a commit records: its snapshot summary properties."""

    @property
    def properties(self) -> Mapping[str, str]: ...


R = TypeVar("R", bound=Record)


@dataclass(frozen=True)
class Properties:
    """A record that is its properties and nothing more (a history commit, a reload)."""

    properties: Mapping[str, str]


@dataclass(frozen=True)
class Update:
    """One write of a commit on the run's branch, given the branch's table name (None: no write, the record alone).
    ``holds``, when given, is checked on the branch right after the write: False gives the commit up."""

    name: str
    write: Callable[[str], object] | None = None
    holds: Callable[[str], bool] | None = None


@dataclass(frozen=True)
class Transaction(Generic[R]):
    """A commit of one lake table from ``base_snapshot_id``: ``updates`` written in order, ``record`` (asked for
    once, before the last update writes, so it can count what the others wrote) kept by the last snapshot, and
    ``requirements``, checked once every update has written: raising there refuses the commit."""

    table_name: str
    base_snapshot_id: int
    updates: Sequence[Update]
    record: Callable[[], R]
    requirements: Sequence[Callable[[], None]] = ()


@dataclass(frozen=True)
class Committed(Generic[R]):
    """A commit that landed: the snapshot main moved to, and what it recorded."""

    snapshot_id: int
    record: R


def commit_transaction(lake: Lake, transaction: Transaction[R]) -> Committed[R] | None:
    """Make ``transaction`` one compare-and-swap of the table's main branch; None when an update's ``holds`` was
    False (main untouched).

    Iceberg validates a MERGE against the snapshot the MERGE itself read, which may be newer than the one
    this run planned from; a commit made in between would then be silently overwritten by a stale plan.
    So the updates go to a private branch created at the base snapshot, and main is fast-forwarded to it
    only if main is still there (otherwise it fails and the run plans again): several updates land at once.
    Earlier updates are marked as parts (``PART``); the last snapshot keeps the record, an empty commit
    when the last update wrote nothing (e.g. only deletes of missing keys), so the record always lands.
    """
    run_id = uuid.uuid4().hex
    branch = run_branch(run_id, dt.datetime.now(dt.UTC))
    dotted = lake.location.dotted(transaction.table_name)
    target = f"{lake.location.named(transaction.table_name)}.{quote('branch_' + branch)}"
    base = transaction.base_snapshot_id
    create_branch(lake.spark, dotted, branch, base)
    landed = False
    try:
        head = base
        for number, update in enumerate(transaction.updates, start=1):
            last = number == len(transaction.updates)
            record = transaction.record() if last else None
            properties = {**(record.properties if record else {PART: update.name}), RUN_ID: run_id}
            written = head
            if update.write is not None:
                with commit_properties(lake.spark, properties):
                    update.write(target)
                if update.holds is not None and not update.holds(target):
                    return None
                after = branch_head(lake, transaction.table_name, branch)
                written = head if after is None else after
            if last and written == head:  # the record lands even when no row changed
                written = empty_commit(lake.spark, dotted, properties, branch)
            head = written
        for requirement in transaction.requirements:
            requirement()
        kept = kept_record(lake, transaction.table_name, record.properties if record else {})
        fast_forward(lake.spark, dotted, branch, base, kept)
        landed = True
        assert record is not None  # the last update asked for it
        return Committed(head, record)
    finally:
        if not landed:
            _drop_branch(lake.spark, dotted, branch)


def kept_record(
    lake: Lake, table_name: str, properties: Mapping[str, str]
) -> Callable[[int, int], Mapping[str, str]] | None:
    """The ``RECORD`` table property a commit recording ``properties`` sets as it moves main (None: a commit that
    applies no files and decides no divergence, e.g. a repair, leaves it as it is)."""
    decided, mark = divergence_mark(properties)
    if not decided:
        return None
    if STATE in properties:
        record = TableRecord(None, ReplayState.from_json(properties[STATE], None), mark)
    else:  # a rejects replay: the files applied are those of main (where it commits from, or it is refused)
        assert REJECTS_REPLAYED in properties
        record = dataclasses.replace(table_record(lake, table_name), diverged=mark)
    return record.properties


def run_branch(run_id: str, started: dt.datetime) -> str:
    """The private branch of a run begun at ``started``: the time in its name is what judges the run dead later."""
    return f"{RUN_BRANCH_PREFIX}{int(started.timestamp() * 1000)}_{run_id}"


def run_started(branch: BranchHead) -> dt.datetime | None:
    """When the run of a run branch began, as its name says; for a name from before times were in names, no later
    than its head when the run itself wrote that (None when it did not: nothing tells)."""
    stamp, _, run_id = branch.name.removeprefix(RUN_BRANCH_PREFIX).partition("_")
    if run_id and stamp.isdigit():
        return dt.datetime.fromtimestamp(int(stamp) / 1000, dt.UTC)
    if branch.summary.get(RUN_ID) == stamp:
        return dt.datetime.fromtimestamp(branch.committed_ms / 1000, dt.UTC)
    return None


def remove_dead_run_branches(
    lake: Lake, table_name: str, older_than: dt.timedelta, *, as_kept: bool = False
) -> list[str]:
    """Remove the branches of runs begun more than ``older_than`` ago (``RunSettings.longest_run``: no live run is
    that old, so such a run was killed or timed out); returns their names. A dead run's branch pins its
    snapshots, so expiry could never free their files. Main never depends on a run branch: a run moves main to
    its branch's head and drops the branch in one metadata commit. ``as_kept``: the caller just read the table
    (``iceberg_java.loaded_table``); a branch that dies meanwhile is removed by the next run."""
    dotted = lake.location.dotted(table_name)
    cutoff = dt.datetime.now(dt.UTC) - older_than
    heads = branches(lake.spark, dotted, RUN_BRANCH_PREFIX, as_kept=as_kept)
    dead = [b.name for b in heads if (run_started(b) or cutoff) < cutoff]
    for name in dead:
        log.warning("%s: removing branch %s of a run that was killed or timed out", dotted, name)
        remove_branch(lake.spark, dotted, name)
    return dead


def _drop_branch(spark: SparkSession, dotted: str, branch: str) -> None:
    # Whether the commit landed or not is already decided; a leftover branch only costs a ref.
    try:
        remove_branch(spark, dotted, branch)
    except (Py4JJavaError, PySparkException) as error:  # must not mask the run's own outcome
        log.warning("could not drop branch %s of %s (remove it by hand): %s", branch, dotted, str(error)[:300])


@dataclass(frozen=True)
class ChangedKeys:
    """How many keys a batch changes, how many of them it leaves with a row (its last change is not a delete), and
    each key column's lowest and highest value among them."""

    count: int
    bounds: Mapping[str, tuple[Any, Any]]
    upserts: int | None = None  # None: not counted, so a row is written if any comes


def ranged_keys(table: TableSpec) -> list[str]:
    """The key columns whose lowest and highest changed value bind as parameters without a conversion (numbers,
    text, dates; not timestamps, which a zone could shift): the MERGE's match condition takes their range."""
    types = {c.name: lake_type(c.type) for c in table.columns}
    return [k for k in table.primary_key if isinstance(types[k], _RANGED_TYPES)]


def gridded(low: Any, high: Any, key_type: T.DataType) -> tuple[Any, Any]:
    """The range ``low``..``high`` of an integer key widened onto the ``RANGE_GRID_MIN`` grid, within its type's
    values; any other key's as it is (Spark passes its literals to the generated code by reference)."""
    bits = _INTEGER_BITS.get(type(key_type))
    if bits is None or not isinstance(low, int) or not isinstance(high, int):
        return low, high
    step = max(RANGE_GRID_MIN, 1 << (high - low).bit_length())
    start = low // step * step
    return max(start, -(1 << bits)), min(start + 2 * step - 1, (1 << bits) - 1)


def key_range(table: TableSpec, keys: ChangedKeys) -> dict[str, tuple[Any, Any]]:
    """The range of ``keys`` in each of ``ranged_keys``, ``gridded``: what a read of their rows is bound to."""
    types = {c.name: lake_type(c.type) for c in table.columns}
    return {key: gridded(low, high, types[key]) for key, (low, high) in keys.bounds.items()}


def changed_keys(last_changes: DataFrame, table: TableSpec) -> ChangedKeys:
    """One aggregation over the batch's keys: their number, how many keep a row, and the range of each of
    ``ranged_keys``."""
    ranged = ranged_keys(table)
    aggregates = [F.count(F.lit(1)).alias("keys"), F.count(F.when(F.col(OP) != "D", 1)).alias("upserts")]
    for index, key in enumerate(ranged):
        aggregates += [F.min(quote(key)).alias(f"lo{index}"), F.max(quote(key)).alias(f"hi{index}")]
    row = last_changes.agg(*aggregates).first()
    assert row is not None
    bounds = {key: (row[f"lo{i}"], row[f"hi{i}"]) for i, key in enumerate(ranged)}
    return ChangedKeys(int(row["keys"]), bounds if row["keys"] else {}, int(row["upserts"]))


def merge_updates(
    table: TableSpec, last_changes: DataFrame, keys: ChangedKeys, *, split: bool, whole_range: bool = False
) -> list[Update]:
    """One row per key (``_op`` = I/U/D) merged as a commit's updates: one MERGE, or with ``split`` (``batch_updates``)
    two updates. ``whole_range``: a copy-on-write MERGE rewrites every file of the key range (``WHOLE_RANGE_BYTES``).

    Split, every changed key's row is deleted, then the new rows of the keys whose last change is not a delete
    are appended. That writes what a three-clause MERGE writes (position deletes, one data file), without its
    outer join: a NOT MATCHED clause keeps the batch's rows that match nothing, and Spark cannot broadcast a side
    it keeps, so that MERGE shuffles every key the scan reads. A MERGE that only deletes joins inner, and a batch
    of up to ``BROADCAST_KEYS`` keys is broadcast to the tasks that scan the table: a uniform batch into a
    10M-row table took 1.6 s instead of 3.9 s. Both land on the run's branch, which main moves to at once.

    The batch's key range (``gridded``) joins the match condition (as bound parameters, never pasted into the
    text): a target row outside it cannot match, and Iceberg then skips every data file whose key statistics lie
    outside it, so changes to recent keys read the newest files only (tables are written in key order).
    """
    bounds = key_range(table, keys)
    if split:
        source = select_sql(last_changes, lake_columns(table, table.primary_key))
        source = F.broadcast(source) if keys.count <= BROADCAST_KEYS else source
        clauses = ["WHEN MATCHED THEN DELETE"]
    else:
        source = select_sql(last_changes, [*lake_columns(table), OP])
        clauses = [f"WHEN MATCHED AND s.{OP} = 'D' THEN DELETE"]
        if table.value_columns:
            assignments = ", ".join(f"t.{quote(c)} = s.{quote(c)}" for c in table.value_columns)
            clauses.append(f"WHEN MATCHED THEN UPDATE SET {assignments}")
        names = ", ".join(quote(c) for c in table.column_names)
        values = ", ".join(f"s.{quote(c)}" for c in table.column_names)
        clauses.append(f"WHEN NOT MATCHED AND s.{OP} <> 'D' THEN INSERT ({names}) VALUES ({values})")

    spark = last_changes.sparkSession

    def merge(target: str) -> None:
        with without_group_filter(spark, off=whole_range):
            merge_text(target)

    def merge_text(target: str) -> None:
        if hasattr(DataFrame, "mergeInto"):
            _merge_into(source, target, table, bounds, split=split)
            return
        conditions = [f"t.{quote(k)} = s.{quote(k)}" for k in table.primary_key]
        arguments: dict[str, Any] = {}
        for index, (key, (low, high)) in enumerate(bounds.items()):
            conditions.append(f"t.{quote(key)} BETWEEN :low{index} AND :high{index}")
            arguments |= {f"low{index}": low, f"high{index}": high}
        with temp_view(source, "changes") as view:
            on = " AND ".join(conditions)
            spark.sql(f"MERGE INTO {target} t USING {view} s ON {on} " + " ".join(clauses), arguments)

    def append(target: str) -> None:
        rows = last_changes.where(f"{OP} <> 'D'")
        select_sql(rows, lake_columns(table)).writeTo(target).append()

    if not split:
        return [Update("merged", merge)]
    return [Update("deleted", merge), Update("upserted", append if keys.upserts != 0 else None)]


@dataclass
class _SessionSwitch:
    """A session setting switched off while any of its users runs: how many run, and what it was before."""

    users: int = 0
    kept: str | None = None


_group_filter_lock = threading.Lock()
_group_filter = _SessionSwitch()


@contextlib.contextmanager
def without_group_filter(spark: SparkSession, *, off: bool = True) -> Iterator[None]:
    """Spark's runtime group filter off (when ``off``) for the MERGEs planned meanwhile. It is a session setting, so
    a MERGE another thread plans meanwhile skips it too: that MERGE rewrites more files, never other rows."""
    if not off:
        yield
        return
    with _group_filter_lock:
        if not _group_filter.users:
            _group_filter.kept = spark.conf.get(GROUP_FILTER, None)
            spark.conf.set(GROUP_FILTER, "false")
        _group_filter.users += 1
    try:
        yield
    finally:
        with _group_filter_lock:
            _group_filter.users -= 1
            if not _group_filter.users:
                if _group_filter.kept is None:
                    spark.conf.unset(GROUP_FILTER)
                else:
                    spark.conf.set(GROUP_FILTER, _group_filter.kept)


def _merge_into(
    source: DataFrame, target: str, table: TableSpec, bounds: Mapping[str, tuple[Any, Any]], *, split: bool
) -> None:
    """``merge_updates``'s MERGE through Spark 4's DataFrame API, the key range as literal columns: Iceberg 1.11's
    SQL extensions leave a statement's bound parameters unbound on Spark 4.1 (apache/iceberg#16625)."""
    named = target.rsplit(".", 1)[-1]  # the branch part, quoted: it qualifies the target's columns

    def t(column: str) -> Column:
        return F.col(f"{named}.{quote(column)}")

    def s(column: str) -> Column:
        return F.col(f"s.{quote(column)}")

    condition = functools.reduce(Column.__and__, [t(k) == s(k) for k in table.primary_key])
    for key, (low, high) in bounds.items():
        condition = condition & t(key).between(F.lit(low), F.lit(high))
    aliased: Any = source.alias("s")  # mergeInto is Spark 4's: not in the 3.5 stubs mypy reads
    if split:
        aliased.mergeInto(target, condition).whenMatched().delete().merge()
        return
    merge = aliased.mergeInto(target, condition).whenMatched(s(OP) == "D").delete()
    if table.value_columns:
        merge = merge.whenMatched().update({quote(c): s(c) for c in table.value_columns})
    merge.whenNotMatched(s(OP) != "D").insert({quote(c): s(c) for c in table.column_names}).merge()


def lake_columns(table: TableSpec, names: Sequence[str] | None = None) -> list[str]:
    """The table's columns (those ``names`` when given) as the lake table types them, as SQL for ``select_sql``."""
    columns = [c for c in table.columns if names is None or c.name in names]
    return [f"CAST({quote(c.name)} AS {lake_type(c.type).simpleString()}) AS {quote(c.name)}" for c in columns]


def batch_updates(
    context: LakeContext,
    table: TableSpec,
    last_changes: DataFrame,
    base: Mapping[str, str],
    keys: ChangedKeys | None = None,
) -> list[Update]:
    """``merge_updates`` of a batch into the table at the base snapshot whose summary is ``base``
    (``summary_of``), split from ``lake.split_merge_from_rows`` rows as it counts them (a summary with no count:
    split), and a copy-on-write key range rewritten whole up to ``WHOLE_RANGE_BYTES``. ``keys``: the batch's
    ``changed_keys`` when the caller has them already."""
    total = base.get("total-records")
    split = not str(total).isdigit() or int(str(total)) >= context.config.lake.split_merge_from_rows
    whole_range = rewritten_whole(base)
    keys = changed_keys(last_changes, table) if keys is None else keys
    return merge_updates(table, last_changes, keys, split=split, whole_range=whole_range)


def rewritten_whole(base: Mapping[str, str]) -> bool:
    """Whether a copy-on-write MERGE into the snapshot whose summary is ``base`` rewrites its key range whole
    (``WHOLE_RANGE_BYTES``)."""
    size = str(base.get("total-files-size"))
    return size.isdigit() and int(size) <= WHOLE_RANGE_BYTES


def summary_of(context: LakeContext, table: TableSpec, snapshot_id: int) -> dict[str, str]:
    """The summary of one snapshot of the table (empty when expired): what ``batch_updates`` decides from."""
    return snapshot_summary(context.spark, context.location.dotted(table.lake_table), snapshot_id)


def branch_head(lake: Lake, table_name: str, branch: str = "main") -> int | None:
    lineage = branch_lineage(lake.spark, lake.location.dotted(table_name), branch)
    return next((snapshot_id for snapshot_id, _ in lineage), None)


def base_snapshot(lake: Lake, table_name: str) -> int:
    """The table's current snapshot, which a run plans from; a new table first gets an empty one."""
    head = branch_head(lake, table_name)
    if head is not None:
        return head
    try:
        return empty_commit(lake.spark, lake.location.dotted(table_name), {}, None)
    except (Py4JJavaError, PySparkException):
        head = branch_head(lake, table_name)  # a concurrent run created it first
        if head is None:
            raise
        return head
