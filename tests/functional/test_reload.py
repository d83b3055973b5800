"""Reloads, through real Spark and Iceberg: DMS writes a table's LOAD files again, then the changes made meanwhile.

The expected tables come from a dict-based model of the source database (the oracle): every change is
applied to it in commit order, and the lake must equal it after the reload and after later CDC files.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from cdc_lake.core.config import PipelineConfig
from cdc_lake.core.dms_files import parse_key
from cdc_lake.core.exceptions import DmsInputError, ReplayOrderError
from cdc_lake.core.storage import LocalFolderStore
from cdc_lake.engine.record import RELOAD, read_state, snapshot_summaries
from cdc_lake.engine.reload import reload_table
from cdc_lake.engine.replay import replay
from cdc_lake.jobs.entry import job_context
from cdc_lake.jobs.maintenance import MaintenanceOptions, run_maintenance
from cdc_lake.ops.operations import list_changes
from tests.support.cli import cli
from tests.support.configs import items_config_file
from tests.support.lake import write_file

P = "dms/shop/items/"
COMMAND = "run `cdc-lake reload -t shop.items` locally, or start the cdc-lake maintenance Glue job with --action reload"


def at(hh: int, mm: int, ss: int = 0) -> dt.datetime:
    return dt.datetime(2025, 3, 1, hh, mm, ss, tzinfo=dt.UTC)


class Source:
    """The source table: the oracle every lake state is compared with."""

    def __init__(self, rows: dict[int, str]) -> None:
        self.rows = dict(rows)

    def load(self, keys: list[int]) -> str:
        return "".join(f"{k},{self.rows[k]}\n" for k in keys)

    def change(self, *changes: tuple[str, int, str | None]) -> str:
        """Commit changes, and return them as DMS writes them to a CDC file (deletes carry the old row)."""
        lines = []
        for op, key, label in changes:
            if op == "D":
                lines.append(f"D,{key},{self.rows.pop(key)}\n")
            else:
                assert label is not None
                self.rows[key] = label
                lines.append(f"{op},{key},{label}\n")
        return "".join(lines)

    def expected(self) -> list[tuple[int, str]]:
        return sorted(self.rows.items())


def land_at(landing: Path, name: str, text: str, written: dt.datetime) -> str:
    """Land a file of shop.items as DMS would, with its LastModified."""
    return write_file(landing, P + name, text, modified=written)


def config_file(tmp_path: Path, history: bool = True) -> tuple[Path, PipelineConfig]:
    """shop.items in CSV, an empty field read as an empty string (not NULL)."""
    return items_config_file(tmp_path / "tables.yaml", history=history, format="csv", csv_null_value="")


@pytest.mark.spark
def test_reload_in_the_middle_of_a_stream_with_changes_during_it(spark, lake, warehouse, database, tmp_path, capsys):
    config, cfg = config_file(tmp_path)
    landing = lake.landing
    lake_args = ["-c", config, "-w", warehouse, "--database", database]
    source = Source({1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"})

    # The first full load, then CDC: replayed as usual.
    land_at(landing, "LOAD00000001.csv", source.load([1, 2, 3, 4, 5, 6]), at(9, 0))
    land_at(
        landing, "20250301-090500000.csv", source.change(("U", 1, "one-b"), ("D", 2, None), ("I", 7, "seven")), at(9, 5)
    )
    land_at(landing, "20250301-091000000.csv", source.change(("U", 3, "three-b")), at(9, 10))
    code, out = cli(capsys, "run", "-l", landing, *lake_args)
    assert code == 0, out
    before_reload = source.expected()
    assert lake.rows() == before_reload
    snapshot_before = lake.head()

    # A change lands shortly before the reload (the lake has not applied it yet).
    land_at(landing, "20250301-105930000.csv", source.change(("U", 4, "four-b")), at(10, 59, 30))
    # DMS reloads the table at 11:00: LOAD00000001 is written again with other content, and there is one LOAD
    # file more. Rows are read while the source changes: keys 6 and 9 are read after their change, key 3 and
    # 5 before theirs, key 1 before its delete. The changes made meanwhile are cached and written after the
    # load, repeating those the LOAD rows already show.
    during = [
        ("U", 6, "six-b"),
        ("I", 9, "nine"),
        ("D", 3, None),
        ("U", 5, "five-b"),
        ("D", 1, None),
        ("I", 8, "eight"),
    ]
    land_at(landing, "LOAD00000001.csv", "1,one-b\n3,three-b\n4,four-b\n", at(11, 0))
    land_at(landing, "LOAD00000002.csv", "5,five\n6,six-b\n7,seven\n9,nine\n", at(11, 0, 20))
    land_at(landing, "20250301-110100000.csv", source.change(*during), at(11, 1))

    # The replay jobs refuse the reloaded files, naming the command to run.
    code, out = cli(capsys, "trigger", "-l", landing, *lake_args, P + "LOAD00000002.csv", P + "20250301-110100000.csv")
    assert code == 1, out
    assert out.count("FAILED") == 2 and COMMAND in out, out
    assert "--table shop.items (docs/deploy.md#reload)" in out
    assert lake.rows() == before_reload

    code, out = cli(capsys, "reload", "-t", "shop.items", "-l", landing, *lake_args)
    assert code == 0, out
    assert (
        "shop.items: reloaded from 2 LOAD file(s) and 2 CDC file(s) from 20250301-100000000 on (automatic: earliest "
        "current LOAD file written 2025-03-01 11:00:00 UTC, less 60 min): 6 row(s); 2 inserted, 3 updated, 2 deleted"
    ) in out, out
    assert f"stays readable as change {snapshot_before}" in out
    assert (
        "2 earlier CDC file(s) left out as older than the reload, the last dms/shop/items/20250301-091000000.csv" in out
    )
    assert lake.rows() == source.expected()
    # One commit replaced the contents; the table before it is still there for time travel.
    assert lake.rows(snapshot=snapshot_before) == before_reload
    reload_snapshot = lake.head()
    summary = snapshot_summaries(lake, cfg.tables[0])[-1]
    assert summary["snapshot_id"] == reload_snapshot and RELOAD in summary["summary"]
    assert list_changes(lake, cfg.tables[0])[-1].kind == "reload"

    # History: a version only for each key whose row changed (7 did not), from the change that made it.
    history = {
        r["id"]: r
        for r in spark.sql(
            f"SELECT * FROM lake.{database}.shop_items_history WHERE valid_to IS NULL ORDER BY id"
        ).collect()
    }
    assert {k: (r["op"], r["version"], r["is_current"]) for k, r in history.items()} == {
        1: ("D", 3, False),
        2: ("D", 2, False),  # deleted before the reload: its tombstone stays as it was
        3: ("D", 3, False),
        4: ("U", 2, True),
        5: ("U", 2, True),
        6: ("U", 2, True),
        7: ("I", 1, True),
        8: ("I", 1, True),
        9: ("I", 1, True),
    }
    assert (history[4]["source_file"], history[4]["source_row"]) == (P + "20250301-105930000.csv", 1)
    assert (history[5]["source_file"], history[5]["source_row"]) == (P + "20250301-110100000.csv", 4)
    assert history[8]["source_file"] == P + "20250301-110100000.csv"
    current = sorted((r["id"], r["label"]) for r in history.values() if r["is_current"])
    assert current == source.expected()

    # Ordinary replay goes on: the next CDC file is applied alone, earlier ones are already applied.
    later = land_at(
        landing,
        "20250301-111000000.csv",
        source.change(("U", 8, "eight-b"), ("I", 10, "ten"), ("D", 7, None)),
        at(11, 10),
    )
    code, out = cli(capsys, "trigger", "-l", landing, *lake_args, P + "20250301-110100000.csv", later)
    assert code == 0, out
    # One run for both events (the second is covered by the waiting run); it applies only the new file.
    assert f"applied shop.items  1 file(s) up to {later}, I 1 U 1 D 1" in out
    assert "1 job run(s): 1 file(s) applied, 0 failed" in out
    assert lake.rows() == source.expected()
    state = read_state(lake, "shop_items")
    assert (state.cdc_last, state.cdc_count, state.load_count) == (later, 5, 2)
    current = spark.sql(f"SELECT id, label FROM lake.{database}.shop_items_history WHERE is_current").collect()
    assert sorted(tuple(r) for r in current) == source.expected()


@pytest.mark.spark
def test_folder_emptied_first_and_the_since_override(spark, lake, database, tmp_path):
    _, cfg = config_file(tmp_path, history=False)
    landing = lake.landing
    context = lake.context(cfg)
    source = Source({1: "one", 2: "two"})
    land_at(landing, "LOAD00000001.csv", source.load([1, 2]), at(9, 0))
    first = land_at(landing, "20250301-090500000.csv", source.change(("U", 1, "one-b")), at(9, 5))
    replay(context, parse_key(first, cfg))

    # DROP_AND_CREATE / TRUNCATE_BEFORE_LOAD may empty the folder before the reload writes it again.
    for path in landing.rglob("*.csv"):
        path.unlink()
    land_at(landing, "LOAD00000001.csv", "1,one-b\n2,two\n3,three\n", at(11, 0))
    source.rows[3] = "three"  # inserted before the reload read the table
    # A CDC file from a DMS host whose clock ran 90 minutes behind: its name is before the automatic boundary.
    skewed = land_at(landing, "20250301-093100000.csv", source.change(("U", 2, "two-b")), at(11, 1))
    with pytest.raises(ReplayOrderError, match=r"run `cdc-lake reload -t shop\.items`"):
        replay(context, parse_key(skewed, cfg))

    result = reload_table(context, cfg.tables[0])
    assert result.skipped_cdc_files == [skewed] and result.cdc_files == []
    assert lake.rows() == [(1, "one-b"), (2, "two"), (3, "three")]  # the skewed change is missing
    result = reload_table(context, cfg.tables[0], since="20250301-093100000.csv")
    assert result.cdc_files == [skewed] and result.boundary_source == "--since 20250301-093100000.csv"
    assert (result.counts.inserts, result.counts.updates, result.counts.deletes) == (0, 1, 0)
    assert lake.rows() == source.expected()


@pytest.mark.spark
def test_load_files_of_an_earlier_longer_load_are_left_out(spark, lake, database, tmp_path):
    _, cfg = config_file(tmp_path, history=False)
    landing = lake.landing
    context = lake.context(cfg)
    land_at(landing, "LOAD00000001.csv", "1,one\n2,two\n", at(9, 0))
    load2 = land_at(landing, "LOAD00000002.csv", "3,three\n4,four\n", at(9, 0, 10))
    replay(context, parse_key(load2, cfg))
    # Keys 3 and 4 were deleted; the reload needs one file only and leaves LOAD00000002 in place.
    land_at(landing, "LOAD00000001.csv", "1,one\n2,two-b\n", at(12, 0))
    result = reload_table(context, cfg.tables[0])
    assert result.stale_load_files == [load2]
    assert lake.rows() == [(1, "one"), (2, "two-b")]
    # The old file stays recorded: a later CDC file is applied, not refused.
    cdc = land_at(landing, "20250301-120500000.csv", "I,5,five\n", at(12, 5))
    assert replay(context, parse_key(cdc, cfg)).applied_files == [cdc]
    assert lake.rows() == [(1, "one"), (2, "two-b"), (5, "five")]


@pytest.mark.spark
def test_bad_rows_refuse_the_reload_and_change_nothing(spark, lake, database, tmp_path):
    _, cfg = config_file(tmp_path)
    landing = lake.landing
    context = lake.context(cfg)
    load = land_at(landing, "LOAD00000001.csv", "1,one\n", at(9, 0))
    replay(context, parse_key(load, cfg))
    before = lake.head(), lake.head("shop_items_history")
    land_at(landing, "LOAD00000001.csv", "1,one\nx,bad\n", at(11, 0))
    with pytest.raises(DmsInputError, match=r"LOAD00000001.csv: row 2, column id: cannot parse as bigint"):
        reload_table(context, cfg.tables[0])
    assert (lake.head(), lake.head("shop_items_history")) == before
    assert lake.rows() == [(1, "one")]


@pytest.mark.spark
def test_reload_as_the_maintenance_glue_job_action(spark, lake, database, tmp_path):
    _, cfg = config_file(tmp_path)
    landing = lake.landing
    land_at(landing, "LOAD00000001.csv", "1,one\n2,two\n", at(11, 0))
    land_at(landing, "20250301-110500000.csv", "D,2,two\nI,3,three\n", at(11, 5))
    options = MaintenanceOptions.from_options(
        {
            "--config_uri": "unused",
            "--action": "reload",
            "--table": "shop.items",
            "--bucket": "raw",
            "--catalog": "lake",
            "--database": database,
        }
    )
    [result] = run_maintenance(options, job_context(options, spark, config=cfg, store=LocalFolderStore(landing)))
    assert (result.table, result.action) == ("shop.items", "reload")
    assert {k: result.detail[k] for k in ("load_files", "cdc_files", "rows", "inserted", "deleted")} == {
        "load_files": 1,
        "cdc_files": 1,
        "rows": 2,
        "inserted": 2,
        "deleted": 0,
    }
    assert lake.rows() == [(1, "one"), (3, "three")]
