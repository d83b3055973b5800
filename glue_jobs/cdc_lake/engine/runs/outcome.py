"""What a run did, whichever its mode: its tables' batches, its failures, its rounds, and what it saw still
waiting at its end."""

from __future__ import annotations

from dataclasses import dataclass, field

from cdc_lake.core.notices import Notice, unique
from cdc_lake.engine.replay import RunResult
from cdc_lake.engine.runs.waiting import Waiting


@dataclass
class DrainResult:
    """What one run did: a result per table batch (no-op checks included), the failed tables, and its rounds."""

    results: list[RunResult] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)
    rounds: int = 0
    seconds: float = 0.0
    surveyed: list[Notice] = field(default_factory=list)  # what the run found beside its tables' folders
    waiting: Waiting = field(default_factory=Waiting)  # what the run saw still waiting at its end

    @property
    def notices(self) -> list[Notice]:
        """Everything the run announced, each once: its tables' batches' notices and its survey's."""
        return unique([*self.surveyed, *(n for r in self.results for n in r.notices)])

    @property
    def applied_files(self) -> list[str]:
        return [key for result in self.results for key in result.applied_files]

    @property
    def already_applied(self) -> bool:
        return not self.failures and all(result.already_applied for result in self.results)

    @property
    def commits(self) -> list[RunResult]:
        return [r for r in self.results if not r.already_applied]
