"""A replay run in a process of its own, for the kill tests: ``python -m tests.functional.killable_run CONFIG LANDING
WAREHOUSE DATABASE [--die-after fast_forward|commit_history|commit_row_delta] [--aws-endpoint URL --bucket BUCKET]
[--warm]``.

With ``--aws-endpoint`` it runs as deployed: the Glue Data Catalog and S3 on the local endpoint, files read from
``BUCKET`` (LANDING is then unused).

It prints ``ready`` once its Spark session is up, then drains every landed file of every table, as a replay job
run does; with ``--warm``, as the warm runs of every shard do (``runs.mode: warm``, whatever CONFIG says), with the
runs they hand tables over to. ``--die-after`` kills the process itself (SIGKILL) right after the first call of that
step returns: after main moved to a run's branch, after a history commit, or after a row delta's commit, before the
run records anything more.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
from pathlib import Path
from typing import Any

from cdc_lake.core.catalogs import glue_catalog_conf
from cdc_lake.core.config import load_config
from cdc_lake.core.names import GLUE_CATALOG, WARM_JOB
from cdc_lake.core.shards import shard_count
from cdc_lake.core.storage import LocalFolderStore, ObjectStore, S3Store
from cdc_lake.engine import commit, row_delta, steps
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.runs.coalesced import Budget, drain
from cdc_lake.engine.tables import LakeLocation
from cdc_lake.local.runtime import LocalGlueClient
from cdc_lake.local.session import LOCAL_CATALOG, local_spark_session
from tests.support.aws import aws_client
from tests.support.lake import GLUE_WAREHOUSE

# Where each step is looked up at call time: the module that calls it.
STEPS = {
    "fast_forward": (commit, "fast_forward"),
    "commit_history": (steps, "commit_history"),
    "commit_row_delta": (row_delta, "commit_row_delta"),
}


def die_after(step: str) -> None:
    module, name = STEPS[step]
    original = getattr(module, name)

    def dying(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(module, name, dying)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("config", type=Path)
    parser.add_argument("landing", type=Path)
    parser.add_argument("warehouse", type=Path)
    parser.add_argument("database")
    parser.add_argument("--die-after", choices=sorted(STEPS))
    parser.add_argument("--aws-endpoint")
    parser.add_argument("--bucket")
    parser.add_argument("--warm", action="store_true")
    args = parser.parse_args(argv)
    if args.die_after:
        die_after(args.die_after)
    config = load_config(args.config)
    if args.aws_endpoint:
        spark = local_spark_session(
            args.warehouse,
            app_name="cdc-lake-killable",
            cores=2,
            conf=glue_catalog_conf(GLUE_WAREHOUSE),
            aws_endpoint=args.aws_endpoint,
        )
        location = LakeLocation(GLUE_CATALOG, args.database)
        store: ObjectStore = S3Store(args.bucket, client=aws_client(args.aws_endpoint, "s3"))
    else:
        spark = local_spark_session(args.warehouse, app_name="cdc-lake-killable", cores=2)
        location, store = LakeLocation(LOCAL_CATALOG, args.database), LocalFolderStore(args.landing)
    print("ready", flush=True)
    context = ReplayContext(spark=spark, location=location, config=config, store=store)
    if args.warm:
        return warm_shards(context)
    outcome = drain(context, Budget.of(config, idle_seconds=0))
    print(f"done: {len(outcome.commits)} commit(s), failures {outcome.failures}", flush=True)
    return 1 if outcome.failures else 0


def warm_shards(context: ReplayContext) -> int:
    """Every shard's warm run, one after another, through the local Glue (handed runs run inside them)."""
    config = context.config
    warm = config.model_copy(update={"runs": config.runs.model_copy(update={"mode": "warm"})})
    context = dataclasses.replace(context, config=warm)
    glue = LocalGlueClient(context)
    for shard in range(shard_count(warm)):
        glue.start_job_run(JobName=WARM_JOB, Arguments={"--bucket": "landing", "--shard": str(shard)})
    failed = [run.error for run in glue.run_waiting() if run.error]
    print(f"done: {len(glue.runs)} run(s), failures {failed}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
