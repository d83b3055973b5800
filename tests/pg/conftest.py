"""A real PostgreSQL for the tests: a throwaway cluster per session (``tests.support.servers``: loopback only, a free
port, stopped at the end even when tests fail), logical decoding on. The workload's seed is drawn once per session
(or taken from CDC_LAKE_PG_SEED) and shown in the report header."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator

import pytest

from tests.pg.cluster import Cluster, find_pg_bin, new_cluster
from tests.support.servers import session_server

SEED_ENV = "CDC_LAKE_PG_SEED"
SEED = int(os.environ.get(SEED_ENV) or random.SystemRandom().randrange(1, 10**9))


def pytest_report_header() -> str:
    return f"pg workload seed: {SEED} (replay with {SEED_ENV}={SEED})"


@pytest.fixture(scope="session")
def seed() -> int:
    return SEED


@pytest.fixture(scope="session")
def postgres() -> Iterator[Cluster]:
    missing = "PostgreSQL's initdb/pg_ctl not found: run `make setup` (installs Debian's postgresql)"
    yield from session_server(find_pg_bin(), missing, new_cluster)
