"""A file read as listed (``ObjectStore.read_listed``) is the object the listing named, or nothing: the driver's
batch commits what it read without listing the landing again, so a file written again since its listing, even to
the same size, or removed, must not be read as if it were the one listed. On S3 (the local endpoint: a GET on the
listed ETag) and on a landing folder."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from cdc_lake.core.storage import LocalFolderStore, ObjectStore, S3Store
from tests.support.aws import aws_client

KEY = "dms/shop/items/20250301-120000000.csv"


class Landing:
    """One landing, S3's or a folder's, written behind its store's back as DMS writes it."""

    def __init__(self, kind: str, tmp_path: Path, endpoint: str) -> None:
        self.kind, self.root = kind, tmp_path
        if kind == "s3":
            self.bucket = f"raw-{uuid.uuid4().hex[:12]}"
            self.s3 = aws_client(endpoint, "s3")
            self.s3.create_bucket(Bucket=self.bucket)

    def store(self) -> ObjectStore:
        return S3Store(self.bucket, client=self.s3) if self.kind == "s3" else LocalFolderStore(self.root)

    def write(self, text: str) -> None:
        if self.kind == "s3":
            self.s3.put_object(Bucket=self.bucket, Key=KEY, Body=text.encode())
        else:
            path = self.root / KEY
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            os.utime(path, ns=(len(text), 10**18 + len(text)))

    def remove(self) -> None:
        if self.kind == "s3":
            self.s3.delete_object(Bucket=self.bucket, Key=KEY)
        else:
            (self.root / KEY).unlink()


@pytest.fixture(params=["s3", "folder"])
def landing(request: Any, tmp_path: Path) -> Landing:
    endpoint = request.getfixturevalue("aws_endpoint") if request.param == "s3" else ""
    return Landing(request.param, tmp_path, endpoint)


def test_a_file_as_listed_is_read_whole(landing: Landing) -> None:
    landing.write("U,1,a\nU,2,b\n")
    store = landing.store()
    [item] = store.list("dms/shop/items/")
    read = store.read_listed(item)
    assert read is not None and read.data == b"U,1,a\nU,2,b\n"


@pytest.mark.parametrize("change", ["same size", "other size", "removed"])
def test_a_file_changed_since_listed_is_not_read(landing: Landing, change: str) -> None:
    landing.write("U,1,a\nU,2,b\n")
    store = landing.store()
    [item] = store.list("dms/shop/items/")
    if change == "removed":
        landing.remove()
    else:
        landing.write("U,1,x\nU,2,y\n" if change == "same size" else "U,1,a\n")
    assert store.read_listed(item) is None
