"""The real DMS samples beside the repository (``../shared/dms-samples``): where they are, how a test lands
one, and plain-Python readers for building expected tables. Pure Python: no Spark, nothing from cdc_lake's
replay, so an expected table never shares the engine's assumptions.

The samples stay outside the repository (two of their source repositories carry no licence): tests read
them at run time and copy them into a temporary landing folder.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import shutil
import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

SAMPLES_ENV = "CDC_LAKE_DMS_SAMPLES"
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SAMPLES = REPO_ROOT.parent / "shared" / "dms-samples"
SAMPLE_CONFIGS = Path(__file__).resolve().parents[1] / "samples"

Row = dict[str, Any]


def samples_root() -> Path:
    """The dms-samples folder: ``$CDC_LAKE_DMS_SAMPLES`` if set, else ``<repo>/../shared/dms-samples``.

    A missing folder fails the test (never a skip): these tests are the suite's only contact with real DMS output.
    """
    configured = os.environ.get(SAMPLES_ENV)
    root = Path(configured) if configured else DEFAULT_SAMPLES
    if not root.is_dir():
        pytest.fail(
            f"real DMS samples not found at {root}: set {SAMPLES_ENV} to the dms-samples folder "
            f"(default <repo root>/../shared/dms-samples)",
            pytrace=False,
        )
    return root


def sample_dir(name: str) -> Path:
    folder = samples_root() / name
    if not (folder / "dms").is_dir():
        pytest.fail(f"sample {name!r} has no dms/ folder under {samples_root()} ({SAMPLES_ENV})", pytrace=False)
    return folder


def sample_file(name: str, relative: str) -> Path:
    """One file of a sample, by its key under the sample folder (``dms/<schema>/<table>/<file>``)."""
    path = sample_dir(name) / relative
    if not path.is_file():
        pytest.fail(f"sample {name!r} lacks {relative} under {samples_root()} ({SAMPLES_ENV})", pytrace=False)
    return path


def land_sample(name: str, landing: Path, bucket_folder: str = "dms") -> list[str]:
    """Copy the sample's ``dms/...`` tree into ``landing`` (file contents only: the samples are read-only)
    and return the landed keys.

    The samples folder keeps every sample's output under ``dms/``, whatever the source task's BucketFolder
    was; the keys land under ``bucket_folder`` as that task wrote them (``""``: at the bucket's root, e.g.
    qiushiyan's ``cdc/users/LOAD00000001.csv``)."""
    source = sample_dir(name) / "dms"
    root = f"{bucket_folder.strip('/')}/" if bucket_folder.strip("/") else ""
    keys = []
    for path in sorted(source.rglob("*")):
        if not path.is_file():
            continue
        key = root + path.relative_to(source).as_posix()
        target = landing / key
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        keys.append(key)
    return keys


def real(text: str) -> float:
    """A PostgreSQL REAL (IEEE single precision) as Python sees it once widened: ``real("32.3800011")``."""
    value: float = struct.unpack("<f", struct.pack("<f", float(text)))[0]
    return value


def csv_records(path: Path, *, header: bool = False) -> tuple[list[str] | None, list[list[str | None]]]:
    """The file's header (if any) and records, with Python's csv module; an empty field is NULL (None). A
    ``.csv.gz`` file is decompressed with the gzip module first.

    DMS writes NULL as an empty unquoted field and an empty string as a quoted ``""``. The csv module cannot
    tell them apart, so this refuses files holding ``""`` at all: none of the CSV samples does.
    """
    data = path.read_bytes()
    text = (gzip.decompress(data) if path.name.endswith(".gz") else data).decode("utf-8")
    assert '""' not in text, f"{path}: holds a quoted empty string; this reader cannot keep it apart from NULL"
    records = list(csv.reader(io.StringIO(text, newline=""), delimiter=",", quotechar='"', strict=True))
    names = records.pop(0) if header else None
    return names, [[field if field != "" else None for field in record] for record in records]


def typed_row(names: Sequence[str], types: Sequence[Callable[[str], Any]], values: Sequence[str | None]) -> Row:
    """One record as a row: each non-NULL text through its column's Python constructor."""
    assert len(names) == len(types) == len(values), (names, values)
    return {n: (None if v is None else t(v)) for n, t, v in zip(names, types, values, strict=True)}


def describe_differences(actual: dict[Any, Row], expected: dict[Any, Row], limit: int = 8) -> str:
    """A short account of how two keyed tables differ, values shown with their Python types."""

    def typed(row: Row) -> dict[str, tuple[str, Any]]:
        return {c: (type(v).__name__, v) for c, v in row.items()}

    missing = sorted(set(expected) - set(actual), key=repr)
    extra = sorted(set(actual) - set(expected), key=repr)
    changed = [k for k in sorted(set(actual) & set(expected), key=repr) if typed(actual[k]) != typed(expected[k])]
    lines = [f"{len(actual)} rows in the lake, {len(expected)} expected"]
    if missing:
        lines.append(f"missing {len(missing)}: " + "; ".join(repr(expected[k]) for k in missing[:limit]))
    if extra:
        lines.append(f"unexpected {len(extra)}: " + "; ".join(repr(actual[k]) for k in extra[:limit]))
    for key in changed[:limit]:
        diff = {
            c: (typed(actual[key]).get(c), typed(expected[key]).get(c))
            for c in expected[key].keys() | actual[key].keys()
            if typed(actual[key]).get(c) != typed(expected[key]).get(c)
        }
        lines.append(f"key {key!r} differs (lake, expected): {diff}")
    if len(changed) > limit:
        lines.append(f"... and {len(changed) - limit} more differing rows")
    return "\n".join(lines)


def same_rows(actual: dict[Any, Row], expected: dict[Any, Row]) -> bool:
    """Equal keys, and per row equal values of equal Python types (Decimal("1") is no 1.0, "" no None)."""

    def typed(row: Row) -> dict[str, tuple[type, Any]]:
        return {c: (type(v), v) for c, v in row.items()}

    return actual.keys() == expected.keys() and all(typed(actual[k]) == typed(expected[k]) for k in expected)
