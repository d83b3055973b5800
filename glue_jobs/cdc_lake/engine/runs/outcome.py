"""What a run did, whichever its mode: its tables' batches, its failures, its rounds, and what it saw still
waiting at its end."""

from __future__ import annotations

from dataclasses import dataclass, field

from cdc_lake.core.notices import Notice, unique
from cdc_lake.engine.replay import RunResult
from cdc_lake.engine.runs.waiting import Waiting

# A long-lived run keeps this many of its newest batches' results; the older are counted (``DrainResult.fold``).
KEPT_RESULTS = 1_000


@dataclass
class DrainResult:
    """What one run did: a result per table batch (no-op checks included), the failed tables, and its rounds. A
    long-lived run keeps its newest ``KEPT_RESULTS`` batches and counts the others (``fold``): a warm run makes
    hundreds of thousands of batches in a day."""

    results: list[RunResult] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)
    rounds: int = 0
    seconds: float = 0.0
    surveyed: list[Notice] = field(default_factory=list)  # what the run found beside its tables' folders
    waiting: Waiting = field(default_factory=Waiting)  # what the run saw still waiting at its end
    folded_commits: int = 0  # of the batches no longer kept
    folded_files: int = 0
    folded_notices: list[Notice] = field(default_factory=list)

    def add(self, results: list[RunResult], *, long_lived: bool) -> None:
        self.results.extend(results)
        if long_lived:
            self.fold()

    def fold(self, keep: int = KEPT_RESULTS) -> None:
        """Keep the newest ``keep`` results; count the older ones' commits and files, and keep their notices, each
        once (the run's announcements are never dropped)."""
        if len(self.results) <= keep:
            return
        older, self.results = self.results[:-keep], self.results[-keep:]
        self.folded_commits += sum(1 for r in older if not r.already_applied)
        self.folded_files += sum(len(r.applied_files) for r in older)
        self.folded_notices = unique([*self.folded_notices, *(n for r in older for n in r.notices)])

    @property
    def notices(self) -> list[Notice]:
        """Everything the run announced, each once: its tables' batches' notices and its survey's."""
        return unique([*self.surveyed, *self.folded_notices, *(n for r in self.results for n in r.notices)])

    @property
    def applied_files(self) -> list[str]:
        """The files of the batches kept (all of them, but for a long-lived run's)."""
        return [key for result in self.results for key in result.applied_files]

    @property
    def applied_count(self) -> int:
        return self.folded_files + sum(len(r.applied_files) for r in self.results)

    @property
    def already_applied(self) -> bool:
        return not self.failures and not self.folded_commits and all(r.already_applied for r in self.results)

    @property
    def commits(self) -> list[RunResult]:
        """The commits of the batches kept (all of them, but for a long-lived run's)."""
        return [r for r in self.results if not r.already_applied]

    @property
    def commit_count(self) -> int:
        return self.folded_commits + len(self.commits)
