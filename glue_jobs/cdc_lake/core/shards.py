"""Which warm run owns which table (``runs.mode: warm``): a stable assignment by table name.

Rendezvous hashing: a table goes to the shard whose hash with the table's name is highest, so when the stack grows
from n to n + 1 shards only the tables the new shard wins move (about 1 in n + 1), and every other table keeps its
run. Pure: the Lambda routes by it, the warm job keeps to it, and the stack counts shards with it; the Lambda and
the warm runs both read a shard's runs and stop markers through it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from cdc_lake.core.config import PipelineConfig, TableSpec
from cdc_lake.core.exceptions import ConfigError
from cdc_lake.core.names import WARM_MARKER_PREFIX


def shard_of(table: str, shards: int) -> int:
    """The shard (0 .. shards - 1) that owns ``table``."""
    if shards < 1:
        raise ValueError(f"shards must be at least 1, not {shards}")
    return max(range(shards), key=lambda shard: _weight(shard, table))


def shard_count(config: PipelineConfig) -> int:
    """How many warm runs the configuration's tables need (``runs.warm.tables_per_job`` each at most, on average)."""
    return config.runs.warm.shards(len(config.tables))


def tables_of(config: PipelineConfig, shard: int) -> Sequence[TableSpec]:
    """The configured tables ``shard`` owns, in configuration order."""
    count = shard_count(config)
    return [table for table in config.tables if shard_of(table.name, count) == shard]


# The warm run's argument naming the configuration it was started for (``PipelineConfig.version``).
VERSION_ARGUMENT = "--config_version"


def state_prefix(shard: int) -> str:
    """Where the warm runs of ``shard`` keep its state, read by the runs with one listing: a stop marker per stopping
    run (``marker_key``), a hold by the run that took the shard (``hold_key``), and the newest configuration that
    asked for it (``version_key``). The Lambda reads a RUNNING run's marker and hold by their keys."""
    return f"{WARM_MARKER_PREFIX}{shard}/"


def marker_key(shard: int, run_id: str) -> str:
    """A run of ``shard`` says it is stopping: files landing after it are not its own."""
    return f"{state_prefix(shard)}stop/{run_id}"


def hold_key(shard: int, run_id: str, version: str) -> str:
    """The run that took ``shard``, and its configuration's version (``PipelineConfig.version``): a new run of that
    version yields to it, the Lambda counts on it only from that version."""
    return f"{state_prefix(shard)}hold/{version}/{run_id}"


def version_key(shard: int) -> str:
    """The configuration of the newest run that asked for ``shard`` while a run of another held it (a deployment):
    the holder reads it every round and ends."""
    return f"{state_prefix(shard)}version"


@dataclass(frozen=True)
class ShardState:
    """What one listing of ``state_prefix`` says: the runs stopping, and the runs holding with their version."""

    stopping: frozenset[str]
    holding: Mapping[str, str]  # run id -> its configuration's version

    @classmethod
    def of(cls, shard: int, keys: Iterable[str]) -> ShardState:
        stopping: set[str] = set()
        holding: dict[str, str] = {}
        for key in keys:
            kind, _, rest = key.removeprefix(state_prefix(shard)).partition("/")
            if kind == "stop" and rest:
                stopping.add(rest)
            elif kind == "hold" and rest.count("/") == 1:
                version, run_id = rest.split("/")
                holding[run_id] = version
        return cls(frozenset(stopping), holding)

    def keys_of(self, shard: int, run_id: str) -> list[str]:
        """The keys ``run_id`` left, in the order a dead run's are removed: its hold before its stop marker, as the
        run itself removes them, since the Lambda reads a run's marker and then its hold (``GlueJobStarter.warm_run``)
        and counts on a hold it finds only while that order holds."""
        keys = [hold_key(shard, run_id, self.holding[run_id])] if run_id in self.holding else []
        if run_id in self.stopping:
            keys.append(marker_key(shard, run_id))
        return keys


def overrun_prefix() -> str:
    """Where a warm run whose batch outlived the bound names the table (``overrun_key``): the next runs hand that
    table's batches to the G.1X job (``engine.runs.warm``)."""
    return f"{WARM_MARKER_PREFIX}overran/"


def overrun_key(table: str) -> str:
    return f"{overrun_prefix()}{table}"


def overrun_table(key: str) -> str:
    """The table an overrun key names."""
    return key.rsplit("/", 1)[1]


def runs_of_shard(runs: Iterable[Mapping[str, Any]], shard: int, states: Iterable[str]) -> list[Mapping[str, Any]]:
    """Of Glue's ``JobRuns`` of the warm job, those of ``shard`` (their ``--shard`` argument) in one of ``states``."""
    wanted = set(states)
    return [
        r for r in runs if r.get("JobRunState") in wanted and (r.get("Arguments") or {}).get("--shard") == str(shard)
    ]


# GetJobRuns' largest page (Glue API reference, GetJobRuns: MaxResults 1-200).
RUNS_PAGE = 200


class RunLister(Protocol):
    """Glue's GetJobRuns, as boto3's Glue client has it."""

    def get_job_runs(self, *, JobName: str, MaxResults: int, **more: str) -> Mapping[str, Any]: ...


def runs_since(glue: RunLister, job: str, since: dt.datetime) -> Iterator[Mapping[str, Any]]:
    """``job``'s runs newest first, page after page (GetJobRuns' order), down to the first started before ``since``.

    Not the newest page alone: a shard's run that has lived for a day falls out of it when other shards' runs come
    and go. Not the whole history either, which grows with the stack's age: no run started before ``since`` is live.
    A run without a ``StartedOn`` is taken as new."""
    token: str | None = None
    while True:
        response = glue.get_job_runs(JobName=job, MaxResults=RUNS_PAGE, **({"NextToken": token} if token else {}))
        for run in response.get("JobRuns", []):
            started = run.get("StartedOn")
            if isinstance(started, dt.datetime) and started < since:
                return
            yield run
        token = response.get("NextToken")
        if not token:
            return


def _weight(shard: int, table: str) -> bytes:
    return hashlib.sha256(f"{shard}\x00{table}".encode()).digest()


# SQS's most messages a request: a receive returns at most ten, a batch send or delete takes ten.
SQS_MOST_PER_REQUEST = 10


def landing_hint(table: str, key: str) -> str:
    """What the Lambda tells a shard's queue of a landed CDC file (``engine.runs.events``): its table, and its key
    for whoever reads the message."""
    return json.dumps({"table": table, "key": key}, separators=(",", ":"))


def hinted_table(body: str) -> str | None:
    """The table a ``landing_hint`` names, or None when the message is not one."""
    try:
        table = json.loads(body).get("table")
    except (ValueError, AttributeError):
        return None
    return table if isinstance(table, str) and table else None


def shard_queue(queues: str, shard: int, shards: int) -> str | None:
    """The shard's queue URL in ``queues`` (``core.names.WARM_QUEUES_ENV``: comma-joined in shard order), or None
    when there are none (a local run, a stack deployed before the queues). A list that does not have one per shard
    was made for another configuration: refused, not read at a wrong index."""
    urls = [url for url in queues.split(",") if url]
    if not urls:
        return None
    if len(urls) != shards:
        raise ConfigError(f"{len(urls)} warm event queue(s) for {shards} shard(s): deploy the stack again (cdk deploy)")
    return urls[shard]
