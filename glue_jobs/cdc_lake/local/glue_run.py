"""``cdc-lake glue-run``: one of the stack's Glue jobs, run here the way Glue runs it.

The job's script, its ``DefaultArguments`` and its single ``--conf`` value come from the synthesized template;
a run's arguments override the defaults key by key, as a Glue console rerun's do, and ``NonOverridableArguments``
win. Spark gets the ``--conf`` settings and the jars of the template's ``GlueVersion``; every AWS client (boto3,
Iceberg's Glue catalog and S3FileIO, S3A) reaches whatever ``AWS_ENDPOINT_URL`` names, or AWS itself when it is
unset. The script imports the installed ``cdc_lake``, the code its ``--extra-py-files`` zip is built from.
"""

from __future__ import annotations

import os
import runpy
import sys
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from cdc_lake.core.catalogs import AWS_ENDPOINT_ENV, parse_conf
from cdc_lake.core.exceptions import JobArgumentError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdc_lake.local.deployed import DeployedJob, DeployedStack


def parse_overrides(pairs: Sequence[str]) -> dict[str, str]:
    """``--ARG VALUE …`` as Glue run arguments; anything but pairs of a ``--`` name and a value is refused."""
    if len(pairs) % 2:
        raise JobArgumentError(f"arguments come as --NAME VALUE pairs; {pairs[-1]!r} has no value")
    overrides: dict[str, str] = {}
    for name, value in zip(pairs[::2], pairs[1::2], strict=True):
        if not name.startswith("--") or len(name) < 3:
            raise JobArgumentError(f"{name!r}: a job argument is named --NAME")
        overrides[name] = value
    return overrides


def job_session(job: DeployedJob, arguments: Mapping[str, str]) -> SparkSession:
    """The Spark session Glue would start for this run: its ``--conf`` settings, on its Glue version's jars."""
    from cdc_lake.local.session import local_spark_session

    if not job.glue_version:
        raise JobArgumentError(f"{job.name}: the template sets no GlueVersion")
    conf = parse_conf(arguments["--conf"]) if arguments.get("--conf") else {}
    return local_spark_session(
        app_name=job.name, conf=conf, aws_endpoint=os.environ.get(AWS_ENDPOINT_ENV), glue_version=job.glue_version
    )


def glue_run(stack: DeployedStack, job_name: str, overrides: Mapping[str, str] | None = None) -> str:
    """Run the stack's job (kind, name or logical id) with ``overrides`` on top of its defaults; returns the run id.

    The script's own failure (a refused table, a bad argument) propagates, as it fails a Glue run.
    """
    job = stack.job(job_name)
    arguments = job.arguments(overrides)
    run_id = arguments.get("--JOB_RUN_ID") or f"jr_local_{uuid.uuid4().hex}"
    job_session(job, arguments)
    argv = [str(job.script_path), "--JOB_NAME", job.name, "--JOB_RUN_ID", run_id]
    for name, value in arguments.items():
        if name not in ("--JOB_NAME", "--JOB_RUN_ID"):
            argv += [name, value]
    with _script_argv(argv):
        runpy.run_path(str(job.script_path), run_name="__main__")
    return run_id


@contextmanager
def _script_argv(argv: list[str]) -> Iterator[None]:
    saved = sys.argv
    sys.argv = argv
    try:
        yield
    finally:
        sys.argv = saved
