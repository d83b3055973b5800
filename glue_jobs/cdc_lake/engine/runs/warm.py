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
  Its Spark jobs are cancelled (the batch's job group) and the run ends through its stop path, its table refused and
  told; a run that has not ended ``WARM_END_GRACE_MINUTES`` later (a batch stuck outside Spark) ends its process.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from cdc_lake.core.config import TableSpec
from cdc_lake.core.exceptions import HandOver
from cdc_lake.core.names import WARM_BATCH_MINUTES, WARM_END_GRACE_MINUTES, WARM_JOB
from cdc_lake.core.shards import (
    VERSION_ARGUMENT,
    ShardState,
    hold_key,
    marker_key,
    overrun_key,
    overrun_prefix,
    overrun_table,
    runs_of_shard,
    runs_since,
    state_prefix,
    tables_of,
    version_key,
)
from cdc_lake.engine.context import Batch, ReplayContext
from cdc_lake.engine.iceberg_java import table_properties
from cdc_lake.engine.record import REFUSED
from cdc_lake.engine.runs.coalesced import Budget, drain
from cdc_lake.engine.runs.events import Landings
from cdc_lake.engine.runs.outcome import DrainResult
from cdc_lake.engine.runs.shift import NO_HOOKS, DrainHooks

log = logging.getLogger(__name__)

# A Glue run in these states may still commit (or has not listed yet).
LIVE_STATES = frozenset({"WAITING", "STARTING", "RUNNING", "STOPPING"})
PEER_POLL_SECONDS = 5.0
CANCEL_EVERY_SECONDS = 2.0  # an overdue batch's jobs are cancelled this often until the run has ended
# A table whose batch failed without a refusal kept on it (an error of S3, Glue or Spark) is tried again after this.
RETRY_UNKEPT_SECONDS = 300.0
NEVER = dt.datetime.max.replace(tzinfo=dt.UTC)


def _started(run: Mapping[str, Any] | None) -> tuple[dt.datetime, str]:
    """Which of two runs of a shard is older: Glue's ``StartedOn``, then the id; a run without one is the newest."""
    if run is None:
        return NEVER, ""
    started = run.get("StartedOn")
    return (started if isinstance(started, dt.datetime) else NEVER), str(run.get("Id"))


def job_group(table: str) -> str:
    """The Spark job group of a warm batch of ``table`` (``WarmShift.watch``)."""
    return f"cdc-lake-warm-{table}"


def _running(run: Mapping[str, Any]) -> bool:
    return run.get("JobRunState") == "RUNNING"


def admit_small(limit_bytes: int, overran: Collection[str] = ()) -> Callable[[Batch], None]:
    """What a warm run takes: a batch of CDC files of at most ``limit_bytes``, of a table not in ``overran`` (whose
    batch outlived the bound on a warm run's workers); any other is handed over."""

    def admit(batch: Batch) -> None:
        loads = [f for f in batch.files if f.is_full_load]
        if loads:
            # Up to the last LOAD file: the full-load job takes what is large, the CDC files after it stay here.
            raise HandOver(batch.table.name, "full_load", loads[-1].key, f"{len(loads)} LOAD file(s) pending")
        if batch.table.name in overran:
            reason = f"its batch outlived {WARM_BATCH_MINUTES} minutes on a warm run's workers; the G.1X job takes it"
            raise HandOver(batch.table.name, "cdc_replay", batch.trigger.key, reason)
        size = sum(batch.landed.objects[f.key].size for f in batch.files)
        if size > limit_bytes:
            reason = (
                f"{size:,} bytes pending in {len(batch.files)} file(s), over runs.warm.handover_bytes ({limit_bytes:,})"
            )
            raise HandOver(batch.table.name, "cdc_replay", batch.trigger.key, reason)

    return admit


class JobRuns(Protocol):
    """What a warm run asks of Glue: the runs of a job, one run, and starting one (boto3's Glue client has them)."""

    def get_job_runs(self, *, JobName: str, MaxResults: int, **more: str) -> Mapping[str, Any]: ...

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
    end_grace_seconds: float = WARM_END_GRACE_MINUTES * 60.0
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    overrun: Callable[[str], None] = field(default=lambda why: os._exit(3))
    now: Callable[[], dt.datetime] = field(default=lambda: dt.datetime.now(dt.UTC))  # against Glue's StartedOn
    handed: dict[str, tuple[str, str]] = field(default_factory=dict)  # table -> (job, run id)
    left: set[str] = field(default_factory=set)  # tables whose handed-over run failed: left for this run
    _batches: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _watchdog: threading.Thread | None = None
    _ended: threading.Event = field(default_factory=threading.Event)
    _marked: bool = False
    _superseded: bool = False
    _refusals: dict[str, tuple[bool, float]] = field(default_factory=dict)  # table -> (kept on it, when)
    overran: set[str] = field(default_factory=set)  # tables whose batch outlived the bound: the G.1X job's
    ending: str | None = None  # why the run ends before its time (its watch): after its last look
    _succeeded_by: str | None = None  # the shard's next run, once this one started it
    landings: Landings | None = None  # the shard's event queue (``events``); None: every round lists every table

    def peer(self) -> str | None:
        """None when this run takes the shard; else the id of the live run holding it, to which the shard is left.

        Until it decides, the run is marked stopping (``marker_key``), so the Lambda counts on no run that may yet
        yield. It yields to a run holding the shard (``hold_key``) with its own configuration and no stop marker; it
        waits for a holder that is stopping (it makes no commit after its last look), for a holder of another
        configuration (a deployment: told so by ``version_key``, it ends within a round), and for an older live run
        that has not decided (by ``StartedOn``, then id), so that of two runs that see each other exactly one takes
        the shard and the other ends only once it sees it held. A wait past the batch bound takes the shard: two
        runs of a shard commit through the same record, whereas none would leave its files waiting. Markers and
        holds of runs no longer live are removed."""
        began = self.clock()
        store = self.context.store
        self._mark()
        asked = False
        while True:
            runs = {
                str(r["Id"]): r
                for r in runs_of_shard(self._runs_since(self.warm_job, self.live_span), self.shard, LIVE_STATES)
            }
            state = ShardState.of(self.shard, (o.key for o in store.list(state_prefix(self.shard))))
            for dead in (set(state.stopping) | set(state.holding)) - set(runs) - {self.run_id}:
                for key in state.keys_of(self.shard, dead):
                    store.delete(key)
            peers = {run_id: run for run_id, run in runs.items() if run_id != self.run_id}
            held = {p: state.holding[p] for p in peers if p in state.holding}
            holder = next(
                (p for p, v in held.items() if v == self.version and p not in state.stopping and _running(peers[p])),
                None,
            )
            if holder is not None:
                return holder
            if not asked and any(v != self.version and p not in state.stopping for p, v in held.items()):
                store.put(version_key(self.shard), self.version.encode())
                log.warning("shard %d: run(s) %s hold it with another configuration; asking them to end", self.shard,
                            sorted(p for p, v in held.items() if v != self.version))  # fmt: skip
                asked = True
            waited = sorted(held) + [
                p for p in peers if p not in held and _started(peers[p]) < _started(runs.get(self.run_id))
            ]
            if not waited:
                break
            if self.clock() - began > self.batch_limit_seconds:
                log.warning("shard %d: run(s) %s neither held nor left the shard; taking it", self.shard, waited)
                break
            log.info("shard %d: waiting for run(s) %s (stopping, of another configuration, or older and undecided)",
                     self.shard, waited)  # fmt: skip
            self.sleep(PEER_POLL_SECONDS)
        store.put(hold_key(self.shard, self.run_id, self.version), self.run_id.encode())
        if self._wanted() not in (None, self.version):
            # Left by a run that asked and then died, or by the deployment before a rollback: this run, the newest
            # to take the shard, is the stack's configuration, and must not read it as a request to end.
            store.put(version_key(self.shard), self.version.encode())
        self.resumed()
        return None

    @property
    def version(self) -> str:
        return self.context.config.version

    def _wanted(self) -> str | None:
        """The configuration that last asked for the shard (``version_key``), if one did."""
        try:
            return self.context.store.read_head(version_key(self.shard), 64).decode()
        except FileNotFoundError:
            return None

    def must_end(self) -> bool:
        """Whether the run ends after its last look: a batch outlived the bound (``ending``), or a run of another
        configuration asked for the shard (``superseded``)."""
        return self.ending is not None or self.superseded()

    def superseded(self) -> bool:
        """Whether a run of another configuration asked for the shard (``version_key``, written by a run a deployment
        made): this run's tables and settings are no longer the stack's, so it ends after its last look, and the new
        run, which waits for it, takes the shard. One small read a round."""
        wanted = self._wanted()
        if wanted is None or wanted == self.version:
            return False
        if not self._superseded:
            log.warning("shard %d: a run of configuration %s asks for the shard (this run's is %s): ending",
                        self.shard, wanted, self.version)  # fmt: skip
            self._superseded = True
        return True

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
        if state == "SUCCEEDED" and table in self.overran:
            self.overran.discard(table)  # the G.1X run applied its backlog: small batches come back here
            self.context.store.delete(overrun_key(table))
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
        if self.context.spark is not None:
            # In the batch's own thread (PySpark pins it to a JVM thread): what the watch cancels if it overruns.
            self.context.spark.sparkContext.setJobGroup(job_group(table), f"cdc-lake warm batch of {table}", True)
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

    def refused(self, table: TableSpec) -> None:
        self._refusals[table.name] = (self._refusal_kept(table), self.clock())

    def fixed(self, table: TableSpec) -> bool:
        """A refusal kept on the table (``REFUSED``) is lifted when the property is gone: ``cdc-lake reload``
        removes it (one read of the table's metadata a round while the table stays refused). A failure that left
        none (an error, not a refusal of the data) is tried again after ``RETRY_UNKEPT_SECONDS``."""
        kept, at = self._refusals.get(table.name, (False, self.clock()))
        if kept:
            return not self._refusal_kept(table)
        return self.clock() - at >= RETRY_UNKEPT_SECONDS

    def _refusal_kept(self, table: TableSpec) -> bool:
        context = self.context
        try:
            properties = table_properties(context.spark, context.location.dotted(table.lake_table))
        except Exception as error:  # a table that is gone, or a catalog that did not answer: asked again later
            log.info("%s: its refusal could not be read (%s)", table.name, str(error)[:200])
            return True
        return REFUSED in properties

    def stopping(self) -> None:
        self._mark()
        log.info("shard %d: stop marker written; a last look at the landing", self.shard)

    def resumed(self) -> None:
        self.context.store.delete(marker_key(self.shard, self.run_id))
        self._marked = False

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
        """The run is over: its watch stops, and it is marked stopping (if an error ended it, not its last look)
        and no longer holds the shard: Glue shows it RUNNING a while longer, and neither the Lambda nor a new run
        may count on it (a new run waits for it, being older)."""
        self._ended.set()
        self._mark()
        self.context.store.delete(hold_key(self.shard, self.run_id, self.version))

    def successor(self) -> None:
        """Start the shard's next run: this one ends (its lifetime spent, or an error) while a table it handed over
        is still another run's, so its last look left that table out, and files of it that landed after the handed
        run's key would wait for the next landing in the shard. The next run waits for this one, then takes the
        shard and lists the table; it commits through the same record as the handed run."""
        if self._succeeded_by is not None:
            return
        started = self.glue.start_job_run(
            JobName=self.warm_job,
            # Its own configuration's version: if a deployment came meanwhile, the Lambda counts on it for no file, and
            # the run it then starts asks this one's successor to end.
            Arguments={"--bucket": self.bucket, "--shard": str(self.shard), VERSION_ARGUMENT: self.version},
            JobRunQueuingEnabled=True,
        )
        self._succeeded_by = str(started["JobRunId"])
        log.warning(
            "shard %d: ending while %s still run(s) handed tables; run %s takes the shard next",
            self.shard,
            sorted(self.handed),
            started["JobRunId"],
        )

    @property
    def live_span(self) -> dt.timedelta:
        return self.context.config.runs.warm.live_span

    def _mark(self) -> None:
        if not self._marked:
            self.context.store.put(marker_key(self.shard, self.run_id), self.run_id.encode())
            self._marked = True

    def _runs_since(self, job: str, span: dt.timedelta) -> Iterator[Mapping[str, Any]]:
        return runs_since(self.glue, job, self.now() - span)

    def overran_tables(self) -> set[str]:
        """The shard's tables whose batch outlived the bound in an earlier run (``overrun_key``): their batches go to
        the G.1X job until one of its runs applies them."""
        found = {overrun_table(o.key) for o in self.context.store.list(overrun_prefix())}
        self.overran = {t.name for t in tables_of(self.context.config, self.shard) if t.name in found}
        return self.overran

    def _watch(self) -> None:
        while not self._ended.wait(min(10.0, self.batch_limit_seconds / 10)):
            table = self.overdue()
            if table is not None:
                why = (
                    f"{table}: a batch has run longer than {self.batch_limit_seconds:.0f}s; cancelling its Spark jobs "
                    "and ending the warm run, so that its commit branch is known dead; the shard's next run hands the "
                    "table's batches to the G.1X job"
                )
                log.critical("%s", why)
                self._overran(table)
                self.ending = why
                # Again and again: a cancel ends the jobs running, not one the batch starts after it.
                every = min(CANCEL_EVERY_SECONDS, self.end_grace_seconds)
                for _ in range(math.ceil(self.end_grace_seconds / every)):
                    self._cancel(table)
                    if self._ended.wait(every):
                        return
                log.critical("the run did not end %.0fs after its batch was cancelled: ending the process",
                             self.end_grace_seconds)  # fmt: skip
                self.overrun(why)
                return

    def _cancel(self, table: str) -> None:
        """The overdue batch's Spark jobs (its job group): it fails, and the round ends. Best effort: a batch stuck
        outside Spark is ended with the process after the grace."""
        if self.context.spark is None:
            return
        try:
            self.context.spark.sparkContext.cancelJobGroup(job_group(table))
        except Exception as error:
            log.error("%s: could not cancel its batch's Spark jobs: %s", table, error)

    def _overran(self, table: str) -> None:
        """Before the run ends from its watch: the table is marked for the next runs, which start now, not at the
        next landing. Best effort: the run ends whatever S3 or Glue answer."""
        try:
            self.context.store.put(overrun_key(table), table.encode())
            self._mark()
            self.successor()
        except Exception as error:
            log.error("%s: could not mark the overrun or start the next run: %s", table, error)

    def _state(self, job: str, run_id: str) -> str:
        return str(self.glue.get_job_run(JobName=self.jobs[job], RunId=run_id)["JobRun"]["JobRunState"])

    def _live_run_of(self, job_name: str, table: str) -> str | None:
        for run in self._runs_since(job_name, self.context.config.runs.longest_run):
            arguments = run.get("Arguments") or {}
            if run.get("JobRunState") in LIVE_STATES and arguments.get("--table") == table:
                return str(run["Id"])
        return None


def warm(context: ReplayContext, shift: WarmShift, budget: Budget, hooks: DrainHooks = NO_HOOKS) -> DrainResult:
    """The shard's run: its tables' landed files, batch after batch, until quiet or old (``coalesced.drain`` with the
    shift's tables, handovers, watch and stop protocol; ``hooks``' own shift is replaced by it)."""
    config = context.config
    tables = tables_of(config, shift.shard)
    admitted = dataclasses.replace(
        context, admit=admit_small(config.runs.warm.handover_bytes, overran=shift.overran_tables())
    )
    log.info("shard %d: %d table(s), quiet after %ss", shift.shard, len(tables), budget.idle_seconds)
    try:
        return drain(admitted, budget, hooks=dataclasses.replace(hooks, shift=shift), tables=tables)
    finally:
        shift.end()
        if shift.holding():
            shift.successor()


def warm_budget(context: ReplayContext, quiet_seconds: int | None = None) -> Budget:
    """A warm run's budget: its lifetime, its quiet time, the configured poll, and its own tables at once, pace of
    rounds and interval between a table's commits. A run with less quiet time than the pace or the interval (a local
    run, given 0: nothing lands while it works) waits no longer for either than it waits for files."""
    runs, warm = context.config.runs, context.config.runs.warm
    quiet = float(warm.quiet_seconds if quiet_seconds is None else quiet_seconds)
    pace, interval = min(warm.round_seconds, quiet), min(warm.commit_interval_seconds, quiet)
    return Budget(
        warm.lifetime_hours * 3600.0,
        quiet,
        runs.poll_seconds,
        warm.parallel_tables,
        pace,
        interval,
        sweep_seconds=warm.sweep_seconds,
    )
