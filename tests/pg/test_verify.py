"""``cdc-lake verify`` against a real PostgreSQL: each kind of drift found, key by key, reading a small part of
the table from the source, and changes in flight under load never reported (tests/support/verify_cases.py)."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from pyspark.sql import SparkSession

from cdc_lake.core.config import PipelineConfig
from cdc_lake.local.pg_capture import PgCapture
from tests.pg.cluster import Cluster, create_database
from tests.support.source_tables import source_rows
from tests.support.verify_cases import (
    PERCENT_ROWS,
    ROWS,
    Source,
    check_percent_names,
    create_items,
    run_concurrent_scenario,
    run_drift_scenario,
)

pytestmark = [pytest.mark.pg, pytest.mark.spark]


class SlotCapture(PgCapture):
    """The capture, its replication slot dropped when it closes."""

    def __init__(self, conninfo: str, config: PipelineConfig, landing: Path, slot: str) -> None:
        super().__init__(conninfo, config, landing, slot=slot, load_file_rows=5_000, files_per_round=1)

    def close(self, *, drop_slot: bool = True) -> None:
        super().close(drop_slot=drop_slot)


def items_source(postgres: Cluster, name: str) -> Source:
    conninfo = create_database(postgres, name)

    def execute(*statements: str) -> None:
        with psycopg.connect(conninfo, autocommit=True) as connection:
            for statement in statements:
                connection.execute(statement)

    capture = lambda config, landing: SlotCapture(conninfo, config, landing, name)  # noqa: E731
    source = Source(conninfo, execute, capture, lambda table: source_rows(conninfo, table))
    execute("CREATE SCHEMA drift")
    moment = "TIMESTAMP '2025-01-01 00:00:00' + n * INTERVAL '1 second'"
    create_items(source, f"generate_series(1, {ROWS}) AS n", moment)
    return source


def test_verify_finds_each_kind_of_drift(
    spark: SparkSession, postgres: Cluster, warehouse: Path, database: str, tmp_path: Path, capsys
) -> None:
    run_drift_scenario(spark, items_source(postgres, "verify_drift"), warehouse, database, tmp_path, capsys)


def test_changes_in_flight_are_not_drift_and_repair_is_exact(
    spark: SparkSession, postgres: Cluster, warehouse: Path, database: str, tmp_path: Path, capsys
) -> None:
    run_concurrent_scenario(spark, items_source(postgres, "verify_load"), warehouse, database, tmp_path, capsys)


def test_names_holding_a_percent_sign_are_read(postgres: Cluster) -> None:
    conninfo = create_database(postgres, "verify_percent")
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute('CREATE SCHEMA "pct%schema"')
        connection.execute('CREATE TABLE "pct%schema"."pct%items" ("id%" bigint PRIMARY KEY, "rate%" text)')
        for row in PERCENT_ROWS:
            connection.execute('INSERT INTO "pct%%schema"."pct%%items" VALUES (%s, %s)', row)  # % doubled: bound
    check_percent_names(conninfo)
