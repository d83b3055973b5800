"""The first cut of an integer key (``verify._Grid``): every key lands in exactly one bucket, the bucket whose
range holds it, computed as the databases and Spark compute it (a comparison, a subtraction and a shift)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cdc_lake.ops.verify import MAX_GRID, _Grid, _grid, _Range

LONG = st.integers(min_value=-(1 << 62), max_value=(1 << 61))


def bucket(grid: _Grid, key: int) -> int:
    """What grid_sums' SQL and Spark expressions give for ``key``."""
    if key < grid.low:
        return -1
    if key >= grid.end:
        return grid.count
    return (key - grid.low) >> grid.shift


def holds(part: _Range, key: int) -> bool:
    return (part.low is None or key >= part.low) and (part.high is None or key < part.high)


@given(
    rows=st.integers(min_value=1, max_value=10**9),
    low=LONG,
    span=st.integers(min_value=0, max_value=(1 << 61)),
    leaf=st.integers(min_value=1, max_value=100_000),
    offsets=st.lists(st.integers(min_value=-(1 << 20), max_value=(1 << 62)), min_size=1, max_size=20),
)
def test_each_key_falls_in_the_one_bucket_whose_range_holds_it(
    rows: int, low: int, span: int, leaf: int, offsets: list[int]
) -> None:
    grid = _grid(rows, low, low + span, leaf)
    assert grid is not None
    assert grid.count <= 2 * MAX_GRID and grid.end > low + span  # the source's keys all fall inside the grid
    for key in [low, low + span, *(low + offset for offset in offsets)]:
        index = bucket(grid, key)
        assert holds(grid.part(index), key), (grid, key, index)
        neighbours = [other for other in (index - 1, index + 1) if -1 <= other <= grid.count]
        assert not any(holds(grid.part(other), key) for other in neighbours), (grid, key, index)


def test_no_grid_for_an_empty_table_or_a_span_beyond_exact_arithmetic() -> None:
    assert _grid(0, 1, 10, 2_000) is None
    assert _grid(5, None, None, 2_000) is None
    assert _grid(5, -(1 << 62), 1 << 62, 2_000) is None


def test_buckets_hold_about_half_a_leaf_of_even_keys() -> None:
    grid = _grid(10_000_000, 1, 10_000_000, 2_000)
    assert grid is not None
    assert (grid.shift, grid.count) == (10, 9_766)  # 1,024 keys a bucket: at most 1,024 rows listed per drifted key
