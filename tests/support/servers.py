"""The real source servers the tests start (PostgreSQL, MariaDB): one shape for each engine's throwaway server. Each
lives in a new folder under the system temp dir, listens on 127.0.0.1 only, on a free port, offers TLS with a
throwaway CA's certificate (``tls``), and is stopped, its folder removed, when its ``with`` block ends, also when
the start or a test failed. The engines refuse to run as root: as root, a server runs as the user its Debian
package creates, owning the folder; otherwise as the current user."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, TypeVar

import pytest

from tests.support.tls import Authority, make_authority


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class ThrowawayServer:
    """What every engine's test server has; each engine adds how it starts and stops."""

    folder: Path
    port: int
    os_user: str  # the user the server runs as
    engine: ClassVar[str]  # its name in messages and in its CA's name
    package: ClassVar[tuple[str, str]]  # the Debian package and the user it creates, to run as when root

    @classmethod
    def new_folder(cls) -> tuple[Path, str]:
        """A new folder for a server, and the user it runs as, who owns the folder."""
        folder = Path(tempfile.mkdtemp(prefix=f"cdc-lake-{cls.engine.lower()}-"))
        if os.geteuid() != 0:
            return folder, pwd.getpwuid(os.geteuid()).pw_name
        package, user = cls.package
        try:
            account = pwd.getpwnam(user)
        except KeyError:
            raise RuntimeError(
                f"{cls.engine} refuses to run as root and there is no {user!r} user: install Debian's {package} "
                "package (make setup) or run the tests as another user"
            ) from None
        os.chown(folder, account.pw_uid, account.pw_gid)
        return folder, user

    @property
    def authority(self) -> Authority:
        tls = self.folder / "tls"
        return Authority(tls / "ca.pem", tls / "server.pem", tls / "server.key")

    def make_authority(self) -> tuple[int, int] | None:
        """The server's CA and certificate, readable by the server's user; that user's (uid, gid) when it is not
        the current user."""
        owner = (self.folder.stat().st_uid, self.folder.stat().st_gid) if os.geteuid() == 0 else None
        make_authority(self.folder / "tls", f"cdc-lake test {self.engine} CA", owner)
        return owner

    def log_tail(self) -> str:
        """The end of the server's log, for an error that says why it did not start."""
        log = self.folder / "server.log"
        return log.read_text(errors="replace")[-3000:] if log.exists() else ""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError


AnyServer = TypeVar("AnyServer", bound=ThrowawayServer)


@contextlib.contextmanager
def running(server: AnyServer) -> Iterator[AnyServer]:
    """``server`` started for the ``with`` block; stopped and its folder removed on exit, however it ends."""
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.folder, ignore_errors=True)


def session_server(program: Path | None, missing: str, new: Callable[[Path], AnyServer]) -> Iterator[AnyServer]:
    """A session fixture's body: a server made by ``new`` from its ``program``, running for the session; the
    session fails with ``missing`` when the program is not installed."""
    if program is None:
        pytest.fail(missing)
    with running(new(program)) as server:
        yield server
