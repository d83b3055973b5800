"""Property: a decimal text is taken exactly when it fits the configured decimal, and refused when the cast would
round it or it overflows (real Spark; ``strict_parse`` only), against Python's exact decimal arithmetic."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation, localcontext

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cdc_lake.engine.spark_types import strict_parse

pytestmark = [pytest.mark.spark, pytest.mark.each_runtime]

PRECISION, SCALE = 6, 2
digits = st.text(alphabet="0123456789", max_size=5)
exponent = st.one_of(
    st.just(""),
    st.just(""),
    st.just(""),
    st.builds("{}{}{}".format, st.sampled_from("eE"), st.sampled_from(["", "+", "-"]), st.integers(0, 12)),
)
# The grammar a decimal cast accepts (sign, digits, point, exponent, surrounding blanks), around the scale and
# the precision; fractions of up to 5 digits (the wide parse that shows rounding keeps 30 here).
number = st.builds(
    "{}{}{}{}{}{}{}".format,
    st.sampled_from(["", " "]),
    st.sampled_from(["", "+", "-"]),
    digits,
    st.sampled_from(["", "."]),
    digits,
    exponent,
    st.sampled_from(["", " ", "\t"]),
)


def exact(text: str) -> Decimal | None:
    """The value the text holds when decimal(6,2) holds it exactly, else None (the oracle)."""
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        return None
    if abs(value) >= Decimal(10) ** (PRECISION - SCALE):
        return None
    with localcontext(prec=100):
        return value if value == value.quantize(Decimal(1).scaleb(-SCALE)) else None


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(number, min_size=1, max_size=300))
@example(texts=["1.005", "1.250", "1.25 ", "1.2e-1", "12E-3", "9999.995", "1.", ".5", "-0.001", "12345", "1e4"])
def test_decimal_texts_are_taken_exactly_or_refused(spark, texts):
    value, fault = strict_parse("text", f"decimal({PRECISION},{SCALE})")
    rows = spark.createDataFrame([(t,) for t in texts], "text string").select(
        "text", value.alias("v"), fault.alias("f")
    )
    for row in rows.collect():
        expected = exact(row["text"])
        if expected is None:
            assert row["f"], f"{row['text']!r} was taken as {row['v']}"
        else:
            assert not row["f"] and row["v"] == expected, f"{row['text']!r}: {row['v']} (refused: {row['f']})"
