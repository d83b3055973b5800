"""A refusal's message without the data's values, the form kept where more people read it than may read the data
(the lake table's ``cdc-lake.refused`` property): each bad row's file, row, column and fault stay, its value goes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cdc_lake.core.exceptions import CdcLakeError, DmsInputError, SchemaChangeError

KEY = "dms/shop/items/20250101-000000000.csv"


def problem(row: int, column: str, fault: str, value: str | None) -> str:
    """A bad row's line as engine.changes.describe_problems writes it."""
    shown = "NULL" if value is None else repr(value)
    return f"{KEY}: row {row}, column {column}: {fault} (value {shown})"


def test_each_value_is_withheld_and_the_rest_kept() -> None:
    error = DmsInputError(
        "shop.items",
        [
            problem(2, "price", "cannot parse as decimal(6,2)", "12345.67"),
            problem(3, "note", "cannot parse as date", "it's \"secret\") (value 'x'"),
            problem(4, "id", "NULL primary key", None),
            problem(5, "ssn", "cannot parse as bigint", "123-45-6789") + " [shop.items_rejects]",
        ],
        total=12,
        quarantinable=False,
    )
    shown = error.without_values()
    assert shown == str(error).replace("'12345.67'", "withheld").replace(
        repr("it's \"secret\") (value 'x'"), "withheld"
    ).replace("'123-45-6789'", "withheld")
    assert f"{KEY}: row 2, column price: cannot parse as decimal(6,2) (value withheld)\n" in shown
    assert f"{KEY}: row 3, column note: cannot parse as date (value withheld)\n" in shown
    assert f"{KEY}: row 4, column id: NULL primary key (value NULL)\n" in shown  # no value to hide
    assert f"{KEY}: row 5, column ssn: cannot parse as bigint (value withheld) [shop.items_rejects]\n" in shown
    assert "… and 8 more" in shown and "cannot be quarantined" in shown
    for value in ("12345.67", "secret", "123-45-6789"):
        assert value in str(error) and value not in shown


@given(st.text(min_size=1))
def test_no_text_a_row_holds_survives(value: str) -> None:
    error = DmsInputError("shop.items", [problem(7, "note", "cannot parse as bigint", value)])
    assert error.problems[0] in str(error)
    lines = error.without_values().splitlines()
    assert lines[1] == f"  {KEY}: row 7, column note: cannot parse as bigint (value withheld)"
    assert len(lines) == 3  # a value's line break does not reach past its line either


def test_a_line_of_another_shape_loses_everything_from_its_value_on() -> None:
    error = DmsInputError("shop.items", [f"{KEY}: row 1, column id: out of range (value 40000, a smallint)"])
    assert f"{KEY}: row 1, column id: out of range (value withheld)\n" in error.without_values()
    assert "40000" not in error.without_values()


def test_other_refusals_quote_no_value_and_keep_their_message() -> None:
    error: CdcLakeError = SchemaChangeError("shop.items: column price changed from int to string")
    assert error.without_values() == str(error)
