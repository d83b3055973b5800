"""What a caller adds to a run of rounds (``DrainHooks``), and what a long-lived run adds to a coalesced one
(``Shift``, which ``warm.WarmShift`` is): tables handed to other runs, a watch on each batch, and the stop protocol
around its last look at the landing."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from cdc_lake.core.config import TableSpec
from cdc_lake.core.exceptions import HandOver
from cdc_lake.engine.replay import RunResult
from cdc_lake.engine.runs.events import Landings


class Shift(Protocol):
    """What a long-lived run adds to a coalesced one (``runs.warm``): tables handed to other runs, a watch on each
    batch, and the stop protocol around its last look at the landing."""

    @property
    def landings(self) -> Landings | None:
        """Which tables files landed for, as the Lambda tells (``events``): then a round lists only those, and all of
        them now and then; None: every round lists every table."""
        ...

    def busy(self, table: str) -> bool:
        """Whether a run the table was handed to still lives: the table is left to it."""
        ...

    def hand_over(self, handover: HandOver) -> None: ...

    def watch(self, table: str) -> AbstractContextManager[None]:
        """Around one table's batch."""
        ...

    def holding(self) -> bool:
        """Whether a run it handed a table to still lives: a quiet run waits for it, then takes the table back, since
        files of the table landing meanwhile are this run's to apply."""
        ...

    def stopping(self) -> None:
        """Said before the run's last look at the landing: files landing after it are not this run's."""
        ...

    def resumed(self) -> None:
        """The last look found work: the run goes on, and ``stopping`` no longer holds."""
        ...

    def must_end(self) -> bool:
        """Whether the run ends as if its lifetime were spent, after its last look, within a round: a run of another
        configuration (a deployment) asked for the shard, or a batch outlived its bound."""
        ...

    def refused(self, table: TableSpec) -> None:
        """The table's batch was refused in this round: it is left out of the next rounds until ``fixed``."""
        ...

    def fixed(self, table: TableSpec) -> bool:
        """Whether a table refused earlier in the run may be tried again in the next round (its refusal was lifted:
        ``cdc-lake reload``), so that a fix takes effect within a round, not when the run ends."""
        ...


@dataclass(frozen=True)
class DrainHooks:
    """What a caller adds to a run: ``on_batch`` sees every committed batch, ``on_round(round, commits)`` every
    finished round, ``on_refusal(table, error)`` every refused batch as it is refused; a ``shift`` makes it a
    long-lived run's (``runs.warm``)."""

    on_batch: Callable[[RunResult], None] | None = None
    on_round: Callable[[int, int], None] | None = None
    shift: Shift | None = None
    on_refusal: Callable[[str, str], None] | None = None

    def also(self, other: DrainHooks) -> DrainHooks:
        """These hooks, then ``other``'s, at each call; this one's ``shift``, else the other's."""
        return DrainHooks(
            _both(self.on_batch, other.on_batch),
            _both(self.on_round, other.on_round),
            self.shift or other.shift,
            _both(self.on_refusal, other.on_refusal),
        )


def _both(first: Callable[..., None] | None, second: Callable[..., None] | None) -> Callable[..., None] | None:
    if first is None or second is None:
        return first or second

    def both(*args: Any) -> None:
        first(*args)
        second(*args)

    return both


NO_HOOKS = DrainHooks()
