"""The local folder store keeps the promise S3's tags keep: a file marked applied is known applied to the next
process, until the file is written again; and the marks never show as landed files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cdc_lake.core.storage import LocalFolderStore

KEY = "dms/shop/items/LOAD00000001.csv"


def applied_in_a_new_process(root: Path, key: str) -> bool:
    code = (
        "import sys; from cdc_lake.core.storage import LocalFolderStore as S; "
        "print(S(sys.argv[1]).is_applied(sys.argv[2]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(root), key], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.strip() == "True"


def test_a_mark_outlives_its_process_and_is_dropped_when_the_file_is_written_again(tmp_path: Path) -> None:
    (tmp_path / KEY).parent.mkdir(parents=True)
    (tmp_path / KEY).write_text("1,one\n")
    store = LocalFolderStore(tmp_path)
    assert not applied_in_a_new_process(tmp_path, KEY)
    store.mark_applied([KEY, "dms/shop/items/gone.csv"])  # a file gone is skipped, as on S3
    assert store.is_applied(KEY) and applied_in_a_new_process(tmp_path, KEY)
    assert store.marked == {KEY}
    (tmp_path / KEY).write_text("1,uno\n")
    os.utime(tmp_path / KEY, ns=(1, 1))  # written again: S3 drops an object's tags with it
    assert not store.is_applied(KEY) and not applied_in_a_new_process(tmp_path, KEY)


def test_the_marks_are_neither_listed_nor_a_folder_of_the_landing(tmp_path: Path) -> None:
    (tmp_path / KEY).parent.mkdir(parents=True)
    (tmp_path / KEY).write_text("1,one\n")
    store = LocalFolderStore(tmp_path)
    store.mark_applied([KEY])
    assert [o.key for o in store.list("")] == [KEY]
    assert store.folders("") == ["dms/"]
    store.delete(KEY)
    assert store.marked == set()
