"""``config-from-source`` and ``config-check-source`` against a real MariaDB: every common type mapped as DMS's
MySQL mapping writes it, the configuration it writes replicated exactly through the binary log, and each
difference with a changed source found."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from cdc_lake.core.config import load_config
from cdc_lake.core.exceptions import CdcLakeError
from cdc_lake.local.mysql_capture import MysqlCapture
from cdc_lake.local.runtime import LocalPipeline, failed_runs
from tests.mariadb.server import Server, create_database, execute, source_fingerprints, source_rows
from tests.support.cli import cli
from tests.support.source_config import (
    check_source_differences,
    check_written_shop,
    config_from_source,
    run_source_check_job,
)
from tests.support.source_tables import check_fingerprints, check_tables, hadoop_reader, newest_per_table

pytestmark = pytest.mark.mariadb

TYPED = (
    "CREATE TABLE typed (id bigint PRIMARY KEY, tiny tinyint NOT NULL, flag boolean, small smallint, "
    "medium mediumint, i int, u_tiny tinyint unsigned, u_small smallint unsigned, u_medium mediumint unsigned, "
    "u_int int unsigned, u_big bigint unsigned, price decimal(12,2), huge decimal(50,10), r float, d double, "
    "name varchar(40), code char(3), body text, long_body longtext, day date, at datetime(6), "
    "stamp timestamp(3) NULL, yr year, t time, e enum('ok','sad'), s set('a','b'), doc json, bits bit(3), "
    "blob_col blob, bin varbinary(8))",
    "CREATE TABLE orders (order_id int, line int, qty int NOT NULL, PRIMARY KEY (order_id, line))",
    "CREATE TABLE log (msg text)",
)


def _typed_source(server: Server, name: str) -> str:
    url = create_database(server, name, f"{name}_other")
    execute(url, *TYPED)
    execute(server.url(f"{name}_other"), "CREATE TABLE x (id int PRIMARY KEY)")
    return url


def test_config_from_source_maps_each_type_as_dms_writes_it(mariadb: Server, tmp_path: Path, capsys) -> None:
    url = _typed_source(mariadb, "shop")
    types = {
        "id": "bigint", "tiny": "tinyint", "flag": "tinyint", "small": "smallint", "medium": "int", "i": "int",
        "u_tiny": "smallint", "u_small": "int", "u_medium": "int", "u_int": "bigint", "u_big": "decimal(20,0)",
        "price": "decimal(12,2)", "huge": "string", "r": "float", "d": "double", "name": "string", "code": "string",
        "body": "string", "long_body": "string", "day": "date", "at": "timestamp", "stamp": "timestamp",
        "yr": "smallint", "t": "string", "e": "string", "s": "string", "doc": "string", "bits": "string",
        "blob_col": "string", "bin": "string",
    }  # fmt: skip
    notes = {"huge": "above precision 38", "flag": "BOOLEAN is TINYINT(1)", "t": "TIME as text", "e": "enum",
             "s": "SET", "bits": "BIT", "blob_col": "binary data"}  # fmt: skip
    text = check_written_shop(capsys, url, tmp_path / "tables.yaml", types, notes)
    assert "DMS's MySQL mapping" in text and "shop_other.x" not in text

    # Parquet keeps binary columns binary.
    code, printed = cli(capsys, "config-from-source", "--source", url, "--table", "shop.typed", "--format", "parquet")
    assert code == 0 and '{"name": "bin", "type": "binary"}' in printed, printed
    code, printed = cli(capsys, "config-from-source", "--source", url, "--schema", "nope", "-o", tmp_path / "n")
    assert code == 2 and "no table in schema(s) nope" in printed and not (tmp_path / "n").exists()


def test_an_unreachable_source_is_named_without_its_password(tmp_path: Path, capsys) -> None:
    url = "mysql://reader:s3cret@127.0.0.1:1/shop"
    code, printed = cli(
        capsys, "config-from-source", "--source", url, "--source-without-tls", "-o", tmp_path / "t.yaml"
    )
    assert code == 2 and "cannot connect to the source mysql://reader:***@127.0.0.1:1/shop" in printed, printed
    assert "s3cret" not in printed and not (tmp_path / "t.yaml").exists()


def test_config_check_source_finds_each_difference(mariadb: Server, tmp_path: Path, capsys) -> None:
    url = _typed_source(mariadb, "check")
    out = config_from_source(capsys, url, tmp_path / "tables.yaml", "--schema", "check")
    code, printed = cli(capsys, "config-check-source", "-c", out, "--source", url.replace("mysql:", "mariadb:", 1))
    assert code == 0 and "2 table(s) checked: 0 difference(s)" in printed, printed
    execute(
        url,
        "ALTER TABLE typed ADD COLUMN note text",
        "ALTER TABLE typed DROP COLUMN body",
        "ALTER TABLE typed MODIFY i bigint",
        "ALTER TABLE orders DROP PRIMARY KEY, ADD PRIMARY KEY (order_id)",
    )
    check_source_differences(capsys, out, url, "check", "bigint(20)")


@pytest.mark.spark
def test_the_written_configuration_replicates_every_type_exactly(
    spark: SparkSession, mariadb: Server, warehouse: Path, database: str, tmp_path: Path, capsys
) -> None:
    url = create_database(mariadb, "kinds_db")
    execute(
        url,
        "CREATE TABLE kinds (id bigint PRIMARY KEY, tiny tinyint, flag boolean, small smallint, medium mediumint, "
        "i int, u_tiny tinyint unsigned, u_small smallint unsigned, u_int int unsigned, u_big bigint unsigned, "
        "price decimal(12,2), r float, d double, name varchar(40), code char(3), body text, day date, "
        "at datetime(6), stamp timestamp(6) NULL, yr year, tiny_fraction decimal(20,6), fine decimal(30,10))",
        "INSERT INTO kinds VALUES (1, -128, true, -32768, -8388608, 2147483647, 255, 65535, 4294967295, "
        "18446744073709551615, -9999999999.99, 3.25, 1e-300, 'a, \"b\"', 'xy', 'multi\\nline é', '1000-01-01', "
        "'2025-03-01 12:00:00.123456', '2025-03-01 12:00:00.5', 2155, 0.000001, -0.0000000001), "
        "(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '', NULL, NULL, "
        "NULL, NULL, NULL, NULL), "
        "(5, 0, false, 0, 0, 0, 0, 0, 0, 0, 0.00, -0.1, 0.1, 'é😀', '', 'ünï', '9999-12-31', '1970-01-01 00:00:00', "
        "'2038-01-19 03:14:07.999999', 1901, 0, 0), "
        "(6, 127, NULL, 32767, 8388607, -2147483648, 0, 0, 0, 9223372036854775807, 0.01, 3.40282e38, "
        "-1.7976931348623157e308, 'x', 'abc', NULL, '2000-02-29', '2000-02-29 23:59:59.000001', NULL, 2000, "
        "-99999999999999.999999, 12345678901234567890.0000000001)",
    )
    written = config_from_source(capsys, url, tmp_path / "tables.yaml", "--schema", "kinds_db", "--database", database)
    config = load_config(written)
    landing = tmp_path / "landing"
    capture = MysqlCapture(url, config, landing, files_per_round=1)
    try:
        keys = capture.start()
        execute(
            url,
            "UPDATE kinds SET name = 'changed', price = 0.01, r = 0.1, flag = false WHERE id = 1",
            "INSERT INTO kinds (id, small, body, u_big) VALUES (3, 7, 'new', 9223372036854775808)",
            "DELETE FROM kinds WHERE id = 2",
        )
        keys += capture.capture()
    finally:
        capture.close()
    pipeline = LocalPipeline(config, landing, spark, database=database)
    runs = pipeline.deliver(newest_per_table(keys, config))
    assert not failed_runs(runs), [r.error for r in failed_runs(runs)]
    counts = check_tables(spark, hadoop_reader(warehouse), source_rows(url), config, pipeline.location, "mariadb")
    assert counts == {"kinds_db.kinds": 4}
    # What verify sums per key range: MariaDB's fingerprint of each row equals Spark's on the lake.
    assert check_fingerprints(spark, pipeline.location, config, source_fingerprints(url)) == 4
    execute(url, "UPDATE kinds SET d = d * (1 + 1e-15) WHERE id = 1")  # one ulp-scale change is seen
    with pytest.raises(AssertionError, match=r"fingerprints differ .* for 1 key\(s\): \{\(1,\)"):
        check_fingerprints(spark, pipeline.location, config, source_fingerprints(url))


def test_the_scheduled_check_reads_the_dms_secret_and_puts_the_differences(
    mariadb: Server, tmp_path: Path, capsys, caplog: pytest.LogCaptureFixture
) -> None:
    url = _typed_source(mariadb, "nightly")
    out = config_from_source(capsys, url, tmp_path / "tables.yaml", "--schema", "nightly")
    password = "p@ss:w/rd%é"  # every character a URL must escape
    execute(
        url,
        f"CREATE USER 'checker'@'127.0.0.1' IDENTIFIED BY '{password}'",
        "GRANT SELECT ON nightly.* TO 'checker'@'127.0.0.1'",  # a catalog read needs no more
    )
    secret = {"host": "localhost", "port": mariadb.port, "username": "checker", "password": password}
    clean = run_source_check_job(out, secret, "mariadb", mariadb.authority.ca)
    assert (clean.differences, clean.metric) == ([], [0.0])

    execute(url, "ALTER TABLE typed ADD COLUMN note text", "ALTER TABLE orders DROP COLUMN qty")
    caplog.set_level("INFO", logger="cdc_lake.jobs.source_check")
    changed = run_source_check_job(out, secret, "aurora", mariadb.authority.ca)
    assert sorted(str(d) for d in changed.differences) == [
        "nightly.orders: column-dropped: qty (mark it dropped: true)",
        "nightly.typed: column-added: note text (add it at the end of columns as {name: note, type: string})",
    ]
    assert changed.metric == [2.0]
    assert "SOURCE DIFFERENCE nightly.typed: column-added" in caplog.text and password not in caplog.text
    with pytest.raises(CdcLakeError, match=r"cannot connect to the source mysql://checker:\*\*\*@localhost"):
        run_source_check_job(out, {**secret, "password": "wrong"}, "mysql", mariadb.authority.ca)
