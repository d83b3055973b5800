"""Quarantine (on_bad_rows: quarantine): bad rows kept out with every later change of their keys, the table marked
diverged, then a replay of the fixed rows (or an accept of their loss) ends at the source's table."""

from __future__ import annotations

import os
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdc_lake.core.config import parse_config
from cdc_lake.core.exceptions import ConfigError, DmsInputError
from cdc_lake.core.sql import sql_string
from cdc_lake.engine.rejects import diverged
from cdc_lake.engine.rejects_replay import replay_rejects
from cdc_lake.engine.reload import reload_table
from cdc_lake.engine.tables import rejects_name
from cdc_lake.jobs.entry import job_context
from cdc_lake.jobs.maintenance import MaintenanceOptions, run_maintenance
from cdc_lake.ops.operations import list_changes, rollback
from tests.support.cli import cli
from tests.support.lake import Lake, landed_paths, on_both_paths, write_file

T = "dms/shop/items/"
LOAD = "".join(f"{i},n{i},{i * 10}\n" for i in range(1, 7))


def fix_reject(spark: Any, rejects: str, file: str, row: int, qty: str) -> None:
    """An operator's fix of a rejected row's qty in SQL. Its values are written out: on Spark 4.1, Iceberg 1.11's SQL
    extensions leave bound parameters unbound (apache/iceberg#16625)."""
    spark.sql(
        f"UPDATE {rejects} SET fields = map_concat(map_filter(fields, (k, v) -> k != 'qty'), map('qty', "
        f"{sql_string(qty)})) WHERE file = {sql_string(file)} AND row = {int(row)}"
    )


def _config_data(on_bad_rows: str = "quarantine") -> dict:
    columns = [{"name": "id", "type": "int"}, {"name": "name", "type": "string"}, {"name": "qty", "type": "int"}]
    table = {"name": "shop.items", "primary_key": ["id"], "columns": columns, "on_bad_rows": on_bad_rows}
    return {"dms": {"bucket_folder": "dms"}, "tables": [table]}


def _config(on_bad_rows: str = "quarantine"):
    return parse_config(_config_data(on_bad_rows))


def _oracle(
    *files: str,
    fixes: dict[tuple[str, int], str] | None = None,
    drop: set[tuple[str, int]] = frozenset(),
    as_load: bool = False,
) -> list[tuple]:
    """The source's table: each file's rows applied in order (``fixes``: a row's text as fixed; ``drop``: rows whose
    change is accepted as lost; ``as_load``: the files are LOAD files)."""
    table: dict[int, tuple[str, int]] = {}
    for name in files:
        loading = name == "LOAD" or as_load
        text = LOAD if name == "LOAD" else name
        for number, written in enumerate(text.splitlines(), start=1):
            if (text, number) in drop:
                continue
            fields = (fixes or {}).get((text, number), written).split(",")
            op, fields = ("I", fields) if loading else (fields[0], fields[1:])
            key = int(fields[0])
            if op == "D":
                table.pop(key, None)
            else:
                table[key] = (fields[1], int(fields[2]))
    return sorted((k, *v) for k, v in table.items())


def _rows(lake: Lake) -> list[tuple]:
    return sorted(tuple(r) for r in lake.spark.table(lake.table("shop_items")).collect())


def _rejects(lake: Lake) -> list[tuple]:
    frame = lake.spark.table(lake.table("shop_items_rejects"))
    return sorted((r.file.rsplit("/", 1)[1], r.row, r.status, r.column, r.resolution) for r in frame.collect())


def _landed(lake: Lake) -> dict[str, bytes]:
    return {p.as_posix(): p.read_bytes() for p in landed_paths(lake.landing)}


CDC_A = "U,2,b2,x\nU,3,c3,33\nU,2,b2b,22\nD,4,n4,40\nI,7,g,notint\n"
CDC_B = "U,7,g2,70\nU,5,e5,55\nU,2,b2c,23\n"


@on_both_paths
def test_bad_rows_are_held_with_later_changes_of_their_keys_until_replayed(spark, lake, landing, capsys):
    cfg = _config()
    write_file(landing, T + "LOAD00000001.csv", LOAD)
    lake.apply(cfg, T + "LOAD00000001.csv")
    a = write_file(landing, T + "20250301-120000000.csv", CDC_A)
    before = _landed(lake)
    result = lake.apply(cfg, a)

    # Keys 2 and 7 stay at their state before their bad rows; every other change applies.
    assert _rows(lake) == [(1, "n1", 10), (2, "n2", 20), (3, "c3", 33), (5, "n5", 50), (6, "n6", 60)]
    assert _rejects(lake) == [
        ("20250301-120000000.csv", 1, "rejected", "qty", None),
        ("20250301-120000000.csv", 3, "held", None, None),
        ("20250301-120000000.csv", 5, "rejected", "qty", None),
    ]
    assert _landed(lake) == before
    [notice] = [n for n in result.notices if n.kind == "rows-quarantined"]
    assert notice.subject == rejects_name(cfg.tables[0])
    assert f"{a}: row 1, column qty: cannot parse as int" in notice.detail
    assert "cdc-lake rejects replay -t shop.items" in notice.detail
    assert diverged(lake, cfg.tables[0]) == {
        "rejected": 2,
        "held": 1,
        "rejects_table": "shop_items_rejects",
    }

    # A later batch holds the frozen keys' changes too.
    b = write_file(landing, T + "20250301-120100000.csv", CDC_B)
    lake.apply(cfg, b)
    assert _rows(lake) == [(1, "n1", 10), (2, "n2", 20), (3, "c3", 33), (5, "e5", 55), (6, "n6", 60)]
    assert [(f, r, s) for f, r, s, *_ in _rejects(lake)] == [
        ("20250301-120000000.csv", 1, "rejected"),
        ("20250301-120000000.csv", 3, "held"),
        ("20250301-120000000.csv", 5, "rejected"),
        ("20250301-120100000.csv", 1, "held"),
        ("20250301-120100000.csv", 3, "held"),
    ]
    assert diverged(lake, cfg.tables[0])["held"] == 3

    # A row whose key is unknown cannot be held: the batch is refused, the table unchanged.
    c = write_file(landing, T + "20250301-120200000.csv", "U,6,f6,66\nU,,x,1\n")
    with pytest.raises(DmsInputError) as refused:
        lake.apply(cfg, c)
    assert f"{c}: row 2, column id: NULL primary key" in str(refused.value)
    assert "cannot be quarantined" in str(refused.value)
    assert _rows(lake)[-1] == (6, "n6", 60)
    c_fixed = "U,6,f6,66\n"
    write_file(landing, T + "20250301-120200000.csv", c_fixed)
    lake.apply(cfg, c)

    # A replay before the rows are fixed is refused, naming each one; nothing changes.
    with pytest.raises(DmsInputError) as still_bad:
        replay_rejects(_context(lake, cfg), cfg.tables[0])
    assert f"{a}: row 1, column qty: cannot parse as int (value 'x')" in str(still_bad.value)
    assert f"{a}: row 5, column qty" in str(still_bad.value)
    assert _rows(lake)[1] == (2, "n2", 20)

    # Fixed in the rejects table with SQL, then replayed: the table is the source's, in DMS order.
    rejects = lake.table("shop_items_rejects")
    for row, qty in ((1, "21"), (5, "7")):
        fix_reject(spark, rejects, a, row, qty)
    replayed = replay_rejects(_context(lake, cfg), cfg.tables[0])
    assert (replayed.applied, replayed.keys, replayed.dropped) == (5, 2, 0)
    fixes = {(CDC_A, 1): "U,2,b2,21", (CDC_A, 5): "I,7,g,7"}
    assert _rows(lake) == _oracle("LOAD", CDC_A, CDC_B, c_fixed, fixes=fixes)
    assert diverged(lake, cfg.tables[0]) is None
    assert {r[-1] for r in _rejects(lake)} == {"replayed"}

    # The keys are free again: their next change applies at once.
    d = write_file(landing, T + "20250301-120300000.csv", "U,2,b2d,24\n")
    lake.apply(cfg, d)
    assert _rows(lake) == _oracle("LOAD", CDC_A, CDC_B, c_fixed, "U,2,b2d,24\n", fixes=fixes)
    assert diverged(lake, cfg.tables[0]) is None
    assert _landed(lake) == {**before, **{k: v for k, v in _landed(lake).items() if k not in before}}


def test_accepting_the_loss_drops_the_bad_rows_and_applies_the_held_ones(spark, lake, landing, warehouse, capsys):
    cfg = _config()
    write_file(landing, T + "LOAD00000001.csv", LOAD)
    cdc = "U,1,a,bad\nU,1,a2,12\nU,2,b2,2x\nD,2,b2,20\n"
    key = write_file(landing, T + "20250301-120000000.csv", cdc)
    lake.apply(cfg, key)
    assert _rows(lake)[:2] == [(1, "n1", 10), (2, "n2", 20)]
    code, out = cli(capsys, "rejects", "list", *_cli_args(lake, landing, warehouse))
    assert code == 0, out
    assert f"rejected: {key}: row 1, column qty: cannot parse as int | U,1,a,bad" in out
    assert "shop.items: 4 outstanding row(s)" in out
    code, out = cli(capsys, "changes", *_cli_args(lake, landing, warehouse, landing_too=False))
    assert code == 0, out
    assert "DIVERGED 2 row(s) quarantined, 2 held, in shop_items_rejects (cdc-lake rejects list)" in out
    # As the deployed maintenance job runs it.
    options = MaintenanceOptions.from_options(
        {"--config_uri": "unused", "--action": "rejects-accept", "--table": "shop.items", "--catalog": "lake",
         "--database": lake.database}
    )  # fmt: skip
    [result] = run_maintenance(options, job_context(options, spark, config=cfg, store=lake.store()))
    assert (result.action, result.detail["applied"], result.detail["dropped"]) == ("rejects-accept", 2, 2)
    assert _rows(lake) == _oracle("LOAD", cdc, drop={(cdc, 1), (cdc, 3)})
    assert diverged(lake, cfg.tables[0]) is None
    assert sorted(r[-1] for r in _rejects(lake)) == ["accepted", "accepted", "replayed", "replayed"]

    # A rollback past the accept freezes the keys again; accepting again ends where it did.
    changes = list_changes(lake, cfg.tables[0])
    assert [c.kind for c in changes[-2:]] == ["replay", "rejects"]
    rollback(lake.context(cfg), cfg.tables[0], changes[-2].snapshot_id)
    assert _rows(lake)[:2] == [(1, "n1", 10), (2, "n2", 20)]
    assert diverged(lake, cfg.tables[0]) == {
        "rejected": 2,
        "held": 2,
        "rejects_table": "shop_items_rejects",
    }
    assert {r[-1] for r in _rejects(lake)} == {None}
    replay_rejects(_context(lake, cfg), cfg.tables[0], accept=True)
    assert _rows(lake) == _oracle("LOAD", cdc, drop={(cdc, 1), (cdc, 3)})


def test_a_run_or_a_replay_stopped_between_its_two_commits_ends_exact(spark, lake, landing, monkeypatch):
    from cdc_lake.engine import rejects_replay, replay

    cfg = _config()
    write_file(landing, T + "LOAD00000001.csv", LOAD)
    lake.apply(cfg, T + "LOAD00000001.csv")
    key = write_file(landing, T + "20250301-120000000.csv", CDC_A)
    stopped = _stop_once(monkeypatch, replay, "commit_transaction")  # after the rejects commit, before main's
    with pytest.raises(RuntimeError, match="stopped"):
        lake.apply(cfg, key)
    assert stopped and _rows(lake) == _oracle("LOAD")
    assert len(_rejects(lake)) == 3  # written, but not counted: the table has not applied their file
    assert diverged(lake, cfg.tables[0]) is None
    lake.apply(cfg, key)
    assert [(r, s) for _, r, s, *_ in _rejects(lake)] == [(1, "rejected"), (3, "held"), (5, "rejected")]
    assert diverged(lake, cfg.tables[0]) == {
        "rejected": 2,
        "held": 1,
        "rejects_table": "shop_items_rejects",
    }

    stopped = _stop_once(monkeypatch, rejects_replay, "resolve_rejects")  # after the replay's commit
    with pytest.raises(RuntimeError, match="stopped"):
        replay_rejects(_context(lake, cfg), cfg.tables[0], accept=True)
    assert stopped
    replay_rejects(_context(lake, cfg), cfg.tables[0], accept=True)
    assert _rows(lake) == _oracle("LOAD", CDC_A, drop={(CDC_A, 1), (CDC_A, 5)})
    assert sorted(r[-1] for r in _rejects(lake)) == ["accepted", "accepted", "replayed"]


def _stop_once(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> list[bool]:
    """Make ``module.name`` fail once, as a run killed at that moment; the list records that it did."""
    original, stopped = getattr(module, name), []

    def stop(*args: object, **kwargs: object) -> object:
        if not stopped:
            stopped.append(True)
            raise RuntimeError("stopped")
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, stop)
    return stopped


def test_a_reload_supersedes_the_rejects(spark, lake, landing):
    cfg = _config()
    write_file(landing, T + "LOAD00000001.csv", LOAD)
    key = write_file(landing, T + "20250301-120000000.csv", "U,1,a,bad\nU,1,a2,12\nU,3,c,30\n")
    lake.apply(cfg, key)
    marked = {"rejected": 1, "held": 1, "rejects_table": "shop_items_rejects"}
    assert diverged(lake, cfg.tables[0]) == marked
    reloaded = "1,a3,13\n2,n2,20\n"
    write_file(landing, T + "LOAD00000001.csv", reloaded)
    reload_table(_context(lake, cfg), cfg.tables[0])
    assert _rows(lake) == _oracle(reloaded, as_load=True)
    assert diverged(lake, cfg.tables[0]) is None
    assert {r[-1] for r in _rejects(lake)} == {"reloaded"}
    later = write_file(landing, T + "20250301-130000000.csv", "U,1,a4,14\n")
    lake.apply(cfg, later)
    assert _rows(lake) == [(1, "a4", 14), (2, "n2", 20)]


def test_a_refusing_table_still_refuses_and_quarantine_rejects_history():
    with pytest.raises(ConfigError, match="cannot be combined with history"):
        parse_config(
            {
                "tables": [
                    {
                        "name": "shop.items",
                        "primary_key": ["id"],
                        "columns": [{"name": "id", "type": "int"}],
                        "history": True,
                        "on_bad_rows": "quarantine",
                    }
                ]
            }
        )
    assert _config("refuse").tables[0].on_bad_rows == "refuse"


def _context(lake: Lake, cfg):
    from cdc_lake.engine.context import ReplayContext

    return ReplayContext(spark=lake.spark, location=lake.location, config=cfg, store=lake.store())


def _cli_args(lake: Lake, landing, warehouse, landing_too: bool = True) -> list[str]:
    import json

    path = landing.parent / "quarantine.json"
    path.write_text(json.dumps(_config_data()))
    lake_args = ["-t", "shop.items", "-c", str(path), "-w", str(warehouse), "--database", lake.database]
    return [*lake_args, "-l", str(landing)] if landing_too else lake_args


# A change: (op, key, name, qty, bad): ``bad`` writes qty as text that does not parse, the source holding ``qty``.
Change = tuple[str, int, str, int, bool]


@st.composite
def _workloads(draw: st.DrawFn) -> tuple[list[Change], list[list[Change]], bool]:
    """A full load and CDC files of valid source changes over a few keys, some written with a bad value; and
    whether the user accepts the bad rows' loss rather than fixing them."""
    present: set[int] = set(draw(st.sets(st.integers(1, 6), max_size=5)))
    loads = [("I", k, f"l{k}", k, draw(st.booleans()) and draw(st.booleans())) for k in sorted(present)]
    files = []
    for number in range(draw(st.integers(1, 3))):
        changes = []
        for index in range(draw(st.integers(1, 6))):
            key = draw(st.integers(1, 6))
            op = draw(st.sampled_from(["U", "D"])) if key in present else "I"
            present.symmetric_difference_update({key} if op in {"I", "D"} else set())
            bad = draw(st.integers(0, 4)) == 0
            changes.append((op, key, f"v{number}{index}", number * 10 + index, bad))
        files.append(changes)
    return loads, files, draw(st.booleans())


def _text(changes: list[Change], load: bool) -> str:
    return "".join(
        ("" if load else f"{op},") + f"{key},{name},{'x' + str(qty) if bad else qty}\n"
        for op, key, name, qty, bad in changes
    )


def _applied(changes: list[Change], frozen_from_bad: bool, drop_bad: bool) -> list[tuple]:
    """The table after ``changes`` in order: each key frozen before its first bad change, or bad changes dropped,
    or (neither) every change applied."""
    table: dict[int, tuple[str, int]] = {}
    frozen: set[int] = set()
    for op, key, name, qty, bad in changes:
        if key in frozen or (bad and drop_bad):
            continue
        if bad and frozen_from_bad:
            frozen.add(key)
            continue
        if op == "D":
            table.pop(key, None)
        else:
            table[key] = (name, qty)
    return sorted((k, *v) for k, v in table.items())


@settings(
    max_examples=int(os.environ.get("CDC_LAKE_QUARANTINE_EXAMPLES", "3")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(workload=_workloads())
def test_quarantine_then_replay_or_accept_is_exact(spark, database, aws_endpoint, tmp_path, workload):
    loads, files, accept = workload
    run = uuid.uuid4().hex[:8]
    data = _config_data()
    data["tables"][0]["target"] = f"items_{run}"
    cfg = parse_config(data)
    lake = Lake("hadoop", spark, database, tmp_path / run, aws_endpoint)
    keys = []
    if loads:
        keys.append(write_file(lake.landing, T + "LOAD00000001.csv", _text(loads, load=True)))
    for number, changes in enumerate(files):
        keys.append(write_file(lake.landing, T + f"20250301-12{number:02d}00000.csv", _text(changes, load=False)))
    everything = [*loads, *[c for changes in files for c in changes]]
    for key in keys:
        lake.apply(cfg, key)
    table = lake.table(f"items_{run}")
    assert sorted(tuple(r) for r in spark.table(table).collect()) == _applied(everything, True, False)
    bad_rows = [c for c in everything if c[-1]]
    mark = diverged(lake, cfg.tables[0])
    assert (mark is not None) == bool(bad_rows)

    if not accept:  # the user fixes each rejected row's value in the rejects table
        located = {(key, row): c for key, text_rows in _rows_by_file(keys, loads, files) for row, c in text_rows}
        for reject in spark.table(f"{table}_rejects").where("status = 'rejected'").collect():
            true_qty = located[(reject.file, reject.row)][3]
            fix_reject(spark, f"{table}_rejects", reject.file, reject.row, str(true_qty))
    if bad_rows:
        replay_rejects(_context(lake, cfg), cfg.tables[0], accept=accept)
    expected = _applied(everything, False, accept)
    assert sorted(tuple(r) for r in spark.table(table).collect()) == expected
    assert diverged(lake, cfg.tables[0]) is None


def _rows_by_file(keys: list[str], loads: list[Change], files: list[list[Change]]):
    batches = ([loads] if loads else []) + files
    return [(key, list(enumerate(changes, start=1))) for key, changes in zip(keys, batches, strict=True)]


def test_parquet_rows_are_quarantined_and_replayed(spark, lake, landing):
    import datetime as dt
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = [{"name": "id", "type": "bigint"}, {"name": "at", "type": "timestamp"}, {"name": "qty", "type": "int"}]
    table = {"name": "shop.items", "primary_key": ["id"], "columns": columns, "on_bad_rows": "quarantine"}
    cfg = parse_config({"dms": {"bucket_folder": "dms", "format": "parquet"}, "tables": [table]})

    def parquet(name: str, rows: list[dict], at_type: pa.DataType) -> str:
        schema = pa.schema([(n, t) for n, t in [("Op", pa.string()), ("id", pa.int64()), ("at", at_type),
                                                  ("qty", pa.int32())] if n in rows[0]])  # fmt: skip
        sink = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), sink)
        path = landing / T / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(sink.getvalue())
        return T + name

    noon = dt.datetime(2025, 3, 1, 12)
    load = parquet("LOAD00000001.parquet", [{"id": i, "at": noon, "qty": i} for i in (1, 2)], pa.timestamp("us"))
    lake.apply(cfg, load)
    changes = [
        {"Op": "U", "id": 1, "at": "2025-13-45 25:00:00", "qty": 10},
        {"Op": "U", "id": 1, "at": "2025-03-02 00:00:00", "qty": 11},
        {"Op": "U", "id": 2, "at": "2025-03-03 10:00:00", "qty": 20},
    ]
    cdc = parquet("20250301-120000000.parquet", changes, pa.string())
    lake.apply(cfg, cdc)
    assert _rows(lake) == [(1, noon, 1), (2, dt.datetime(2025, 3, 3, 10), 20)]
    [bad, held] = lake.spark.table(lake.table("shop_items_rejects")).orderBy("row").collect()
    assert (bad.row, bad.status, bad.column, held.row, held.status) == (1, "rejected", "at", 2, "held")
    assert bad.fields["at"] == "2025-13-45 25:00:00" and '"at":"2025-13-45 25:00:00"' in bad.raw
    spark.sql(
        f"UPDATE {lake.table('shop_items_rejects')} SET fields = map_concat(map_filter(fields, (k, v) -> k != 'at'), "
        "map('at', '2025-03-01 13:00:00')) WHERE row = 1"
    )
    replay_rejects(_context(lake, cfg), cfg.tables[0])
    assert _rows(lake) == [(1, dt.datetime(2025, 3, 2), 11), (2, dt.datetime(2025, 3, 3, 10), 20)]
