"""Which cases Glue 6.0's run leaves to 5.1: only a Hadoop-path case whose Glue-path twin (same test, same other
parameters) runs, whatever the parameter naming the path is called."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from tests.support.lake import hadoop_twins


def case(test: str, **params: Any) -> Any:
    label = "-".join(map(str, params.values()))
    nodeid = f"tests/functional/test_x.py::{test}" + (f"[{label}]" if params else "")
    return (
        SimpleNamespace(nodeid=nodeid, callspec=SimpleNamespace(params=params))
        if params
        else SimpleNamespace(nodeid=nodeid)
    )


def names(items: list[Any]) -> list[str]:
    return [item.nodeid.split("::")[1] for item in items]


def test_a_hadoop_case_with_a_glue_twin_is_left_whatever_its_parameter_is_called() -> None:
    items = [case("test_a", lake="hadoop"), case("test_a", lake="glue"), case("test_b", replayed="hadoop"),
             case("test_b", replayed="glue")]  # fmt: skip
    assert names(hadoop_twins(items)) == ["test_a[hadoop]", "test_b[hadoop]"]


def test_the_other_parameters_must_match() -> None:
    items = [case("test_c", fmt="csv", lake="hadoop"), case("test_c", fmt="parquet", lake="hadoop"),
             case("test_c", fmt="csv", lake="glue")]  # fmt: skip
    assert names(hadoop_twins(items)) == ["test_c[csv-hadoop]"]


def test_a_hadoop_case_without_a_glue_twin_and_an_unparametrized_test_stay() -> None:
    items = [
        case("test_d", lake="hadoop"),
        case("test_e"),
        case("test_f", lake="glue"),
        case("test_g", fmt="hadoop-ish"),
    ]
    assert hadoop_twins(items) == []
