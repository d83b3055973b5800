"""The run modes (``runs.mode``), in one table: which job applies a table's CDC files, on which workers, what one of
its runs takes, and how the trigger Lambda starts it (docs/runs.md). The Lambda, the jobs, the configuration and the
stack read a mode's row (``RunSettings.run_mode``) instead of testing its name; each mode's run is a module of its
own, ``engine/runs/<name>.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum, auto
from types import MappingProxyType
from typing import Literal

from cdc_lake.core.names import TRIGGERED_JOBS, WARM_JOB, StartedJob

RunModeName = Literal["coalesced", "per_file", "warm"]

# Glue's smallest worker, a quarter DPU (2 vCPU, 4 GB), "only available for Glue version 3.0 or later streaming
# jobs" (the Glue API reference's WorkerType, of CreateJob and StartJobRun; the worker-types page lists G.1X and
# up only). So the warm
# job, which waits for files most of its life, is a gluestreaming job, though it reads no stream: a long-lived run.
SMALLEST_WORKER_TYPE = "G.025X"


class Admits(Enum):
    """What one run of the mode's job takes (the runs themselves: ``engine.runs``)."""

    FILE_TABLE = auto()  # the triggering file's table, up to that file (``per_file``)
    EVERY_TABLE = auto()  # every table's landed files, round after round up to a time budget (``coalesced``)
    SHARD = auto()  # its shard's tables as their files land; LOAD files and large batches handed over (``warm``)


class Starts(Enum):
    """How the trigger Lambda starts runs for the files of an event."""

    PER_FILE = auto()  # one run per file
    UNLESS_WAITING = auto()  # one run per job, unless a run of it still waits or starts: that one lists after the file
    PER_SHARD = auto()  # CDC files: their shard's run, unless it lives and has not said it stops; LOAD files, per file


@dataclass(frozen=True)
class RunMode:
    """One run mode: its ``job`` (the one started for CDC files), that job's ``worker_type`` (None: the Glue
    version's), what one of its runs ``admits``, and how the Lambda ``starts`` it. The replay jobs' runs apply every
    table only in a mode whose job is theirs and admits every table: in the others, a replay run takes one table."""

    name: RunModeName
    job: StartedJob
    worker_type: str | None
    admits: Admits
    starts: Starts

    @property
    def every_table(self) -> bool:
        """Whether a replay job's run (not given ``--one_table``) applies every table's landed files."""
        return self.admits is Admits.EVERY_TABLE

    @property
    def own_job(self) -> StartedJob | None:
        """The job the stack makes for this mode alone (None: the mode runs on the replay jobs, made in every mode)."""
        return None if self.job in TRIGGERED_JOBS else self.job

    def makes(self, job: str) -> bool:
        """Whether the stack makes ``job`` in this mode: every job but the other modes' own."""
        return job == self.own_job or all(job != mode.own_job for mode in RUN_MODES.values())


RUN_MODES: Mapping[RunModeName, RunMode] = MappingProxyType(
    {
        mode.name: mode
        for mode in (
            RunMode("coalesced", "cdc_replay", None, Admits.EVERY_TABLE, Starts.UNLESS_WAITING),
            RunMode("per_file", "cdc_replay", None, Admits.FILE_TABLE, Starts.PER_FILE),
            RunMode("warm", WARM_JOB, SMALLEST_WORKER_TYPE, Admits.SHARD, Starts.PER_SHARD),
        )
    }
)
