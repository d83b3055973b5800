"""A throwaway MariaDB server for tests (``tests.support.servers``' shape): the binary log in row format with full
row images and full row metadata (what DMS requires of a MySQL-compatible source); as root, it runs as the ``mysql``
user (``--user=mysql``). ``url`` names the server's CA (``ssl_ca``), so every client checks the certificate and the
name, as cdc-lake requires of a source.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, quote, urlsplit

import pymysql
import pymysql.cursors

from cdc_lake.core.config import ColumnSpec, TableSpec
from cdc_lake.ops import mysql_catalog
from cdc_lake.ops.fingerprint import quote as quote_name
from cdc_lake.ops.fingerprint import source_fingerprint
from tests.support.servers import ThrowawayServer, free_port
from tests.support.source_tables import Row, SourceFingerprints, SourceRows
from tests.support.tls import SERVER_NAME

USER = "cdc_lake"  # created with every privilege on 127.0.0.1; root stays on the socket


def find_mariadbd() -> Path | None:
    for candidate in (shutil.which("mariadbd"), "/usr/sbin/mariadbd"):
        if candidate and Path(candidate).exists():
            return Path(candidate)
    return None


@dataclass
class Server(ThrowawayServer):
    mariadbd: Path
    process: subprocess.Popen[bytes] | None = None
    engine: ClassVar[str] = "MariaDB"
    package: ClassVar[tuple[str, str]] = ("mariadb-server", "mysql")

    @property
    def socket(self) -> str:
        return str(self.folder / "mysqld.sock")

    def url(self, database: str, user: str = USER) -> str:
        return f"mysql://{user}@{SERVER_NAME}:{self.port}/{database}?ssl_ca={quote(str(self.authority.ca))}"

    def start(self) -> None:
        owner = self.make_authority()
        data = self.folder / "data"
        # Its own folder for temporary tables, not the machine's /tmp, where another process can remove them
        # mid-query ("Error on delete of '/tmp/#sql-temptable-….MAI'").
        tmp = self.folder / "tmp"
        tmp.mkdir()
        if owner is not None:
            os.chown(tmp, *owner)
        install = shutil.which("mariadb-install-db") or "/usr/bin/mariadb-install-db"
        install_args = ["--no-defaults", f"--datadir={data}", f"--user={self.os_user}", "--skip-test-db"]
        install_args.append("--auth-root-authentication-method=normal")  # root on the socket, no password
        done = subprocess.run([install, *install_args], check=False, capture_output=True, text=True, timeout=180)
        if done.returncode != 0:
            raise RuntimeError(f"mariadb-install-db failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        settings = {
            "datadir": str(data),
            "tmpdir": str(tmp),
            "user": self.os_user,
            "bind-address": "127.0.0.1",
            "port": str(self.port),
            "socket": self.socket,
            "pid-file": str(self.folder / "mysqld.pid"),
            # what DMS requires of a MySQL source's binary log
            "log-bin": "binlog",
            "server-id": "1",
            "binlog-format": "ROW",
            "binlog-row-image": "FULL",
            "binlog-row-metadata": "FULL",
            "default-time-zone": "+00:00",
            "character-set-server": "utf8mb4",
            "collation-server": "utf8mb4_bin",
            # a throwaway server: durability buys nothing
            "innodb-flush-log-at-trx-commit": "0",
            "sync-binlog": "0",
            "innodb-buffer-pool-size": "64M",
            "ssl-cert": str(self.authority.cert),
            "ssl-key": str(self.authority.key),
        }
        arguments = ["--no-defaults", *(f"--{name}={value}" for name, value in settings.items()), "--skip-name-resolve"]
        with (self.folder / "server.log").open("wb") as log:
            self.process = subprocess.Popen([str(self.mariadbd), *arguments], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                root = pymysql.connect(unix_socket=self.socket, user="root", autocommit=True)
                break
            except pymysql.err.OperationalError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"mariadbd did not start:\n{self.log_tail()}") from None
                time.sleep(0.2)
        with root.cursor() as cursor:
            cursor.execute(f"CREATE USER '{USER}'@'127.0.0.1'")
            cursor.execute(f"GRANT ALL PRIVILEGES ON *.* TO '{USER}'@'127.0.0.1' WITH GRANT OPTION")
        root.close()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()


def new_server(mariadbd: Path) -> Server:
    """A server (not started) of the program ``mariadbd``, in a new folder."""
    folder, user = Server.new_folder()
    return Server(folder=folder, port=free_port(), os_user=user, mariadbd=mariadbd)


def execute(url: str, *statements: str) -> None:
    """Run statements on the server at ``url`` (``mysql://user@host:port/database``), each committed."""
    parts = urlsplit(url)
    [ca] = parse_qs(parts.query)["ssl_ca"]
    connection = pymysql.connect(
        host=parts.hostname, port=parts.port or 3306, user=parts.username or "", autocommit=True,
        database=parts.path.lstrip("/") or None, init_command="SET time_zone = '+00:00'",
        ssl={"ca": ca, "check_hostname": True, "verify_mode": True},
    )  # fmt: skip
    with connection, connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def create_database(server: Server, *names: str) -> str:
    """Fresh databases (MySQL's schemas) ``names``; the URL of the first."""
    for name in names:
        execute(server.url(""), f"DROP DATABASE IF EXISTS `{name}`", f"CREATE DATABASE `{name}`")
    return server.url(names[0])


def source_rows(url: str) -> SourceRows:
    """``SELECT *`` of a table in the lake's types: an unsigned BIGINT's int as the decimal(20,0) it becomes."""

    def rows(table: TableSpec) -> list[Row]:
        decimals = {c.name for c in table.columns if c.type.startswith("decimal")}
        connection = mysql_catalog.connect(url)
        with connection, connection.cursor(pymysql.cursors.DictCursor) as cursor:
            schema, name = table.name.split(".", 1)
            cursor.execute(f"SELECT * FROM `{schema}`.`{name}`")
            found = cursor.fetchall()
        return [{k: Decimal(v) if k in decimals and isinstance(v, int) else v for k, v in r.items()} for r in found]

    return rows


def source_fingerprints(url: str) -> SourceFingerprints:
    """Each row's fingerprint as MariaDB computes it, by key."""

    def read(table: TableSpec, columns: list[ColumnSpec]) -> dict[tuple[Any, ...], int]:
        keys = ", ".join(quote_name(k, "mysql") for k in table.primary_key)
        relation = ".".join(quote_name(part, "mysql") for part in table.name.split("."))
        connection = mysql_catalog.connect(url)
        with connection, connection.cursor() as cursor:
            cursor.execute(f"SELECT {keys}, {source_fingerprint(columns, 'mysql')} FROM {relation}")
            return {tuple(row[:-1]): int(row[-1]) for row in cursor.fetchall()}

    return read
