"""The mark the scheduled maintenance leaves per table of the landed files it removed (``engine.landed_expiry``):
outside DMS's folder, it outlives the lake table, so that a lake table built again from what is left knows its
history was cut (``engine.continuity``)."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass

from cdc_lake.core.config import PipelineConfig, TableSpec
from cdc_lake.core.names import EXPIRED_MARK_PREFIX
from cdc_lake.core.storage import ObjectStore

# A mark is a few hundred bytes: a read of this many is the whole of it.
_MARK_BYTES = 64 * 1024


@dataclass(frozen=True)
class ExpiryMark:
    """What was removed of a table's landed files, over every maintenance run: how many, the newest in DMS order
    (removals go forward: the last removal's), and the newest landing among them."""

    files: int
    newest_key: str
    newest_landed: dt.datetime

    def adding(self, other: ExpiryMark) -> ExpiryMark:
        return ExpiryMark(
            self.files + other.files,
            other.newest_key,
            max(self.newest_landed, other.newest_landed),
        )

    def to_json(self) -> bytes:
        text = {"files": self.files, "newest_key": self.newest_key, "newest_landed": self.newest_landed.isoformat()}
        return json.dumps(text, sort_keys=True).encode()


def mark_key(config: PipelineConfig, table: TableSpec) -> str:
    return f"{EXPIRED_MARK_PREFIX}{config.table_prefix(table)}expired.json"


def read_mark(store: ObjectStore, config: PipelineConfig, table: TableSpec) -> ExpiryMark | None:
    """The table's mark (one request), or None when nothing of it was ever removed."""
    key = mark_key(config, table)
    try:
        data = json.loads(store.read_head(key, _MARK_BYTES))
    except FileNotFoundError:
        return None
    return ExpiryMark(int(data["files"]), str(data["newest_key"]), dt.datetime.fromisoformat(data["newest_landed"]))


def write_mark(store: ObjectStore, config: PipelineConfig, table: TableSpec, mark: ExpiryMark) -> None:
    store.put(mark_key(config, table), mark.to_json())
