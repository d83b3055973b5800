"""A real MariaDB for the tests: a throwaway server per session (a new data folder, loopback only, a free port,
the binary log as DMS requires it), stopped at the end even when tests fail."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from tests.mariadb.server import Server, find_mariadbd, new_server


@pytest.fixture(scope="session")
def mariadb() -> Iterator[Server]:
    mariadbd = find_mariadbd()
    if mariadbd is None:
        pytest.fail("MariaDB's mariadbd not found: run `make setup` (installs Debian's mariadb-server)")
    server = new_server(mariadbd)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.folder, ignore_errors=True)
