"""When a replay run compacts or expires a table, or changes its write mode, after its commit: from the table's own
state, never the clock."""

from __future__ import annotations

import datetime as dt

import pytest

from cdc_lake.core.config import UpkeepSettings, WriteMode
from cdc_lake.engine.maintenance import TableShape, due, fitting_write_mode

NOW = dt.datetime(2026, 11, 26, 12, 0, tzinfo=dt.UTC)
SETTINGS = UpkeepSettings(compact_at_delete_files=16, compact_every_commits=50, keep_snapshots=500, keep_days=1)


def shape(
    snapshots: int = 100, deletes: int = 0, commits: int = 0, age: dt.timedelta = dt.timedelta(hours=1)
) -> TableShape:
    return TableShape(snapshots, deletes, commits, int((NOW - age).timestamp() * 1000))


@pytest.mark.parametrize(
    ("table", "steps"),
    [
        (shape(), []),
        (shape(deletes=15, commits=49), []),
        (shape(deletes=16, commits=4), ["compact"]),
        (shape(deletes=40, commits=3), []),  # compacted three commits ago and still 40: one per partition
        (shape(commits=50), ["compact"]),
        (shape(snapshots=550), []),  # within the margin: expiry does not run at every commit
        (shape(snapshots=551), ["expire"]),
        (shape(snapshots=31, age=dt.timedelta(days=1, hours=2)), ["expire"]),  # past the rollback window
        (shape(snapshots=30, age=dt.timedelta(days=1, hours=2)), []),  # only what expiry by age keeps anyway
        (shape(snapshots=600, deletes=40, commits=9), ["compact", "expire"]),
    ],
)
def test_upkeep_follows_the_tables_state(table: TableShape, steps: list[str]) -> None:
    assert due(table, SETTINGS, NOW) == steps


def test_thresholds_of_zero_leave_compaction_to_the_maintenance_job() -> None:
    off = UpkeepSettings(compact_at_delete_files=0, compact_every_commits=0)
    assert due(shape(deletes=1000, commits=1000), off, NOW) == []


MB = 1024 * 1024


@pytest.mark.parametrize(
    ("mb", "now", "fitting"),
    [
        (0, "merge-on-read", "copy-on-write"),  # a new table, empty after its first commit
        (2, "merge-on-read", "copy-on-write"),
        (8, "copy-on-write", "copy-on-write"),
        (9, "copy-on-write", "merge-on-read"),  # grown past the size: batches would rewrite most of it
        (7.5, "merge-on-read", "merge-on-read"),  # shrunk a little: not back until under 90%, no flapping
        (7, "merge-on-read", "copy-on-write"),
        (2000, "copy-on-write", "merge-on-read"),
    ],
)
def test_auto_writes_small_tables_copy_on_write(mb: float, now: str, fitting: str) -> None:
    table = TableShape(100, 0, 0, None, files_bytes=int(mb * MB), write_mode=now)
    assert fitting_write_mode(table, "auto", 8) == fitting


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_a_configured_mode_holds_whatever_the_size(mode: WriteMode) -> None:
    for mb in (0, 8, 10_000):
        table = TableShape(100, 0, 0, None, files_bytes=mb * MB, write_mode="merge-on-read")
        assert fitting_write_mode(table, mode, 8) == mode


@pytest.mark.parametrize("mode", ["auto", "copy-on-write", "merge-on-read"])
def test_a_pinned_table_keeps_its_mode_whatever_is_configured(mode: WriteMode) -> None:
    """A rejects table: its MERGE reads the table it writes, which Spark 4.1 plans only merge-on-read."""
    for mb in (0, 8, 10_000):
        table = TableShape(
            100, 0, 0, None, files_bytes=mb * MB, write_mode="merge-on-read", pinned_mode="merge-on-read"
        )
        assert fitting_write_mode(table, mode, 8) == "merge-on-read"


def test_auto_up_to_no_size_is_merge_on_read_always() -> None:
    table = TableShape(100, 0, 0, None, files_bytes=0, write_mode="copy-on-write")
    assert fitting_write_mode(table, "auto", 0) == "merge-on-read"
