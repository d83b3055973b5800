"""Property: reducing any interleaving of I/U/D changes to the last change per key, then applying it,
gives the table a change-by-change replay gives (real Spark; the reduction only, no Iceberg)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdc_lake.engine.changes import last_change_per_key
from tests.support.configs import one_table_config, table_data

pytestmark = [pytest.mark.spark, pytest.mark.each_runtime]

TABLE = one_table_config(table_data("s.t", ["k1", "k2"], k1="int", k2="string", v="string")).tables[0]
SCHEMA = "_phase int, _op string, _change_seq string, k1 int, k2 string, v string, _file_seq int, _row long"

keys = st.tuples(st.integers(0, 3), st.sampled_from(["a", "b"]))
change = st.tuples(st.sampled_from("IUD"), keys, st.text(alphabet="xyz", max_size=2))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    load=st.dictionaries(keys, st.text(alphabet="xyz", max_size=2), max_size=6),
    files=st.lists(st.lists(change, max_size=12), min_size=1, max_size=4),
    row_gap=st.integers(1, 1 << 33),
)
def test_last_change_per_key_equals_replay(spark, load, files, row_gap):
    rows = [(0, "I", None, k1, k2, v, 0, i * row_gap) for i, ((k1, k2), v) in enumerate(load.items())]
    expected = dict(load)
    for file_seq, changes in enumerate(files, start=1):
        # Row positions only increase within a file; their size and offset carry no meaning.
        for position, (op, key, value) in enumerate(changes):
            rows.append((1, op, None, key[0], key[1], value, file_seq, 7 + position * row_gap))
            if op == "D":
                expected.pop(key, None)
            else:
                expected[key] = value
    if not rows:
        return
    frame = spark.createDataFrame(rows, SCHEMA).repartition(3)
    reduced = last_change_per_key(frame, TABLE, use_change_sequence=False).collect()
    table = dict(load)
    for row in reduced:
        if row["_op"] == "D":
            table.pop((row["k1"], row["k2"]), None)
        else:
            table[(row["k1"], row["k2"])] = row["v"]
    assert table == expected
    assert len(reduced) == len({(r["k1"], r["k2"]) for r in reduced})
