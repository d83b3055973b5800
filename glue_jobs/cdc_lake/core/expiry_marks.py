"""The mark the scheduled maintenance leaves per table of the landed files it removed (``engine.landed_expiry``):
outside DMS's folder, it outlives the lake table, so that a lake table built again from what is left knows whether
its history was cut (``engine.continuity``). A table the maintenance saw apply files has one, if only to say it
removed none."""

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
    (removals go forward: the last removal's), and the newest landing among them; None for both while none was."""

    files: int
    newest_key: str | None = None
    newest_landed: dt.datetime | None = None

    def adding(self, other: ExpiryMark) -> ExpiryMark:
        if not other.files:
            return self
        if not self.files:
            return other
        assert self.newest_landed is not None and other.newest_landed is not None  # set with files
        return ExpiryMark(self.files + other.files, other.newest_key, max(self.newest_landed, other.newest_landed))

    def to_json(self) -> bytes:
        landed = self.newest_landed.isoformat() if self.newest_landed is not None else None
        text = {"files": self.files, "newest_key": self.newest_key, "newest_landed": landed}
        return json.dumps(text, sort_keys=True).encode()


def mark_key(config: PipelineConfig, table: TableSpec) -> str:
    return f"{EXPIRED_MARK_PREFIX}{config.table_prefix(table)}expired.json"


def read_mark(store: ObjectStore, config: PipelineConfig, table: TableSpec) -> ExpiryMark | None:
    """The table's mark (one request), or None when no maintenance saw the table apply a file."""
    key = mark_key(config, table)
    try:
        data = json.loads(store.read_head(key, _MARK_BYTES))
    except FileNotFoundError:
        return None
    landed = data.get("newest_landed")
    return ExpiryMark(int(data["files"]), data.get("newest_key"), dt.datetime.fromisoformat(landed) if landed else None)


def write_mark(store: ObjectStore, config: PipelineConfig, table: TableSpec, mark: ExpiryMark) -> None:
    store.put(mark_key(config, table), mark.to_json())
