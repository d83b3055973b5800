"""Where DMS files are read from: an S3 bucket on AWS, a landing folder on a laptop."""

from __future__ import annotations

import builtins
import datetime as dt
import hashlib
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from cdc_lake.core.exceptions import AccessDeniedError

# DeleteObjects takes at most a thousand keys a request.
DELETES_PER_REQUEST = 1000
# S3's error codes for a request the caller's permissions refuse (a missing kms:Decrypt on the bucket's key too).
_DENIED_CODES = frozenset({"AccessDenied", "AllAccessDisabled", "KMS.AccessDeniedException"})


@dataclass(frozen=True)
class StoredObject:
    key: str
    size: int
    etag: str | None
    # When the object was written (S3 LastModified, a local file's mtime), UTC; None when unknown.
    # Only reload planning reads it; it is not part of an object's identity for replay.
    last_modified: dt.datetime | None = None


@dataclass(frozen=True)
class ReadAsListed:
    """An object read whole as its listing named it (``ObjectStore.read_listed``)."""

    data: bytes


class ObjectStore(Protocol):
    """The few object-store operations the jobs need, so they run the same on S3 and locally."""

    def list(self, prefix: str, start_after: str | None = None) -> list[StoredObject]:
        """The objects under ``prefix``, or only those whose key sorts after ``start_after`` (S3's StartAfter:
        the listing then costs what is newer, not what the folder has kept)."""
        ...

    def uri(self, key: str) -> str: ...

    def read_head(self, key: str, size: int) -> bytes:
        """The first ``size`` bytes of the object (fewer if it is shorter); FileNotFoundError when it is gone."""
        ...

    def read_listed(self, item: StoredObject) -> ReadAsListed | None:
        """The whole object while it is still the one ``item`` lists (its ETag and size), in one request; None when
        it changed or is gone since: what the caller read is then what the listing names."""
        ...

    def folders(self, prefix: str) -> builtins.list[str]:
        """The folders right under ``prefix`` (which ends with "/", or is empty), each as a prefix ending with "/"
        (S3's CommonPrefixes: one request per thousand, whatever the folders hold)."""
        ...

    def put(self, key: str, data: bytes) -> None:
        """Write a small object (a warm run's stop marker, ``core.shards.marker_key``; runs never write DMS files)."""
        ...

    def delete(self, key: str) -> None:
        """Remove the object; one already gone is no error."""
        ...

    def delete_many(self, keys: Sequence[str]) -> None:
        """Remove the objects (on S3 a request a thousand); those already gone are no error. An object that could
        not be removed raises, naming it, after the others went."""
        ...


def holds(store: ObjectStore, key: str) -> bool:
    """Whether ``store`` still holds ``key``, asked of it by key (one request, no listing)."""
    try:
        store.read_head(key, 1)
    except FileNotFoundError:
        return False
    return True


def changed_since_listed(
    store: ObjectStore, prefix: str, listed: Sequence[StoredObject]
) -> list[tuple[StoredObject, StoredObject | None]]:
    """Each of the ``listed`` objects that is gone (None) or not the same (ETag, size) now, with what is there now,
    from one listing of ``prefix`` that starts at the first of them."""
    if not listed:
        return []
    first = min(o.key for o in listed)
    now = {o.key: o for o in store.list(prefix, start_after=first[:-1])}  # a key's own prefix sorts before it
    changed = []
    for item in sorted(listed, key=lambda o: o.key):
        current = now.get(item.key)
        if current is None or (current.etag, current.size) != (item.etag, item.size):
            changed.append((item, current))
    return changed


def normalize_etag(etag: str | None) -> str | None:
    return etag.strip('"') if etag else None


def _utc(value: dt.datetime | None) -> dt.datetime | None:
    """boto3 gives LastModified as an aware datetime; a naive one is taken as UTC."""
    if value is None:
        return None
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


class S3Store:
    """A bucket read through boto3; the client is built only when not injected."""

    def __init__(self, bucket: str, client: Any | None = None) -> None:
        self.bucket = bucket
        if client is None:
            import boto3

            client = boto3.client("s3")
        self._client = client

    def list(self, prefix: str, start_after: str | None = None) -> list[StoredObject]:
        objects = []
        paginator = self._client.get_paginator("list_objects_v2")
        after = {"StartAfter": start_after} if start_after else {}
        with self._denied(prefix, "s3:ListBucket"):
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix, **after):
                for item in page.get("Contents", []):
                    objects.append(
                        StoredObject(
                            item["Key"],
                            int(item["Size"]),
                            normalize_etag(item.get("ETag")),
                            _utc(item.get("LastModified")),
                        )
                    )
        return objects

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def folders(self, prefix: str) -> builtins.list[str]:
        paginator = self._client.get_paginator("list_objects_v2")
        found = []
        with self._denied(prefix, "s3:ListBucket"):
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix, Delimiter="/"):
                found += [item["Prefix"] for item in page.get("CommonPrefixes", [])]
        return found

    def put(self, key: str, data: bytes) -> None:
        """Write a small object (a warm run's stop marker; runs never write the DMS files)."""
        with self._denied(key, "s3:PutObject"):
            self._client.put_object(Bucket=self.bucket, Key=key, Body=data)

    def delete(self, key: str) -> None:
        with self._denied(key, "s3:DeleteObject"):
            self._client.delete_object(Bucket=self.bucket, Key=key)

    def delete_many(self, keys: Sequence[str]) -> None:
        failed: list[str] = []
        for start in range(0, len(keys), DELETES_PER_REQUEST):
            batch = keys[start : start + DELETES_PER_REQUEST]
            with self._denied(batch[0], "s3:DeleteObject"):
                response = self._client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": [{"Key": key} for key in batch], "Quiet": True}
                )
            failed += [f"{e['Key']} ({e.get('Code')}: {e.get('Message')})" for e in response.get("Errors", [])]
        if failed:
            raise OSError(f"{len(failed)} object(s) of s3://{self.bucket} could not be removed, the first: {failed[0]}")

    def read_head(self, key: str, size: int) -> bytes:
        with self._denied(key, "s3:GetObject"):
            try:
                response = self._client.get_object(Bucket=self.bucket, Key=key, Range=f"bytes=0-{size - 1}")
            except self._client.exceptions.NoSuchKey:
                raise FileNotFoundError(self.uri(key)) from None
            return bytes(response["Body"].read())

    def read_listed(self, item: StoredObject) -> ReadAsListed | None:
        """One GET on the listed ETag (``If-Match``): S3 refuses it once the object is written again."""
        from botocore.exceptions import ClientError

        if item.etag is None:
            return None
        with self._denied(item.key, "s3:GetObject"):
            try:
                response = self._client.get_object(Bucket=self.bucket, Key=item.key, IfMatch=f'"{item.etag}"')
            except self._client.exceptions.NoSuchKey:
                return None
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") != "PreconditionFailed":
                    raise
                return None
            data = bytes(response["Body"].read())
        return ReadAsListed(data) if len(data) == item.size else None

    @contextmanager
    def _denied(self, key: str, action: str) -> Iterator[None]:
        """S3's refusal of the job's role as an error naming the object (or prefix) and the permission it lacks."""
        from botocore.exceptions import ClientError

        try:
            yield
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") not in _DENIED_CODES:
                raise
            raise AccessDeniedError(self.uri(key), action) from None


class LocalFolderStore:
    """A folder standing in for the raw bucket; keys are paths relative to it.

    ETags are MD5 digests of the content, as S3 gives for single-part uploads, cached for the process by path,
    size and mtime: S3 lists them for free, so a run should not pay for reading a large LOAD file again.
    Listings skip any name starting with a dot, which DMS never writes.
    """

    _etags: ClassVar[dict[tuple[str, int, int], str]] = {}

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        # What listing would cost on S3: requests, and objects returned (benchmarks read these).
        self.listings = 0
        self.listed_objects = 0
        self._count = threading.Lock()

    def list(self, prefix: str, start_after: str | None = None) -> list[StoredObject]:
        base = self.root / prefix if prefix else self.root
        start = base if base.is_dir() else base.parent
        if not start.exists():
            return []
        objects = []
        for folder, dirs, names in os.walk(start):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in names:
                if name.startswith("."):
                    continue
                path = Path(folder) / name
                key = path.relative_to(self.root).as_posix()
                if key.startswith(prefix) and (start_after is None or key > start_after):
                    try:
                        objects.append(self.stat(key))
                    except FileNotFoundError:
                        continue  # removed while listed: as S3, the listing need not show it
        with self._count:
            self.listings += 1
            self.listed_objects += len(objects)
        return sorted(objects, key=lambda o: o.key)

    def stat(self, key: str) -> StoredObject:
        path = self.root / key
        info = path.stat()
        cache_key = (str(path), info.st_size, info.st_mtime_ns)
        etag = self._etags.get(cache_key)
        if etag is None:
            digest = hashlib.md5(usedforsecurity=False)
            with path.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            etag = self._etags[cache_key] = digest.hexdigest()
        modified = dt.datetime.fromtimestamp(info.st_mtime_ns / 1e9, tz=dt.UTC)
        return StoredObject(key, info.st_size, etag, modified)

    def uri(self, key: str) -> str:
        return str(self.root / key)

    def read_head(self, key: str, size: int) -> bytes:
        with (self.root / key).open("rb") as handle:
            return handle.read(size)

    def read_listed(self, item: StoredObject) -> ReadAsListed | None:
        try:
            data = (self.root / item.key).read_bytes()
        except FileNotFoundError:
            return None
        same = len(data) == item.size and hashlib.md5(data, usedforsecurity=False).hexdigest() == item.etag
        return ReadAsListed(data) if same else None

    def put(self, key: str, data: bytes) -> None:
        path = self.root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def delete(self, key: str) -> None:
        (self.root / key).unlink(missing_ok=True)

    def delete_many(self, keys: Sequence[str]) -> None:
        for key in keys:
            self.delete(key)

    def folders(self, prefix: str) -> builtins.list[str]:
        base = self.root / prefix if prefix else self.root
        if not base.is_dir():
            return []
        return sorted(f"{prefix}{path.name}/" for path in base.iterdir() if path.is_dir() and path.name[0] != ".")
