"""make test's budget (tests/support/budget.py): a case over it is listed, and past this machine's limit the run
fails though every case passed."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytest_plugins = ["pytester"]

SLOW_CASE = """
import time

import pytest


@pytest.fixture(scope="session")
def server():
    time.sleep(0.3)  # a shared server starting: not the case's own time


def test_slow():
    time.sleep(0.3)


def test_fast(server):
    pass
"""


def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, factor: str, *args: str) -> pytest.RunResult:
    monkeypatch.setenv("CDC_LAKE_CASE_SECONDS", "0.1")
    monkeypatch.setenv("CDC_LAKE_MACHINE_FACTOR", factor)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    pytester.makepyfile(test_cases=SLOW_CASE)
    return pytester.runpytest_subprocess("-p", "tests.support.budget", *args)


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["one-process", "xdist"])
def test_a_case_past_the_limit_fails_the_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: tuple[str, ...]
) -> None:
    result = run(pytester, monkeypatch, "1", *workers)
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["*cases over the 0.1 s budget*", "*test_cases.py::test_slow (over this machine's limit)"]
    )
    assert "test_fast" not in result.stdout.str()


def test_a_slower_machine_lists_the_case_and_passes(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    result = run(pytester, monkeypatch, "10")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*test_cases.py::test_slow", "*computes 10.00x the reference's time*"])


def test_a_case_with_a_budget_of_its_own_is_held_to_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CDC_LAKE_CASE_SECONDS", "0.1")
    monkeypatch.setenv("CDC_LAKE_MACHINE_FACTOR", "1")
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    pytester.makepyfile(test_cases=SLOW_CASE.replace("def test_slow", "@pytest.mark.budget(0.15)\ndef test_slow"))
    result = pytester.runpytest_subprocess("-p", "tests.support.budget", "-n", "2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*test_cases.py::test_slow (its own budget: 0.15 s) (over this machine's limit)"])
    pytester.makepyfile(test_cases=SLOW_CASE.replace("def test_slow", "@pytest.mark.budget(5)\ndef test_slow"))
    assert pytester.runpytest_subprocess("-p", "tests.support.budget").ret == pytest.ExitCode.OK


def test_a_budget_of_0_checks_nothing(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CDC_LAKE_CASE_SECONDS", "0")
    monkeypatch.setenv("CDC_LAKE_MACHINE_FACTOR", "1")
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    pytester.makepyfile(test_cases=SLOW_CASE)
    result = pytester.runpytest_subprocess("-p", "tests.support.budget")
    assert result.ret == pytest.ExitCode.OK
    assert "cases over" not in result.stdout.str()


LONG_CASE = """
import time

import pytest


@pytest.mark.budget(1)
def test_within_its_budget_on_this_machine():
    time.sleep(1.5)


@pytest.mark.budget(0.1)
def test_hung():
    time.sleep(30)
"""


def test_a_slow_machine_raises_the_hard_timeout_to_the_budgets_limit_and_still_stops_a_hang(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CDC_LAKE_MACHINE_FACTOR", "1.2")
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    pytester.makepyfile(test_cases=LONG_CASE)
    # A 1 s timeout: the first case may take 1 × 1.2 × 1.5 s here, the hung one 0.1 × 1.2 × 1.5 × 1.2 s at most.
    result = pytester.runpytest_subprocess("-p", "tests.support.budget", "--timeout", "1", "-n", "2")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_hung*Timeout*"])
