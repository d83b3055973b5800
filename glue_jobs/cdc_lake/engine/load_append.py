"""A table's full load appended, not merged: the fast path for a table that has applied no CDC file yet.

Such a table holds only LOAD rows, and a full load holds each key once, so its LOAD files can be appended:
no reduction per key, no join with the table, no shuffle. What the merge path would have guaranteed is
checked on the run's private branch, before main moves (``commit.commit_transaction``):
- every row is well formed: the write counts the bad rows it leaves out (an observed metric, so no second
  pass), and any refuses the batch, named by file, row and column as on the merge path;
- each key is held once, rows from earlier LOAD files included. A repeated key (a configured key that is
  not unique in the source, parallel-load segments that overlap) fails the update's check, the branch is
  dropped, and the run merges the batch instead, which keeps each key's last row in DMS order.
CDC files in the same batch are merged on the same branch right after the append: still one change of main.
LOAD rows need no row order, so uncompressed CSV files fewer than the cores are read split across them,
unless a value spans lines (``reader.has_multiline_values``: decided from the text, never guessed).
"""

from __future__ import annotations

import functools
import itertools
import logging
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from cdc_lake.core.config import TableSpec
from cdc_lake.core.dms_files import DmsFile
from cdc_lake.core.exceptions import DmsInputError
from cdc_lake.core.shapes import DMS_TS, PROBLEM, FileLayout
from cdc_lake.core.sql import quote
from cdc_lake.engine.changes import ChangeCounts, describe_problems
from cdc_lake.engine.commit import Update, lake_columns
from cdc_lake.engine.context import Batch, ReplayContext
from cdc_lake.engine.reader import has_multiline_values, read_changes
from cdc_lake.engine.spark_types import described, lake_type, select_sql
from cdc_lake.engine.tables import quarantines

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

# The Spark jobs of an append, as ``described`` names them after the table's name: what the bench times.
MULTILINE_CHECK = "LOAD files checked for values spanning lines"
APPEND = "LOAD rows appended"
KEY_CHECK = "keys checked"
# Iceberg packs small data files into one read task in its listing's order, which need not be the keys' (on Glue,
# tasks finish in any order): a file that costs a whole split to open gets a task of its own, so that no run of
# keys spans two files. Large files still split, at row groups, each part read in order.
_SPLIT = str(128 * 1024 * 1024)  # Iceberg's read.split.target-size default
FILE_A_TASK = {"split-size": _SPLIT, "file-open-cost": _SPLIT}


def appendable_loads(batch: Batch) -> list[DmsFile]:
    """The LOAD files a batch starts with, when they may be appended: the table has applied no CDC file yet
    (and keeps no history, whose versions the merge path writes, nor quarantines bad rows)."""
    if batch.history_plan is not None or batch.state.cdc_started or quarantines(batch.table):
        return []  # a quarantining table's bad rows are split from the good ones on the merge path
    loads = []
    for dms_file in batch.plan.pending:
        if not dms_file.is_full_load:
            break
        loads.append(dms_file)
    return loads


class LoadAppend:
    """The append of the LOAD files a batch starts with (``appendable_loads``) as a commit step; ``counts`` once the
    step has run."""

    def __init__(
        self, context: ReplayContext, batch: Batch, table: TableSpec, layouts: Mapping[str, FileLayout]
    ) -> None:
        files = self.files = appendable_loads(batch)
        sizes = [batch.landed.objects[f.key].size for f in files]
        spark = context.spark
        self._spark = spark
        self._table = table
        # Parquet is read in parts anyway, a gzip file cannot be split, and with a file for every core splitting
        # gains nothing that the extra pass over the text (has_multiline_values) would not cost again. Nor does a
        # file Spark would not split: one no larger than the cost it counts for opening a file.
        split = context.config.dms.file_format.splits_by_line and not any(f.gzip for f in files)
        split = split and len(files) < spark.sparkContext.defaultParallelism
        split = split and max(sizes) > _open_cost(spark)
        if split:
            with described(spark, f"{table.name}: {MULTILINE_CHECK}"):
                split = not has_multiline_values(spark, [context.store.uri(f.key) for f in files])
        log.info("%s: appending %d LOAD file(s)%s", table.name, len(files), ", read in parallel parts" if split else "")
        self._observation = Observation(f"cdc_lake_load_{uuid.uuid4().hex}")
        self._good = good_rows(read_changes(context, files, table, layouts, split=split), table, self._observation)
        # Split reads number no rows: bad rows are located by reading the files again in order.
        self._ordered = lambda: read_changes(context, files, table, layouts)

    def update(self) -> Update:
        return Update("load appended", self._write, holds=self._keys_held_once)

    @functools.cached_property
    def _metrics(self) -> dict[str, Any]:
        # Fixed once the write has run; each read of an Observation is a round trip to the JVM.
        return self._observation.get

    @property
    def counts(self) -> ChangeCounts:
        return ChangeCounts(inserts=self._metrics["rows"], updates=0, deletes=0, newest_change=self._metrics["newest"])

    def _write(self, target: str) -> None:
        # Bad rows are left out of the write and counted; any refuses the batch (the branch never lands), the
        # rows then read in order to name every bad row's place in its file.
        with described(self._spark, f"{self._table.name}: {APPEND}"):
            self._good.writeTo(target).append()
        if self._metrics["bad"]:
            problems, total = describe_problems(self._ordered())
            raise DmsInputError(self._table.name, problems, total)
        log.info("%s: appended %d row(s); checking that each key is held once", self._table.name, self.counts.rows)

    def _keys_held_once(self, target: str) -> bool:
        with described(self._spark, f"{self._table.name}: {KEY_CHECK}"):
            held_once = _keys_unique_by_order(self._spark, target, self._table) or not _repeats_a_key(
                self._spark, target, self._table
            )
        if not held_once:
            log.warning(
                "%s: a key is held twice in the LOAD files; merging the batch in DMS order instead", self._table.name
            )
        return held_once


def good_rows(read: DataFrame, table: TableSpec, observation: Observation) -> DataFrame:
    """The well-formed rows of ``read`` (``read_changes``) in the lake's columns, every row counted into
    ``observation`` as it passes (``rows``, ``newest``, ``bad``): what an append writes, in the write's pass."""
    counted = read.observe(
        observation,
        F.count(F.lit(1)).alias("rows"),
        F.max(F.col(DMS_TS)).alias("newest"),
        F.count(F.col(PROBLEM)).alias("bad"),
    )
    return select_sql(counted.filter(F.col(PROBLEM).isNull()), lake_columns(table))


def _open_cost(spark: SparkSession) -> int:
    """What Spark counts for opening a file (bytes): no file this small is read in more than one part."""
    # SQLConf parses the size as Spark does ("4194304b", "8MB").
    return int(spark._jsparkSession.sessionState().conf().filesOpenCostInBytes())


def _keys_unique_by_order(spark: SparkSession, target: str, table: TableSpec) -> bool:
    """Whether the table's keys are shown unique by their order alone: one columnar scan, no shuffle.

    Each data file is written sorted by key, so the key column, read in order, comes as runs that rise
    strictly; if no two runs overlap, no key can repeat. False means not shown (the aggregate decides):
    a composite key, or LOAD files whose key ranges overlap.
    """
    if len(table.primary_key) != 1:
        return False
    key = table.primary_key[0]
    key_type = lake_type(next(c.type for c in table.columns if c.name == key)).simpleString()
    runs = (
        spark.read.options(**FILE_A_TASK)
        .table(target)
        .select(quote(key))
        .mapInArrow(_rising_runs, f"low {key_type}, high {key_type}, rises boolean")
    )
    found = sorted((r["low"], r["high"], r["rises"]) for r in runs.collect())
    return all(rises for *_, rises in found) and all(
        high < low for (_, high, _), (low, _, _) in itertools.pairwise(found)
    )


def _rising_runs(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Each batch of keys as a run: its first and last key, and whether every key is above the one before."""
    import pyarrow as pa
    import pyarrow.compute as pc

    lows, highs, rises = [], [], []
    key_type = None
    for batch in batches:
        keys = batch.column(0)
        if len(keys) == 0:
            continue
        key_type = keys.type
        lows.append(keys[0])
        highs.append(keys[len(keys) - 1])
        rises.append(len(keys) == 1 or bool(pc.all(pc.greater(keys.slice(1), keys.slice(0, len(keys) - 1))).as_py()))
    if key_type is not None:  # the key's own Arrow type: Spark reads the result by the declared schema
        columns = [pa.array([v.as_py() for v in lows], key_type), pa.array([v.as_py() for v in highs], key_type)]
        yield pa.RecordBatch.from_arrays([*columns, pa.array(rises, pa.bool_())], names=["low", "high", "rises"])


def _repeats_a_key(spark: SparkSession, target: str, table: TableSpec) -> bool:
    keys = ", ".join(quote(k) for k in table.primary_key)
    return bool(spark.sql(f"SELECT 1 FROM {target} GROUP BY {keys} HAVING count(*) > 1 LIMIT 1").collect())
