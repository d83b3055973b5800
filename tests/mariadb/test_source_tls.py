"""Checked TLS to a real MariaDB (a throwaway CA's certificate for ``localhost``): cdc-lake connects with the
certificate and the host name checked, refuses a URL with no CA to check with, a certificate another CA signed or
naming another host, and reaches the source without a checked certificate only when told to, saying so."""

from __future__ import annotations

import logging
from pathlib import Path
from urllib.parse import quote

import pytest

from cdc_lake.core.exceptions import CdcLakeError
from cdc_lake.ops.mysql_catalog import connect
from cdc_lake.ops.source_tls import SourceTls
from tests.mariadb.server import USER, Server
from tests.support.cli import cli
from tests.support.tls import make_authority

pytestmark = pytest.mark.mariadb


def _cipher(connection) -> str:  # type: ignore[no-untyped-def]
    with connection, connection.cursor() as cursor:
        cursor.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        return str(cursor.fetchone()[1])


def test_the_source_is_reached_with_its_certificate_and_name_checked(mariadb: Server, tmp_path: Path) -> None:
    assert _cipher(connect(mariadb.url(""))) != ""
    bare = f"mysql://{USER}@localhost:{mariadb.port}/"
    assert _cipher(connect(bare, SourceTls(ca_file=str(mariadb.authority.ca)))) != ""  # the jobs' packaged CA

    other = make_authority(tmp_path / "other", "another CA")
    with pytest.raises(CdcLakeError, match=r"certificate verify failed.*--source-without-tls"):
        connect(f"{bare}?ssl_ca={quote(str(other.ca))}")
    by_address = f"mysql://{USER}@127.0.0.1:{mariadb.port}/?ssl_ca={quote(str(mariadb.authority.ca))}"
    with pytest.raises(CdcLakeError, match="certificate verify failed: IP address mismatch"):
        connect(by_address)


def test_a_url_without_a_ca_is_refused_unless_allowed_and_then_announced(
    mariadb: Server, tmp_path: Path, capsys, caplog: pytest.LogCaptureFixture
) -> None:
    bare = f"mysql://{USER}:Qx7kZm9w@localhost:{mariadb.port}/"
    with pytest.raises(CdcLakeError, match=r"no CA to check its certificate with.*--source-without-tls") as refused:
        connect(bare)
    assert "Qx7kZm9w" not in str(refused.value)
    code, printed = cli(capsys, "config-from-source", "--source", bare, "-o", tmp_path / "t.yaml")
    assert code == 2 and "no CA to check" in printed and not (tmp_path / "t.yaml").exists()

    caplog.set_level(logging.WARNING, logger="cdc_lake.ops.source_tls")
    unchecked = f"mysql://{USER}@localhost:{mariadb.port}/"
    assert _cipher(connect(unchecked, SourceTls(required=False))) != ""  # PyMySQL still encrypts, unchecked
    assert "certificate is not checked (allowed by --source-without-tls)" in caplog.text
