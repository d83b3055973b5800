"""``cdc-lake verify`` against a real MariaDB: each kind of drift found, key by key, reading a small part of the
table from the source, and changes in flight under load never reported (tests/verify_cases.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from cdc_lake.core.config import PipelineConfig
from cdc_lake.local.mysql_capture import MysqlCapture
from tests.mariadb.server import Server, create_database, execute, source_rows
from tests.verify_cases import ROWS, Source, create_items, run_concurrent_scenario, run_drift_scenario

pytestmark = [pytest.mark.mariadb, pytest.mark.spark]


def items_source(mariadb: Server) -> Source:
    url = create_database(mariadb, "drift")  # a fresh one each time

    def capture(config: PipelineConfig, landing: Path) -> MysqlCapture:
        return MysqlCapture(url, config, landing, load_file_rows=5_000, files_per_round=1)

    source = Source(url, lambda *sql: execute(url, *sql), capture, source_rows(url))
    moment = "TIMESTAMP '2025-01-01 00:00:00' + INTERVAL n SECOND"
    create_items(source, f"(SELECT seq AS n FROM seq_1_to_{ROWS}) s", moment)
    return source


def test_verify_finds_each_kind_of_drift(
    spark: SparkSession, mariadb: Server, warehouse: Path, database: str, tmp_path: Path, capsys
) -> None:
    run_drift_scenario(spark, items_source(mariadb), warehouse, database, tmp_path, capsys)


def test_changes_in_flight_are_not_drift_and_repair_is_exact(
    spark: SparkSession, mariadb: Server, warehouse: Path, database: str, tmp_path: Path, capsys
) -> None:
    run_concurrent_scenario(spark, items_source(mariadb), warehouse, database, tmp_path, capsys)
