"""The default tier's time budget: every case of ``make test`` within 60 s (its setup, call and teardown) on
this workplace's 2-core machine. A case that grows past it belongs in ``make soak`` (docs/testing.md). The
session's shared servers (Spark, the local AWS endpoint, Trino) are not charged to the case that happens to start
them first.

Machines here differ by 2-3x in speed, so the limit a run enforces is the budget times how much slower than the
reference machine this one computes (a fixed pure-Python workload, timed in CPU seconds so the busy other worker
does not count): a slow machine does not fail for being slow, a case that grew fails everywhere. The run fails
only past half as much again (``TOLERANCE``): what the other worker runs beside a case moves its time, and one case
took 55 s and 88 s in two runs of one commit. Every case over its budget is listed as well. A case may carry a
budget of its own (``@pytest.mark.budget(seconds)``), said and justified in docs/testing.md. A case's hard
timeout (pytest-timeout, there to stop a hang) never falls below the time its budget lets it take on this machine,
so a slow machine lists a slow case instead of killing it.
``CDC_LAKE_CASE_SECONDS`` sets the budget, 0 turns the check off (``make soak``); ``CDC_LAKE_MACHINE_FACTOR``
overrides the measured factor.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from collections import defaultdict
from collections.abc import Iterator

import pytest
import pytest_timeout

BUDGET_ENV = "CDC_LAKE_CASE_SECONDS"
FACTOR_ENV = "CDC_LAKE_MACHINE_FACTOR"
DEFAULT_BUDGET = 60.0
TOLERANCE = 1.5  # a budget times the machine's factor times this fails the run
# A hard timeout sits this much past a case's limit, so the case ends over its limit (and is named) before it is cut.
TIMEOUT_MARGIN = 1.2
# CPU seconds the workload below took on the reference machine (this workplace's 2-core machine, 2026-12-02).
REFERENCE_SECONDS = 0.26


def _workload() -> float:
    """CPU seconds of a fixed mix of interpreter work and hashing, the best of three."""
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        total = 0
        for i in range(3_000_000):
            total += i % 7
        digest = b"cdc-lake"
        for _ in range(200_000):
            digest = hashlib.sha256(digest * 16).digest()
        best = min(best, time.process_time() - start)
    return best


def machine_factor() -> float:
    """How much slower than the reference this machine computes, never below 1."""
    if os.environ.get(FACTOR_ENV):
        return float(os.environ[FACTOR_ENV])
    return max(1.0, _workload() / REFERENCE_SECONDS)


SHARED_SETUP = "cdc_lake_shared_setup"  # a report's seconds spent starting session-scoped fixtures
OWN_BUDGET = "cdc_lake_own_budget"  # a case's own budget, from its ``budget`` mark


class SharedSetup:
    """Where the cases run (each pytest-xdist worker), tells each report how long it spent starting the session's
    shared fixtures; the attribute travels to the controller with the report."""

    def __init__(self) -> None:
        self.seconds = 0.0

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[object]) -> Iterator[None]:
        start = time.perf_counter()
        yield
        if fixturedef.scope == "session":
            self.seconds += time.perf_counter() - start

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
        outcome = yield
        report = outcome.get_result()
        # A server a case starts in its own body (Trino beside a replay) may overlap the case's work: it counts.
        setattr(report, SHARED_SETUP, self.seconds if call.when == "setup" else 0.0)
        self.seconds = 0.0
        if (mark := item.get_closest_marker("budget")) is not None:
            setattr(report, OWN_BUDGET, float(mark.args[0]))


class CaseTimeouts:
    """Where the cases run, raises each case's hard timeout to its budget times this machine's limit."""

    def __init__(self, budget: float, factor: float) -> None:
        self.budget = budget
        self.factor = factor

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            own = item.get_closest_marker("budget")
            limit = (float(own.args[0]) if own else self.budget) * self.factor * TOLERANCE * TIMEOUT_MARGIN
            mark = item.get_closest_marker("timeout")
            configured = mark.args[0] if mark and mark.args else pytest_timeout.get_env_settings(item.config).timeout
            if configured and configured < limit:
                item.add_marker(pytest.mark.timeout(math.ceil(limit)), append=False)


class CaseBudget:
    """Sums each case's phases as the reports arrive (on pytest-xdist's controller, from every worker)."""

    def __init__(self, budget: float, factor: float) -> None:
        self.budget = budget
        self.factor = factor
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.own: dict[str, float] = {}  # cases with a budget of their own (the ``budget`` mark)

    @property
    def limit_factor(self) -> float:
        return self.factor * TOLERANCE

    def allowed(self, nodeid: str) -> float:
        return self.own.get(nodeid, self.budget)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid] += report.duration - getattr(report, SHARED_SETUP, 0.0)
        if hasattr(report, OWN_BUDGET):
            self.own[report.nodeid] = getattr(report, OWN_BUDGET)

    def over(self, factor: float = 1.0) -> list[tuple[str, float]]:
        """The cases over their budget times ``factor``, slowest first."""
        cases = ((n, s) for n, s in self.seconds.items() if s > self.allowed(n) * factor)
        return sorted(cases, key=lambda case: -case[1])

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        listed = self.over()
        if not listed:
            return
        terminalreporter.section(f"cases over the {self.budget:g} s budget (docs/testing.md: move them to make soak)")
        for nodeid, seconds in listed:
            own = f" (its own budget: {self.own[nodeid]:g} s)" if nodeid in self.own else ""
            failing = " (over this machine's limit)" if seconds > self.allowed(nodeid) * self.limit_factor else ""
            line = f"{seconds:7.1f} s  {nodeid}{own}{failing}"
            terminalreporter.write_line(line, red=bool(failing), yellow=not failing)
        terminalreporter.write_line(
            f"this machine computes {self.factor:.2f}x the reference's time: the run fails past a budget times "
            f"{self.limit_factor:.2f}"
        )

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.over(self.limit_factor) and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_configure(config: pytest.Config) -> None:
    budget = float(os.environ.get(BUDGET_ENV, DEFAULT_BUDGET))
    if budget <= 0:
        return
    # Measured once, by the controller: its workers inherit the environment, so each case's timeout and the check
    # use one factor.
    factor = machine_factor()
    os.environ[FACTOR_ENV] = repr(factor)
    config.pluginmanager.register(SharedSetup(), "cdc_lake_shared_setup")  # idle where no case runs
    config.pluginmanager.register(CaseTimeouts(budget, factor), "cdc_lake_case_timeouts")
    # Only the process that reports (pytest-xdist's controller, or a run without workers) checks.
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(CaseBudget(budget, factor), "cdc_lake_case_budget")
