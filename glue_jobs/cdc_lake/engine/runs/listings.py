"""A run's listings, kept: ``ListingLog`` records each folder's listings and the heads it read as a run makes them;
``RecordedListings`` answers from them afterwards, so that telling what still waits lists nothing again."""

from __future__ import annotations

import builtins
import threading
from typing import Any

from cdc_lake.core.storage import ObjectStore, StoredObject


def _covers(start_after: str | None, other: str | None) -> bool:
    """Whether a listing from ``start_after`` holds everything a listing from ``other`` would."""
    return start_after is None or (other is not None and start_after <= other)


class ListingLog:
    """An object store that keeps each folder's listings as it returns them, and the heads of objects it reads, so
    that a run can look at what it listed again without asking S3 (``RecordedListings``). Everything else, and
    every listing, goes to ``store`` (any operation the store has, named here or not); runs' threads share it."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._listings: dict[str, list[tuple[str | None, list[StoredObject]]]] = {}  # per folder, oldest first
        self._heads: dict[tuple[str, int], bytes] = {}

    def list(self, prefix: str, start_after: str | None = None) -> list[StoredObject]:
        listed = self.store.list(prefix, start_after)
        with self._lock:
            # The folder's newest listing, and the one that starts earliest: a run that lives for days lists each
            # folder thousands of times from a start that moves on, and what it keeps must grow with its tables, not
            # its files. What another alone held is asked of the store again, and counted (``RecordedListings``),
            # as are heads of objects before the newest start, which no round reads again.
            older = [(s, o) for s, o in self._listings.get(prefix, []) if not _covers(start_after, s)]
            widest = min(older, key=lambda listing: listing[0] or "", default=None)
            self._listings[prefix] = [*([widest] if widest is not None else []), (start_after, listed)]
            if start_after is not None:
                done = [h for h in self._heads if h[0].startswith(prefix) and h[0] <= start_after]
                for head in done:
                    del self._heads[head]
        return listed

    def uri(self, key: str) -> str:
        return self.store.uri(key)

    def read_head(self, key: str, size: int) -> bytes:
        data = self.store.read_head(key, size)
        with self._lock:
            self._heads[(key, size)] = data
        return data

    def folders(self, prefix: str) -> builtins.list[str]:
        return self.store.folders(prefix)

    def __getattr__(self, name: str) -> Any:
        """Every other operation of ``store``, as it is."""
        if name.startswith("_") or name == "store":
            raise AttributeError(name)
        return getattr(self.store, name)

    def newest(self, prefix: str) -> tuple[str | None, builtins.list[StoredObject]] | None:
        """The folder's newest listing, and where it started; None when the folder was not listed."""
        with self._lock:
            found = self._listings.get(prefix)
            return found[-1] if found else None

    def covering(self, prefix: str, start_after: str | None) -> builtins.list[StoredObject] | None:
        """What the folder's newest listing that holds everything from ``start_after`` returned, from there on."""
        with self._lock:
            found = [o for s, o in reversed(self._listings.get(prefix, [])) if _covers(s, start_after)]
        if not found:
            return None
        return [o for o in found[0] if start_after is None or o.key > start_after]

    def head(self, key: str, size: int) -> bytes | None:
        with self._lock:
            return self._heads.get((key, size))


class RecordedListings:
    """An object store that answers from a ``ListingLog``: a listing from the newest recorded one of the folder that
    covers it, a head from those read. What was not recorded is asked of the store itself, counted in
    ``requests``."""

    def __init__(self, listings: ListingLog) -> None:
        self._listings = listings
        self.requests = 0

    def list(self, prefix: str, start_after: str | None = None) -> list[StoredObject]:
        found = self._listings.covering(prefix, start_after)
        if found is not None:
            return found
        self.requests += 1
        return self._listings.store.list(prefix, start_after)

    def uri(self, key: str) -> str:
        return self._listings.uri(key)

    def read_head(self, key: str, size: int) -> bytes:
        data = self._listings.head(key, size)
        if data is not None:
            return data
        self.requests += 1
        return self._listings.store.read_head(key, size)

    def folders(self, prefix: str) -> builtins.list[str]:
        self.requests += 1
        return self._listings.store.folders(prefix)

    def __getattr__(self, name: str) -> Any:
        """Every other operation of the store, asked of it and counted in ``requests``."""
        if name.startswith("_"):
            raise AttributeError(name)
        operation = getattr(self._listings.store, name)

        def asked(*args: Any, **kwargs: Any) -> Any:
            self.requests += 1
            return operation(*args, **kwargs)

        return asked if callable(operation) else operation
