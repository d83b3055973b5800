"""``cdc-lake status``: every configured table at a glance, from what the lake and the landing area already hold.

Per table: how far behind the source it is (from its newest applied change, and from its oldest waiting file),
what waits for it in the landing area, what its commits applied in the last 24 hours and what that cost on
Glue, and one state:

- ``refused``: its last run was refused (the record the run kept on the table), or its waiting files would be
  (late or rewritten files, a DMS reload), with the message saying what to do;
- ``diverged``: quarantined rows wait for ``cdc-lake rejects replay`` (``engine.rejects``);
- ``behind``: a file has waited longer than ``runs.lag_alarm_seconds``, the stack's lag alarm;
- ``fresh``; or ``never loaded``: no lake table yet.

Nothing here runs a Spark job: snapshot summaries and table properties come from Iceberg's metadata
(``iceberg_java``), waiting files from one listing per table, starting where the table's record says.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from cdc_lake.core.config import TableSpec, glue_version
from cdc_lake.core.dms_files import list_landed
from cdc_lake.core.exceptions import RecordLostError
from cdc_lake.core.names import GLUE_VERSIONS
from cdc_lake.core.plan import ReplayState
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.iceberg_java import table_properties, timed_lineage
from cdc_lake.engine.record import FRESHNESS, REFUSED, STATE, table_record
from cdc_lake.engine.runs.waiting import waiting_files
from cdc_lake.engine.tables import table_exists

State = Literal["fresh", "behind", "refused", "diverged", "never loaded"]
DAY = dt.timedelta(days=1)


@dataclass(frozen=True)
class LagPoint:
    """One commit of the last day: when it landed, and how far behind it left the table (seconds)."""

    at: dt.datetime
    landed_lag_s: float | None
    change_lag_s: float | None


@dataclass(frozen=True)
class TableStatus:
    table: str
    state: State
    detail: str = ""  # why the state, and what to do
    change_lag_s: float | None = None  # now less the newest applied change's DMS timestamp
    waiting_lag_s: float | None = None  # now less the oldest waiting file's landing
    waiting_files: int = 0
    waiting_bytes: int = 0
    last_commit: dt.datetime | None = None
    rows_24h: int = 0
    files_24h: int = 0
    batch_seconds_24h: float = 0.0
    # Batch seconds x the replay job's workers (DPUs) x Glue's DPU-hour price: an upper bound, as tables a run
    # applies at once share its workers.
    cost_24h_usd: float = 0.0
    lags: list[LagPoint] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return self.state in ("fresh", "never loaded")

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["last_commit"] = self.last_commit.isoformat() if self.last_commit else None
        data["lags"] = [{**asdict(p), "at": p.at.isoformat()} for p in self.lags]
        return data


def pipeline_status(
    context: ReplayContext, tables: Sequence[TableSpec] | None = None, now: dt.datetime | None = None
) -> list[TableStatus]:
    """The status of ``tables`` (default: every configured table), at ``now`` (UTC)."""
    moment = now or dt.datetime.now(dt.UTC)
    return [table_status(context, table, moment) for table in tables or context.config.tables]


def table_status(context: ReplayContext, table: TableSpec, now: dt.datetime) -> TableStatus:
    spark, location = context.spark, context.location
    if not table_exists(context, table):
        return _never_loaded(context, table)
    dotted = location.dotted(table.lake_table)
    commits = _commits(spark, dotted, now)
    try:
        record = table_record(context, table.lake_table)
        state, mark = record.state, record.diverged
        waiting, refusal = _waiting(context, table, state)
    except RecordLostError as error:
        mark, waiting, refusal = None, [], str(error)
    recorded = table_properties(spark, dotted).get(REFUSED)
    if recorded is not None:
        refusal = refusal or json.loads(recorded)["message"]
    last = commits[0][0] if commits else None
    newest_change = next((at - dt.timedelta(seconds=f["change_lag_s"]) for at, f in commits
                          if f.get("change_lag_s") is not None), None)  # fmt: skip
    day = [(at, f) for at, f in commits if now - at <= DAY]
    seconds = sum(float(f.get("seconds") or 0) for _, f in day)
    oldest = min((o.last_modified for o in waiting if o.last_modified is not None), default=None)
    waiting_lag = (now - oldest).total_seconds() if oldest is not None else None
    state_name, detail = _state(context, table, refusal, mark, waiting_lag)
    return TableStatus(
        table=table.name,
        state=state_name,
        detail=detail,
        change_lag_s=round((now - newest_change).total_seconds(), 1) if newest_change else None,
        waiting_lag_s=round(waiting_lag, 1) if waiting_lag is not None else None,
        waiting_files=len(waiting),
        waiting_bytes=sum(o.size for o in waiting),
        last_commit=last,
        rows_24h=sum(int(f.get("rows") or 0) for _, f in day),
        files_24h=sum(int(f.get("files") or 0) for _, f in day),
        batch_seconds_24h=round(seconds, 1),
        cost_24h_usd=round(seconds * context.config.runs.workers / 3600 * _dpu_hour_usd(context), 4),
        lags=[LagPoint(at, f.get("landed_lag_s"), f.get("change_lag_s")) for at, f in reversed(day)],
    )


def _dpu_hour_usd(context: ReplayContext) -> float:
    """The price of one DPU-hour on the configured Glue version: the replay job's workers are G.1X, one DPU each."""
    return GLUE_VERSIONS[glue_version(context.config)].usd_per_dpu_hour


def _commits(spark: Any, dotted: str, now: dt.datetime) -> list[tuple[dt.datetime, Mapping[str, Any]]]:
    """The table's replay commits (time, freshness), newest first: those of the last day, or the newest one at
    least (as far as expiry left them)."""
    commits: list[tuple[dt.datetime, Mapping[str, Any]]] = []
    for _, millis, summary in timed_lineage(spark, dotted):
        at = dt.datetime.fromtimestamp(millis / 1000, dt.UTC)
        if STATE in summary and FRESHNESS in summary:
            commits.append((at, json.loads(summary[FRESHNESS])))
        if now - at > DAY and commits:
            break
    return commits


def _waiting(context: ReplayContext, table: TableSpec, state: ReplayState) -> tuple[list[Any], str | None]:
    """The landed objects the table has not applied yet, and the refusal a run would meet applying them."""
    try:
        return waiting_files(context, table, state)
    except Exception as error:  # any failure of the store: shown as the table's state, never a crash
        return [], _unlisted(error)


def _state(
    context: ReplayContext,
    table: TableSpec,
    refusal: str | None,
    mark: Mapping[str, Any] | None,
    waiting_lag: float | None,
) -> tuple[State, str]:
    limit = context.config.runs.lag_alarm_seconds
    if refusal is not None:
        return "refused", refusal
    if mark:
        return "diverged", (
            f"{mark['rejected']} quarantined row(s) and {mark['held']} held behind them in {mark['rejects_table']}: "
            f"fix them and run `cdc-lake rejects replay -t {table.name}` (docs/bad-input.md#quarantine)"
        )
    if waiting_lag is not None and waiting_lag > limit:
        return "behind", (
            f"a file has waited {waiting_lag:.0f} s, more than runs.lag_alarm_seconds ({limit} s): look for replay "
            "runs waiting, failing or reaching their time budget (docs/runs.md)"
        )
    return "fresh", ""


def _never_loaded(context: ReplayContext, table: TableSpec) -> TableStatus:
    try:
        landed = list_landed(context.store, context.config, table)
    except Exception as error:  # any failure of the store: shown as the table's state, never a crash
        return TableStatus(table.name, "never loaded", f"no lake table yet; {_unlisted(error)}")
    files = [landed.objects[f.key] for f in landed.files]
    if not files:
        return TableStatus(
            table.name,
            "never loaded",
            f"no lake table yet and nothing landed under {context.config.table_prefix(table)}: check that the DMS "
            "task's table mappings include the table",
        )
    return TableStatus(
        table.name,
        "never loaded",
        f"no lake table yet; {len(files)} file(s) landed: trigger a run (`cdc-lake run`, or the replay job)",
        waiting_files=len(files),
        waiting_bytes=sum(o.size for o in files),
    )


def _unlisted(error: Exception) -> str:
    return f"the landing area cannot be listed ({type(error).__name__}: {error}): check the path or bucket"
