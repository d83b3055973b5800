"""One proof of equality for the write paths (issue 71): the same random op sequences, applied to a table that
takes the MERGE at every batch (``write_mode: copy-on-write``) and to one that takes the row delta (``auto``, a
small table; ``merge-on-read``), leave identical tables, identical records in their snapshots' summaries and the
same replay state, on both lake paths.

The sequences are hypothesis's: inserts, updates, deletes of keys that exist and that do not, key updates (DMS's
``U`` with the old key in its before-image columns, chains included), keys that come back, one key changed several
times in a batch, under a composite key, with a value of every type the writer converts (NULL and empty text
among them). A key-level oracle in Python checks that both are right, not only alike.
"""

from __future__ import annotations

import itertools
import json
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from cdc_lake.core.config import parse_config
from cdc_lake.engine.record import FRESHNESS, RUN_ID, STATE, read_state, snapshot_summaries
from cdc_lake.local.generator.dms_output import csv_field
from tests.support.configs import CONVERTED_TYPES, columns
from tests.support.lake import Lake, on_both_paths, write_file

pytestmark = pytest.mark.spark

# Examples a case runs: 2 in make test (about 17 s each on the reference machine), 40 in make soak.
EXAMPLES_ENV = "CDC_LAKE_WRITE_PATH_EXAMPLES"
KEY = ("id", "part")
# Each column with texts DMS writes for it (None: NULL, an unquoted empty field).
VALUES: dict[str, tuple[str | None, ...]] = {
    "label": (None, "", "a", "x,y", 'say "hi"', " edge "),
    "price": (None, "1.50", "-0.01", "99999999.99", "0.00"),
    "day": (None, "2024-01-31", "1970-01-01", "2025-12-31"),
    "at": (None, "2024-01-31 10:11:12.123456", "1970-01-01 00:00:00.000001", "1999-09-09 09:09:09"),
    "seen": (None, "2024-01-31 10:11:12.5+00", "2025-12-31 23:59:59.999999+02", "1970-01-01 00:00:01+00"),
    "ratio": (None, "0.5", "-1e+30", "0", "+3.23800011e+01"),
    "weight": (None, "1.25", "-2.5e+10", "3.0", "+2.1804858784530072e+04"),
    "count": (None, "7", "2147483647", "-1"),
    "flag": (None, "true", "false", "1", "0"),
}
# Among them the forms each engine's DMS writes (../shared/dms-format.md): REAL and DOUBLE in exponent form with a
# sign, MySQL's BOOLEAN as 1/0, PostgreSQL's timestamptz with its offset.
TYPES = columns(id="bigint", part="string", **CONVERTED_TYPES)
DMS = {
    "bucket_folder": "dms",
    "timestamp_column": "dms_ts",
    "before_image": {"column_prefix": "before_", "column_filter": "pk-only"},
}
# Timestamps out of order and tied: DMS order is the file's row order, whatever they say.
STAMPS = ("2025-03-01 12:00:00.000000", "2025-03-01 11:59:59.000000", "2025-03-01 12:00:00.000000")

keys = st.tuples(st.integers(1, 4), st.sampled_from(["a", "b"]))
row_values = st.fixed_dictionaries({name: st.sampled_from(texts) for name, texts in VALUES.items()})
change = st.tuples(st.sampled_from("IUDK"), keys, keys, row_values, st.sampled_from(STAMPS))
batches = st.tuples(
    st.lists(st.tuples(keys, row_values), min_size=1, max_size=5, unique_by=lambda row: row[0]),  # the full load
    st.lists(st.lists(change, min_size=1, max_size=8), min_size=1, max_size=3),
)
_examples = itertools.count()


def _field(text: str | None) -> str:
    return "" if text is None else (csv_field(text) if text else '""')


def _row(op: str | None, key: tuple[int, str], values: dict[str, str | None], stamp: str, old: Any) -> str:
    fields = ([op] if op else []) + [stamp, str(key[0]), _field(key[1])]
    fields += [_field(values[name]) for name in VALUES]
    fields += [str(old[0]), _field(old[1])] if old else ["", ""]
    return ",".join(fields) + "\n"


def _config(schema: str, modes: dict[str, str]) -> Any:
    tables = [
        {"name": f"{schema}.{name}", "primary_key": list(KEY), "columns": TYPES, "write_mode": mode}
        for name, mode in modes.items()
    ]
    return parse_config({"dms": DMS, "tables": tables})


def _expected_keys(load: list[Any], cdc: list[list[Any]]) -> list[tuple[int, str]]:
    present = {key for key, _ in load}
    for batch in cdc:
        for op, key, old, _, _ in batch:
            if op == "D":
                present.discard(key)
            else:
                if op == "K":
                    present.discard(old)
                present.add(key)
    return sorted(present)


def _record(lake: Lake, table: str, folder: str) -> list[dict[str, Any]]:
    """The cdc-lake properties of each replay snapshot in the table's lineage, named without
    the table's folder; without what differs by run and clock: its id, its timing, and the LOAD files' landing
    time (and the digest that covers it)."""
    records = []
    for snapshot in snapshot_summaries(lake, table):
        summary = snapshot["summary"]
        if STATE not in summary:
            continue
        record = {
            name: json.loads(value.replace(folder, "<table>/")) if value[:1] in "[{" else value.replace(folder, "")
            for name, value in summary.items()
            if name.startswith("cdc-lake.") and name not in (RUN_ID, FRESHNESS)
        }
        _timeless(record[STATE])
        records.append(record)
    return records


def _state(lake: Lake, table: str, folder: str) -> dict[str, Any]:
    return _timeless(json.loads(read_state(lake, table).to_json().replace(folder, "<table>/")))


def _timeless(state: dict[str, Any]) -> dict[str, Any]:
    """A replay state without when its files landed (each table's copy landed at its own time)."""
    for part in ("load", "cdc"):
        state[part].pop("written", None)
    state["load"].pop("digest", None)
    return state


@on_both_paths
@pytest.mark.parametrize(
    ("fast", "indexed"),
    [("auto", True), ("merge-on-read", True), ("merge-on-read", False)],
    ids=["auto", "merge-on-read", "merge-on-read-scanned"],
)
def test_the_row_delta_and_the_merge_leave_the_same_table_and_record(spark, lake, landing, monkeypatch, fast, indexed):
    """``indexed``: the row delta finds its keys' rows in the key index; else every table is too large to index,
    and each batch finds them by a Spark read of the files their range can touch (never the generic reader), and
    collects its keys' rows as Arrow, as a batch of many keys does."""
    from cdc_lake.engine import row_delta
    from cdc_lake.engine.key_index import KEY_INDEXES

    made: list[int] = []
    real = row_delta.commit_row_delta
    monkeypatch.setattr(row_delta, "commit_row_delta", lambda *args: made.append(real(*args)) or made[-1])
    if not indexed:
        monkeypatch.setattr(KEY_INDEXES, "most_keys", 0)
        monkeypatch.setattr(row_delta, "ARROW_COLLECT_KEYS", 0)

        def generic_reader(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("a batch read its keys' rows in the driver")

        monkeypatch.setattr(row_delta, "key_positions", generic_reader)

    @settings(
        max_examples=int(os.environ.get(EXAMPLES_ENV, "2")),
        deadline=None,
        phases=[Phase.generate],  # unshrunk: a failure is printed before the case's timeout could cut shrinking
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(batches)
    def same_table(case: tuple[list[Any], list[list[Any]]]) -> None:
        load, cdc = case
        schema = f"d{next(_examples)}"
        modes = {"merged": "copy-on-write", "fast": fast}
        config = _config(schema, modes)
        made.clear()
        for name in modes:
            folder = f"dms/{schema}/{name}/"
            paths = [folder + "LOAD00000001.csv"] + [f"{folder}20250301-12{n:02d}00000.csv" for n in range(len(cdc))]
            write_file(landing, paths[0], "".join(_row(None, k, v, STAMPS[0], None) for k, v in load))
            for path, batch in zip(paths[1:], cdc, strict=True):
                text = "".join(
                    _row("U" if op == "K" else op, key, values, stamp, old if op == "K" else None)
                    for op, key, old, values, stamp in batch
                )
                write_file(landing, path, text)
            for path in paths:
                result = lake.apply(config, path)
                assert result.applied_files == [path], (name, path)
        assert len(made) == len(cdc), "every batch into the fast table is a row delta"

        merged, fast_table = (f"{schema}_{name}" for name in modes)
        assert lake.rows(fast_table) == lake.rows(merged)
        assert [row[:2] for row in lake.rows(merged)] == _expected_keys(load, cdc)
        folders = [f"dms/{schema}/{name}/" for name in modes]
        records = [_record(lake, t, f) for t, f in zip((merged, fast_table), folders, strict=True)]
        for number, (one, other) in enumerate(zip(*records, strict=True)):
            differ = {k: (one.get(k), other.get(k)) for k in one.keys() | other.keys() if one.get(k) != other.get(k)}
            assert not differ, f"replay snapshot {number}: (merged, fast) {differ}"
        assert len(records[0]) == len(records[1]) == 1 + len(cdc)
        assert _state(lake, merged, folders[0]) == _state(lake, fast_table, folders[1])
        # How each commits is its own (the MERGE rewrites the files it touches); a row delta that deletes nothing
        # is an append, which incremental readers (a streaming read) take.
        for snapshot in snapshot_summaries(lake, fast_table)[1:]:
            deletes = int(snapshot["summary"].get("added-delete-files", 0))
            assert (snapshot["operation"] == "append") == (not deletes), snapshot

    same_table()
