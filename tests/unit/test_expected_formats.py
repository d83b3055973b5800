"""Which reader an expected extract (``cdc-lake reconcile``) goes to: the format given, else its name's or its
folder's files'."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_lake.core.exceptions import CdcLakeError
from cdc_lake.ops.reconcile import EXPECTED_FORMATS, detect_format


@pytest.mark.parametrize("file_format", EXPECTED_FORMATS)
def test_every_format_is_told_by_its_own_name_given_or_as_a_suffix(file_format: str) -> None:
    assert detect_format("s3://bucket/extract", file_format.upper()) == file_format
    assert detect_format(f"s3://bucket/extract.{file_format}") == file_format
    assert detect_format(f"s3://bucket/extract.{file_format}.gz") == file_format


def test_json_names_are_json_lines_and_an_unknown_format_is_refused() -> None:
    assert [detect_format("extract", name) for name in ("json", "ndjson")] == ["jsonl", "jsonl"]
    assert detect_format("extract.ndjson") == "jsonl"
    with pytest.raises(CdcLakeError, match="unknown expected-file format 'xml'; use one of jsonl, csv, parquet"):
        detect_format("extract.xml", "xml")
    with pytest.raises(CdcLakeError, match="cannot tell the format from the name"):
        detect_format("s3://bucket/extract.xml")


def test_a_local_folder_is_read_by_its_files_format_and_refused_when_they_differ(tmp_path: Path) -> None:
    (tmp_path / "_SUCCESS").touch()
    (tmp_path / "part-0.parquet").touch()
    assert detect_format(tmp_path) == "parquet"
    (tmp_path / "part-1.csv").touch()
    with pytest.raises(CdcLakeError, match=r"holds files of several formats \(csv, parquet\)"):
        detect_format(tmp_path)
