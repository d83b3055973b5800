"""The key range a MERGE matches on: the batch's own, widened onto a grid so that it repeats from batch to batch
(Spark compiles integer literals into its code), never losing a key and never leaving the key's type."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import types as T

from cdc_lake.engine.commit import RANGE_GRID_MIN, gridded

LONGS = st.integers(-(1 << 63), (1 << 63) - 1)
INTS = st.integers(-(1 << 31), (1 << 31) - 1)


@given(st.one_of(st.tuples(INTS, INTS, st.just(T.IntegerType())), st.tuples(LONGS, LONGS, st.just(T.LongType()))))
def test_the_grid_holds_the_batchs_range_within_its_type_and_four_times_its_width(case) -> None:
    first, second, key_type = case
    low, high = sorted((first, second))
    bits = 31 if isinstance(key_type, T.IntegerType) else 63

    start, end = gridded(low, high, key_type)

    assert -(1 << bits) <= start <= low <= high <= end <= (1 << bits) - 1
    assert end - start + 1 <= max(4 * (high - low + 1), 2 * RANGE_GRID_MIN)


def test_batches_of_nearby_keys_share_one_range() -> None:
    ranges = {gridded(low, low + 90, T.LongType()) for low in range(9_300, 10_200, 100)}
    assert ranges == {(9_216, 11_263)}
    assert gridded(5, 9_000, T.IntegerType()) == gridded(40, 9_990, T.IntegerType()) == (0, 32_767)


def test_keys_spark_passes_by_reference_keep_their_own_range() -> None:
    assert gridded("a", "k", T.StringType()) == ("a", "k")
    assert gridded(Decimal("1.5"), Decimal("9.5"), T.DecimalType(10, 1)) == (Decimal("1.5"), Decimal("9.5"))
    day = dt.date(2026, 11, 28)
    assert gridded(day, day, T.DateType()) == (day, day)
