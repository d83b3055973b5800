"""``config-from-source`` and ``config-check-source`` against a real PostgreSQL: every common type mapped as DMS
writes it, the configuration it writes replicated exactly, and each difference with a changed source found."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from pyspark.sql import SparkSession

from cdc_lake.core.config import load_config
from cdc_lake.local.pg_capture import PgCapture
from cdc_lake.local.runtime import LocalPipeline, failed_runs
from tests.pg.cluster import Cluster, create_database
from tests.support.cli import cli
from tests.support.source_config import (
    check_source_differences,
    check_written_shop,
    config_from_source,
    run_source_check_job,
)
from tests.support.source_tables import (
    check_fingerprints,
    check_tables,
    hadoop_reader,
    newest_per_table,
    postgres_fingerprints,
)

pytestmark = pytest.mark.pg

TYPED = """
CREATE SCHEMA shop;
CREATE SCHEMA other;
CREATE TYPE shop.mood AS ENUM ('ok', 'sad');
CREATE TABLE shop.typed (
    id bigint PRIMARY KEY, small smallint NOT NULL, i integer, price numeric(12,2), huge numeric(50,10),
    plain numeric, r real, d double precision, ok boolean, name varchar(40), code char(3), body text, day date,
    at timestamp(3), at_tz timestamptz, t time, span interval, u uuid, doc jsonb, tags text[], m shop.mood,
    blob bytea, cash money);
CREATE TABLE shop.orders (order_id int, line int, qty int NOT NULL, PRIMARY KEY (order_id, line));
CREATE TABLE shop.log (msg text);
CREATE TABLE other.x (id int PRIMARY KEY);
"""


def typed_source(postgres: Cluster, name: str) -> str:
    """A fresh database ``name`` holding the typed schema ``shop``; its conninfo."""
    conninfo = create_database(postgres, name)
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(TYPED)
    return conninfo


def test_config_from_source_maps_each_type_as_dms_writes_it(postgres: Cluster, tmp_path: Path, capsys) -> None:
    conninfo = typed_source(postgres, "config_types")
    out = tmp_path / "tables.yaml"
    types = {
        "id": "bigint", "small": "smallint", "i": "int", "price": "decimal(12,2)", "huge": "string",
        "plain": "decimal(28,6)", "r": "float", "d": "double", "ok": "boolean", "name": "string", "code": "string",
        "body": "string", "day": "date", "at": "timestamp", "at_tz": "string", "t": "string", "span": "string",
        "u": "string", "doc": "string", "tags": "string", "m": "string", "blob": "string", "cash": "string",
    }  # fmt: skip
    notes = {"huge": "above precision 38", "plain": "NUMERIC(28,6)", "tags": "array", "m": "enum",
             "doc": "JSON as text", "blob": "BLOB", "u": "UUID"}  # fmt: skip
    text = check_written_shop(capsys, conninfo, out, types, notes)
    assert "other.x" not in text and "password" not in text

    # An existing file is kept without --force; patterns choose tables; nothing matching writes nothing.
    code, printed = cli(capsys, "config-from-source", "--source", conninfo, "-o", out)
    assert code == 2 and "exists; give --force" in printed
    code, printed = cli(
        capsys, "config-from-source", "--source", conninfo, "--table", "shop.ord*", "-o", out, "--force"
    )
    assert code == 0 and [t.name for t in load_config(out).tables] == ["shop.orders"]
    code, printed = cli(capsys, "config-from-source", "--source", conninfo, "--schema", "nope", "-o", tmp_path / "n")
    assert code == 2 and "no table in schema(s) nope" in printed and not (tmp_path / "n").exists()


def test_an_unreachable_source_is_named_without_its_password(tmp_path: Path, capsys) -> None:
    source = "host=127.0.0.1 port=1 dbname=shop user=reader password=s3cret"
    code, printed = cli(capsys, "config-from-source", "--source", source, "-o", tmp_path / "t.yaml")
    assert code == 2 and "cannot connect to the source host=127.0.0.1 port=1 dbname=shop user=reader" in printed
    assert "s3cret" not in printed and not (tmp_path / "t.yaml").exists()
    url = "postgresql://reader:s3cret@127.0.0.1:1/shop"
    code, printed = cli(capsys, "config-from-source", "--source", url)
    assert code == 2 and "postgresql://reader:***@127.0.0.1:1/shop" in printed and "s3cret" not in printed


def test_config_check_source_finds_each_difference(postgres: Cluster, tmp_path: Path, capsys) -> None:
    conninfo = typed_source(postgres, "config_check")
    out = config_from_source(capsys, conninfo, tmp_path / "tables.yaml", "--schema", "shop")
    code, printed = cli(capsys, "config-check-source", "-c", out, "--source", conninfo)
    assert code == 0 and "2 table(s) checked: 0 difference(s)" in printed, printed
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute("ALTER TABLE shop.typed ADD COLUMN note text")
        connection.execute("ALTER TABLE shop.typed DROP COLUMN body")
        connection.execute("ALTER TABLE shop.typed ALTER COLUMN i TYPE bigint")
        connection.execute("ALTER TABLE shop.orders DROP CONSTRAINT orders_pkey")
        connection.execute("ALTER TABLE shop.orders ADD PRIMARY KEY (order_id)")
    check_source_differences(capsys, out, conninfo, "shop", "bigint")


@pytest.mark.spark
def test_the_written_configuration_replicates_every_type_exactly(
    spark: SparkSession, postgres: Cluster, warehouse: Path, database: str, tmp_path: Path, capsys
) -> None:
    conninfo = create_database(postgres, "config_replicated")
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(
            "CREATE TABLE kinds (id bigint PRIMARY KEY, small smallint, i integer, price numeric(12,2), r real, "
            "d double precision, ok boolean, name varchar(40), code char(3), body text, day date, at timestamp(6), "
            "tiny numeric(20,6), fine numeric(30,10))"  # scales up to 6 and beyond print differently in Spark
        )
        connection.execute(
            "INSERT INTO kinds VALUES (1, -32768, 2147483647, -9999999999.99, 3.25, 1e-300, true, 'a, \"b\"', 'xy', "
            "E'multi\\nline é', '0001-01-01', '2025-03-01 12:00:00.123456', 0.000001, -0.0000000001), "
            "(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '', NULL, NULL, NULL, NULL), "
            "(5, 0, 0, 0.00, '-0', 0.1, false, 'é😀', '', 'ünï', '9999-12-31', '1970-01-01 00:00:00', 0, 0), "
            "(6, 32767, -2147483648, 0.01, 3.4028235e38, -1.7976931348623157e308, true, 'x', 'abc', NULL, "
            "'2000-02-29', '2000-02-29 23:59:59.000001', -99999999999999.999999, "
            "12345678901234567890.0000000001)"
        )
    config = load_config(config_from_source(capsys, conninfo, tmp_path / "tables.yaml", "--database", database))
    landing = tmp_path / "landing"
    capture = PgCapture(conninfo, config, landing, slot="config_replicated", files_per_round=1)
    try:
        keys = capture.start()
        with psycopg.connect(conninfo, autocommit=True) as connection:
            connection.execute("UPDATE kinds SET name = 'changed', price = 0.01 WHERE id = 1")
            connection.execute("INSERT INTO kinds (id, small, body) VALUES (3, 7, 'new')")
            connection.execute("DELETE FROM kinds WHERE id = 2")
        keys += capture.capture()
    finally:
        capture.close(drop_slot=True)
    pipeline = LocalPipeline(config, landing, spark, database=database)
    runs = pipeline.deliver(newest_per_table(keys, config))
    assert not failed_runs(runs), [r.error for r in failed_runs(runs)]
    counts = check_tables(spark, hadoop_reader(warehouse), conninfo, config, pipeline.location, "config-from-source")
    assert counts == {"public.kinds": 4}
    # What verify sums per key range: PostgreSQL's fingerprint of each row equals Spark's on the lake.
    assert check_fingerprints(spark, pipeline.location, config, postgres_fingerprints(conninfo)) == 4
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute("UPDATE kinds SET d = d * (1 + 1e-15) WHERE id = 1")  # one ulp-scale change is seen
    with pytest.raises(AssertionError, match=r"fingerprints differ .* for 1 key\(s\): \{\(1,\)"):
        check_fingerprints(spark, pipeline.location, config, postgres_fingerprints(conninfo))


def test_the_scheduled_check_reaches_postgres_through_the_dms_secret(postgres: Cluster, tmp_path: Path, capsys) -> None:
    conninfo = typed_source(postgres, "config_scheduled")
    out = config_from_source(capsys, conninfo, tmp_path / "tables.yaml", "--schema", "shop")
    # The secret as RDS writes it names another database: the stack's sourceDatabase (DMS's) wins.
    secret = {"host": "localhost", "port": postgres.port, "username": postgres.user, "password": "unused:/@",
              "dbname": "postgres"}  # fmt: skip
    assert run_source_check_job(out, secret, "postgres", postgres.authority.ca, "config_scheduled").metric == [0.0]
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute("ALTER TABLE shop.orders ALTER COLUMN qty TYPE numeric(10,2)")
    # The stack's aurora-postgresql reaches the same database as PostgreSQL and finds the same difference.
    changed = run_source_check_job(out, secret, "aurora-postgresql", postgres.authority.ca, "config_scheduled")
    assert [str(d) for d in changed.differences] == [
        "shop.orders: type-changed: qty: source numeric(10,2) (decimal(10,2)), configured int"
    ]
    assert changed.metric == [1.0]
