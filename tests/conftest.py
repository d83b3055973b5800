"""Shared fixtures: one real local Spark session with Iceberg for the whole run, holding both lake paths (a
Hadoop catalog on a folder, and the Glue catalog with S3FileIO on a local AWS endpoint, configured as the
deployed jobs configure it), a fresh lake database and landing folder per test, and the lake under test. The
helpers tests share live in ``tests.support``."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from cdc_lake.core.names import GLUE_VERSION
from cdc_lake.local.jars import installed_glue_version as _installed_glue_version
from tests.support.aws import aws_client
from tests.support.lake import GLUE_LAKE_BUCKET, GLUE_WAREHOUSE, Lake, hadoop_twins, runtime_independent

if TYPE_CHECKING:
    from cdc_lake.local.trino import TrinoServer

# make test's budget: every case within 60 s on this workplace's machine (docs/testing.md).
pytest_plugins = ["tests.support.budget"]

os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
# The stacks the tests synthesize and run (aws-replay, glue-run) are on the Glue version this environment runs.
os.environ.setdefault("GLUE_VERSION", _installed_glue_version())
# Two shuffle partitions, one per core: a tiny batch's shuffle still splits (an order lost between partitions
# shows), and the Spark-heavy modules took 13 % less time than with 4 (132 s against 152 s, 2026-12-02).
os.environ.setdefault("CDC_LAKE_SHUFFLE_PARTITIONS", "2")
# Every JVM the tests start (this session's, and the CLI's in subprocesses) compiles with C1 alone: on tiny
# tables the C2 compiler's work never pays back and took about a third of the JVM's CPU. Results are the same.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

# The Node.js LTS make setup installs when the machine's is past its end of life: first on PATH for aws-cdk-lib's
# jsii, as the Makefile puts it, also when pytest is run by hand.
NODE_BIN = Path(__file__).parents[1] / ".node" / "node_modules" / ".bin"
if NODE_BIN.is_dir() and not os.environ.get("PATH", "").startswith(str(NODE_BIN)):
    os.environ["PATH"] = f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}"


# Under pytest-xdist (make test), the CDK suite stays on one worker, so the stacks it synthesizes once per
# session are synthesized once. Everything else, the PostgreSQL tests too (minutes each, against a cluster
# started in seconds), goes to whichever worker is free.
_ONE_WORKER_SUITES = ("infra",)


# make test's scope (docs/testing.md, "What runs where"). A test written for both lake paths runs on the Glue
# catalog + S3 path, the path AWS runs, and its Hadoop twin in make soak: the engine code is the same on both paths
# (they differ below Iceberg's catalog and FileIO interfaces and in where landed files are read from), and the
# Hadoop catalog runs in every test written for one path. CDC_LAKE_BOTH_PATHS=1 runs both.
BOTH_PATHS_ENV = "CDC_LAKE_BOTH_PATHS"
# On a runtime but the default (Glue 6.0), the cases whose outcome the runtime cannot change are left to the
# default's suite (runtime_independent). CDC_LAKE_EVERY_CASE=1 runs them there too.
EVERY_CASE_ENV = "CDC_LAKE_EVERY_CASE"
# How many each rule left, by each process that collected (pytest-xdist's workers send theirs to the controller,
# which reports).
_LEFT: dict[str, list[int]] = {"twins": [], "runtime": []}
_LEFT_OUTPUT = "cdc_lake_cases_left"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    from tests.support.source_tables import SUMMARIES  # filled by the real-source tests (tests/pg, tests/mariadb)

    for line in SUMMARIES:
        terminalreporter.write_line(f"real-source check: {line}")
    if any(_LEFT["twins"]):
        terminalreporter.write_line(
            f"{max(_LEFT['twins'])} test(s) written for both lake paths ran on the Glue catalog + S3 path alone "
            f"(their Hadoop twins run in make soak; {BOTH_PATHS_ENV}=1 runs both)"
        )
    if any(_LEFT["runtime"]):
        terminalreporter.write_line(
            f"Glue {_installed_glue_version()}: {max(_LEFT['runtime'])} case(s) the runtime cannot change were left "
            f"to Glue {GLUE_VERSION}'s suite ({EVERY_CASE_ENV}=1 runs them)"
        )


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """A pytest-xdist worker's counts of the cases it left, for the controller's summary."""
    for rule, count in getattr(node, "workeroutput", {}).get(_LEFT_OUTPUT, {}).items():
        _LEFT[rule].append(count)


def _leave(config: pytest.Config, items: list[pytest.Item], rule: str, cases: list[pytest.Item]) -> None:
    left = set(map(id, cases))
    items[:] = [item for item in items if id(item) not in left]
    config.hook.pytest_deselected(items=cases)
    _LEFT[rule].append(len(cases))
    if hasattr(config, "workeroutput"):
        config.workeroutput.setdefault(_LEFT_OUTPUT, {})[rule] = len(cases)


# Before pytest-xdist's own hook, which reads the xdist_group marks to name each test's group.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get(BOTH_PATHS_ENV) != "1":
        _leave(config, items, "twins", hadoop_twins(items))
    if _installed_glue_version() != GLUE_VERSION and os.environ.get(EVERY_CASE_ENV) != "1":
        _leave(config, items, "runtime", runtime_independent(items))
    tests = Path(__file__).parent
    for item in items:
        suite = item.path.relative_to(tests).parts[0]
        if suite in _ONE_WORKER_SUITES:
            item.add_marker(pytest.mark.xdist_group(suite))


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("warehouse")


@pytest.fixture(scope="session")
def aws_endpoint() -> Iterator[str]:
    """A local AWS endpoint (moto's server, extended as AWS behaves) for the whole run; its URL."""
    from cdc_lake.local.aws_endpoint import local_aws_endpoint

    with local_aws_endpoint() as url:
        yield url


@pytest.fixture(scope="session")
def trino(aws_endpoint: str) -> Iterator[TrinoServer]:
    """Trino (the engine Athena runs) on the local endpoint's Glue catalog and S3, for the whole run: its
    ``iceberg`` catalog reads the lake tables the deployed path wrote; ``trino.query(sql, params)`` gives rows."""
    from cdc_lake.local.trino import trino_server

    with trino_server(aws_endpoint) as server:
        yield server


@pytest.fixture(scope="session")
def spark(warehouse: Path, aws_endpoint: str) -> Iterator[SparkSession]:  # noqa: F821 - imported lazily
    from cdc_lake.core.catalogs import glue_catalog_conf
    from cdc_lake.local.aws_endpoint import endpoint_environment
    from cdc_lake.local.session import local_spark_session

    # The JVM's AWS SDKs (Iceberg's, S3A's) read credentials and region from the environment.
    for name, value in endpoint_environment(aws_endpoint).items():
        if name != "AWS_ENDPOINT_URL":
            os.environ.setdefault(name, value)
    aws_client(aws_endpoint, "s3").create_bucket(Bucket=GLUE_LAKE_BUCKET)
    session = local_spark_session(
        warehouse,
        app_name="cdc-lake-tests",
        cores=2,
        conf=glue_catalog_conf(GLUE_WAREHOUSE),
        aws_endpoint=aws_endpoint,
    )
    yield session
    session.stop()


@pytest.fixture
def database() -> str:
    """A lake database no other test uses, so tests never see each other's tables."""
    return f"t_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    path = tmp_path / "landing"
    path.mkdir()
    return path


@pytest.fixture
def lake(request: pytest.FixtureRequest, spark: Any, database: str, landing: Path, aws_endpoint: str) -> Lake:
    """The lake path under test: the Hadoop catalog, unless the test is marked ``on_both_paths``."""
    return Lake(getattr(request, "param", "hadoop"), spark, database, landing, aws_endpoint)
