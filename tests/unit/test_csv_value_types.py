"""``config-from-files`` on CSV files with a header: each column's type proposed from its values as DMS writes
them, and the sample those values come from (whole rows of the file's first bytes, gzip too)."""

from __future__ import annotations

import gzip

import pytest

from cdc_lake.core.config import DmsSettings
from cdc_lake.local.files_catalog import SAMPLE_BYTES, csv_sample, proposal_with_note, propose_type

REAL4 = ["+3.23800011e+01", "-1.00000000e+00", "+0.00000000e+00", "+1.17549435e-38"]
REAL8 = ["+2.1804858784530072e+04", "-1.0000000000000000e+00", "+1.7976931348623157e+308"]


@pytest.mark.parametrize(
    ("values", "proposed"),
    [
        (["1", "-42", "+7", "0", "9223372036854775807", "-9223372036854775808"], "bigint"),
        (["1", "9223372036854775808"], "decimal(38,0)"),  # one past bigint
        (["-" + "9" * 38], "decimal(38,0)"),
        (["1" + "0" * 38], "string"),  # 39 digits: no decimal holds it
        (["21000.00", "-0.50", "+3.25"], "decimal(38,2)"),
        (["0.000001", "12.000000"], "decimal(38,6)"),
        (["12", "3.5", "0.125"], "decimal(38,3)"),  # a NUMBER without scale: integers and fractions
        (["1." + "0" * 37, "10.5"], "string"),  # 2 integer and 37 fraction digits
        (REAL4, "float"),
        (REAL4 + REAL8[:1], "double"),
        (REAL8, "double"),
        (["true", "false", "true"], "boolean"),
        (["1", "0", "1"], "bigint"),  # MySQL BOOLEAN, SQL Server BIT: ambiguous, noted
        (["2024-01-15", "1987-06-17"], "date"),
        (["1987-06-17 00:00:00", "2024-01-15 10:30:00.5", "2024-01-15 10:30:00.123456"], "timestamp"),
        (["2024-01-15 10:30:00.1234567", "2024-01-15 10:30:00.123456789"], "timestamp"),
        (
            [
                "2024-01-15 10:30:00.1234567 +02:00",
                "2024-01-15 10:30:00.123456789 -05:30",
                "2024-01-15 10:30:00 Europe/Paris",
                "2024-01-15 10:30:00 America/Argentina/Buenos_Aires",
                "2024-01-15 10:30:00.000000 UTC",
                "2024-01-15 10:30:00Z",
                "2024-01-15 10:30:00.5 Z",
            ],
            "timestamp_offset",
        ),
        (
            ["2024-01-15 10:30:00 US/Eastern", "2024-01-15 10:30:00 +0200", "2024-01-15 10:30:00 -05"],
            "timestamp_offset",
        ),
        (["2024-01-15 10:30:00 +02:00", "2024-01-15 10:30:00"], "string"),  # zoned beside local
        (["2024-01-15 10:30:00 CEST"], "string"),  # no zone's name: Spark would refuse it
        (["2024-01-15 10:30:00 Foo/Bar"], "string"),
        (["2024-01-15 10:30:00 +2:00"], "string"),
        (["12", "abc"], "string"),
        (["007", "12"], "string"),  # leading zeros: a code, not a number
        (["1.5e3"], "double"),
        (["1,5"], "string"),
        (["True", "False"], "string"),  # not as DMS writes a PostgreSQL boolean
        (["2024-02-30"], "string"),  # no such day
        (["2024-01-15 24:00:00"], "string"),
        (["2024-01-15T10:30:00"], "string"),
        (["2024-01-15", "2024-01-15 10:30:00"], "string"),
        (["true", "1"], "string"),
        (["+3.23800011e+01", "32.38"], "string"),
        (["١٢"], "string"),  # Arabic-Indic digits are digits to str.isdigit, not to DMS
    ],
)
def test_values_as_dms_writes_them_propose_a_type(values, proposed):
    assert propose_type(values)[0] == proposed


def test_remarks_say_what_the_values_cannot_settle():
    assert "MySQL BOOLEAN or a SQL Server BIT" in str(propose_type(["1", "0"])[1])
    assert propose_type(["1", "2"])[1] is None
    assert propose_type(["12", "3.5", "0.125"])[1] == (
        "0 to 3 fraction digits, as a NUMBER without a scale is written: a later value with more is refused"
    )
    assert propose_type(["21000.00", "1.50"])[1] is None
    lost = propose_type(["2024-01-15 10:30:00.1234560", "2024-01-15 10:30:00.1234567", "2024-01-15 10:30:00.5"])
    assert lost == (
        "timestamp",
        "1 value(s) with digits beyond microseconds, which the lake's timestamp drops: string keeps them",
    )


def test_the_note_names_the_file_and_the_count_and_asks_to_confirm():
    assert proposal_with_note(["1", "2"], "LOAD00000001.csv", 3) == (
        "bigint",
        "bigint proposed from 2 value(s) of LOAD00000001.csv: confirm it",
    )
    assert proposal_with_note([], "LOAD00000001.csv", 3) == (
        "string",
        "NULL in all 3 row(s) read of LOAD00000001.csv: set this column's type",
    )


CSV = DmsSettings(add_column_name=True)


def test_the_sample_is_whole_rows_quoted_as_rfc_4180_and_of_the_header_s_width():
    text = 'Op,id,note\nI,1,"a, ""b""\nc"\nI,2,\nI,3,""\nbad row\nU,4,x\n'
    header, rows = csv_sample(text.encode(), False, CSV)
    assert header == ["Op", "id", "note"]
    assert rows == [["I", "1", 'a, "b"\nc'], ["I", "2", ""], ["I", "3", ""], ["U", "4", "x"]]
    assert csv_sample(b"", False, CSV) == ([], [])


def test_a_file_longer_than_the_sample_drops_its_cut_row_gzipped_or_not():
    row = 'I,12345,"quoted, with a\nline break"\n'
    text = "Op,id,note\n" + row * (SAMPLE_BYTES // len(row) + 10)
    for head, gzipped in ((text.encode()[:SAMPLE_BYTES], False), (gzip.compress(text.encode()), True)):
        header, rows = csv_sample(head, gzipped, CSV)
        assert header == ["Op", "id", "note"]
        assert rows and all(r == ["I", "12345", "quoted, with a\nline break"] for r in rows)
        assert len(rows) <= SAMPLE_BYTES // len(row)
    # A whole gzipped file shorter than the sample keeps its last row.
    assert csv_sample(gzip.compress(b"id\n1\n2"), True, CSV) == (["id"], [["1"], ["2"]])


def test_a_cut_inside_a_quoted_field_never_yields_a_row():
    rows = (SAMPLE_BYTES - 100) // len('1,"x"\n')
    head = ("id,note\n" + '1,"x"\n' * rows).encode()
    head += b'2,"a field with a line break\n3,and a comma, cut' + b" here" * 100
    assert csv_sample(head[:SAMPLE_BYTES], False, CSV) == (["id", "note"], [["1", "x"]] * rows)
    # A field past the csv module's size limit ends the sample before its row.
    huge = b'id,note\n1,"x"\n2,"' + b"y" * SAMPLE_BYTES
    assert csv_sample(huge[:SAMPLE_BYTES], False, CSV) == (["id", "note"], [["1", "x"]])
