"""``cdc-lake verify`` against a real MariaDB: each kind of drift found, key by key, reading a small part of the
table from the source (tests/verify_cases.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from cdc_lake.core.config import PipelineConfig
from cdc_lake.local.mysql_capture import MysqlCapture
from tests.mariadb.server import Server, create_database, execute
from tests.verify_cases import ROWS, Source, create_items, run_drift_scenario

pytestmark = [pytest.mark.mariadb, pytest.mark.spark]


def test_verify_finds_each_kind_of_drift(
    spark: SparkSession, mariadb: Server, warehouse: Path, database: str, tmp_path: Path, capsys
) -> None:
    url = create_database(mariadb, "drift")

    def capture(config: PipelineConfig, landing: Path) -> list[str]:
        loader = MysqlCapture(url, config, landing, load_file_rows=5_000)
        try:
            return loader.start()
        finally:
            loader.close()

    source = Source(url, lambda *sql: execute(url, *sql), capture)
    create_items(
        source, f"(SELECT seq AS n FROM seq_1_to_{ROWS}) s", "TIMESTAMP '2025-01-01 00:00:00' + INTERVAL n SECOND"
    )
    run_drift_scenario(spark, source, warehouse, database, tmp_path, capsys)
