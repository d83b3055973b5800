"""A warm run's shift for tests of ``coalesced.drain`` on a clock of their own, without Spark."""

from __future__ import annotations

from contextlib import nullcontext

from cdc_lake.engine.runs.events import Landings


class QuietShift:
    """A shift that hands nothing over and is never asked to end: what it is told (``said``). ``landings``: the
    shard's event queue, None for none (every round lists every table)."""

    def __init__(self, landings: Landings | None = None) -> None:
        self.said: list[str] = []
        self.landings = landings

    def busy(self, table: str) -> bool:
        return False

    def hand_over(self, handover: object) -> None:
        raise AssertionError(handover)

    def watch(self, table: str) -> nullcontext[None]:
        return nullcontext()

    def holding(self) -> bool:
        return False

    def stopping(self) -> None:
        self.said.append("stopping")

    def resumed(self) -> None:
        self.said.append("resumed")

    def must_end(self) -> bool:
        return False

    def refused(self, table: object) -> None:
        raise AssertionError(table)

    def fixed(self, table: object) -> bool:
        return False
