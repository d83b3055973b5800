"""The two Glue jobs as library functions: typed options in, one replay run out.

``full_load`` is started for LOAD files and ``cdc_replay`` for CDC files; both apply every pending file
of the table up to the triggering one, so either recovers from the other's lost events.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import SparkSession

from cdc_lake.config import PipelineConfig, load_config_uri
from cdc_lake.dms_files import JOB_FOR_FILE_KIND, parse_key
from cdc_lake.exceptions import JobArgumentError
from cdc_lake.maintenance import MaintenanceResult
from cdc_lake.names import GLUE_CATALOG, ORPHAN_DAYS, RETAIN_DAYS, RETAIN_LAST, JobKind
from cdc_lake.replay import RunResult, apply_up_to
from cdc_lake.storage import ObjectStore, S3Store
from cdc_lake.tables import LakeLocation

log = logging.getLogger(__name__)

REQUIRED_ARGUMENTS = ("config_uri", "bucket", "key", "table")
OPTIONAL_ARGUMENTS = {"catalog": GLUE_CATALOG, "database": ""}


@dataclass(frozen=True)
class JobOptions:
    """Arguments of a job run; the Lambda passes bucket, key and table, the job defines the rest."""

    config_uri: str
    bucket: str
    key: str
    table: str
    catalog: str = GLUE_CATALOG
    database: str = ""  # empty: the configuration's lake.database

    @classmethod
    def from_sys_argv(cls, argv: Sequence[str]) -> JobOptions:
        from awsglue.utils import getResolvedOptions

        present = [name for name in OPTIONAL_ARGUMENTS if f"--{name}" in argv]
        resolved = getResolvedOptions(list(argv), [*REQUIRED_ARGUMENTS, *present])
        return cls.from_options(resolved)

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> JobOptions:
        """Build from a plain mapping; keys may carry Glue's ``--`` prefix."""
        plain = {k.removeprefix("--"): v for k, v in options.items()}
        missing = [name for name in REQUIRED_ARGUMENTS if not plain.get(name)]
        if missing:
            raise JobArgumentError(f"missing job argument(s): {', '.join('--' + m for m in missing)}")
        known = {*REQUIRED_ARGUMENTS, *OPTIONAL_ARGUMENTS}
        return cls(**{k: v for k, v in plain.items() if k in known})


def run_job(
    kind: JobKind,
    options: JobOptions,
    spark: SparkSession,
    *,
    config: PipelineConfig | None = None,
    store: ObjectStore | None = None,
) -> RunResult:
    """Run one job: check the file suits this job, then apply the table's pending files up to it."""
    config = config or load_config_uri(options.config_uri)
    dms_file = parse_key(options.key, config)
    if dms_file.table != options.table:
        raise JobArgumentError(f"{options.key}: belongs to table {dms_file.table}, not {options.table}")
    if JOB_FOR_FILE_KIND[dms_file.kind] != kind:
        raise JobArgumentError(f"{options.key}: a {dms_file.kind.value} file was routed to the {kind} job")
    location = LakeLocation(options.catalog, options.database or config.lake.database)
    store = store or S3Store(options.bucket)
    result = apply_up_to(spark, config, location, store, dms_file)
    if result.already_applied:
        log.info("%s: %s already applied", options.table, options.key)
    else:
        log.info(
            "%s: applied %d file(s) up to %s in snapshot %s: %s, %d key(s) changed",
            result.table,
            len(result.applied_files),
            options.key,
            result.snapshot_id,
            result.counts.as_dict() if result.counts else {},
            result.keys_changed,
        )
    return result


def glue_main(kind: JobKind, argv: Sequence[str] | None = None) -> RunResult:
    """Entry point of the Glue scripts: resolve arguments, use Glue's Spark session, run."""
    from cdc_lake.session import glue_spark_session

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    options = JobOptions.from_sys_argv(list(argv if argv is not None else sys.argv))
    return run_job(kind, options, glue_spark_session())


MAINTENANCE_OPTIONAL = ("table", "catalog", "database", "retain_days", "retain_last", "orphan_days")


def maintenance_options(argv: Sequence[str]) -> dict[str, str]:
    """The maintenance job's arguments: --config_uri and --action, the rest optional."""
    from awsglue.utils import getResolvedOptions

    present = [name for name in MAINTENANCE_OPTIONAL if f"--{name}" in argv]
    return dict(getResolvedOptions(list(argv), ["config_uri", "action", *present]))


def glue_maintenance_main(argv: Sequence[str] | None = None) -> list[MaintenanceResult]:
    """Entry point of the maintenance Glue script."""
    from cdc_lake.maintenance import Retention, maintain
    from cdc_lake.session import glue_spark_session

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    options = maintenance_options(list(argv if argv is not None else sys.argv))
    config = load_config_uri(options["config_uri"])
    location = LakeLocation(options.get("catalog", GLUE_CATALOG), options.get("database") or config.lake.database)
    retention = Retention(
        days=int(options.get("retain_days", RETAIN_DAYS)),
        last=int(options.get("retain_last", RETAIN_LAST)),
        orphan_days=int(options.get("orphan_days", ORPHAN_DAYS)),
    )
    tables = [options["table"]] if options.get("table") else None
    return maintain(glue_spark_session(), config, location, options["action"], tables=tables, retention=retention)  # type: ignore[arg-type]
