"""A throwaway PostgreSQL cluster for tests (``tests.support.servers``' shape): initdb in its folder, logical
decoding on; as root, initdb and pg_ctl run as the ``postgres`` user. ``conninfo`` connects with
``sslmode=verify-full`` against the server's CA, as cdc-lake requires of a source.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import psycopg

from tests.support.servers import ThrowawayServer, free_port
from tests.support.tls import SERVER_NAME

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


@dataclass
class Cluster(ThrowawayServer):
    bin: Path
    engine: ClassVar[str] = "PostgreSQL"
    package: ClassVar[tuple[str, str]] = ("postgresql", "postgres")

    @property
    def user(self) -> str:
        """The database superuser: initdb names it after the user the server runs as."""
        return self.os_user

    @property
    def data(self) -> Path:
        return self.folder / "data"

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
            command = ["runuser", "-u", self.os_user, "--", *command]
        return subprocess.run(command, check=False, capture_output=True, text=True, timeout=120)

    def _check(self, *args: str) -> None:
        done = self._run(*args)
        if done.returncode != 0:
            raise RuntimeError(
                f"{args[0]} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}\n{self.log_tail()}"
            )

    def start(self) -> None:
        self.make_authority()
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
    """A cluster (not started) of the server programs in ``pg_bin``, in a new folder."""
    folder, user = Cluster.new_folder()
    return Cluster(folder=folder, port=free_port(), os_user=user, bin=pg_bin)


def create_database(cluster: Cluster, name: str) -> str:
    """A fresh database ``name``; its conninfo."""
    with psycopg.connect(cluster.conninfo, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.execute(f"CREATE DATABASE {name}")
    return cluster.conninfo.replace("dbname=postgres", f"dbname={name}")
