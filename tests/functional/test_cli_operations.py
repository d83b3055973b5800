"""The operations commands as a user runs them: changes, history, rollback, reapply, reconcile, maintain.

In-process (``cli.main``) against the test session's warehouse, each test in its own lake database.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.support.cli import cli
from tests.support.configs import items_config_file
from tests.support.lake import write_file

pytestmark = pytest.mark.spark

P = "dms/shop/items/"


def test_operations_round_trip(spark, warehouse, database, tmp_path, capsys):
    # One commit per file: rollback points to step through.
    config, _ = items_config_file(
        tmp_path / "tables.yaml", history=True, format="csv", timestamp_column="ts", runs={"mode": "per_file"}
    )
    landing = tmp_path / "landing"
    write_file(landing, P + "LOAD00000001.csv", "2025-03-01 12:00:00.000000,1,one\n2025-03-01 12:00:00.000000,2,two\n")
    write_file(landing, P + "20250301-120100000.csv", "U,2025-03-01 12:01:00.000000,1,uno\n")
    write_file(landing, P + "20250301-120200000.csv", "D,2025-03-01 12:02:00.000000,2,two\n")
    lake = ["-c", config, "-w", warehouse, "--database", database]

    code, out = cli(capsys, "run", "-l", landing, *lake)
    assert code == 0, out

    code, out = cli(capsys, "changes", "-t", "shop.items", *lake)
    assert code == 0, out
    replays = re.findall(r"^(\d+)\s+\S+ \S+\s+replay\s+1\s+(\d+)\s+(\d+)\s+(\d+)", out, re.MULTILINE)
    assert [r[1:] for r in replays] == [("2", "0", "0"), ("0", "1", "0"), ("0", "0", "1")]
    assert P + "20250301-120200000.csv" in out

    code, out = cli(capsys, "history", "-t", "shop.items", "-k", "id=1", *lake)
    assert code == 0, out
    assert re.search(r"v1\s+I\s+2025-03-01 12:00:00 \.\. 2025-03-01 12:01:00\s+label='one'", out), out
    assert re.search(r"v2\s+U\s+2025-03-01 12:01:00 \.\. \(open\)\s+current label='uno'", out), out

    code, out = cli(capsys, "rollback", "-t", "shop.items", "--to", replays[0][0], "-l", landing, *lake)
    assert code == 0, out
    assert "2 later file(s) will be applied again" in out
    code, out = cli(capsys, "export", "-o", tmp_path / "rolled", *lake)
    rows = [json.loads(line) for line in (tmp_path / "rolled" / "shop.items.jsonl").read_text().splitlines()]
    assert rows == [{"id": 1, "label": "one"}, {"id": 2, "label": "two"}]

    code, out = cli(capsys, "reapply", "-t", "shop.items", "-l", landing, *lake)
    assert code == 0, out
    assert "applied 2 file(s)" in out
    code, out = cli(capsys, "export", "-o", tmp_path / "now", *lake)
    expected = tmp_path / "now" / "shop.items.jsonl"
    assert expected.read_text() == '{"id":1,"label":"uno"}\n'

    code, out = cli(capsys, "reconcile", "-t", "shop.items", "-e", expected, *lake)
    assert code == 0, out
    assert "MATCH" in out
    expected.write_text('{"id":1,"label":"uno"}\n{"id":3,"label":"three"}\n')
    code, out = cli(capsys, "reconcile", "-t", "shop.items", "-e", expected, *lake)
    assert code == 1, out
    assert "MISMATCH" in out and "id=3" in out

    code, out = cli(capsys, "maintain", "--action", "all", *lake)
    assert code == 0, out
    assert f"{database}.shop_items: compact" in out and f"{database}.shop_items_history: expire" in out

    code, out = cli(capsys, "rollback", "-t", "shop.items", "--to", "12345", "-l", landing, *lake)
    assert code == 2 and "not a change of the table's current lineage" in out
