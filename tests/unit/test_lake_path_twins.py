"""Which cases make test leaves: to make soak, only a Hadoop-path case whose Glue-path twin (same test, same other
parameters) runs, whatever the parameter naming the path is called; to Glue 5.1's suite, on Glue 6.0's, the cases
the runtime cannot change."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from tests.support.lake import hadoop_twins, runtime_independent


def case(test: str, module: str = "functional/test_x.py", marks: tuple[str, ...] = (), **params: Any) -> Any:
    label = "-".join(map(str, params.values()))
    nodeid = f"tests/{module}::{test}" + (f"[{label}]" if params else "")
    item = SimpleNamespace(nodeid=nodeid, get_closest_marker=lambda name: name if name in marks else None)
    if params:
        item.callspec = SimpleNamespace(params=params)
    return item


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


def test_a_second_runtime_keeps_the_pure_the_glue_path_and_the_runtimes_own_cases() -> None:
    kept = [
        case("test_pure", module="unit/test_x.py"),
        case("test_a", lake="glue"),
        case("test_deployed", marks=("glue_path",)),
        case("test_spark_parsing", marks=("each_runtime",)),
    ]
    left = [
        case("test_a", lake="hadoop"),
        case("test_local_only"),
        case("test_stack", module="infra/test_x.py"),
        case("test_capture", module="pg/test_x.py"),
    ]
    assert runtime_independent([*kept, *left]) == left
