"""The Glue jobs as library functions: typed options in, one replay or maintenance run out.

``full_load`` is started for LOAD files and ``cdc_replay`` for CDC files. Coalesced (the default), a run of
either applies every landed file of every table (``drain``); per file, the table's pending files up to the
triggering one. Either way each job recovers from the other's lost events. The maintenance
job's ``--action reload`` rebuilds one table after DMS reloaded it (``cdc_lake.engine.reload``).
"""

from __future__ import annotations

import datetime as dt
import logging
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self

from pyspark.sql import SparkSession

from cdc_lake.core.config import PipelineConfig, load_config_uri
from cdc_lake.core.dms_files import JOB_FOR_FILE_KIND, parse_key
from cdc_lake.core.exceptions import JobArgumentError, TableFailuresError
from cdc_lake.core.names import GLUE_CATALOG, ORPHAN_DAYS, RETAIN_LAST, JobKind
from cdc_lake.core.storage import ObjectStore, S3Store
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.drain import Budget, DrainResult, drain, oldest_waiting
from cdc_lake.engine.maintenance import ACTIONS, Action, MaintenanceResult, Retention, maintain
from cdc_lake.engine.rejects_replay import replay_rejects
from cdc_lake.engine.reload import ReloadResult, reload_table
from cdc_lake.engine.replay import RunResult, replay
from cdc_lake.engine.tables import LakeLocation

if TYPE_CHECKING:
    from cdc_lake.engine.metrics import CloudWatchPublisher

log = logging.getLogger(__name__)

REQUIRED_ARGUMENTS = ("config_uri", "bucket", "key", "table")
OPTIONAL_ARGUMENTS = {"catalog": GLUE_CATALOG, "database": "", "idle_seconds": ""}


class _GlueArguments:
    """A job's options read from the arguments Glue hands its script, as Glue resolves them."""

    required: ClassVar[tuple[str, ...]]
    optional: ClassVar[tuple[str, ...]]

    @classmethod
    def from_sys_argv(cls, argv: Sequence[str]) -> Self:
        return cls.from_options(resolve_glue_arguments(argv, cls.required, cls.optional))

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> Self:
        raise NotImplementedError


@dataclass(frozen=True)
class JobOptions(_GlueArguments):
    """Arguments of a job run; the Lambda passes bucket, key and table, the job defines the rest."""

    required = REQUIRED_ARGUMENTS
    optional = tuple(OPTIONAL_ARGUMENTS)

    config_uri: str
    bucket: str
    key: str
    table: str
    catalog: str = GLUE_CATALOG
    database: str = ""  # empty: the configuration's lake.database
    # How long a coalesced run waits for new files after a round that found none; None: runs.idle_seconds.
    # A run reproduced after its files landed (glue-run, aws-replay) has nothing to wait for.
    idle_seconds: int | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> Self:
        """Build from a plain mapping; keys may carry Glue's ``--`` prefix. Bad values name the argument."""
        plain = _plain_arguments(options, REQUIRED_ARGUMENTS)
        known = {*REQUIRED_ARGUMENTS, "catalog", "database"}
        idle = plain.get("idle_seconds")
        return cls(
            **{k: v for k, v in plain.items() if k in known},
            idle_seconds=_whole_number(plain, "idle_seconds", 0) if idle else None,
        )


def job_context(
    options: JobOptions | MaintenanceOptions,
    spark: SparkSession,
    *,
    config: PipelineConfig | None = None,
    store: ObjectStore | None = None,
) -> ReplayContext:
    """A run's context from its options: the configuration read from --config_uri unless given, the lake at
    --catalog/--database (default: the configuration's), the landed files in --bucket unless a store is given."""
    config = config or load_config_uri(options.config_uri)
    location = LakeLocation(options.catalog, options.database or config.lake.database)
    return ReplayContext(spark, config, location, store or S3Store(options.bucket))


def run_job(
    kind: JobKind,
    options: JobOptions,
    context: ReplayContext,
    *,
    on_batch: Callable[[RunResult], None] | None = None,
    on_round: Callable[[int, int], None] | None = None,
) -> DrainResult:
    """Run one job: check the file suits this job, then apply.

    ``runs.mode: coalesced``: every table's landed files, the file's table first, round after round up to
    the time budget (``drain``). ``per_file``: the file's table's pending files up to the file. A table
    whose batch is refused is reported in the result's ``failures``; the caller fails the run.
    """
    config = context.config
    dms_file = parse_key(options.key, config)
    if dms_file.table != options.table:
        raise JobArgumentError(f"{options.key}: belongs to table {dms_file.table}, not {options.table}")
    if JOB_FOR_FILE_KIND[dms_file.kind] != kind:
        raise JobArgumentError(f"{options.key}: a {dms_file.kind.value} file was routed to the {kind} job")
    if config.runs.coalesced:
        budget = Budget.of(config, idle_seconds=options.idle_seconds)
        outcome = drain(context, budget, first=dms_file.table, on_batch=on_batch, on_round=on_round)
    else:
        single = replay(context, dms_file)
        if on_batch and not single.already_applied:
            on_batch(single)
        outcome = DrainResult(results=[single], rounds=1, seconds=single.seconds)
    for result in outcome.results:
        if not result.already_applied:
            log.info(
                "%s: applied %d file(s) up to %s in snapshot %s: %s, %d key(s) changed",
                result.table,
                len(result.applied_files),
                result.trigger.key if result.trigger else None,
                result.snapshot_id,
                result.counts.as_dict() if result.counts else {},
                result.keys_changed,
            )
    log.info(
        "run for %s: %d commit(s), %d file(s), %d round(s), %.1fs%s",
        options.key,
        len(outcome.commits),
        len(outcome.applied_files),
        outcome.rounds,
        outcome.seconds,
        f", {len(outcome.failures)} table(s) failed" if outcome.failures else "",
    )
    return outcome


@dataclass(frozen=True)
class JobClients:
    """The AWS clients of a job's Python side: S3 (the configuration and the landed files) and CloudWatch (the
    metrics). Spark's Glue catalog and its S3 reads have clients of their own, set by the job's --conf."""

    s3: Any
    cloudwatch: Any


def glue_main(kind: JobKind, clients: JobClients, argv: Sequence[str] | None = None) -> DrainResult:
    """Entry point of the Glue scripts: resolve arguments, use Glue's Spark session, run, publish the metrics.

    Fails the run (after every other table was applied) when a table's batch was refused, so the Glue
    run's state and the TableFailures metric both say so.
    """
    from cdc_lake.engine.metrics import CloudWatchPublisher
    from cdc_lake.engine.session import glue_spark_session

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    options = JobOptions.from_sys_argv(list(argv if argv is not None else sys.argv))
    config = load_config_uri(options.config_uri, s3_client=clients.s3)
    store = S3Store(options.bucket, client=clients.s3)
    context = job_context(options, glue_spark_session(options.catalog), config=config, store=store)
    publisher = CloudWatchPublisher(clients.cloudwatch, context.location.database)
    outcome = run_job(kind, options, context, on_batch=publisher.batch)
    if outcome.notices:
        publisher.notices(len(outcome.notices))
    if outcome.failures:
        publisher.table_failures(len(outcome.failures))
        raise TableFailuresError(outcome.failures)
    return outcome


MAINTENANCE_REQUIRED = ("config_uri", "action")
MAINTENANCE_OPTIONAL = ("table", "catalog", "database", "retain_days", "retain_last", "orphan_days", "bucket", "since")
RELOAD: Literal["reload"] = "reload"
REJECTS = {"rejects-replay": False, "rejects-accept": True}  # action: whether it accepts the bad rows' loss
JobAction = Action | Literal["reload", "rejects-replay", "rejects-accept"]
# The maintenance job's actions: the table maintenance ones, rebuilding one table after a DMS reload, and
# replaying a quarantining table's rejects (or accepting their loss).
JOB_ACTIONS: tuple[JobAction, ...] = (*ACTIONS, RELOAD, "rejects-replay", "rejects-accept")


@dataclass(frozen=True)
class MaintenanceOptions(_GlueArguments):
    """Arguments of a maintenance run; the scheduled trigger passes --action, the job defines the rest."""

    required = MAINTENANCE_REQUIRED
    optional = MAINTENANCE_OPTIONAL

    config_uri: str
    action: JobAction
    table: str | None = None  # None: every configured table (not for reload and rejects)
    catalog: str = GLUE_CATALOG
    database: str = ""  # empty: the configuration's lake.database
    retention: Retention = field(default_factory=Retention)
    bucket: str = ""  # reload: the raw bucket DMS writes to
    since: str | None = None  # reload: first CDC file (name or time) to apply; None: automatic

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> Self:
        """Build from a plain mapping; keys may carry Glue's ``--`` prefix. Bad values name the argument."""
        plain = _plain_arguments(options, MAINTENANCE_REQUIRED)
        action = plain["action"]
        if action not in JOB_ACTIONS:
            raise JobArgumentError(f"--action {action!r}: use one of {', '.join(JOB_ACTIONS)}")
        if action == RELOAD:
            missing = [name for name in ("table", "bucket") if not plain.get(name)]
            if missing:
                named = ", ".join("--" + m for m in missing)
                raise JobArgumentError(f"--action reload rebuilds one table from the raw bucket: add {named}")
        if action in REJECTS and not plain.get("table"):
            raise JobArgumentError(f"--action {action} applies one table's rejects: add --table")
        return cls(
            config_uri=plain["config_uri"],
            action=action,
            table=plain.get("table") or None,
            bucket=plain.get("bucket", ""),
            since=plain.get("since") or None,
            catalog=plain.get("catalog") or GLUE_CATALOG,
            database=plain.get("database", ""),
            retention=Retention(
                days=_given_number(plain, "retain_days"),
                last=_whole_number(plain, "retain_last", RETAIN_LAST),
                orphan_days=_whole_number(plain, "orphan_days", ORPHAN_DAYS),
            ),
        )


def resolve_glue_arguments(argv: Sequence[str], required: Iterable[str], optional: Iterable[str]) -> dict[str, str]:
    """Glue's own resolution of ``argv``: the required arguments, and those optional ones that are present."""
    from awsglue.utils import getResolvedOptions

    wanted = [*required, *(name for name in optional if f"--{name}" in argv)]
    return dict(getResolvedOptions(_only_named(argv, {f"--{name}" for name in wanted}), wanted))


def _only_named(argv: Sequence[str], names: set[str]) -> list[str]:
    """The script name and the ``--name value`` pairs of ``names``, nothing else.

    Glue hands a script every job argument, and getResolvedOptions parses with argparse, which takes an
    unknown option for an abbreviation of a known one: the stack's ``--conf`` would be read as
    ``--config_uri``. Only exact names reach it.
    """
    kept = list(argv[:1])
    for index, item in enumerate(argv[1:-1], start=1):
        if item in names:
            kept += [item, argv[index + 1]]
    return kept


def _plain_arguments(options: Mapping[str, str], required: Sequence[str]) -> dict[str, str]:
    """``options`` without Glue's ``--`` prefix; refused, naming them, when required ones are missing."""
    plain = {k.removeprefix("--"): v for k, v in options.items()}
    missing = [name for name in required if not plain.get(name)]
    if missing:
        raise JobArgumentError(f"missing job argument(s): {', '.join('--' + m for m in missing)}")
    return plain


def _whole_number(options: Mapping[str, str], name: str, default: int) -> int:
    number = _given_number(options, name)
    return default if number is None else number


def _given_number(options: Mapping[str, str], name: str) -> int | None:
    text = options.get(name)
    if text is None or text == "":
        return None
    if not text.isdigit():
        raise JobArgumentError(f"--{name} {text!r}: expected a whole number of at least 0")
    return int(text)


def run_maintenance(options: MaintenanceOptions, context: ReplayContext) -> list[MaintenanceResult]:
    """Run one maintenance action on one table or on every configured table, or reload one table."""
    if options.action == RELOAD:
        assert options.table is not None  # checked by from_options
        result = reload_table(context, context.config.table(options.table), since=options.since)
        log.info("%s", describe_reload(result))
        return [MaintenanceResult(result.table, RELOAD, reload_detail(result))]
    if options.action == "rejects-replay" or options.action == "rejects-accept":  # noqa: PLR1714 (narrows the type)
        assert options.table is not None  # checked by from_options
        table = context.config.table(options.table)
        replayed = replay_rejects(context, table, accept=REJECTS[options.action])
        detail = {"applied": replayed.applied, "dropped": replayed.dropped, "keys": replayed.keys}
        log.info("%s: %s: %s", table.name, options.action, detail)
        return [MaintenanceResult(table.name, options.action, {**detail, "snapshot_id": replayed.snapshot_id or 0})]
    tables = [options.table] if options.table else None
    return maintain(context, options.action, tables=tables, retention=options.retention)


def reload_detail(result: ReloadResult) -> dict[str, int]:
    counts = result.counts
    return {
        "load_files": len(result.load_files),
        "cdc_files": len(result.cdc_files),
        "skipped_cdc_files": len(result.skipped_cdc_files),
        "stale_load_files": len(result.stale_load_files),
        "rows": result.rows,
        "inserted": counts.inserts,
        "updated": counts.updates,
        "deleted": counts.deletes,
        "snapshot_id": result.snapshot_id,
        "previous_snapshot_id": result.previous_snapshot_id,
    }


def describe_reload(result: ReloadResult) -> str:
    """The reload's outcome in a few lines, as the CLI prints it and the Glue job logs it."""
    counts = result.counts
    lines = [
        f"{result.table}: reloaded from {len(result.load_files)} LOAD file(s) and {len(result.cdc_files)} CDC "
        f"file(s) from {result.boundary} on ({result.boundary_source}): {result.rows} row(s); "
        f"{counts.inserts} inserted, {counts.updates} updated, {counts.deletes} deleted "
        f"in change {result.snapshot_id}",
        f"  the table before the reload stays readable as change {result.previous_snapshot_id} "
        "(export/reconcile --as-of, rollback --to)",
    ]
    if result.skipped_cdc_files:
        lines.append(
            f"  {len(result.skipped_cdc_files)} earlier CDC file(s) left out as older than the reload, the last "
            f"{result.skipped_cdc_files[-1]}; if that is wrong, reload again with --since"
        )
    if result.stale_load_files:
        lines.append(
            f"  {len(result.stale_load_files)} LOAD file(s) older than the reload's first one left out: "
            + ", ".join(result.stale_load_files)
        )
    return "\n".join(lines)


def glue_maintenance_main(clients: JobClients, argv: Sequence[str] | None = None) -> list[MaintenanceResult]:
    """Entry point of the maintenance Glue script. The scheduled run (``--action all``) also puts how long the
    oldest landed file no table applied has waited (``OLDEST_WAITING_METRIC``; 0 when none waits), which the stack
    alarms on long before the raw bucket's lifecycle could expire it."""
    from cdc_lake.engine.metrics import CloudWatchPublisher
    from cdc_lake.engine.session import glue_spark_session

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    options = MaintenanceOptions.from_sys_argv(list(argv if argv is not None else sys.argv))
    store = S3Store(options.bucket, client=clients.s3)
    context = job_context(options, glue_spark_session(options.catalog), store=store)
    results = run_maintenance(options, context)
    if options.action == "all" and options.bucket:
        publish_oldest_waiting(context, CloudWatchPublisher(clients.cloudwatch, context.location.database))
    return results


def publish_oldest_waiting(context: ReplayContext, publisher: CloudWatchPublisher) -> float | None:
    """Put the seconds the oldest unapplied landed file has waited (0: none waits); None, and a warning, when the
    raw bucket cannot be read (the maintenance itself is done)."""
    try:
        oldest = oldest_waiting(context)
    except Exception as error:  # the tables are maintained: only the look at the raw bucket is lost
        log.warning("could not look for landed files waiting: %s", str(error)[:300])
        return None
    seconds = (dt.datetime.now(dt.UTC) - oldest).total_seconds() if oldest is not None else 0.0
    log.info("oldest landed file no table applied: %s", f"waiting {seconds:.0f} s" if oldest else "none")
    publisher.oldest_waiting(seconds)
    return seconds
