"""A real PostgreSQL for the tests: a throwaway cluster per session (initdb in a temp folder, logical decoding
on, loopback only, a free port), stopped at the end even when tests fail. The workload's seed is drawn once
per session (or taken from CDC_LAKE_PG_SEED) and shown in the report header."""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Iterator

import pytest

from tests.pg.cluster import Cluster, find_pg_bin, new_cluster

SEED_ENV = "CDC_LAKE_PG_SEED"
SEED = int(os.environ.get(SEED_ENV) or random.SystemRandom().randrange(1, 10**9))


def pytest_report_header() -> str:
    return f"pg workload seed: {SEED} (replay with {SEED_ENV}={SEED})"


@pytest.fixture(scope="session")
def seed() -> int:
    return SEED


@pytest.fixture(scope="session")
def postgres() -> Iterator[Cluster]:
    pg_bin = find_pg_bin()
    if pg_bin is None:
        pytest.fail("PostgreSQL's initdb/pg_ctl not found: run `make setup` (installs Debian's postgresql)")
    cluster = new_cluster(pg_bin)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(cluster.folder, ignore_errors=True)
