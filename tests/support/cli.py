"""The ``cdc-lake`` command as the tests run it: in this process (``cli``), or ``aws-replay`` in its own process
against the local AWS endpoint; and the output lines a command must no longer show."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest


def cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str]:
    """The ``cdc-lake`` command run in this process (on the test session); its exit code and what it printed."""
    from cdc_lake.local.cli import main

    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out + out.err


def aws_replay_environment(endpoint: str) -> dict[str, str]:
    """The environment of a ``cdc-lake aws-replay`` process against the local endpoint (few shuffle partitions:
    the test's tables are small)."""
    from cdc_lake.local.aws_endpoint import endpoint_environment

    return {**os.environ, **endpoint_environment(endpoint), "CDC_LAKE_SHUFFLE_PARTITIONS": "4"}


def aws_replay(
    python: str | Path, config: Path, landing: Path, workdir: Path, environment: dict[str, str], timeout: int = 900
) -> tuple[int, str]:
    """``cdc-lake aws-replay`` of ``landing`` in its own process (``python``'s environment); its exit code and
    output."""
    command = [str(python), "-m", "cdc_lake.local.cli", "aws-replay", "-c", str(config), "-l", str(landing)]
    command += ["--workdir", str(workdir)]
    done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=timeout, check=False)
    return done.returncode, done.stdout + done.stderr


# Lines a JVM, Spark or the CDK once printed that a user can do nothing about (cdc_lake.local.session, infra.app's
# create_app): a command's output must not show them again.
UNACTIONABLE_LINES = (
    "resolves to a loopback address",  # Spark, when the host name resolves to loopback
    "Set SPARK_LOCAL_IP",
    "Unable to load native-hadoop library",  # Hadoop, without its optional native library
    "sun.reflect.Reflection.getCallerClass",  # log4j's Java 8 code, from a jar's copy of it
    "Setting default log level",  # Spark's advice for its interactive shell
    "To adjust logging level use sc.setLogLevel",
)
# The CDK's warnings about deployment values, which a synth for a deploy gives and a replay's must not.
DEPLOYMENT_WARNINGS = ("EXAMPLE VALUES (exampleValues=true)", "cdc-lake:exampleValues", "DMS's replication secret")


def unactionable_lines(output: str, markers: tuple[str, ...] = UNACTIONABLE_LINES) -> list[str]:
    """The lines of ``output`` that hold one of ``markers``."""
    return [line for line in output.splitlines() if any(marker in line for marker in markers)]
