"""A real MariaDB for the tests: a throwaway server per session (``tests.support.servers``: loopback only, a free
port, stopped at the end even when tests fail), the binary log as DMS requires it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.mariadb.server import Server, find_mariadbd, new_server
from tests.support.servers import session_server


@pytest.fixture(scope="session")
def mariadb() -> Iterator[Server]:
    missing = "MariaDB's mariadbd not found: run `make setup` (installs Debian's mariadb-server)"
    yield from session_server(find_mariadbd(), missing, new_server)
