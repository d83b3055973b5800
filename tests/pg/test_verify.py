"""``cdc-lake verify`` against a real PostgreSQL: each kind of drift found, key by key, reading a small part of
the table from the source (tests/verify_cases.py)."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from pyspark.sql import SparkSession

from cdc_lake.core.config import PipelineConfig
from cdc_lake.local.pg_capture import PgCapture
from tests.pg.cluster import Cluster
from tests.pg.test_real_source import create_database
from tests.verify_cases import ROWS, Source, create_items, run_drift_scenario

pytestmark = [pytest.mark.pg, pytest.mark.spark]


def test_verify_finds_each_kind_of_drift(
    spark: SparkSession, postgres: Cluster, warehouse: Path, database: str, tmp_path: Path, capsys
) -> None:
    conninfo = create_database(postgres, "verify_drift")

    def execute(*statements: str) -> None:
        with psycopg.connect(conninfo, autocommit=True) as connection:
            for statement in statements:
                connection.execute(statement)

    def capture(config: PipelineConfig, landing: Path) -> list[str]:
        loader = PgCapture(conninfo, config, landing, slot="verify_drift", load_file_rows=5_000)
        try:
            return loader.start()
        finally:
            loader.close(drop_slot=True)

    source = Source(conninfo, execute, capture)
    execute("CREATE SCHEMA drift")
    create_items(
        source, f"generate_series(1, {ROWS}) AS n", "TIMESTAMP '2025-01-01 00:00:00' + n * INTERVAL '1 second'"
    )
    run_drift_scenario(spark, source, warehouse, database, tmp_path, capsys)
