"""The capture alone, without Spark: test_decoding lines parsed exactly, DMS's CSV written from a real database,
unchanged TOAST values refused under the default REPLICA IDENTITY, taken from the old row under FULL, and both its
connections made over checked TLS, as every connection to a source is."""

from __future__ import annotations

import csv
import io
import logging
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from cdc_lake.core.config import parse_config
from cdc_lake.core.exceptions import CaptureError, CdcLakeError, UnchangedToastError
from cdc_lake.local.pg_capture import (
    UNCHANGED_TOAST,
    PgCapture,
    parse_tuple,
    run_capture,
    table_entry,
)
from cdc_lake.ops.source_tls import SourceTls
from tests.pg.cluster import Cluster
from tests.support.tls import make_authority

pytestmark = pytest.mark.pg


def test_parse_tuple_quotes_nulls_and_markers() -> None:
    new, old = parse_tuple(
        ' old-key: id[integer]:1 new-tuple: id[integer]:2 "Odd ""name"""[text]:\'it\'\'s, "q"\nx\' '
        "n[text]:null s[text]:'null' e[text]:'' big[text]:unchanged-toast-datum r[real]:3.25"
    )
    assert old == [("id", "integer", "1")]
    assert new == [
        ("id", "integer", "2"),
        ('Odd "name"', "text", 'it\'s, "q"\nx'),
        ("n", "text", None),
        ("s", "text", "null"),
        ("e", "text", ""),
        ("big", "text", UNCHANGED_TOAST),
        ("r", "real", "3.25"),
    ]


def _database(cluster: Cluster, name: str, ddl: str) -> str:
    with psycopg.connect(cluster.conninfo, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.execute(f"CREATE DATABASE {name}")
    conninfo = cluster.conninfo.replace("dbname=postgres", f"dbname={name}")
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(ddl)
    return conninfo


def _capture(conninfo: str, landing: Path, slot: str, **dms: Any) -> PgCapture:
    with psycopg.connect(conninfo) as connection:
        entry = table_entry(connection, "public.docs")
    config = parse_config({"dms": {"timestamp_column": "ts", **dms}, "tables": [entry]})
    return PgCapture(conninfo, config, landing, slot=slot, files_per_round=1)


def _rows(landing: Path, key: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO((landing / key).read_text(encoding="utf-8"), newline="")))


DOCS = (
    "CREATE TABLE docs (id int PRIMARY KEY, body text, n real, ok boolean); "
    "ALTER TABLE docs ALTER body SET STORAGE EXTERNAL"  # out of line from 2 kB, never compressed
)


def test_cdc_files_as_dms_writes_them(postgres: Cluster, tmp_path: Path) -> None:
    conninfo = _database(postgres, "capture_csv", DOCS)
    capture = _capture(conninfo, tmp_path, "capture_csv", before_image={"column_prefix": "before_"})
    try:
        assert capture.start() == ["public/docs/LOAD00000001.csv"]
        assert (tmp_path / "public/docs/LOAD00000001.csv").read_text() == ""
        with psycopg.connect(conninfo, autocommit=True) as connection:
            connection.execute("INSERT INTO docs VALUES (1, 'a, \"b\"', 32.38, true), (2, '', NULL, false)")
            connection.execute("UPDATE docs SET id = 3 WHERE id = 1")
            connection.execute("DELETE FROM docs WHERE id = 2")
            with connection.transaction():
                connection.execute("INSERT INTO docs VALUES (9, 'never', 1, true)")
                raise psycopg.Rollback()
        (key,) = capture.capture()
        rows = _rows(tmp_path, key)
        assert [r[:1] + r[2:] for r in rows] == [
            ["I", "1", 'a, "b"', "+3.23800011e+01", "true", ""],
            ["I", "2", "", "", "false", ""],
            ["U", "3", 'a, "b"', "+3.23800011e+01", "true", "1"],
            ["D", "2", "", "", "", ""],
        ]
        text = (tmp_path / key).read_text()
        assert ',"",,false,' in text, "the empty string is written quoted, NULL as an empty field"
        assert capture.capture() == [], "the slot moved past what was written"
    finally:
        capture.close(drop_slot=True)


def test_unchanged_toast_refused_then_taken_from_the_old_row(postgres: Cluster, tmp_path: Path) -> None:
    big = "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(6000))  # incompressible, stored out of line
    conninfo = _database(postgres, "capture_toast", DOCS)
    capture = _capture(conninfo, tmp_path / "default", "toast_default")
    try:
        capture.start()
        with psycopg.connect(conninfo, autocommit=True) as connection:
            connection.execute("INSERT INTO docs VALUES (1, %s, 1, true)", (big,))
            connection.execute("UPDATE docs SET n = 2 WHERE id = 1")
        with pytest.raises(UnchangedToastError, match="REPLICA IDENTITY FULL"):
            capture.capture()
    finally:
        capture.close(drop_slot=True)

    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute("ALTER TABLE docs REPLICA IDENTITY FULL")
    capture = _capture(conninfo, tmp_path / "full", "toast_full")
    try:
        capture.start()
        with psycopg.connect(conninfo, autocommit=True) as connection:
            connection.execute("UPDATE docs SET n = 3 WHERE id = 1")
            connection.execute("DELETE FROM docs WHERE id = 1")
        (key,) = capture.capture()
        rows = _rows(tmp_path / "full", key)
        assert [(r[0], r[2], r[3], r[4]) for r in rows] == [
            ("U", "1", big, "+3.00000000e+00"),
            ("D", "1", big, "+3.00000000e+00"),
        ]
    finally:
        capture.close(drop_slot=True)


def test_unsupported_types_are_named(postgres: Cluster) -> None:
    conninfo = _database(postgres, "capture_types", "CREATE TABLE docs (id int PRIMARY KEY, blob bytea)")
    with psycopg.connect(conninfo) as connection, pytest.raises(CaptureError, match=r"public.docs.blob: .*bytea"):
        table_entry(connection, "public.docs")


def test_run_capture_starts_then_resumes_from_its_slot(postgres: Cluster, tmp_path: Path) -> None:
    conninfo = _database(postgres, "capture_run", DOCS)
    with psycopg.connect(conninfo) as connection:
        config = parse_config({"dms": {"format": "parquet"}, "tables": [table_entry(connection, "public.docs")]})
    written: list[list[str]] = []

    def change(seconds: float) -> None:  # the "sleep" between rounds: the source changes meanwhile
        with psycopg.connect(conninfo, autocommit=True) as connection:
            connection.execute("INSERT INTO docs VALUES (%s, 'x', 1, true)", (len(written),))

    stats = run_capture(conninfo, config, tmp_path, slot="run_capture", rounds=2, on_files=written.append, sleep=change)
    assert (stats.load_files, stats.changes) == (["public/docs/LOAD00000001.parquet"], 2)
    resumed = run_capture(conninfo, config, tmp_path, slot="run_capture", rounds=1, sleep=change)
    assert (resumed.load_files, resumed.changes) == ([], 1)
    assert len({key for keys in written for key in keys}) == 3
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute("SELECT pg_drop_replication_slot('run_capture')")


def test_truncate_is_refused(postgres: Cluster, tmp_path: Path) -> None:
    conninfo = _database(postgres, "capture_truncate", DOCS + "; CREATE TABLE other (id int PRIMARY KEY)")
    capture = _capture(conninfo, tmp_path, "capture_truncate")
    try:
        capture.start()
        with psycopg.connect(conninfo, autocommit=True) as connection:
            connection.execute("TRUNCATE other, docs")
        with pytest.raises(CaptureError, match=r"TRUNCATE of \['public.other', 'public.docs'\]"):
            capture.capture()
    finally:
        capture.close(drop_slot=True)


def _unchecked(postgres: Cluster, conninfo: str) -> str:
    """``conninfo`` without the TLS settings the test cluster's carries: libpq alone would fall back to ``prefer``."""
    return conninfo.replace(f" sslmode=verify-full sslrootcert={postgres.authority.ca}", "")


def test_both_connections_check_the_certificate_and_name_whatever_the_url_leaves_out(
    postgres: Cluster, tmp_path: Path
) -> None:
    conninfo = _database(postgres, "capture_tls", DOCS)
    with psycopg.connect(conninfo) as connection:
        config = parse_config({"tables": [table_entry(connection, "public.docs")]})
    opened: list[tuple[str | None, str | None, bool]] = []

    def connect(conninfo: str, **options: Any) -> Any:  # psycopg's, noting how each connection was made
        connection = psycopg.connect(conninfo, **options)
        used = conninfo_to_dict(connection.info.dsn)
        opened.append((options.get("replication"), used.get("sslmode"), connection.pgconn.ssl_in_use))
        return connection

    ca = SourceTls(ca_file=str(postgres.authority.ca))
    capture = PgCapture(_unchecked(postgres, conninfo), config, tmp_path, slot="capture_tls", tls=ca, connect=connect)
    try:
        assert capture.start() == ["public/docs/LOAD00000001.csv"]
    finally:
        capture.close(drop_slot=True)
    assert {replication for replication, _, _ in opened} == {None, "database"}  # the session's and the slot's
    assert {(mode, encrypted) for _, mode, encrypted in opened} == {("verify-full", True)}


def test_a_certificate_another_ca_signed_or_a_weaker_mode_is_refused(postgres: Cluster, tmp_path: Path) -> None:
    conninfo = _database(postgres, "capture_refused", DOCS)
    with psycopg.connect(conninfo) as connection:
        config = parse_config({"tables": [table_entry(connection, "public.docs")]})
    other = make_authority(tmp_path / "other", "another CA")
    address = _unchecked(postgres, conninfo)
    with pytest.raises(psycopg.OperationalError, match="certificate verify failed"):
        PgCapture(f"{address} sslrootcert={other.ca}", config, tmp_path)  # libpq's prefer would have connected
    with pytest.raises(CdcLakeError, match="sslmode=prefer falls back to plaintext"):
        PgCapture(f"{address} sslmode=prefer", config, tmp_path)


def test_a_source_without_tls_is_captured_only_when_allowed_and_announced(
    postgres: Cluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    conninfo = _database(postgres, "capture_plain", DOCS)
    with psycopg.connect(conninfo) as connection:
        config = parse_config({"tables": [table_entry(connection, "public.docs")]})
    caplog.set_level(logging.WARNING, logger="cdc_lake.ops.source_tls")
    capture = PgCapture(f"{_unchecked(postgres, conninfo)} sslmode=disable", config, tmp_path, tls=SourceTls(False))
    try:
        assert not capture._session.pgconn.ssl_in_use
    finally:
        capture.close()
    assert "dbname=capture_plain sslmode=disable: the source's certificate is not checked" in caplog.text
