"""Faults on both lake paths: landed files that vanish or change under a run, denied access, a missing lake
database or table, and commits refused because another run committed first."""

from __future__ import annotations

import http.client
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest

from cdc_lake.core.config import PipelineConfig, parse_config
from cdc_lake.core.dms_files import parse_key
from cdc_lake.core.exceptions import (
    AccessDeniedError,
    LakeDatabaseMissingError,
    LakeTableCreateError,
    LakeTableMissingError,
    LandedFileChangedError,
)
from cdc_lake.core.storage import ObjectStore, ReadAsListed, S3Store, StoredObject
from cdc_lake.engine import driver_batch
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.iceberg_errors import is_commit_conflict
from cdc_lake.engine.replay import replay
from cdc_lake.engine.tables import LakeLocation
from tests.support.aws import aws_client
from tests.support.configs import ITEMS_COLUMNS, items_config
from tests.support.lake import Lake, on_both_paths, write_file

pytestmark = pytest.mark.spark

# AWS's refusals are injected through a proxy of the local endpoint, which only the Glue + S3 path talks to.
on_glue = pytest.mark.parametrize("lake", ["glue"], indirect=True)

T = "dms/shop/items/"
LOAD = T + "LOAD00000001.csv"
CDC1 = T + "20250301-120000000.csv"
CDC2 = T + "20250301-120100000.csv"


def landed(lake: Lake, store: ObjectStore) -> list[str]:
    return [o.key for o in store.list("dms/")]


class HookedStore:
    """The lake's store with a hook run once, after its first listing or its first read of a file's head."""

    def __init__(self, inner: ObjectStore, after: str, hook: Callable[[], None]) -> None:
        self.inner = inner
        self.after = after
        self.hook: Callable[[], None] | None = hook

    def _fire(self, event: str) -> None:
        if event == self.after and self.hook is not None:
            hook, self.hook = self.hook, None
            hook()

    def list(self, prefix: str, start_after: str | None = None) -> list[StoredObject]:
        listed = self.inner.list(prefix, start_after)
        self._fire("list")
        return listed

    def uri(self, key: str) -> str:
        return self.inner.uri(key)

    def read_head(self, key: str, size: int) -> bytes:
        data = self.inner.read_head(key, size)
        self._fire("read")
        return data

    def read_listed(self, item: StoredObject) -> ReadAsListed | None:
        self._fire("read")  # the file changes as the run reads it: the read finds it so
        return self.inner.read_listed(item)

    def folders(self, prefix: str) -> list[str]:
        return self.inner.folders(prefix)

    def put(self, key: str, data: bytes) -> None:
        self.inner.put(key, data)


def remove(lake: Lake, key: str) -> None:
    """Delete a landed object where the lake path reads it from."""
    if lake.path == "hadoop":
        (lake.landing / key).unlink()
    else:
        aws_client(lake.endpoint, "s3").delete_object(Bucket=lake.bucket, Key=key)


def replace(lake: Lake, key: str, text: str) -> None:
    """Write other content to a landed object where the lake path reads it from."""
    if lake.path == "hadoop":
        (lake.landing / key).write_text(text)
    else:
        aws_client(lake.endpoint, "s3").put_object(Bucket=lake.bucket, Key=key, Body=text.encode())


# --- a proxy in front of the local endpoint that answers chosen requests itself --------------------------


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def glue_action(self) -> str | None:
        target = self.headers.get("x-amz-target", "")
        return target.split(".", 1)[1] if target.startswith("AWSGlue.") else None


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes


def glue_denied(action: str) -> Response:
    """Glue's answer to a role without ``glue:<action>``."""
    body = {
        "__type": "AccessDeniedException",
        "Message": f"User: arn:aws:sts::123456789012:assumed-role/cdc-lake-JobRole/GlueJobRunnerSession is not "
        f"authorized to perform: glue:{action} on resource: arn:aws:glue:us-east-1:123456789012:table/x/y",
    }
    headers = {"Content-Type": "application/x-amz-json-1.1", "x-amzn-ErrorType": "AccessDeniedException"}
    return Response(400, headers, json.dumps(body).encode())


def s3_denied() -> Response:
    """S3's answer to a role without the permission a request needs."""
    body = b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
    return Response(403, {"Content-Type": "application/xml"}, body)


Rule = Callable[[Request], "Response | None"]


class FaultyEndpoint:
    """Forwards every request to the local endpoint, except those a rule answers itself (a rule may also run
    something first, e.g. another run's commit, and return None to let the request through)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = urlsplit(upstream)
        self.rules: list[Rule] = []
        self.answered: list[tuple[str, int]] = []  # what the endpoint answered with an error, from upstream too
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                request = Request(self.command, self.path, headers, body)
                response = None
                for rule in list(endpoint.rules):
                    response = rule(request)
                    if response is not None:
                        break
                if response is None:
                    response = endpoint._forward(request)
                if response.status >= 400:
                    endpoint.answered.append(
                        (request.glue_action or f"{request.method} {request.path}", response.status)
                    )
                self.send_response(response.status)
                for name, value in response.headers.items():
                    if name.lower() not in ("transfer-encoding", "connection", "date", "server", "content-length"):
                        self.send_header(name, value)
                # A HEAD answer says the object's length and carries no body.
                head = self.command == "HEAD"
                length = response.headers.get("Content-Length", "0") if head else str(len(response.body))
                self.send_header("Content-Length", length)
                self.end_headers()
                if not head:
                    self.wfile.write(response.body)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _forward(self, request: Request) -> Response:
        connection = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=60)
        try:
            headers = {k: v for k, v in request.headers.items() if k not in ("host", "connection")}
            connection.request(request.method, request.path, body=request.body or None, headers=headers)
            answer = connection.getresponse()
            return Response(answer.status, dict(answer.getheaders()), answer.read())
        finally:
            connection.close()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture(scope="module")
def faulty_endpoint(aws_endpoint):
    # One for the module: the SDKs keep connections open, and Spark keeps a catalog once it has loaded it.
    endpoint = FaultyEndpoint(aws_endpoint)
    yield endpoint
    endpoint.close()


@pytest.fixture
def faulty(faulty_endpoint):
    faulty_endpoint.rules.clear()
    faulty_endpoint.answered.clear()
    yield faulty_endpoint
    faulty_endpoint.rules.clear()


FAULTY_CATALOG = "glue_faulty"


def faulty_location(lake: Lake, endpoint: FaultyEndpoint) -> LakeLocation:
    """The lake's database through a Glue catalog whose Glue requests pass ``endpoint`` (S3 goes direct)."""
    from cdc_lake.core.catalogs import endpoint_conf, glue_catalog_conf
    from tests.support.lake import GLUE_WAREHOUSE

    prefix = f"spark.sql.catalog.{FAULTY_CATALOG}"
    settings = {k: v for k, v in glue_catalog_conf(GLUE_WAREHOUSE, FAULTY_CATALOG).items() if k.startswith(prefix)}
    settings |= endpoint_conf(lake.endpoint, [FAULTY_CATALOG]) | {f"{prefix}.glue.endpoint": endpoint.url}
    for key, value in settings.items():
        lake.spark.conf.set(key, value)
    return LakeLocation(FAULTY_CATALOG, lake.database)


def applied_keys(lake: Lake) -> list[str]:
    """Every file the table's lineage records as applied, once per commit that applied it."""
    from cdc_lake.engine.record import snapshot_summaries

    keys = []
    for snapshot in snapshot_summaries(lake, items_config().tables[0]):
        recorded = (snapshot["summary"] or {}).get("cdc-lake.applied-files")
        keys += [f["key"] for f in json.loads(recorded)] if recorded else []
    return sorted(keys)


def context(lake: Lake, cfg: PipelineConfig, store: ObjectStore, location: LakeLocation | None = None) -> ReplayContext:
    """A run's context on ``lake`` (or on its tables at ``location``), reading the landed files from ``store``."""
    return ReplayContext(spark=lake.spark, location=location or lake.location, config=cfg, store=store)


def land_and_apply_load(lake: Lake, landing, cfg: PipelineConfig) -> int | None:
    write_file(landing, LOAD, "1,a\n2,b\n")
    lake.apply(cfg, LOAD)
    write_file(landing, CDC1, "U,1,a1\n")
    write_file(landing, CDC2, "D,2,b\n")
    return lake.head()


# --- landed files gone or changed under a run ----------------------------------------------------------------


@on_both_paths
@pytest.mark.parametrize("when", ["list", "read"])
@pytest.mark.parametrize("fault", ["deleted", "replaced"])
def test_a_file_gone_or_changed_after_listing_is_refused(spark, lake, landing, when, fault):
    cfg = items_config()
    before = land_and_apply_load(lake, landing, cfg)
    store = lake.store()
    fixed = "U,1,a1\nU,3,fixed in place\n"
    hook = (lambda: remove(lake, CDC1)) if fault == "deleted" else (lambda: replace(lake, CDC1, fixed))
    with pytest.raises(LandedFileChangedError) as refused:
        replay(context(lake, cfg, HookedStore(store, when, hook)), parse_key(CDC2, cfg))
    message = str(refused.value)
    assert message.startswith(CDC1 + ": ")
    if fault == "deleted":
        assert "gone from the landing bucket after this run listed it" in message
        assert "Trigger the run again once the file is back" in message
    else:
        assert "changed after this run listed it (ETag/size" in message
        assert "Trigger the run again: it applies the file as it is then" in message
    assert "nothing was applied and no file was removed" in message
    assert lake.head() == before
    assert lake.rows() == [(1, "a"), (2, "b")]
    assert landed(lake, store) == ([CDC1, CDC2, LOAD] if fault == "replaced" else [CDC2, LOAD])
    # What the message says to do works: with the file back (or as it is now), the run applies it once.
    if fault == "deleted":
        replace(lake, CDC1, "U,1,a1\n")
    replay(context(lake, cfg, store), parse_key(CDC2, cfg))
    assert lake.rows() == ([(1, "a1"), (3, "fixed in place")] if fault == "replaced" else [(1, "a1")])
    assert applied_keys(lake) == [CDC1, CDC2, LOAD]


@on_both_paths
def test_a_load_file_changed_while_appended_is_refused(spark, lake, landing):
    cfg = items_config()
    second = T + "LOAD00000002.csv"
    write_file(landing, LOAD, "1,a\n")
    write_file(landing, second, "2,b\n")
    store = lake.store()
    hooked = HookedStore(store, "read", lambda: replace(lake, second, "2,b\n3,c\n"))
    with pytest.raises(LandedFileChangedError, match=f"^{second}: changed after this run listed it"):
        replay(context(lake, cfg, hooked), parse_key(second, cfg))
    assert lake.rows() == []
    assert applied_keys(lake) == []
    assert landed(lake, store) == [LOAD, second]


# --- access denied -------------------------------------------------------------------------------------------


@on_glue
@pytest.mark.parametrize("operation", ["list", "read"])
def test_s3_refusing_the_landing_bucket_names_the_object_and_permission(spark, lake, landing, faulty, operation):
    cfg = items_config()
    before = land_and_apply_load(lake, landing, cfg)
    store = lake.store()
    if operation == "list":
        denied, action = f"s3://{lake.bucket}/{T}", "s3:ListBucket"
        faulty.rules.append(lambda r: s3_denied() if "list-type=2" in r.path else None)
    else:
        denied, action = f"s3://{lake.bucket}/{CDC1}", "s3:GetObject"
        faulty.rules.append(lambda r: s3_denied() if r.path.startswith(f"/{lake.bucket}/{CDC1}") else None)
    refused_store = S3Store(lake.bucket, client=aws_client(faulty.url, "s3"))
    with pytest.raises(AccessDeniedError) as refused:
        replay(context(lake, cfg, refused_store), parse_key(CDC2, cfg))
    assert str(refused.value).startswith(f"{denied}: access denied: the job's role lacks {action} on it;")
    assert lake.head() == before
    assert landed(lake, store) == [CDC1, CDC2, LOAD]


@on_glue
def test_s3_refusing_spark_a_landed_file_names_it_and_the_permission(spark, lake, landing, faulty, monkeypatch):
    # A batch this small is read in the driver, through the store (whose refusal the test above covers): here Spark
    # reads it, as it reads a larger batch.
    monkeypatch.setattr(driver_batch, "DRIVER_BATCH_BYTES", -1)
    cfg = items_config()
    # Spark reads this bucket through the faulty endpoint (S3A takes settings per bucket); the store does not.
    spark.sparkContext._jsc.hadoopConfiguration().set(f"fs.s3a.bucket.{lake.bucket}.endpoint", faulty.url)
    before = land_and_apply_load(lake, landing, cfg)
    store = lake.store()
    faulty.rules.append(lambda r: s3_denied() if r.path.startswith(f"/{lake.bucket}/{CDC1}") else None)
    with pytest.raises(AccessDeniedError) as refused:
        replay(context(lake, cfg, store), parse_key(CDC2, cfg))
    assert str(refused.value).startswith(
        f"s3://{lake.bucket}/{CDC1}: access denied: the job's role lacks s3:GetObject on it;"
    )
    assert lake.head() == before
    assert landed(lake, store) == [CDC1, CDC2, LOAD]


@on_glue
@pytest.mark.parametrize("action", ["GetTable", "UpdateTable", "CreateTable"])
def test_glue_refusing_the_lake_table_names_it_and_the_permission(spark, lake, landing, faulty, action):
    cfg = items_config()
    location = faulty_location(lake, faulty)
    if action == "CreateTable":
        before = None
        write_file(landing, LOAD, "1,a\n2,b\n")
    else:
        before = land_and_apply_load(lake, landing, cfg)
    store = lake.store()
    faulty.rules.append(lambda r: glue_denied(action) if r.glue_action == action else None)
    with pytest.raises(AccessDeniedError) as refused:
        replay(context(lake, cfg, store, location), parse_key(LOAD if action == "CreateTable" else CDC2, cfg))
    table = f"{FAULTY_CATALOG}.{lake.database}.shop_items"
    assert str(refused.value).startswith(f"{table}: access denied: the job's role lacks glue:{action} on it;")
    faulty.rules.clear()
    if action == "CreateTable":
        assert not spark.catalog.tableExists(lake.table("shop_items"))
    else:
        assert lake.head() == before
    assert landed(lake, store) == ([CDC1, CDC2, LOAD] if action != "CreateTable" else [LOAD])


# --- a missing lake database or table --------------------------------------------------------------------------


@on_glue
def test_a_missing_lake_database_is_refused_when_the_role_may_not_create_it(spark, lake, landing, faulty):
    cfg = items_config()
    write_file(landing, LOAD, "1,a\n")
    store = lake.store()
    location = faulty_location(lake, faulty)
    faulty.rules.append(lambda r: glue_denied("CreateDatabase") if r.glue_action == "CreateDatabase" else None)
    with pytest.raises(LakeDatabaseMissingError) as refused:
        replay(context(lake, cfg, store, location), parse_key(LOAD, cfg))
    assert str(refused.value) == (
        f"{FAULTY_CATALOG}.{lake.database}: the lake database does not exist, and the job's role may not create it "
        "(no glue:CreateDatabase, by design); nothing was applied and no file was removed. The stack creates it: "
        "check the job's --database, or deploy the stack again (cdk deploy), then trigger the run"
    )
    databases = aws_client(lake.endpoint, "glue").get_databases()["DatabaseList"]
    assert lake.database not in [d["Name"] for d in databases]
    assert landed(lake, store) == [LOAD]
    # Where the catalog lets a run create it (the local endpoint, a Hadoop folder), the run does.
    faulty.rules.clear()
    replay(context(lake, cfg, store, location), parse_key(LOAD, cfg))
    assert lake.rows() == [(1, "a")]


@on_both_paths
def test_a_table_dropped_during_a_run_is_refused_and_the_next_run_rebuilds_it(spark, lake, landing):
    cfg = items_config()
    land_and_apply_load(lake, landing, cfg)
    store = lake.store()
    hooked = HookedStore(store, "list", lambda: spark.sql(f"DROP TABLE {lake.table('shop_items')}"))
    with pytest.raises(LakeTableMissingError) as refused:
        replay(context(lake, cfg, hooked), parse_key(CDC2, cfg))
    assert str(refused.value).startswith(
        f"{lake.table('shop_items')}: the lake table (or its database) was dropped while this run applied it; "
        "nothing was applied and no file was removed. Trigger the run again: it creates the table anew from every "
        "landed file of shop.items"
    )
    assert landed(lake, store) == [CDC1, CDC2, LOAD]
    replay(context(lake, cfg, store), parse_key(CDC2, cfg))
    assert lake.rows() == [(1, "a1")]
    assert applied_keys(lake) == [CDC1, CDC2, LOAD]


@on_both_paths
def test_a_lake_table_the_catalog_will_not_create_is_refused_with_the_catalogs_reason(spark, lake, landing):
    table = {"name": "shop.items", "primary_key": ["id"], "columns": ITEMS_COLUMNS, "partition_by": ["bucket(0, id)"]}
    cfg = parse_config({"dms": {"bucket_folder": "dms"}, "tables": [table]})
    write_file(landing, LOAD, "1,a\n")
    with pytest.raises(LakeTableCreateError) as refused:
        lake.apply(cfg, LOAD)
    message = str(refused.value)
    # Not "dropped": the table never was; the catalog's own reason is kept.
    assert message.startswith(f"{lake.location.dotted('shop_items')}: the lake table could not be found or created: ")
    assert "IllegalArgumentException: Unsupported width for transform: bucket(0, id)" in message
    assert "Nothing was applied and no file was removed" in message
    assert not spark.catalog.tableExists(lake.location.dotted("shop_items"))
    assert landed(lake, lake.store()) == [LOAD]


# --- commits refused because another run committed first --------------------------------------------------------


@on_glue
def test_a_commit_glue_refuses_for_another_runs_commit_plans_again(spark, lake, landing, faulty, caplog):
    cfg = items_config()
    land_and_apply_load(lake, landing, cfg)
    store = lake.store()
    location = faulty_location(lake, faulty)
    other: list = []
    armed = threading.Event()

    def commit_first(request: Request) -> Response | None:
        # The other run commits between this run's GetTable and its UpdateTable: Glue sees a stale VersionId.
        if request.glue_action == "UpdateTable" and armed.is_set():
            armed.clear()
            other.append(replay(context(lake, cfg, store), parse_key(CDC1, cfg)))
        return None

    faulty.rules.append(commit_first)
    caplog.set_level(logging.WARNING, logger="cdc_lake.engine.commit")
    result = replay(context(lake, cfg, HookedStore(store, "list", armed.set), location), parse_key(CDC2, cfg))
    assert ("UpdateTable", 400) in faulty.answered  # Glue refused the stale version
    assert [r.applied_files for r in other] == [[CDC1]]
    assert result.attempts == 2
    assert result.applied_files == [CDC2]
    assert "shop.items: concurrent commit, planning again (attempt 1/" in caplog.text
    assert lake.rows() == [(1, "a1")]
    assert applied_keys(lake) == [CDC1, CDC2, LOAD]


def test_commit_conflicts_are_told_by_their_java_classes(spark):
    from py4j.protocol import Py4JJavaError

    jvm = spark.sparkContext._jvm
    none = spark.sparkContext._gateway.new_array(jvm.java.lang.Object, 0)
    iceberg = jvm.org.apache.iceberg.exceptions
    glue = jvm.software.amazon.awssdk.services.glue.model
    stale = glue.ConcurrentModificationException.builder().message("version changed").build()
    glue_refusal = iceberg.CommitFailedException(stale, "Cannot commit because Glue detected concurrent update", none)
    conflicting = iceberg.ValidationException("Found conflicting files that can contain records", none)
    glue_invalid = iceberg.ValidationException(
        glue.ValidationException.builder().message("bad input").build(), "Glue encountered a validation exception", none
    )

    def error(throwable) -> Py4JJavaError:
        return Py4JJavaError("An error occurred", throwable)

    assert is_commit_conflict(error(glue_refusal))
    assert is_commit_conflict(error(jvm.org.apache.spark.SparkException("Writing job aborted", glue_refusal)))
    assert is_commit_conflict(error(conflicting))
    assert not is_commit_conflict(error(glue_invalid))
    assert not is_commit_conflict(error(iceberg.NoSuchTableException("Table does not exist: t", none)))
