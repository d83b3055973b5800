"""A source URL's password never reaches a message: not when the connection is refused, and not when the URL is
malformed, where libpq, PyMySQL and ``urlsplit`` quote the part of it they stumbled on (refused on port 1 of
127.0.0.1: nothing listens there)."""

from __future__ import annotations

import pytest

from cdc_lake.core.exceptions import CdcLakeError
from cdc_lake.ops import mysql_catalog, source_catalog
from cdc_lake.ops.source_tls import SourceTls
from tests.support.passwords import MYSQL_URLS, PIECES, URLS


@pytest.mark.parametrize(("connect", "url"), [*((source_catalog.connect, u) for u in URLS),
                                              *((mysql_catalog.connect, u) for u in MYSQL_URLS)])  # fmt: skip
def test_no_fragment_of_the_password_is_echoed(connect, url: str) -> None:
    with pytest.raises(CdcLakeError, match="cannot connect to the source") as refused:
        connect(url, SourceTls(required=False))  # the drivers' own messages: TLS would refuse a CA-less URL first
    assert not PIECES.search(str(refused.value)), str(refused.value)
    assert "reader" in str(refused.value)  # it still says which source


def test_masked_keeps_everything_but_the_password() -> None:
    assert source_catalog.masked("postgresql://reader:Qx7k@Zm9w@db.example:5432/shop?sslmode=verify-full") == (
        "postgresql://reader:***@db.example:5432/shop?sslmode=verify-full"
    )
    assert source_catalog.masked("host=db port=5432 password='a b' user=r") == "host=db port=5432 password=*** user=r"
    assert source_catalog.masked("postgresql://reader@db.example/shop") == "postgresql://reader@db.example/shop"
