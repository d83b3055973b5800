"""Shared fixtures: one real local Spark session with Iceberg for the whole run, holding both lake paths (a
Hadoop catalog on a folder, and the Glue catalog with S3FileIO on a local AWS endpoint, configured as the
deployed jobs configure it), a fresh lake database per test, and helpers to land hand-written DMS files."""

from __future__ import annotations

import datetime as dt
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from cdc_lake.local.jars import installed_glue_version as _installed_glue_version

if TYPE_CHECKING:
    from cdc_lake.core.config import PipelineConfig, TableSpec
    from cdc_lake.local.trino import TrinoServer

os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
# The stacks the tests synthesize and run (aws-replay, glue-run) are on the Glue version this environment runs.
os.environ.setdefault("GLUE_VERSION", _installed_glue_version())
os.environ.setdefault("CDC_LAKE_SHUFFLE_PARTITIONS", "4")
# Every JVM the tests start (this session's, and the CLI's in subprocesses) compiles with C1 alone: on tiny
# tables the C2 compiler's work never pays back and took about a third of the JVM's CPU. Results are the same.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

# The bucket holding the Glue path's warehouse on the local endpoint, as the stack's lake bucket does.
# The Node.js LTS make setup installs when the machine's is past its end of life: first on PATH for aws-cdk-lib's
# jsii, as the Makefile puts it, also when pytest is run by hand.
NODE_BIN = Path(__file__).parents[1] / ".node" / "node_modules" / ".bin"
if NODE_BIN.is_dir() and not os.environ.get("PATH", "").startswith(str(NODE_BIN)):
    os.environ["PATH"] = f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}"

GLUE_LAKE_BUCKET = "cdc-lake-tests-lake"
GLUE_WAREHOUSE = f"s3://{GLUE_LAKE_BUCKET}/warehouse/"
LAKE_PATHS = ("hadoop", "glue")


# Under pytest-xdist (make test), the CDK suite stays on one worker, so the stacks it synthesizes once per
# session are synthesized once. Everything else, the PostgreSQL tests too (minutes each, against a cluster
# started in seconds), goes to whichever worker is free.
_ONE_WORKER_SUITES = ("infra",)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    from tests.pg.checks import SUMMARIES  # filled by the real-source tests (tests/pg, tests/mariadb)

    for line in SUMMARIES:
        terminalreporter.write_line(f"real-source check: {line}")


# Before pytest-xdist's own hook, which reads the xdist_group marks to name each test's group.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
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


def aws_client(endpoint: str, service: str) -> Any:
    """A boto3 client of the local endpoint, given explicitly: tests that use moto's in-process mock keep theirs."""
    import boto3

    from cdc_lake.local.aws_endpoint import DUMMY_CREDENTIAL

    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=DUMMY_CREDENTIAL,
        aws_secret_access_key=DUMMY_CREDENTIAL,
    )


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


# The one table most tests replay: shop.items, keyed by id.
ITEMS_COLUMNS: list[dict[str, Any]] = [{"name": "id", "type": "bigint"}, {"name": "label", "type": "string"}]


# The generator's order lines as the oracle tests configure them: a composite key and a value of each kind of number;
# each test adds the columns it needs beside them.
ORDER_ITEMS_COLUMNS: list[dict[str, Any]] = [
    {"name": "order_id", "type": "bigint"},
    {"name": "line_no", "type": "int"},
    {"name": "sku", "type": "string"},
    {"name": "quantity", "type": "smallint"},
    {"name": "unit_price", "type": "decimal(10,2)"},
    {"name": "weight_kg", "type": "double"},
]


def items_config(
    columns: list[dict[str, Any]] = ITEMS_COLUMNS, history: bool = False, lake: dict[str, Any] | None = None, **dms: Any
) -> PipelineConfig:
    """A configuration of shop.items alone (``columns``, SCD2 ``history``), DMS files under ``dms/`` with
    these DMS settings, and ``lake`` settings; ``schema_changes`` goes to the table."""
    from cdc_lake.core.config import parse_config

    table: dict[str, Any] = {"name": "shop.items", "primary_key": ["id"], "columns": columns, "history": history}
    if "schema_changes" in dms:
        table["schema_changes"] = dms.pop("schema_changes")
    return parse_config({"dms": {"bucket_folder": "dms", **dms}, "lake": lake or {}, "tables": [table]})


def write_file(landing: Path, key: str, text: str) -> str:
    """Land a DMS file with exactly this text; returns its key."""
    path = landing / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return key


def cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str]:
    """The ``cdc-lake`` command run in this process (on the test session); its exit code and what it printed."""
    from cdc_lake.local.cli import main

    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out + out.err


def apply_at_once(lake: Lake, config: Any, keys: list[str]) -> list[BaseException]:
    """Runs triggered by each of ``keys`` at once, one thread each (the newest first); what they raised."""
    import threading

    errors: list[BaseException] = []

    def trigger(key: str) -> None:
        try:
            lake.apply(config, key)
        except BaseException as error:  # returned to the test
            errors.append(error)

    threads = [threading.Thread(target=trigger, args=(k,)) for k in reversed(keys)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def run_parts(lake: Lake, table: str) -> list[str]:
    """The parts of runs (snapshots a run wrote before its last, ``PART``) in the lake table's lineage, oldest
    first: main's history shows only where runs moved it."""
    from cdc_lake.engine.iceberg_java import branch_lineage
    from cdc_lake.engine.record import PART

    lineage = branch_lineage(lake.spark, lake.location.dotted(table))
    return [summary[PART] for _, summary in reversed(list(lineage)) if PART in summary]


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
    import subprocess

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


def assert_lake_equals_oracle(pipeline: Any, expected: Path, out: Path) -> None:
    """Every table of the pipeline, exported to ``out``, equals the generator's expected table in ``expected``."""
    from cdc_lake.core.jsonl import read_jsonl
    from cdc_lake.ops.export import export_tables

    export_tables(pipeline.context, out)
    for table in pipeline.config.tables:
        actual, wanted = read_jsonl(out / f"{table.name}.jsonl"), read_jsonl(expected / f"{table.name}.jsonl")
        assert len(actual) == len(wanted), f"{table.name}: {len(actual)} rows in the lake, {len(wanted)} expected"
        assert actual == wanted, f"{table.name}: lake differs from the oracle"


@dataclass
class Lake:
    """One lake path under test: where the tables live (catalog, database) and where DMS files are read from.

    ``hadoop``: the Hadoop catalog on a folder, files read from the landing folder. ``glue``: the Glue Data
    Catalog with S3FileIO on the local endpoint, files read from a bucket that mirrors the landing folder
    (each ``store()`` puts what changed there since, as DMS would have written it). Its ``spark`` and ``location``
    make it an ``engine.tables.Lake`` to the library's functions that take one.
    """

    path: str
    spark: Any
    database: str
    landing: Path
    endpoint: str
    bucket: str = field(default_factory=lambda: f"landing-{uuid.uuid4().hex[:12]}")
    _put: dict[str, tuple[int, int]] | None = None

    @property
    def catalog(self) -> str:
        from cdc_lake.core.names import GLUE_CATALOG
        from cdc_lake.local.session import LOCAL_CATALOG

        return LOCAL_CATALOG if self.path == "hadoop" else GLUE_CATALOG

    @property
    def location(self) -> Any:
        from cdc_lake.engine.tables import LakeLocation

        return LakeLocation(self.catalog, self.database)

    def table(self, name: str) -> str:
        return f"{self.catalog}.{self.database}.{name}"

    def apply(self, config: Any, key: str) -> Any:
        """Replay ``key``'s table up to ``key``, as a run triggered by it does; its RunResult."""
        from cdc_lake.core.dms_files import parse_key
        from cdc_lake.engine.context import ReplayContext
        from cdc_lake.engine.replay import replay

        return replay(
            ReplayContext(spark=self.spark, location=self.location, config=config, store=self.store()),
            parse_key(key, config),
        )

    def store(self) -> Any:
        from cdc_lake.core.storage import LocalFolderStore, S3Store

        if self.path == "hadoop":
            return LocalFolderStore(self.landing)
        s3 = aws_client(self.endpoint, "s3")
        if self._put is None:
            s3.create_bucket(Bucket=self.bucket)
            self._put = {}
        for path in sorted(p for p in self.landing.rglob("*") if p.is_file()):
            key = path.relative_to(self.landing).as_posix()
            info = path.stat()
            if self._put.get(key) != (info.st_size, info.st_mtime_ns):
                s3.put_object(Bucket=self.bucket, Key=key, Body=path.read_bytes())
                self._put[key] = (info.st_size, info.st_mtime_ns)
        return S3Store(self.bucket, client=s3)


@pytest.fixture
def lake(request: pytest.FixtureRequest, spark: Any, database: str, landing: Path, aws_endpoint: str) -> Lake:
    """The lake path under test: the Hadoop catalog, unless the test is marked ``on_both_paths``."""
    return Lake(getattr(request, "param", "hadoop"), spark, database, landing, aws_endpoint)


# The test once on each lake path: the Hadoop catalog, and the Glue catalog + S3 as deployed.
on_both_paths = pytest.mark.parametrize("lake", LAKE_PATHS, indirect=True)


@dataclass(frozen=True)
class SourceCheckRun:
    differences: list[Any]  # cdc_lake.ops.source_catalog.Difference
    metric: list[float]  # the SourceDifferences values put


def run_source_check_job(
    config_file: Path, secret: dict[str, Any], engine: str, ca: Path, database: str = ""
) -> SourceCheckRun:
    """The source-check Glue job through its entry, its clients on moto: the configuration in S3, the source's
    connection details in a Secrets Manager secret as RDS writes them, checked TLS with the server's ``ca``."""
    import json

    import boto3
    from moto import mock_aws

    from cdc_lake.core.names import METRICS_NAMESPACE, SOURCE_DIFFERENCES_METRIC
    from cdc_lake.jobs.entry import glue_entry
    from cdc_lake.jobs.source_check import SOURCE_CHECK

    options = {"region_name": "us-east-1", "aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
    with mock_aws():
        s3, secrets, cloudwatch = (boto3.client(n, **options) for n in ("s3", "secretsmanager", "cloudwatch"))
        s3.create_bucket(Bucket="assets")
        s3.put_object(Bucket="assets", Key="tables.yaml", Body=config_file.read_bytes())
        arn = secrets.create_secret(Name="cdc-lake/source", SecretString=json.dumps(secret))["ARN"]
        arguments = {"--config_uri": "s3://assets/tables.yaml", "--source_secret": arn, "--source_engine": engine,
                     "--source_ca": str(ca)}  # fmt: skip
        if database:
            arguments["--source_database"] = database
        argv = ["source_check.py", *(item for pair in arguments.items() for item in pair)]
        found = glue_entry(SOURCE_CHECK, argv, lambda service: boto3.client(service, **options))
        stats = cloudwatch.get_metric_statistics(
            Namespace=METRICS_NAMESPACE, MetricName=SOURCE_DIFFERENCES_METRIC,
            Dimensions=[{"Name": "Pipeline", "Value": "cdc_lake"}],
            StartTime=dt.datetime(2000, 1, 1), EndTime=dt.datetime(2100, 1, 1), Period=60, Statistics=["Maximum"],
        )  # fmt: skip
    return SourceCheckRun(found, [p["Maximum"] for p in stats["Datapoints"]])


def check_written_shop(out: Path) -> TableSpec:
    """The configuration ``config-from-source`` wrote to ``out`` from a source test's typed schema, ``shop``: its
    orders and typed tables in that order (log has no key: only a comment lists it), orders with its key and NOT NULL
    columns as the source declares them. Returns typed, whose types each source maps its own way."""
    from cdc_lake.core.config import load_config

    config = load_config(out)
    assert [t.name for t in config.tables] == ["shop.orders", "shop.typed"]
    orders, typed = config.tables
    assert orders.primary_key == ["order_id", "line"]
    assert [(c.name, c.nullable) for c in orders.columns] == [("order_id", False), ("line", False), ("qty", False)]
    return typed


def check_source_differences(
    capsys: pytest.CaptureFixture[str], config_file: Path, source: str, schema: str, source_bigint: str
) -> None:
    """``config-check-source`` of ``config_file`` against ``source`` once a source test changed its typed schema
    (``schema``): typed gained note, lost body and had i widened to bigint (``source_bigint``, as the source spells
    the type), and the orders key lost line. Each of the four differences is named."""
    code, printed = cli(capsys, "config-check-source", "-c", config_file, "--source", source)
    assert code == 1, printed
    added = f"{schema}.typed: column-added: note text (add it at the end of columns as {{name: note, type: string}})"
    assert added in printed
    assert f"{schema}.typed: column-dropped: body (mark it dropped: true)" in printed
    assert f"{schema}.typed: type-changed: i: source {source_bigint} (bigint), configured int" in printed
    assert f"{schema}.orders: key-changed: source ['order_id'], configured ['order_id', 'line']" in printed
    assert "2 table(s) checked: 4 difference(s)" in printed
