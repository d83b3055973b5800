"""A source URL's password never reaches a message: not when the connection is refused, and not when the URL is
malformed, where libpq, PyMySQL and ``urlsplit`` quote the part of it they stumbled on (refused on port 1 of
127.0.0.1: nothing listens there)."""

from __future__ import annotations

import re

import pytest

from cdc_lake.core.exceptions import CdcLakeError
from cdc_lake.ops import mysql_catalog, source_catalog
from cdc_lake.ops.source_tls import SourceTls

# Each password is made of pieces no message holds by chance; the separators are what breaks a URL apart.
URLS = [
    "postgresql://reader:Qx7k@Zm9w:Vb4t@127.0.0.1:1/db",  # an unescaped @ and :
    "postgresql://reader:Qx7k/Zm9w@127.0.0.1:1/db",  # an unescaped / ends the authority early
    "postgresql://reader:Qx7k#Zm9w@127.0.0.1:1/db",
    "postgresql://reader:Qx7k%zzZm9w@127.0.0.1:1/db",  # a bad percent escape
    "postgresql://reader:Qx7kZm9w@[::1/db",
    "host=127.0.0.1 port=1 password=Qx7k Zm9w user=reader",  # an unquoted space in a conninfo
    "host=127.0.0.1 port=1 password='Qx7k Zm9w' user=reader",
    "postgresql://reader:Qx7kZm9w@127.0.0.1:1/db",
]
MYSQL_URLS = [
    "mysql://reader:Qx7k@Zm9w:Vb4t@127.0.0.1:1/db",
    "mysql://reader:Qx7k/Zm9w@127.0.0.1:1/db",
    "mysql://reader:Qx7k#Zm9w@127.0.0.1:1/db",
    "mysql://reader:Qx7kZm9w@[::1/db",
    "mysql://reader:Qx7kZm9w@127.0.0.1:1/db",
]
PIECES = re.compile(r"Qx7k|Zm9w|Vb4t|Qx7|x7k|Zm9|m9w|Vb4|b4t")


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
