"""A throwaway PostgreSQL cluster for tests: initdb in a temp folder, logical decoding on, loopback only.

PostgreSQL refuses to run as root: as root, initdb and pg_ctl run as the ``postgres`` user the Debian
package creates, in a folder chowned to it; otherwise as the current user.

The server offers TLS with a throwaway CA's certificate for ``localhost``, and ``conninfo`` connects with
``sslmode=verify-full`` against that CA, as cdc-lake requires of a source.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.support.tls import SERVER_NAME, Authority, make_authority

PG_BIN_ENV = "CDC_LAKE_PG_BIN"


def find_pg_bin() -> Path | None:
    """The folder of initdb/pg_ctl: $CDC_LAKE_PG_BIN, else the newest /usr/lib/postgresql/*/bin."""
    if os.environ.get(PG_BIN_ENV):
        return Path(os.environ[PG_BIN_ENV])
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("pg_ctl")
    return Path(on_path).parent if on_path else None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Cluster:
    bin: Path
    folder: Path
    port: int
    user: str

    @property
    def data(self) -> Path:
        return self.folder / "data"

    @property
    def authority(self) -> Authority:
        return Authority(
            self.folder / "tls" / "ca.pem", self.folder / "tls" / "server.pem", self.folder / "tls" / "server.key"
        )

    @property
    def conninfo(self) -> str:
        """Checked TLS to the server's name (``hostaddr`` only saves resolving it)."""
        return (
            f"host={SERVER_NAME} hostaddr=127.0.0.1 port={self.port} user={self.user} dbname=postgres "
            f"sslmode=verify-full sslrootcert={self.authority.ca}"
        )

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, check=False, capture_output=True, text=True, timeout=120)

    def _check(self, *args: str) -> None:
        done = self._run(*args)
        if done.returncode != 0:
            log = self.folder / "server.log"
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            raise RuntimeError(f"{args[0]} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}\n{tail}")

    def start(self) -> None:
        owner = (self.folder.stat().st_uid, self.folder.stat().st_gid) if os.geteuid() == 0 else None
        make_authority(self.folder / "tls", "cdc-lake test PostgreSQL CA", owner)
        self._check("initdb", "-D", str(self.data), "-U", self.user, "--auth=trust", "-E", "UTF8", "--locale=C")
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.folder}'",
            "wal_level": "logical",
            "max_replication_slots": "8",
            "max_wal_senders": "8",
            "fsync": "off",  # a throwaway cluster: durability buys nothing; synchronous_commit stays on
            "full_page_writes": "off",
            "shared_buffers": "64MB",
            "max_connections": "50",
            "ssl": "on",
            "ssl_cert_file": f"'{self.authority.cert}'",
            "ssl_key_file": f"'{self.authority.key}'",
        }
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.writelines(f"{key} = {value}\n" for key, value in settings.items())
        self._check("pg_ctl", "-D", str(self.data), "-l", str(self.folder / "server.log"), "-w", "-t", "60", "start")

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")


def new_cluster(pg_bin: Path) -> Cluster:
    """A cluster (not started) in a new folder under the system temp dir that the server's user owns."""
    folder = Path(tempfile.mkdtemp(prefix="cdc-lake-pg-"))
    if os.geteuid() == 0:
        try:
            server = pwd.getpwnam("postgres")
        except KeyError:
            raise RuntimeError(
                "PostgreSQL refuses to run as root and there is no 'postgres' user: install Debian's postgresql "
                "package (make setup) or run the tests as another user"
            ) from None
        os.chown(folder, server.pw_uid, server.pw_gid)
        user = "postgres"
    else:
        user = pwd.getpwuid(os.geteuid()).pw_name
    return Cluster(bin=pg_bin, folder=folder, port=free_port(), user=user)


def create_database(cluster: Cluster, name: str) -> str:
    import psycopg

    with psycopg.connect(cluster.conninfo, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.execute(f"CREATE DATABASE {name}")
    return cluster.conninfo.replace("dbname=postgres", f"dbname={name}")
