"""What a run carries down once: the context every step needs, and the one table's batch it applies."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pyspark.sql import types as T

from cdc_lake.core.config import PipelineConfig, TableSpec
from cdc_lake.core.dms_files import DmsFile, LandedFiles
from cdc_lake.core.plan import ReplayState, RunPlan
from cdc_lake.core.storage import ObjectStore
from cdc_lake.engine.tables import Lake


@dataclass(frozen=True)
class LakeContext(Lake):
    """A lake and the configuration its tables follow: what maintenance and exports need."""

    config: PipelineConfig


@dataclass(frozen=True)
class ReplayContext(LakeContext):
    """A lake context and where DMS files land: what every step of a run needs; ``admit``, when given, sees each
    planned batch before it reads a file, and may refuse it by raising (a warm run hands large batches over)."""

    store: ObjectStore
    admit: Callable[[Batch], None] | None = None


@dataclass(frozen=True)
class Batch:
    """One table's batch as planned: the trigger it goes up to, the listing it planned from, the plan of the lake
    table and of its history (each from the base snapshot it names, which its commit must still find), the lake
    table's recorded state, and where the next run may start listing (``plan.listing_start``).

    History keeps its own record of applied files: after a run stopped between the two commits it is ahead, and
    its plan has less (or nothing) pending.
    """

    trigger: DmsFile
    landed: LandedFiles
    plan: RunPlan
    history_plan: RunPlan | None
    state: ReplayState
    next_listing_start: str | None
    started: float  # time.monotonic() when the run began: the commit records how long its batch took
    # The lake table's columns and its base snapshot's summary, read with its state: not loaded again.
    lake_fields: tuple[T.StructField, ...]
    base_summary: Mapping[str, str]
    history_summary: Mapping[str, str] = field(default_factory=dict)  # the history table's base, when kept

    @property
    def table(self) -> TableSpec:
        return self.plan.table

    @property
    def history_pending(self) -> list[DmsFile]:
        return self.history_plan.pending if self.history_plan is not None else []

    @property
    def files(self) -> list[DmsFile]:
        """Every file the batch reads, for the table or its history, in DMS order."""
        files = {f.key: f for f in [*self.plan.pending, *self.history_pending]}
        return sorted(files.values(), key=lambda f: f.order_key)

    @property
    def nothing_pending(self) -> bool:
        return not self.plan.pending and not self.history_pending
