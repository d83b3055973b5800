"""Which warm run owns which table: every table exactly one shard, evenly, and growing the stack moves few."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdc_lake.core.config import parse_config
from cdc_lake.core.shards import shard_count, shard_of, tables_of

NAMES = [f"shop.table_{i:04d}" for i in range(1000)]


@given(st.text(min_size=1, max_size=40), st.integers(min_value=1, max_value=64))
def test_a_table_has_one_shard_within_range_and_always_the_same(table: str, shards: int) -> None:
    assert 0 <= shard_of(table, shards) < shards
    assert shard_of(table, shards) == shard_of(table, shards)


def test_1000_tables_spread_over_10_shards_evenly() -> None:
    sizes = Counter(shard_of(name, 10) for name in NAMES)
    assert set(sizes) == set(range(10))
    assert max(sizes.values()) <= 130 and min(sizes.values()) >= 70  # 100 each, give or take a third


@pytest.mark.parametrize("shards", [1, 3, 10])
def test_adding_a_shard_moves_only_the_tables_the_new_shard_takes_about_one_in_n_plus_one(shards: int) -> None:
    moved = [name for name in NAMES if shard_of(name, shards) != shard_of(name, shards + 1)]
    assert all(shard_of(name, shards + 1) == shards for name in moved)
    assert abs(len(moved) - len(NAMES) / (shards + 1)) < 0.25 * len(NAMES) / (shards + 1)


def test_a_hash_by_modulo_would_move_most_tables() -> None:
    """What the stable assignment spares: ``hash % n`` moves about n/(n+1) of the tables from 10 to 11 shards."""
    import hashlib

    def modulo(name: str, shards: int) -> int:
        return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big") % shards

    by_modulo = sum(modulo(name, 10) != modulo(name, 11) for name in NAMES)
    stable = sum(shard_of(name, 10) != shard_of(name, 11) for name in NAMES)
    assert by_modulo > 5 * stable


def test_the_configuration_makes_ceil_tables_over_tables_per_job_shards_and_tables_of_partitions_them() -> None:
    config = parse_config(
        {
            "runs": {"mode": "warm", "warm": {"tables_per_job": 100}},
            "tables": [
                {"name": name, "primary_key": ["id"], "columns": [{"name": "id", "type": "bigint"}]}
                for name in NAMES[:250]
            ],
        }
    )
    assert shard_count(config) == 3
    owned = [t.name for shard in range(3) for t in tables_of(config, shard)]
    assert sorted(owned) == sorted(NAMES[:250])


def test_no_shards_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        shard_of("shop.orders", 0)
