"""A local AWS endpoint for tests and the local demo: moto's server in a subprocess, bound to 127.0.0.1.

A subprocess, not moto's in-process mock, so that every client reaches the same endpoint by URL: boto3 in
this process, in the Lambda's local stand-in and in Iceberg's Java ``GlueCatalog`` inside Spark's JVM
(``AWS_ENDPOINT_URL``, see ``endpoint_environment``). Before serving, the subprocess restores the Glue
behaviours the pipeline relies on and moto 5.2.5 lacks (``_extend_moto``); moto is imported there only,
so this module imports without moto installed.

``python -m cdc_lake.local.aws_endpoint`` prints ``ready http://127.0.0.1:PORT`` and serves until SIGTERM
or SIGINT. It counts the requests it serves (``served_requests``): what a run would ask of AWS, and wait for.

It answers in about a millisecond, where AWS answers each request over the network: with a delay profile
(``DELAY_ENV``, or ``local_aws_endpoint(delay=...)``) it holds each Glue Data Catalog and S3 request for about as
long as AWS takes in the same Region (``DELAY_PROFILES``), so that a benchmark sees the round trips a run makes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import random
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from cdc_lake.core.catalogs import AWS_ENDPOINT_ENV
from cdc_lake.core.exceptions import EndpointStartError

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment
    from moto.core.responses import ActionResult
    from moto.glue.responses import GlueResponse

ACCESS_KEY_ENV = "AWS_ACCESS_KEY_ID"
SECRET_KEY_ENV = "AWS_SECRET_ACCESS_KEY"
REGION_ENV = "AWS_REGION"
DEFAULT_REGION_ENV = "AWS_DEFAULT_REGION"
DEFAULT_REGION = "us-east-1"
DUMMY_CREDENTIAL = "testing"
HOST = "127.0.0.1"
READY = "ready"

_MODULE = "cdc_lake.local.aws_endpoint"
# The folder holding the cdc_lake package, so the subprocess imports the same code as its parent.
_PACKAGE_PARENT = Path(__file__).resolve().parents[2]
_STOPPABLE_RUN_STATES = frozenset({"STARTING", "RUNNING", "WAITING", "STOPPING"})
# UpdateTable's version check and moto's update, one request at a time (the server is threaded).
_UPDATE_TABLE_LOCK = threading.Lock()
# GET: the requests served so far, by kind (``_kind``), as JSON; DELETE: the same, and the counts start again.
REQUESTS_PATH = "/_cdc_lake/requests"
# The seconds of delay the endpoint added, among the counts of REQUESTS_PATH.
DELAYED = "delay_s"
# PUT: the delay profile named by the body holds the requests from now on (``set_delay``).
DELAY_PATH = "/_cdc_lake/delay"
DELAY_ENV = "CDC_LAKE_AWS_DELAY"

# Median seconds per request, in-Region, from ../shared/dms-format.md "AWS round trips" (its sources: AWS's S3
# performance guide, awslabs/mountpoint-s3's latency bench: 20-34 ms to a small object's first byte and 23-39 ms
# for a small write; cdouglas/endive's 4 KiB GET p50 27 ms, p99 113 ms; 1,000-object listings 130-180 ms). Glue
# publishes no latency: GetTable and UpdateTable are assumed a little slower than an S3 read and write.
IN_REGION: dict[str, float] = {
    "s3:GET": 0.025,
    "s3:HEAD": 0.020,
    "s3:PUT": 0.050,  # and PUT_PER_MIB for each MiB sent
    "s3:LIST": 0.100,
    "s3:DELETE": 0.030,
    "s3:POST": 0.050,
    "glue:GetTable": 0.040,
    "glue:UpdateTable": 0.075,
    "glue:CreateTable": 0.075,
    "glue": 0.040,  # any other Glue Data Catalog action
}
PUT_PER_MIB = 0.020
# AWS's own statement for S3 ("roughly 100-200 milliseconds" for small objects), and Glue twice the assumption.
PESSIMISTIC = {kind: seconds * (6 if kind.startswith("s3") else 2) for kind, seconds in IN_REGION.items()}
DELAY_PROFILES: dict[str, dict[str, float]] = {"0": {}, "in-region": IN_REGION, "pessimistic": PESSIMISTIC}
# Request times are long-tailed: a log-normal around the median whose p99 is about 4x it, as measured for S3 GETs.
TAIL_SIGMA = math.log(4) / 2.326


def aws_region() -> str:
    """The region AWS clients of this process use: the SDKs' variables, else the local endpoint's default."""
    return os.environ.get(REGION_ENV) or os.environ.get(DEFAULT_REGION_ENV) or DEFAULT_REGION


def endpoint_environment(url: str, region: str = DEFAULT_REGION) -> dict[str, str]:
    """What an AWS client (boto3, the AWS SDK for Java) reads to reach the endpoint at ``url``."""
    return {
        AWS_ENDPOINT_ENV: url,
        ACCESS_KEY_ENV: DUMMY_CREDENTIAL,
        SECRET_KEY_ENV: DUMMY_CREDENTIAL,
        REGION_ENV: region,
        DEFAULT_REGION_ENV: region,
    }


@contextlib.contextmanager
def local_aws_endpoint(
    startup_timeout: float = 30.0, stop_timeout: float = 5.0, delay: str | None = None
) -> Iterator[str]:
    """Serve a local AWS endpoint for the ``with`` block; yields its URL. The subprocess is terminated on exit
    (killed if it outlives ``stop_timeout``); its stderr goes to a file, not a pipe nobody drains. ``delay`` names a
    profile of ``DELAY_PROFILES`` (default: ``DELAY_ENV``'s, else none)."""
    python_path = os.pathsep.join(filter(None, [str(_PACKAGE_PARENT), os.environ.get("PYTHONPATH")]))
    environment = {**os.environ, "PYTHONPATH": python_path}
    if delay is not None:
        environment[DELAY_ENV] = delay
    delay_profile(environment.get(DELAY_ENV))  # refused here, not in the child
    with tempfile.TemporaryFile() as stderr:
        server = subprocess.Popen(
            [sys.executable, "-m", _MODULE],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=environment,
        )
        with server:  # closes the pipe and reaps the child
            try:
                yield _await_ready(server, stderr, startup_timeout)
            finally:
                stop_process(server, stop_timeout)


def _await_ready(server: subprocess.Popen[bytes], stderr: IO[bytes], timeout: float) -> str:
    """Read the subprocess's ready line; its URL is the rest of the line."""
    assert server.stdout is not None
    deadline = time.monotonic() + timeout
    output = b""
    with selectors.DefaultSelector() as selector:
        selector.register(server.stdout, selectors.EVENT_READ)
        while b"\n" not in output:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise EndpointStartError(f"the local AWS endpoint did not report ready within {timeout:g}s")
            if not selector.select(remaining):
                continue
            chunk = os.read(server.stdout.fileno(), 4096)
            if not chunk:
                code = server.wait(timeout=max(remaining, 1.0))
                stderr.seek(0)
                detail = stderr.read().decode("utf-8", "replace").strip()
                raise EndpointStartError(f"the local AWS endpoint exited with code {code} before ready:\n{detail}")
            output += chunk
    word, _, url = output.partition(b"\n")[0].decode().partition(" ")
    if word != READY or not url:
        raise EndpointStartError(f"the local AWS endpoint printed {output!r} instead of '{READY} <url>'")
    return url


def delay_profile(name: str | None) -> dict[str, float]:
    """The median delays of the profile ``name`` (None or empty: none)."""
    if not name:
        return {}
    if name not in DELAY_PROFILES:
        raise EndpointStartError(f"{DELAY_ENV}={name!r}: use one of {', '.join(DELAY_PROFILES)}")
    return DELAY_PROFILES[name]


def served_requests(url: str, *, reset: bool = False) -> Counter[str]:
    """The requests the local endpoint at ``url`` has served, by kind: ``glue:GetTable`` or ``sqs:ReceiveMessage``
    (an action of a JSON service), ``s3:GET metadata.json`` (a method and the object's kind of file); with ``reset``,
    counting (and ``served_delay``'s sum) starts again."""
    served = _served(url, reset)
    served.pop(DELAYED, None)
    return Counter(served)


def set_delay(url: str, name: str) -> None:
    """Hold the requests the endpoint at ``url`` serves from now on as the delay profile ``name`` says."""
    import urllib.request

    delay_profile(name)  # refused here, with the names to use
    request = urllib.request.Request(url + DELAY_PATH, data=name.encode(), method="PUT")
    with urllib.request.urlopen(request, timeout=10):
        pass


def served_delay(url: str) -> float:
    """The seconds the endpoint's delay profile has held the requests counted by ``served_requests`` for."""
    return float(_served(url, reset=False).get(DELAYED, 0.0))


def _served(url: str, reset: bool) -> dict[str, Any]:
    import urllib.request

    request = urllib.request.Request(url + REQUESTS_PATH, method="DELETE" if reset else "GET")
    with urllib.request.urlopen(request, timeout=10) as response:
        data: dict[str, Any] = json.load(response)
    return data


# JSON services whose target prefix is not their name ("AmazonSQS.SendMessage": boto3's SQS speaks JSON).
_JSON_SERVICES = {"GraniteServiceVersion20100801": "cloudwatch", "AmazonSQS": "sqs"}


def _kind(environ: WSGIEnvironment) -> str:
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:  # "AWSGlue.GetTable"
        service, _, action = target.partition(".")
        return f"{_JSON_SERVICES.get(service, service.removeprefix('AWS').lower())}:{action}"
    # A REST request's service is in its signature's scope: "Credential=KEY/20250301/us-east-1/s3/aws4_request".
    scope = environ.get("HTTP_AUTHORIZATION", "").partition("Credential=")[2].split(",")[0].split("/")
    service = scope[3] if len(scope) > 3 else "unsigned"
    method = environ.get("REQUEST_METHOD", "")
    path = environ.get("PATH_INFO", "").strip("/")
    if service == "s3" and method == "GET" and ("/" not in path or "list-type" in environ.get("QUERY_STRING", "")):
        return "s3:LIST"  # a GET on the bucket: priced as a PUT, not as a GET
    name = path.rsplit("/", 1)[-1]
    suffix = "metadata.json" if name.endswith(".metadata.json") else name.rpartition(".")[2] if "." in name else ""
    return f"{service}:{method} {suffix}".rstrip()


def _delay_kind(environ: WSGIEnvironment) -> str:
    """The request's entry in a delay profile: a Glue action, or an S3 method (``s3:LIST`` for a listing)."""
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    if target.startswith("AWSGlue."):
        return "glue:" + target.partition(".")[2]
    kind = _kind(environ)
    if not kind.startswith("s3:"):
        return ""
    return kind.partition(" ")[0]


def _delay(profile: dict[str, float], environ: WSGIEnvironment, rng: random.Random) -> float:
    """Seconds to hold the request for, drawn around its median in ``profile`` (0: not a delayed kind)."""
    kind = _delay_kind(environ)
    median = profile.get(kind, profile.get(kind.partition(":")[0], 0.0) if kind.startswith("glue:") else 0.0)
    if kind == "s3:PUT":
        median += PUT_PER_MIB * int(environ.get("CONTENT_LENGTH") or 0) / 2**20
    return median * math.exp(rng.gauss(0.0, TAIL_SIGMA)) if median else 0.0


class _Counting:
    """The endpoint's WSGI application, counting each request by ``_kind``, holding it as its delay profile says,
    and answering ``REQUESTS_PATH``."""

    def __init__(self, app: WSGIApplication, profile: dict[str, float] | None = None) -> None:
        self.app = app
        self.counts: Counter[str] = Counter()
        self.delayed = 0.0
        self.lock = threading.Lock()
        self.profile = profile or {}
        self.rng = random.Random(20261128)  # the same draws each run: benchmarks compare like with like

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == DELAY_PATH:
            length = int(environ.get("CONTENT_LENGTH") or 0)
            name = environ["wsgi.input"].read(length).decode()
            with self.lock:
                self.profile = delay_profile(name)
            start_response("204 No Content", [])
            return []
        if environ.get("PATH_INFO") == REQUESTS_PATH:
            with self.lock:
                body = json.dumps({**self.counts, DELAYED: round(self.delayed, 6)}).encode()
                if environ.get("REQUEST_METHOD") == "DELETE":
                    self.counts.clear()
                    self.delayed = 0.0
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        with self.lock:
            self.counts[_kind(environ)] += 1
            pause = _delay(self.profile, environ, self.rng) if self.profile else 0.0
            self.delayed += pause
        if pause:
            time.sleep(pause)  # this request's thread only: the server is threaded, as AWS serves in parallel
        return self.app(environ, start_response)


def stop_process(server: subprocess.Popen[bytes], timeout: float) -> None:
    """Stop a local server: asked first, killed when it does not exit within ``timeout`` seconds."""
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _update_table_at_version(
    moto_update_table: Callable[[GlueResponse], ActionResult],
) -> Callable[[GlueResponse], ActionResult]:
    """Wrap moto's UpdateTable to honour the request's ``VersionId`` as Glue does: an update naming a version
    that is no longer the table's current one is refused with ConcurrentModificationException (400), and
    the table is left as it is. Iceberg's Java GlueCatalog sends the VersionId it read with GetTable and
    relies on this refusal as its optimistic lock; moto 5.2.5 ignores the VersionId, so two commits could
    both win. Without a VersionId the update goes through, as on Glue."""
    from moto.glue.exceptions import GlueClientError

    def update_table(self: GlueResponse) -> ActionResult:
        expected = self.parameters.get("VersionId")
        with _UPDATE_TABLE_LOCK:
            if expected is not None:
                database, name = self.parameters["DatabaseName"], self.parameters["TableInput"]["Name"]
                current = str(self.glue_backend.get_table(database, name)._current_version)
                if str(expected) != current:
                    # moto's glue has no class for this error; it raises it this way itself (resource policies).
                    raise GlueClientError(
                        "ConcurrentModificationException",
                        f"table {database}.{name} is at version {current}, not {expected}: it changed since read",
                    )
            return moto_update_table(self)

    return update_table


def _batch_stop_job_run(self: GlueResponse) -> ActionResult:
    """Glue's BatchStopJobRun, which moto 5.2.5 lacks: each named run still in progress becomes ``STOPPED``.
    Runs the job does not have, or that already ended, are reported in ``Errors`` and left as they are."""
    from moto.core.responses import ActionResult
    from moto.core.utils import utcnow

    job_name = self.parameters["JobName"]
    runs = {run.job_run_id: run for run in self.glue_backend.get_job(job_name).job_runs}
    stopped: list[dict[str, str]] = []
    errors: list[dict[str, Any]] = []
    for run_id in self.parameters.get("JobRunIds", []):
        run = runs.get(run_id)
        if run is None or run.status not in _STOPPABLE_RUN_STATES:
            code, message = (
                ("EntityNotFoundException", f"job run {run_id} not found")
                if run is None
                else ("InvalidInputException", f"job run {run_id} is already {run.status}")
            )
            errors.append(
                {"JobName": job_name, "JobRunId": run_id, "ErrorDetail": {"ErrorCode": code, "ErrorMessage": message}}
            )
            continue
        run.status = "STOPPED"
        run.modified_on = run.completed_on = utcnow()
        stopped.append({"JobName": job_name, "JobRunId": run_id})
    return ActionResult({"SuccessfulSubmissions": stopped, "Errors": errors})


def _hold_job_runs_until_stopped() -> None:
    """A started Glue job run reports ``STARTING`` (as on Glue before its script runs) until BatchStopJobRun:
    locally a laptop tool executes the runs the Lambda starts, so moto must not advance them by itself
    (its ``glue::job_run`` model goes STARTING → RUNNING → SUCCEEDED as the run is read)."""
    from moto.moto_api import state_manager

    state_manager.set_transition(model_name="glue::job_run", transition={"progression": "manual", "times": sys.maxsize})


def _extend_moto() -> None:
    """Patch moto's classes in this (the server's) process only."""
    from moto.glue.responses import GlueResponse

    GlueResponse.update_table = _update_table_at_version(GlueResponse.update_table)  # type: ignore[method-assign,assignment]
    GlueResponse.batch_stop_job_run = _batch_stop_job_run  # type: ignore[attr-defined]
    _hold_job_runs_until_stopped()


def serve() -> None:
    """Serve moto on 127.0.0.1 at a port the OS picks, print the ready line, and return on SIGTERM or SIGINT."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    # Both signals raise KeyboardInterrupt, whatever was inherited: a shell's background job (`cmd &`, nohup)
    # starts with SIGINT ignored, and a server that kept serving would leave its parent waiting for good.
    for stop in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop, signal.default_int_handler)
    with contextlib.suppress(KeyboardInterrupt):
        _extend_moto()
        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
        app = _Counting(DomainDispatcherApplication(create_backend_app), delay_profile(os.environ.get(DELAY_ENV)))
        server = make_server(HOST, 0, app, threaded=True, request_handler=MotoRequestHandler)
        port = server.server_address[1]
        os.environ["MOTO_PORT"] = str(port)  # moto builds some of its own URLs from it
        print(f"{READY} http://{HOST}:{port}", flush=True)
        server.serve_forever()  # werkzeug's returns on KeyboardInterrupt and closes the socket


if __name__ == "__main__":
    serve()
