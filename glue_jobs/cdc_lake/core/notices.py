"""Notices: input a run accepted on purpose but must not pass over in silence (docs/bad-input.md).

A notice names what it is about (a file's key, or a folder), what was done, and what the user may do. A run
logs each as a warning, records those of a commit in its snapshot summary (``cdc-lake.notices``), shows
them in ``cdc-lake changes``, and the jobs put their count to CloudWatch, where the stack alarms on it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Literal

NoticeKind = Literal[
    "empty-object",  # a 0-byte or blank object: not applied, not recorded; a later file under its key applies
    "column-missing",  # a file lacks a column of the table: NULL in its rows
    "column-added",  # a file brought a column the lake table did not have: added in place
    "type-widened",  # a file's type is wider than the lake column's: widened in place
    "load-duplicate-keys",  # LOAD files hold a key more than once: the last row in DMS order is kept
    "unknown-table",  # files of a table the configuration lacks: not applied
    "not-a-dms-file",  # an object in a table's folder whose name is no DMS data file: not applied
    "rows-quarantined",  # on_bad_rows: quarantine kept bad rows, and later changes of their keys, out of the table
    "history-rebuilt",  # a lake table gone (dropped, target changed) built again from a landing still whole
]


@dataclass(frozen=True, order=True)
class Notice:
    kind: NoticeKind
    subject: str  # the file's key, the folder's prefix, or the rejects table
    detail: str  # what was done, and what the user may do

    def __str__(self) -> str:
        return f"{self.subject}: {self.detail} [{self.kind}]"


def unique(notices: Iterable[Notice]) -> list[Notice]:
    """Each notice once, in order."""
    return list(dict.fromkeys(notices))


def notices_json(notices: Iterable[Notice]) -> str:
    return json.dumps([asdict(n) for n in notices], separators=(",", ":"))


def notices_from_json(text: str) -> list[Notice]:
    return [Notice(**item) for item in json.loads(text)]
