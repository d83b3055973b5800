"""``cdc-lake verify``: compare a lake table with the live source database, reading from the source only what
differs.

The key space (the first key column's values) is cut into ranges. For each range both sides give their row
count and the sum of their rows' fingerprints (``ops.fingerprint``), the source computing them inside the
database. Equal ranges are done; a differing range is cut again, at boundaries taken from whichever side holds
more of its rows (a sample of the lake's keys, or the source's ``NTILE``), until it holds few rows. Then both
sides list the range's keys with their fingerprints, and each key found on one side only, or with two
different fingerprints, is fetched whole from both and compared value by value: only a real difference is
reported.

So the rows read from the source follow the drift, not the table. Ranges compare keys byte-wise on both
sides (PostgreSQL ``COLLATE "C"``, MySQL ``BINARY``), as Spark does, so a key falls in the same range on both.
Every value reaches the SQL as a bound parameter.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import struct
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from decimal import Decimal
from functools import partial
from typing import Any, Literal

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_lake.core.config import ColumnSpec, TableSpec
from cdc_lake.core.exceptions import CdcLakeError
from cdc_lake.engine.context import LakeContext, ReplayContext
from cdc_lake.engine.tables import Lake, table_exists
from cdc_lake.ops.export import read_table
from cdc_lake.ops.fingerprint import INTEGERS, Dialect, comparable, quote, source_fingerprint, spark_fingerprint
from cdc_lake.ops.mysql_catalog import is_mysql_url
from cdc_lake.ops.source_check import dialect as source_dialect
from cdc_lake.ops.source_tls import SourceAddress

Kind = Literal["missing", "extra", "changed"]
FINGERPRINT = "_cdc_lake_fp"
FETCH_CHUNK = 500  # keys per query when whole rows are fetched
SAMPLE_PER_BUCKET = 64  # lake keys sampled per bucket when a range is cut
MAX_GRID = 1 << 20  # buckets of the first cut at most: their sums are what reaches the driver


@dataclasses.dataclass(frozen=True)
class Drift:
    table: str
    key: dict[str, Any]
    kind: Kind
    columns: list[str]  # the differing columns of a changed row

    def as_json(self) -> dict[str, Any]:
        key = {k: _json_value(v) for k, v in self.key.items()}
        return {"table": self.table, "key": key, "kind": self.kind, "columns": self.columns}


@dataclasses.dataclass
class VerifyStats:
    """What a table's verify cost: queries sent to the source, rows fetched from it (key listings and whole
    rows; the sums read none), rows listed from the lake, ranges compared, seconds."""

    source_queries: int = 0
    source_rows: int = 0
    lake_rows: int = 0
    ranges: int = 0
    seconds: float = 0.0


@dataclasses.dataclass(frozen=True)
class TableVerify:
    table: str
    drift: list[Drift]
    stats: VerifyStats
    not_compared: list[str]  # configured columns whose values DMS writes as text: not comparable with the source
    unsettled: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # keys still changing: not drift
    settle_note: str = ""  # why keys stayed unsettled, when they did


@dataclasses.dataclass(frozen=True)
class Cuts:
    """How ranges narrow: a differing range is cut into ``buckets``; one with at most ``leaf_rows`` rows on
    either side is listed key by key."""

    buckets: int = 16
    leaf_rows: int = 2_000


@dataclasses.dataclass(frozen=True)
class Settle:
    """Changes in flight are not drift. A key found differing is looked at again once the lake has applied every
    file landed up to ``interval_s`` (DMS's CdcMaxBatchInterval) after the comparison; it is drift only if it
    still differs while its source row stayed the same. A key whose source row changed meanwhile is looked at
    again, up to ``rounds`` times; one still changing then is reported as unsettled, never as drift.

    ``context`` knows where DMS files land; ``wait`` pauses between looks at the lake (a test lands and applies
    files there), at most ``timeout_s`` per round."""

    context: ReplayContext
    interval_s: float
    timeout_s: float = 900.0
    poll_s: float = 5.0
    rounds: int = 5
    wait: Callable[[float], None] = time.sleep


@dataclasses.dataclass(frozen=True)
class _Range:
    low: Any  # None: unbounded
    high: Any  # exclusive; None: unbounded


Sums = dict[int, tuple[int, int]]  # (row count, fingerprint sum) by bucket
Differing = tuple[_Range, int, int]  # a range whose sums differ, with its lake and source row counts


@dataclasses.dataclass(frozen=True)
class _Grid:
    """The first cut of an integer key, made in one pass on each side: bucket ``i`` holds the keys from
    ``low + (i << shift)`` up to the next bucket's; keys below ``low`` fall in bucket -1, keys from ``end`` on in
    bucket ``count``. A shift, not a division, so that every engine computes the same bucket exactly."""

    low: int
    shift: int
    count: int

    @property
    def end(self) -> int:
        return self.low + (self.count << self.shift)

    def part(self, index: int) -> _Range:
        if index < 0:
            return _Range(None, self.low)
        if index >= self.count:
            return _Range(self.end, None)
        return _Range(self.low + (index << self.shift), self.low + ((index + 1) << self.shift))


def _grid(rows: int, low: Any, high: Any, leaf_rows: int) -> _Grid | None:
    """Buckets of about half a leaf each if the keys were even (so most differing buckets are listed at once);
    none when the table is empty or its keys span too much for exact integer arithmetic everywhere."""
    if not rows or low is None or high is None or high - low >= 1 << 62:
        return None
    wanted = min(MAX_GRID, max(1, math.ceil(2 * rows / max(leaf_rows, 1))))
    span = high - low + 1
    shift = max(0, math.ceil(math.log2(span / wanted))) if span > wanted else 0
    return _Grid(low, shift, -(-span // (1 << shift)))


def _both(on_lake: Callable[[], Any], at_source: Callable[[], Any]) -> tuple[Any, Any]:
    """Both sides' answers, the source computing while Spark does: each side's pass is a scan of the table."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(at_source)
        return on_lake(), pending.result()


def _placeholders_escaped(sql: str) -> str:
    """SQL text for a query that binds parameters: both drivers read a ``%`` in it (a table, column or text) as
    the start of a placeholder, so it is doubled."""
    return sql.replace("%", "%%")


class SourceTable:
    """One table at the source: range sums, key listings and whole rows, through one connection."""

    def __init__(self, connection: Any, dialect: Dialect, table: TableSpec, columns: Sequence[ColumnSpec]) -> None:
        self.connection = connection
        self.dialect = dialect
        self.table = table
        self.columns = list(columns)
        self.stats = VerifyStats()
        self.relation = ".".join(self._quote(part) for part in table.name.split("."))
        self.keys = [self._quote(k) for k in table.source_primary_key]
        first = next(c for c in table.columns if c.name == table.primary_key[0])
        self.first = self._ordered(self.keys[0], first)
        self.fingerprint = _placeholders_escaped(source_fingerprint(self.columns, dialect))

    def _quote(self, name: str) -> str:
        return _placeholders_escaped(quote(name, self.dialect))

    def _ordered(self, name: str, column: ColumnSpec) -> str:
        """The first key as both sides order it: strings byte-wise (UTF-8 order is code point order)."""
        if column.type != "string" and not column.type.startswith("varchar"):
            return name
        return f'{name} COLLATE "C"' if self.dialect == "postgres" else f"BINARY {name}"

    def _where(self, part: _Range) -> tuple[str, list[Any]]:
        clauses, values = [], []
        if part.low is not None:
            clauses.append(f"{self.first} >= %s")
            values.append(part.low)
        if part.high is not None:
            clauses.append(f"{self.first} < %s")
            values.append(part.high)
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", values

    def _query(self, sql: str, values: Sequence[Any]) -> list[tuple[Any, ...]]:
        self.stats.source_queries += 1
        cursor = self.connection.cursor()
        try:
            cursor.execute(sql, list(values))
            return [tuple(row) for row in cursor.fetchall()] if cursor.description is not None else []
        finally:
            cursor.close()

    def sums(self, part: _Range, boundaries: Sequence[Any]) -> dict[int, tuple[int, int]]:
        """(count, fingerprint sum) per bucket of ``part`` cut at ``boundaries``; computed in the database."""
        where, values = self._where(part)
        bucket = "0"
        if boundaries:
            cases = " ".join(f"WHEN {self.first} < %s THEN {i}" for i in range(len(boundaries)))
            bucket = f"CASE {cases} ELSE {len(boundaries)} END"
        return self._sums(bucket, where, [*boundaries, *values])

    def grid_sums(self, grid: _Grid) -> dict[int, tuple[int, int]]:
        """(count, fingerprint sum) per bucket of ``grid``, in one pass over the table in the database."""
        key = self.keys[0]
        bucket = f"CASE WHEN {key} < %s THEN -1 WHEN {key} >= %s THEN %s ELSE ({key} - %s) >> %s END"
        return self._sums(bucket, "", [grid.low, grid.end, grid.count, grid.low, grid.shift])

    def _sums(self, bucket: str, where: str, values: Sequence[Any]) -> dict[int, tuple[int, int]]:
        sql = f"SELECT {bucket} AS b, COUNT(*), SUM({self.fingerprint}) FROM {self.relation}{where} GROUP BY 1"
        return {int(b): (int(n), int(s or 0)) for b, n, s in self._query(sql, values)}

    def extent(self) -> tuple[int, Any, Any]:
        """The table's row count and its first key's lowest and highest value (read from the key's index)."""
        key = self.keys[0]
        [(rows, low, high)] = self._query(f"SELECT COUNT(*), MIN({key}), MAX({key}) FROM {self.relation}", [])
        return int(rows), low, high

    def boundaries(self, part: _Range, buckets: int) -> list[Any]:
        """Cut points of ``part`` in about equal numbers of source rows (only keys are read, in the database)."""
        where, values = self._where(part)
        sql = (
            f"SELECT MIN(k) FROM (SELECT {self.first} AS k, NTILE({int(buckets)}) OVER (ORDER BY {self.first}) AS t "
            f"FROM {self.relation}{where}) x GROUP BY t ORDER BY 1"
        )
        return [row[0] for row in self._query(sql, values)][1:]

    def listing(self, part: _Range) -> dict[tuple[Any, ...], int]:
        where, values = self._where(part)
        rows = self._query(f"SELECT {', '.join(self.keys)}, {self.fingerprint} FROM {self.relation}{where}", values)
        self.stats.source_rows += len(rows)
        return {row[:-1]: int(row[-1]) for row in rows}

    def rows_at_position(self, keys: Sequence[tuple[Any, ...]]) -> tuple[str, dict[tuple[Any, ...], dict[str, Any]]]:
        """The rows of ``keys`` and the source's log position, read in one snapshot (PostgreSQL: the WAL
        position; MariaDB: the binary log position of the snapshot)."""
        if self.dialect == "postgres":
            self._query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", [])
            position = str(self._query("SELECT pg_current_wal_lsn()::text", [])[0][0])
        else:
            self._query("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY", [])
            status = dict(self._query("SHOW STATUS LIKE %s", ["binlog_snapshot_%"]))
            position = f"{status.get('Binlog_snapshot_file', '')}:{status.get('Binlog_snapshot_position', '')}"
        try:
            return position, self.rows(keys)
        finally:
            self._query("COMMIT", [])

    def rows(self, keys: Sequence[tuple[Any, ...]]) -> dict[tuple[Any, ...], dict[str, Any]]:
        names = [c.name for c in self.columns]  # rows come back under the lake's names, as the lake's do
        selected = ", ".join(self._quote(c.source) for c in self.columns)
        found: dict[tuple[Any, ...], dict[str, Any]] = {}
        width = len(self.keys)
        for start in range(0, len(keys), FETCH_CHUNK):
            chunk = keys[start : start + FETCH_CHUNK]
            tuple_sql = "(" + ", ".join(["%s"] * width) + ")"
            sql = (
                f"SELECT {selected} FROM {self.relation} WHERE ({', '.join(self.keys)}) IN "
                f"({', '.join([tuple_sql] * len(chunk))})"
            )
            rows = self._query(sql, [v for key in chunk for v in key])
            self.stats.source_rows += len(rows)
            for row in rows:
                record = dict(zip(names, row, strict=True))
                found[tuple(record[k] for k in self.table.primary_key)] = record
        return found


class LakeTable:
    """The lake table's keys and fingerprints, and its whole rows on demand. Nothing is cached: the table is
    written in key order, so a range's query reads only the data files whose key bounds meet it, and the first
    pass, which reads them all, is the only one that would fill a cache."""

    def __init__(self, lake: Lake, table: TableSpec, columns: list[ColumnSpec]):
        self.table = table
        self.columns = columns
        self.first = table.primary_key[0]
        self.key_type = next(c.type for c in table.columns if c.name == self.first)
        self.frame = read_table(lake, table)
        self.fingerprints = self.frame.select(*table.primary_key, F.expr(spark_fingerprint(columns)).alias(FINGERPRINT))
        self.rows_listed = 0

    def _in(self, frame: DataFrame, part: _Range) -> DataFrame:
        if part.low is not None:
            frame = frame.where(F.col(self.first) >= F.lit(part.low))
        if part.high is not None:
            frame = frame.where(F.col(self.first) < F.lit(part.high))
        return frame

    def sums(self, part: _Range, boundaries: Sequence[Any]) -> dict[int, tuple[int, int]]:
        bucket = F.lit(len(boundaries))
        for index in reversed(range(len(boundaries))):
            bucket = F.when(F.col(self.first) < F.lit(boundaries[index]), F.lit(index)).otherwise(bucket)
        return self._sums(self._in(self.fingerprints, part), bucket)

    def grid_sums(self, grid: _Grid) -> dict[int, tuple[int, int]]:
        key = F.col(self.first).cast("bigint")
        inside = F.shiftright(key - F.lit(grid.low).cast("bigint"), grid.shift)
        bucket = F.when(key < F.lit(grid.low), F.lit(-1)).when(key >= F.lit(grid.end), F.lit(grid.count))
        return self._sums(self.fingerprints, bucket.otherwise(inside))

    def _sums(self, frame: DataFrame, bucket: Any) -> dict[int, tuple[int, int]]:
        grouped = frame.groupBy(bucket.alias("b")).agg(
            F.count(F.lit(1)).alias("n"), F.sum(F.col(FINGERPRINT).cast("decimal(38,0)")).alias("s")
        )
        return {int(r["b"]): (int(r["n"]), int(r["s"] or 0)) for r in grouped.collect()}

    def boundaries(self, part: _Range, buckets: int, rows: int) -> list[Any]:
        """Cut points of ``part`` in about equal numbers of lake rows, from a sample of its keys (no sort of the
        range: a few hundred keys reach the driver)."""
        fraction = min(1.0, buckets * SAMPLE_PER_BUCKET / max(rows, 1))
        sample = self._in(self.fingerprints, part).select(self.first).sample(fraction=fraction, seed=7).collect()
        keys = sorted(row[0] for row in sample if row[0] is not None)
        return [keys[len(keys) * i // buckets] for i in range(1, buckets)] if len(keys) >= buckets else keys[1:]

    def listing(self, part: _Range) -> dict[tuple[Any, ...], int]:
        rows = self._in(self.fingerprints, part).collect()
        self.rows_listed += len(rows)
        return {tuple(r[k] for k in self.table.primary_key): int(r[FINGERPRINT]) for r in rows}

    def rows(self, keys: Sequence[tuple[Any, ...]]) -> dict[tuple[Any, ...], dict[str, Any]]:
        return _rows_by_key(self.frame, self.table, keys)


def _rows_by_key(
    frame: DataFrame, table: TableSpec, keys: Sequence[tuple[Any, ...]]
) -> dict[tuple[Any, ...], dict[str, Any]]:
    wanted = frame.sparkSession.createDataFrame([list(k) for k in keys], schema=frame.select(*table.primary_key).schema)
    # The first key's values reach Iceberg's scan planning, which skips every data file that cannot hold them.
    first = sorted({k[0] for k in keys if k[0] is not None})
    if first:
        frame = frame.where(F.col(table.primary_key[0]).isin(first))
    found = frame.join(F.broadcast(wanted), on=table.primary_key, how="inner").collect()
    return {tuple(r[k] for k in table.primary_key): r.asDict() for r in found}


def verify(
    lake: LakeContext,
    source: SourceAddress,
    tables: Sequence[str] | None = None,
    *,
    cuts: Cuts = Cuts(),
    settle: Settle | None = None,
) -> list[TableVerify]:
    """Compare each chosen table (default: every configured one) with the source; raises CdcLakeError for a
    source that cannot be reached or a table or column missing at the source, before anything is compared."""
    from cdc_lake.ops.source_check import check_source

    config, location = lake.config, lake.location
    chosen = [config.table(name) for name in tables] if tables else list(config.tables)
    catalog, differences = check_source(config, source.url, source.tls)
    at_source = {t.name: t for t in catalog}
    problems = [
        str(d)
        for d in differences
        if d.table in {t.name for t in chosen} and d.kind in ("table-missing", "column-dropped", "key-changed")
    ]
    if problems:
        raise CdcLakeError(
            "the source does not have what the configuration names; fix the configuration (cdc-lake "
            "config-check-source) before verifying:\n  " + "\n  ".join(problems)
        )
    results = []
    with connection_for(source) as (connection, kind):
        for table in chosen:
            faithful = {c.name for c in at_source[table.name].columns if c.note is None or c.config_type != "string"}
            columns = [c for c in table.columns if not c.dropped and comparable(c) and c.source in faithful]
            skipped = [c.name for c in table.columns if not c.dropped and c not in columns]
            if not table_exists(lake, table):
                raise CdcLakeError(f"{table.name}: no lake table {location.table(table)} yet; nothing to verify")
            verified = verify_table(lake, table, SourceTable(connection, kind, table, columns), cuts, settle)
            results.append(dataclasses.replace(verified, not_compared=skipped))
    return results


@contextmanager
def connection_for(source: SourceAddress) -> Iterator[tuple[Any, Dialect]]:
    """A read-only connection to the source over checked TLS, and its SQL dialect."""
    connection = source_dialect(source.url).connect(source.url, source.tls)
    try:
        yield connection, "mysql" if is_mysql_url(source.url) else "postgres"
    finally:
        connection.close()


def verify_table(
    context: LakeContext, table: TableSpec, source: SourceTable, cuts: Cuts = Cuts(), settle: Settle | None = None
) -> TableVerify:
    """One table's comparison with the source, every configured column of ``source.columns`` compared."""
    started = time.monotonic()
    lake = LakeTable(context, table, source.columns)
    candidates = _differing_keys(lake, source, cuts)
    found = _compare_rows(table, lake.rows, source, candidates)
    unsettled: list[dict[str, Any]] = []
    note = ""
    if settle is not None and found:
        found, unsettled, note = _settle(table, context, source, found, settle)
    stats = source.stats
    stats.lake_rows = lake.rows_listed
    stats.seconds = time.monotonic() - started
    drift = [d for d, _ in found]
    return TableVerify(table.name, drift, stats, [], unsettled, note)


Found = list[tuple[Drift, "dict[str, Any] | None"]]  # a differing key, and its source row when compared


def _settle(
    table: TableSpec, context: LakeContext, source: SourceTable, found: Found, settle: Settle
) -> tuple[Found, list[dict[str, Any]], str]:
    """The differing keys that still differ once the lake caught up with what was in flight (``Settle``)."""
    confirmed: Found = []
    pending = found
    note = ""
    for _round in range(settle.rounds):
        target = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=settle.interval_s)
        note = _catch_up(settle, table, target)
        if note:
            break
        keys = [tuple(d.key.values()) for d, _ in pending]
        again = {tuple(d.key.values()): (d, row) for d, row in _compare_rows(table, _lake_rows(context, table),
                                                                           source, set(keys))}  # fmt: skip
        still: Found = []
        for drift, before in pending:
            key = tuple(drift.key.values())
            if key not in again:
                continue  # the lake caught up with it: it was in flight
            now_drift, row = again[key]
            if row == before:
                confirmed.append((now_drift, row))  # unchanged at the source, and the lake still differs
            else:
                still.append((now_drift, row))  # changed at the source meanwhile: look again
        pending = still
        if not pending:
            break
    else:
        note = f"still changing at the source after {settle.rounds} looks; run verify again"
    return confirmed, [d.key for d, _ in pending], note if pending else ""


def _catch_up(settle: Settle, table: TableSpec, target: dt.datetime) -> str:
    """Wait until the lake has applied every file of ``table`` landed up to ``target``; why not, if it did not."""
    from cdc_lake.ops.status import table_status

    deadline = time.monotonic() + settle.timeout_s + settle.interval_s
    while True:
        now = dt.datetime.now(dt.UTC)
        if now >= target:
            status = table_status(settle.context, table, now)
            oldest = now - dt.timedelta(seconds=status.waiting_lag_s) if status.waiting_lag_s is not None else None
            if oldest is None or oldest > target:
                return ""
            if time.monotonic() > deadline:
                return (
                    f"the lake had not applied the files landed up to {target:%H:%M:%S} UTC within "
                    f"{settle.timeout_s:.0f} s ({status.waiting_files} waiting): run verify when it has caught up"
                )
        settle.wait(settle.poll_s)


def _lake_rows(context: LakeContext, table: TableSpec) -> Callable[[Sequence[tuple[Any, ...]]], dict[Any, Any]]:
    """Whole lake rows by key, read from the table's newest snapshot."""

    def rows(keys: Sequence[tuple[Any, ...]]) -> dict[tuple[Any, ...], dict[str, Any]]:
        frame = read_table(context, table)
        return _rows_by_key(frame, table, keys)

    return rows


def _first_cut(lake: LakeTable, source: SourceTable, cuts: Cuts) -> list[Differing]:
    """The differing ranges of the first pass, with their lake and source row counts. An integer first key is
    cut at once into buckets of about half a leaf, so each side hashes every row once and most differing buckets
    are listed right away; any other key starts from the whole table, cut ``cuts.buckets`` ways at a time."""
    grid = None
    if lake.key_type in INTEGERS:
        grid = _grid(*source.extent(), cuts.leaf_rows)
    if grid is None:
        whole = _Range(None, None)
        by_lake, by_source = _both(partial(lake.sums, whole, []), partial(source.sums, whole, []))
        parts = {0: whole}
    else:
        by_lake, by_source = _both(partial(lake.grid_sums, grid), partial(source.grid_sums, grid))
        parts = {index: grid.part(index) for index in by_lake.keys() | by_source.keys()}
    return _differing(parts, by_lake, by_source, source.stats)


def _differing(parts: dict[int, _Range], by_lake: Sums, by_source: Sums, stats: VerifyStats) -> list[Differing]:
    """The parts whose count or sum differs between the sides, in order, each with its lake and source rows."""
    differing: list[Differing] = []
    for index, part in sorted(parts.items()):
        stats.ranges += 1
        mine, theirs = by_lake.get(index, (0, 0)), by_source.get(index, (0, 0))
        if mine != theirs:
            differing.append((part, mine[0], theirs[0]))
    return differing


def _differing_keys(lake: LakeTable, source: SourceTable, cuts: Cuts) -> set[tuple[Any, ...]]:
    """Keys whose fingerprint differs or that one side lacks, found by cutting differing ranges down."""
    found: set[tuple[Any, ...]] = set()
    pending = _first_cut(lake, source, cuts)
    while pending:
        part, in_lake, in_source = pending.pop()
        big = max(in_lake, in_source) > cuts.leaf_rows
        boundaries = _cut(lake, source, part, (in_lake, in_source), cuts.buckets) if big else []
        if not boundaries:
            found |= _listing_differences(lake, source, part)
            continue
        by_lake, by_source = _both(partial(lake.sums, part, boundaries), partial(source.sums, part, boundaries))
        edges = [part.low, *boundaries, part.high]
        parts = {index: _Range(edges[index], edges[index + 1]) for index in range(len(boundaries) + 1)}
        pending.extend(_differing(parts, by_lake, by_source, source.stats))
    return found


def _cut(lake: LakeTable, source: SourceTable, part: _Range, rows: tuple[int, int], buckets: int) -> list[Any]:
    """Cut points for a differing range, from the side holding more of its rows; none when it cannot be cut."""
    in_lake, in_source = rows
    cuts = lake.boundaries(part, buckets, in_lake) if in_lake >= in_source else source.boundaries(part, buckets)
    return sorted({c for c in cuts if c is not None and (part.low is None or c > part.low)})


def _listing_differences(lake: LakeTable, source: SourceTable, part: _Range) -> set[tuple[Any, ...]]:
    mine, theirs = lake.listing(part), source.listing(part)
    return {k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k)}


def _compare_rows(
    table: TableSpec,
    lake_rows: Callable[[Sequence[tuple[Any, ...]]], dict[Any, Any]],
    source: SourceTable,
    keys: set[tuple[Any, ...]],
) -> Found:
    """The keys of ``keys`` whose rows differ, compared value by value, each with its source row."""
    if not keys:
        return []
    ordered = sorted(keys, key=_sort_key)
    in_lake, at_source = lake_rows(ordered), source.rows(ordered)
    found: Found = []
    for key in ordered:
        named = dict(zip(table.primary_key, key, strict=True))
        row = at_source.get(key)
        if row is not None and key not in in_lake:
            found.append((Drift(table.name, named, "missing", []), row))
        elif key in in_lake and row is None:
            found.append((Drift(table.name, named, "extra", []), None))
        elif row is not None:
            differing = [c.name for c in source.columns if not same(c, row.get(c.name), in_lake[key].get(c.name))]
            if differing:
                found.append((Drift(table.name, named, "changed", differing), row))
    return found


def same(column: ColumnSpec, at_source: Any, in_lake: Any) -> bool:
    """Whether a source value and a lake value are the same value of the column's lake type."""
    if at_source is None or in_lake is None:
        return at_source is None and in_lake is None
    if column.type == "float":
        return _float32(float(at_source)) == _float32(float(in_lake))
    if column.type == "double":
        return float(at_source) == float(in_lake) or (math.isnan(float(at_source)) and math.isnan(float(in_lake)))
    if column.type.startswith("decimal"):
        return Decimal(at_source) == Decimal(in_lake)
    if column.type == "boolean":
        return bool(at_source) == bool(in_lake)
    if isinstance(at_source, (bytes, bytearray, memoryview)):
        return bytes(at_source) == bytes(in_lake)
    return bool(at_source == in_lake)


def _float32(value: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def _sort_key(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((v is None, str(type(v)), v) for v in key)


def _json_value(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat(sep=" ") if isinstance(value, dt.datetime) else value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    return value
