"""Checked TLS to a real PostgreSQL (a throwaway CA's certificate for ``localhost``): cdc-lake connects with
``sslmode=verify-full`` whatever the URL leaves out, refuses a URL asking for less, a server whose certificate
another CA signed or names another host, and reaches a source without TLS only when told to, saying so."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from cdc_lake.core.exceptions import CdcLakeError
from cdc_lake.ops.source_catalog import connect
from cdc_lake.ops.source_tls import SourceTls
from tests.pg.cluster import Cluster, create_database
from tests.support.cli import cli
from tests.support.source_config import run_source_check_job
from tests.support.tls import make_authority

pytestmark = pytest.mark.pg


def _address(postgres: Cluster, host: str = "host=localhost hostaddr=127.0.0.1") -> str:
    return f"{host} port={postgres.port} user={postgres.user} dbname=postgres"


def _encrypted(connection) -> bool:  # type: ignore[no-untyped-def]
    with connection:
        return bool(connection.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone()[0])


def test_the_source_is_reached_with_its_certificate_and_name_checked(postgres: Cluster, tmp_path: Path) -> None:
    ca = postgres.authority.ca
    assert _encrypted(connect(postgres.conninfo))
    assert _encrypted(connect(f"{_address(postgres)} sslrootcert={ca}"))  # verify-full when the URL names no mode
    assert _encrypted(connect(_address(postgres), SourceTls(ca_file=str(ca))))  # the jobs' packaged CA

    other = make_authority(tmp_path / "other", "another CA")
    for url in (
        f"{_address(postgres)} sslrootcert={other.ca}",
        f"{_address(postgres)} sslrootcert={other.ca} sslmode=verify-full",
    ):
        with pytest.raises(CdcLakeError, match=r"certificate verify failed.*--source-without-tls"):
            connect(url)  # libpq's default mode (prefer) would have connected without a word
    with pytest.raises(CdcLakeError, match=r'does not match host name "127.0.0.1"'):
        connect(f"{_address(postgres, 'host=127.0.0.1')} sslrootcert={ca}")


@pytest.mark.parametrize("mode", ["disable", "allow", "prefer", "require", "verify-ca"])
def test_a_url_asking_for_less_than_verify_full_is_refused_before_connecting(postgres: Cluster, mode: str) -> None:
    url = f"postgresql://{postgres.user}:Qx7kZm9w@localhost:{postgres.port}/postgres?sslmode={mode}"
    with pytest.raises(CdcLakeError, match=f"sslmode={mode} .*--source-without-tls") as refused:
        connect(url)
    assert "Qx7kZm9w" not in str(refused.value)


def test_a_source_without_tls_is_reached_only_when_allowed_and_announced(
    postgres: Cluster, tmp_path: Path, capsys, caplog: pytest.LogCaptureFixture
) -> None:
    with connect(create_database(postgres, "tls_plain")) as connection:
        connection.execute("SET default_transaction_read_only = off")
        connection.execute("CREATE TABLE items (id int PRIMARY KEY)")
    plaintext = f"{_address(postgres)} sslmode=disable".replace("dbname=postgres", "dbname=tls_plain")
    code, printed = cli(capsys, "config-from-source", "--source", plaintext, "-o", tmp_path / "t.yaml")
    assert code == 2 and "sslmode=disable no TLS at all" in printed and "--source-without-tls" in printed
    assert not (tmp_path / "t.yaml").exists()

    caplog.set_level(logging.WARNING, logger="cdc_lake.ops.source_tls")
    assert not _encrypted(connect(plaintext, SourceTls(required=False)))
    assert "certificate is not checked (allowed by --source-without-tls)" in caplog.text
    code, printed = cli(capsys, "config-from-source", "--source", plaintext, "--source-without-tls")
    assert code == 0 and 'name: "public.items"' in printed, printed


def test_the_scheduled_job_refuses_a_certificate_its_ca_did_not_sign(postgres: Cluster, tmp_path: Path) -> None:
    out = tmp_path / "tables.yaml"
    out.write_text("tables:\n  - name: public.none\n    primary_key: [id]\n    columns: [{name: id, type: int}]\n")
    secret = {"host": "localhost", "port": postgres.port, "username": postgres.user, "password": "unused"}
    other = make_authority(tmp_path / "other", "another CA")
    with pytest.raises(CdcLakeError, match=r"certificate verify failed.*sourceWithoutTls"):
        run_source_check_job(out, secret, "postgres", other.ca, "postgres")
