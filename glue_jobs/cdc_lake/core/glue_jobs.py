"""The stack's Glue jobs, in one table: packaging, the CDK stack, the deployed runner (``glue-run``, ``aws-replay``)
and the tests read it, and nothing counts the jobs by hand.

A job's row names its script (``glue_jobs/<name>.py``, whose entry is in ``cdc_lake.jobs``), declares its arguments
(``cdc_lake.core.job_arguments``) and says in which network it runs; its sizing and rights are the stack's
(``infra/glue.py``, ``infra/source_check.py``). Of these jobs the trigger Lambda starts only the replay jobs,
``core.names.TRIGGERED_JOBS``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from cdc_lake.core.job_arguments import (
    DriftArguments,
    JobArguments,
    LakeArguments,
    MaintenanceArguments,
    ReplayArguments,
    SourceCheckArguments,
    WarmArguments,
)
from cdc_lake.core.names import TRIGGERED_JOBS, WARM_JOB

# lake: Glue's own network, the lake jobs' role (infra/glue.py); source: the source's network, with roles of
# their own that may read its secret (infra/source_check.py).
JobNetwork = Literal["lake", "source"]


@dataclass(frozen=True)
class GlueJobFacts:
    """One Glue job of the stack: its name, the arguments it reads, its network, what its stack output says it
    does, and the names of further jobs the stack makes of the same script (with other rights)."""

    name: str
    arguments: type[JobArguments]
    network: JobNetwork
    summary: str
    twins: tuple[str, ...] = ()

    @property
    def script(self) -> str:
        """Its script's file name, in ``glue_jobs/``; CDK stages it as the asset ``Script-<name>``."""
        return f"{self.name}.py"

    @property
    def resource_name(self) -> str:
        """Its deployed name after the stack's prefix: ``<prefix>-full-load``."""
        return self.name.replace("_", "-")

    @property
    def resource_names(self) -> tuple[str, ...]:
        """The deployed names of every job the stack makes of its script."""
        return (self.resource_name, *self.twins)

    @property
    def construct_id(self) -> str:
        """Its construct id (``FullLoadJob``), which its logical id holds; its stack output is ``<id>Name``."""
        return "".join(part.title() for part in self.name.split("_")) + "Job"

    @property
    def triggered(self) -> bool:
        """Started by the trigger Lambda for landed files (else by a schedule or by hand; the warm job by the Lambda
        too, in runs.mode warm only: ``warm``)."""
        return self.name in TRIGGERED_JOBS

    @property
    def warm(self) -> bool:
        """The long-lived replay of runs.mode warm: a ``gluestreaming`` job on G.025X workers, made only in that
        mode."""
        return self.name == WARM_JOB

    @property
    def reads_lake(self) -> bool:
        return issubclass(self.arguments, LakeArguments)


GLUE_JOBS: Mapping[str, GlueJobFacts] = MappingProxyType(
    {
        job.name: job
        for job in (
            GlueJobFacts("full_load", ReplayArguments, "lake", "applying full-load files"),
            GlueJobFacts("cdc_replay", ReplayArguments, "lake", "replaying CDC files"),
            GlueJobFacts(WARM_JOB, WarmArguments, "lake", "replaying CDC files warm, one run per shard of tables"),
            GlueJobFacts("maintenance", MaintenanceArguments, "lake", "compacting and expiring the lake tables"),
            GlueJobFacts(
                "source_check", SourceCheckArguments, "source", "checking the configuration against the source"
            ),
            GlueJobFacts(
                "drift", DriftArguments, "source", "verifying the lake against the source (read only)", ("repair",)
            ),
        )
    }
)
JOB_NAMES: tuple[str, ...] = tuple(GLUE_JOBS)
