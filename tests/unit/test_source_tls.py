"""What the source's TLS settings show and leave behind: a source address prints without its password."""

from __future__ import annotations

import pytest

from cdc_lake.ops.source_tls import SourceAddress, SourceTls
from tests.support.passwords import MYSQL_URLS, PIECES, URLS


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://reader:Qx7kZm9w@db.example:5432/shop?sslmode=verify-full", "host='db.example', database='shop'"),
        (
            "host=db.example port=5432 password='Qx7k Zm9w' user=reader dbname=shop",
            "host='db.example', database='shop'",
        ),
        ("mysql://reader:Qx7kZm9w@db.example:3306/shop", "host='db.example', database='shop'"),
        ("postgresql://reader@db.example", "host='db.example', database=None"),
    ],
)
def test_a_source_address_prints_its_host_and_database_not_its_password(url: str, shown: str) -> None:
    address = SourceAddress(url, SourceTls(required=False))
    assert repr(address) == str(address)
    assert repr(address).startswith(f"SourceAddress({shown}, tls=SourceTls(required=False")
    assert "Qx7k" not in repr(address)


@pytest.mark.parametrize("url", [*URLS, *MYSQL_URLS])
def test_no_fragment_of_a_malformed_urls_password_is_printed(url: str) -> None:
    assert not PIECES.search(repr(SourceAddress(url))), repr(SourceAddress(url))
