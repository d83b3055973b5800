"""The deployed pipeline, on a laptop: files land in a folder, each becomes the S3 event the Lambda would
receive, the Lambda's own handler routes it, and a local stand-in for the Glue client runs the job in
this process's Spark session. Locally each Glue job is named after its kind (``full_load``, ``cdc_replay``).
"""

from __future__ import annotations

import itertools
import logging
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from cdc_lake.config import PipelineConfig
from cdc_lake.dms_files import parse_key
from cdc_lake.exceptions import CdcLakeError
from cdc_lake.jobs import JobOptions, run_job
from cdc_lake.local.session import LOCAL_CATALOG
from cdc_lake.names import JOB_KINDS
from cdc_lake.replay import RunResult
from cdc_lake.storage import LocalFolderStore
from cdc_lake.tables import LakeLocation

log = logging.getLogger(__name__)

LOCAL_BUCKET = "local-landing"


@dataclass
class LocalJobRun:
    """A job run as Glue would report it: SUCCEEDED with its result, or FAILED with the error message."""

    run_id: str
    job: str
    arguments: dict[str, str]
    result: RunResult | None = None
    error: str | None = None
    seconds: float = 0.0

    @property
    def state(self) -> str:
        return "SUCCEEDED" if self.error is None else "FAILED"


class LocalGlueClient:
    """Implements the one Glue call the Lambda makes, ``start_job_run``, by running the job here.

    Like Glue, starting a run succeeds even when the run then fails: the failure is on the run.
    """

    def __init__(
        self,
        spark: SparkSession,
        config: PipelineConfig,
        store: LocalFolderStore,
        location: LakeLocation,
        on_run: Callable[[LocalJobRun], None] | None = None,
    ) -> None:
        self._spark = spark
        self._config = config
        self._store = store
        self._location = location
        self._on_run = on_run
        self._ids = itertools.count(1)
        self.runs: list[LocalJobRun] = []

    def start_job_run(self, JobName: str, Arguments: dict[str, str], **_: Any) -> dict[str, str]:
        kind = next((k for k in JOB_KINDS if k == JobName), None)
        if kind is None:
            raise ValueError(f"unknown job {JobName!r}")
        run = LocalJobRun(run_id=f"jr_local_{next(self._ids):06d}", job=JobName, arguments=dict(Arguments))
        options = JobOptions.from_options(
            {
                "config_uri": "(local)",
                "catalog": self._location.catalog,
                "database": self._location.database,
                **Arguments,
            }
        )
        started = time.monotonic()
        try:
            run.result = run_job(kind, options, self._spark, config=self._config, store=self._store)
        except CdcLakeError as error:
            run.error = str(error)
        except Exception as error:  # a Glue run fails on any error; the event that started it is kept
            run.error = f"{type(error).__name__}: {error}"
            log.debug("job run failed:\n%s", traceback.format_exc())
        run.seconds = time.monotonic() - started
        self.runs.append(run)
        if self._on_run:
            self._on_run(run)
        return {"JobRunId": run.run_id}


class LocalPipeline:
    """A landing folder, a warehouse folder and the routing between them."""

    def __init__(
        self,
        config: PipelineConfig,
        landing: str | Path,
        spark: SparkSession,
        *,
        database: str | None = None,
        on_run: Callable[[LocalJobRun], None] | None = None,
    ) -> None:
        self.config = config
        self.landing = Path(landing)
        self.store = LocalFolderStore(self.landing)
        self.location = LakeLocation(LOCAL_CATALOG, database or config.lake.database)
        self.glue = LocalGlueClient(spark, config, self.store, self.location, on_run)

    def deliver(self, keys: Iterable[str]) -> list[LocalJobRun]:
        """Deliver one S3 ObjectCreated event per key, in the given order (duplicates allowed)."""
        from dms_trigger.events import s3_object_created_event
        from dms_trigger.handler import GlueJobStarter, handle

        starter = GlueJobStarter(self.glue, {kind: kind for kind in JOB_KINDS})
        first = len(self.glue.runs)
        for key in keys:
            path = self.landing / key
            if not path.is_file():
                raise CdcLakeError(f"{key}: no such file under {self.landing}")
            stored = self.store.stat(key)
            event = s3_object_created_event(LOCAL_BUCKET, [(key, stored.size, stored.etag or "")])
            handle(event, config=self.config, starter=starter)
        return self.glue.runs[first:]

    def landed_keys(self) -> list[str]:
        """Every file in the landing folder, DMS data files in DMS order first, then the rest by name."""
        keys = [o.key for o in self.store.list("")]
        return sorted(keys, key=lambda key: _landing_order(key, self.config))

    def run_all(self) -> list[LocalJobRun]:
        return self.deliver(self.landed_keys())


def _landing_order(key: str, config: PipelineConfig) -> tuple[int, int, str, str]:
    """As DMS writes: every table's LOAD files first, then CDC files of all tables by time."""
    try:
        dms_file = parse_key(key, config)
    except CdcLakeError:
        return (1, 0, "", key)
    phase, position, _name = dms_file.order_key
    return (0, phase, position, key)


def failed_runs(runs: Sequence[LocalJobRun]) -> list[LocalJobRun]:
    return [r for r in runs if r.error is not None]
