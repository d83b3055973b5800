"""A warm run (``runs.mode: warm``): one shard's tables replayed as their files land, by one long-lived run.

It is a coalesced run (``coalesced.drain``) with four differences:

- It takes only its shard's tables (``core.shards``), so several runs share 1,000 tables without meeting.
- Large work goes where it fits: a batch holding LOAD files, or more pending bytes than ``runs.warm.handover_bytes``,
  is handed to a run of the G.1X job for that table alone (``HandOver``), and the table is left to that run while it
  lives. Both commit through the same record, so neither applies a file twice.
- It stops after ``runs.warm.quiet_seconds`` without a landed file (once no run it handed a table to lives: files of
  that table landing meanwhile are its own), or after ``runs.warm.lifetime_hours``. Before its
  last look at the landing it writes a stop marker (``core.shards.marker_key``): the Lambda, finding the
  shard's run RUNNING with a marker, starts the next run, so a file landing after that look is never left to it.
  A new run yields to a live run of its shard that is not stopping, and waits for one that is (``WarmShift.peer``).
- A batch that outlives ``WARM_BATCH_MINUTES`` ends the run: a run that lives for days then never holds a commit
  branch longer than that, and the clean-up of dead runs' branches (``RunSettings.longest_run``) need not wait days.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from cdc_lake.core.exceptions import HandOver
from cdc_lake.core.names import WARM_BATCH_MINUTES, WARM_JOB
from cdc_lake.core.shards import marked_run, marker_key, marker_prefix, runs_of_shard, tables_of
from cdc_lake.engine.context import Batch, ReplayContext
from cdc_lake.engine.runs.coalesced import Budget, drain
from cdc_lake.engine.runs.outcome import DrainResult
from cdc_lake.engine.runs.shift import NO_HOOKS, DrainHooks

log = logging.getLogger(__name__)

# A Glue run in these states may still commit (or has not listed yet).
LIVE_STATES = frozenset({"WAITING", "STARTING", "RUNNING", "STOPPING"})
PEER_POLL_SECONDS = 5.0


def admit_small(limit_bytes: int) -> Callable[[Batch], None]:
    """What a warm run takes: a batch of CDC files of at most ``limit_bytes``; any other is handed over."""

    def admit(batch: Batch) -> None:
        loads = [f for f in batch.files if f.is_full_load]
        if loads:
            # Up to the last LOAD file: the full-load job takes what is large, the CDC files after it stay here.
            raise HandOver(batch.table.name, "full_load", loads[-1].key, f"{len(loads)} LOAD file(s) pending")
        size = sum(batch.landed.objects[f.key].size for f in batch.files)
        if size > limit_bytes:
            reason = (
                f"{size:,} bytes pending in {len(batch.files)} file(s), over runs.warm.handover_bytes ({limit_bytes:,})"
            )
            raise HandOver(batch.table.name, "cdc_replay", batch.trigger.key, reason)

    return admit


class JobRuns(Protocol):
    """What a warm run asks of Glue: the runs of a job, one run, and starting one (boto3's Glue client has them)."""

    def get_job_runs(self, *, JobName: str, MaxResults: int) -> Mapping[str, Any]: ...

    def get_job_run(self, *, JobName: str, RunId: str) -> Mapping[str, Any]: ...

    def start_job_run(
        self, *, JobName: str, Arguments: dict[str, str], JobRunQueuingEnabled: bool
    ) -> Mapping[str, Any]: ...


@dataclass
class WarmShift:
    """A warm run's ``shift.Shift``: its handed-over tables, its batches' watch and its stop marker."""

    context: ReplayContext
    glue: JobRuns
    shard: int
    run_id: str
    jobs: Mapping[str, str]  # full_load / cdc_replay / cdc_warm -> the deployed job's name
    bucket: str
    batch_limit_seconds: float = WARM_BATCH_MINUTES * 60.0
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    overrun: Callable[[str], None] = field(default=lambda why: os._exit(3))
    handed: dict[str, tuple[str, str]] = field(default_factory=dict)  # table -> (job, run id)
    left: set[str] = field(default_factory=set)  # tables whose handed-over run failed: left for this run
    _batches: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _watchdog: threading.Thread | None = None
    _ended: threading.Event = field(default_factory=threading.Event)

    def peer(self) -> str | None:
        """None when this run may take the shard; else the id of a live run of the shard that is not stopping, to
        which the shard is left (it lists the landing again before it stops). A stopping run is waited for, up to
        the batch bound: it makes no commit after its last look. Markers of runs that ended are removed."""
        began = self.clock()
        store = self.context.store
        while True:
            runs = self.glue.get_job_runs(JobName=self.warm_job, MaxResults=50).get("JobRuns", [])
            running = runs_of_shard(runs, self.shard, ["RUNNING"])
            peers = [str(r["Id"]) for r in running if r.get("Id") != self.run_id]
            stopping = {marked_run(o.key): o.key for o in store.list(marker_prefix(self.shard))}
            for ended in set(stopping) - set(peers) - {self.run_id}:
                store.delete(stopping[ended])
            alive = [peer for peer in peers if peer not in stopping]
            if alive:
                return alive[0]
            if not peers:
                return None
            if self.clock() - began > self.batch_limit_seconds:
                log.warning("shard %d: run(s) %s still stopping; taking the shard", self.shard, peers)
                return None
            log.info("shard %d: waiting for stopping run(s) %s", self.shard, peers)
            self.sleep(PEER_POLL_SECONDS)

    def busy(self, table: str) -> bool:
        if table in self.left:
            return True
        handed = self.handed.get(table)
        if handed is None:
            return False
        job, run_id = handed
        state = self._state(job, run_id)
        if state in LIVE_STATES:
            return True
        del self.handed[table]
        if state != "SUCCEEDED":
            log.error(
                "%s: the %s run %s it was handed to ended %s: left until the next warm run", table, job, run_id, state
            )
            self.left.add(table)
            return True
        return False

    def holding(self) -> bool:
        for table in list(self.handed):
            self.busy(table)  # forgets the runs that ended
        return bool(self.handed)

    def hand_over(self, handover: HandOver) -> None:
        job = self.jobs[handover.job]
        live = self._live_run_of(job, handover.table)
        if live is None:
            arguments = {
                "--bucket": self.bucket,
                "--key": handover.key,
                "--table": handover.table,
                "--one_table": "true",
            }
            started = self.glue.start_job_run(JobName=job, Arguments=arguments, JobRunQueuingEnabled=True)
            live = str(started["JobRunId"])
            log.warning("%s: run %s of %s", handover, live, job)
        else:
            log.info("%s: %s run %s already takes it", handover.table, job, live)
        self.handed[handover.table] = (handover.job, live)

    @contextmanager
    def watch(self, table: str) -> Iterator[None]:
        with self._lock:
            self._batches[table] = self.clock()
            if self._watchdog is None:
                self._watchdog = threading.Thread(target=self._watch, name="cdc-lake-warm-watch", daemon=True)
                self._watchdog.start()
        try:
            yield
        finally:
            with self._lock:
                self._batches.pop(table, None)

    def stopping(self) -> None:
        self.context.store.put(marker_key(self.shard, self.run_id), self.run_id.encode())
        log.info("shard %d: stop marker written; a last look at the landing", self.shard)

    def resumed(self) -> None:
        self.context.store.delete(marker_key(self.shard, self.run_id))

    @property
    def warm_job(self) -> str:
        return self.jobs[WARM_JOB]

    def overdue(self) -> str | None:
        """The batch that has outlived the bound, if one has."""
        now = self.clock()
        with self._lock:
            late = [t for t, began in self._batches.items() if now - began > self.batch_limit_seconds]
        return late[0] if late else None

    def end(self) -> None:
        """The run is over: its watch stops."""
        self._ended.set()

    def _watch(self) -> None:
        while not self._ended.wait(min(10.0, self.batch_limit_seconds / 10)):
            table = self.overdue()
            if table is not None:
                why = (
                    f"{table}: a batch has run longer than {self.batch_limit_seconds:.0f}s; ending the warm run so "
                    "that its commit branch is known dead (the next landed file starts the shard's next run)"
                )
                log.critical("%s", why)
                self.overrun(why)
                return

    def _state(self, job: str, run_id: str) -> str:
        return str(self.glue.get_job_run(JobName=self.jobs[job], RunId=run_id)["JobRun"]["JobRunState"])

    def _live_run_of(self, job_name: str, table: str) -> str | None:
        runs = self.glue.get_job_runs(JobName=job_name, MaxResults=50).get("JobRuns", [])
        for run in runs:
            arguments = run.get("Arguments") or {}
            if run.get("JobRunState") in LIVE_STATES and arguments.get("--table") == table:
                return str(run["Id"])
        return None


def warm(context: ReplayContext, shift: WarmShift, budget: Budget, hooks: DrainHooks = NO_HOOKS) -> DrainResult:
    """The shard's run: its tables' landed files, batch after batch, until quiet or old (``coalesced.drain`` with the
    shift's tables, handovers, watch and stop protocol; ``hooks``' own shift is replaced by it)."""
    config = context.config
    tables = tables_of(config, shift.shard)
    admitted = dataclasses.replace(context, admit=admit_small(config.runs.warm.handover_bytes))
    log.info("shard %d: %d table(s), quiet after %ss", shift.shard, len(tables), budget.idle_seconds)
    try:
        return drain(admitted, budget, hooks=dataclasses.replace(hooks, shift=shift), tables=tables)
    finally:
        shift.end()


def warm_budget(context: ReplayContext, quiet_seconds: int | None = None) -> Budget:
    """A warm run's budget: its lifetime, its quiet time, the configured poll, and its own tables at once and pace
    of rounds. A run with less quiet time than the pace (a local run, given 0: nothing lands while it works) paces
    its rounds no longer than it waits for files."""
    runs, warm = context.config.runs, context.config.runs.warm
    quiet = float(warm.quiet_seconds if quiet_seconds is None else quiet_seconds)
    pace = min(warm.round_seconds, quiet)
    return Budget(warm.lifetime_hours * 3600.0, quiet, runs.poll_seconds, warm.parallel_tables, pace)
