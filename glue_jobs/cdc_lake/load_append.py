"""A table's full load appended, not merged: the fast path for a table that has applied no CDC file yet.

Such a table holds only LOAD rows, and a full load holds each key once, so its LOAD files can be appended:
no reduction per key, no join with the table, no shuffle. What the merge path would have guaranteed is
checked on the run's private branch, before main moves (``commit.commit_on_branch``):
- every row is well formed: bad rows refuse the batch, named by file, row and column as on the merge path;
- each key is held once, rows from earlier LOAD files included. A repeated key (a configured key that is
  not unique in the source, parallel-load segments that overlap) raises ``RepeatedKey``, and the run merges
  the batch instead, which keeps each key's last row in DMS order, as it always did.
CDC files in the same batch are merged on the same branch right after the append: still one change of main.
LOAD rows need no row order, so uncompressed CSV files are read split across cores, unless a value spans
lines (``reader.has_multiline_values``: decided from the text, never guessed).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import Observation, SparkSession
from pyspark.sql import functions as F

from cdc_lake.changes import ChangeCounts, describe_problems
from cdc_lake.commit import Step, lake_columns
from cdc_lake.config import DmsSettings, TableSpec
from cdc_lake.dms_files import DmsFile
from cdc_lake.exceptions import DmsInputError
from cdc_lake.plan import ReplayState
from cdc_lake.reader import DMS_TS, PROBLEM, has_multiline_values, read_changes
from cdc_lake.record import LOAD_APPEND
from cdc_lake.shapes import FileLayout
from cdc_lake.sql import quote
from cdc_lake.storage import ObjectStore

log = logging.getLogger(__name__)

_BAD_ROW = "cdc-lake: a LOAD row cannot be applied"


class RepeatedKey(Exception):
    """Raised on the run's branch when the appended LOAD rows hold a key twice: the run merges them instead."""


def appendable_loads(pending: Sequence[DmsFile], state: ReplayState, history: bool) -> list[DmsFile]:
    """The LOAD files a batch starts with, when they may be appended: the table has applied no CDC file yet
    (and keeps no history, whose versions the merge path writes)."""
    if history or state.cdc_started:
        return []
    loads = []
    for dms_file in pending:
        if not dms_file.is_full_load:
            break
        loads.append(dms_file)
    return loads


class LoadAppend:
    """The append of a batch's LOAD files as a commit step; ``counts`` once the step has run."""

    def __init__(
        self,
        spark: SparkSession,
        dms: DmsSettings,
        store: ObjectStore,
        table: TableSpec,
        files: Sequence[DmsFile],
        layouts: Mapping[str, FileLayout],
    ) -> None:
        self._spark = spark
        self._table = table
        split = dms.format == "csv" and not any(f.gzip for f in files)  # Parquet is read in parts anyway
        split = split and not has_multiline_values(spark, [store.uri(f.key) for f in files])
        log.info("%s: appending %d LOAD file(s)%s", table.name, len(files), ", read in parallel parts" if split else "")
        self._observation = Observation(f"cdc_lake_load_{uuid.uuid4().hex}")
        read = read_changes(spark, files, table, dms, store.uri, layouts, split=split)
        self._rows = read.observe(
            self._observation, F.count(F.lit(1)).alias("rows"), F.max(F.col(DMS_TS)).alias("newest")
        )
        # Split reads number no rows: bad rows are located by reading the files again in order.
        self._ordered = lambda: read_changes(spark, files, table, dms, store.uri, layouts)

    def step(self) -> Step:
        return Step(self._write, lambda: {LOAD_APPEND: "data"})

    @property
    def counts(self) -> ChangeCounts:
        metrics = self._observation.get
        return ChangeCounts(inserts=metrics["rows"], updates=0, deletes=0, newest_change=metrics["newest"])

    def _write(self, target: str) -> None:
        first, *others = lake_columns(self._table)
        # The first bad row stops the write (its files are never committed); the rows are then read in order
        # to name every bad row's place in its file.
        checked = F.when(F.col(PROBLEM).isNull(), first).otherwise(F.raise_error(F.lit(_BAD_ROW)))
        try:
            self._rows.select(checked.alias(self._table.columns[0].name), *others).writeTo(target).append()
        except (Py4JJavaError, PySparkException) as error:
            if _BAD_ROW not in str(error):
                raise
            problems, total = describe_problems(self._ordered())
            raise DmsInputError(self._table.name, problems, total) from None
        log.info("%s: appended %d row(s); checking that each key is held once", self._table.name, self.counts.rows)
        keys = ", ".join(quote(k) for k in self._table.primary_key)
        if self._spark.sql(f"SELECT 1 FROM {target} GROUP BY {keys} HAVING count(*) > 1 LIMIT 1").collect():
            raise RepeatedKey(f"{self._table.name}: a key is held twice in the LOAD files")
