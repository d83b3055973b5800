"""Shared fixtures: one real local Spark session with Iceberg for the whole run, a fresh lake database
per test, and helpers to land hand-written DMS files."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("CDC_LAKE_SHUFFLE_PARTITIONS", "4")


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("warehouse")


@pytest.fixture(scope="session")
def spark(warehouse: Path) -> Iterator[SparkSession]:  # noqa: F821 - imported lazily so pure tests skip Spark
    from cdc_lake.local.session import local_spark_session

    session = local_spark_session(warehouse, app_name="cdc-lake-tests", cores=2)
    yield session
    session.stop()


@pytest.fixture
def database() -> str:
    """A lake database no other test uses, so tests never see each other's tables."""
    return f"t_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    path = tmp_path / "landing"
    path.mkdir()
    return path


def write_file(landing: Path, key: str, text: str) -> str:
    """Land a DMS file with exactly this text; returns its key."""
    path = landing / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return key
