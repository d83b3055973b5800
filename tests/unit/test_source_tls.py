"""What the source's TLS settings show and leave behind: a source address prints without its password, and the
jobs' CA bundle is copied where no other user can plant or swap it."""

from __future__ import annotations

import os
import stat
import tempfile
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from cdc_lake.ops import source_tls
from cdc_lake.ops.source_tls import BUNDLED_CA, SourceAddress, SourceTls, bundled_ca_file
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


BUNDLE = b"-----BEGIN CERTIFICATE-----\nthe packaged CA\n-----END CERTIFICATE-----\n"


@pytest.fixture
def shared_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary folder every local user shares, here one of the test's own."""
    shared = tmp_path / "tmp"
    shared.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    return shared


def test_the_bundle_from_the_zip_is_copied_to_a_private_folder_nobody_can_plant_first(
    shared_tmp: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    library = tmp_path / "library.zip"
    with zipfile.ZipFile(library, "w") as zipped:
        zipped.writestr(f"cdc_lake/ops/{BUNDLED_CA}", BUNDLE)
    monkeypatch.setattr(
        source_tls, "resources", SimpleNamespace(files=lambda _: zipfile.Path(library, "cdc_lake/ops/"))
    )
    # Another user's plant at the predictable name: a link to a file of ours, which a write would go through.
    victim = tmp_path / "victim"
    victim.write_bytes(b"mine")
    (shared_tmp / f"cdc-lake-{BUNDLED_CA}").symlink_to(victim)

    first, second = bundled_ca_file(), bundled_ca_file()
    assert first is not None and second is not None
    assert Path(first).read_bytes() == Path(second).read_bytes() == BUNDLE
    assert victim.read_bytes() == b"mine"
    assert first != second  # a new folder each time, its name not guessable
    folder = Path(first).parent
    assert folder.parent == shared_tmp and folder.name != "tmp"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and folder.stat().st_uid == os.getuid()


def test_an_unpacked_bundle_is_used_where_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / BUNDLED_CA).write_bytes(BUNDLE)
    monkeypatch.setattr(source_tls, "resources", SimpleNamespace(files=lambda _: tmp_path))
    assert bundled_ca_file() == str(tmp_path / BUNDLED_CA)


def test_no_bundle_packaged_gives_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(source_tls, "resources", SimpleNamespace(files=lambda _: tmp_path))
    assert bundled_ca_file() is None
