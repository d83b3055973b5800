"""``cdc-lake config-from-files`` on CSV files with a header (Oracle and SQL Server sources, which no command
reaches): each column's type proposed from its values as DMS writes them, and the proposal replicates the files
exactly."""

from __future__ import annotations

import struct

import pytest

from cdc_lake.core.config import load_config
from cdc_lake.core.jsonl import read_jsonl
from tests.support.cli import cli
from tests.support.lake import write_file

pytestmark = [pytest.mark.spark, pytest.mark.each_runtime]

HEADER = "id,big,price,ratio,measure,active,flag,born,at,at_zone,note,empty"
LOAD = f"""{HEADER}
1,-5,0.10,+1.00000000e+00,+1.0000000000000000e+00,true,0,1987-06-17,1987-06-17 00:00:00,2024-01-15 10:30:00Z,x,
2,7,1.00,+2.00000000e+00,+2.0000000000000000e+00,false,1,1990-01-01,1990-01-01 00:00:00,2024-01-15 10:30:00Z,y,
"""
# As DMS writes a CDC file: Op first; NULL an empty unquoted field; a DELETE with only its key (PostgreSQL's
# default replica identity; other engines write the whole row: either replays); a quoted "" is an empty string.
CDC = f"""Op,{HEADER}
U,1,9223372036854775808,21000.00,+3.23800011e+01,+2.1804858784530072e+04,true,1,2024-01-15,2024-01-15 10:30:00.123456,2024-01-15 10:30:00.1234567 +02:00,12,
D,2,,,,,,,,,,,
I,3,-42,-0.50,-1.17549435e-38,-1.7976931348623157e+308,false,0,1987-06-17,1987-06-17 00:00:00,2024-01-15 10:30:00.123456789 -05:30,"a, ""quoted""
text",
I,4,,,,,,,,,2024-01-15 10:30:00 Europe/Paris,"",
"""  # noqa: E501 - rows as DMS writes them
PROPOSED = [
    ("id", "bigint"),
    ("big", "decimal(38,0)"),
    ("price", "decimal(38,2)"),
    ("ratio", "float"),
    ("measure", "double"),
    ("active", "boolean"),
    ("flag", "bigint"),
    ("born", "date"),
    ("at", "timestamp"),
    ("at_zone", "timestamp_offset"),
    ("note", "string"),
    ("empty", "string"),
]


def _real4(text: str) -> float:
    """The value a REAL4 column holds, as Python's float of it."""
    return float(struct.unpack("f", struct.pack("f", float(text)))[0])


def test_csv_values_propose_types_that_replicate_the_files_exactly(spark, warehouse, database, tmp_path, capsys):
    landing = tmp_path / "landing"
    write_file(landing, "dms/ora/orders/LOAD00000001.csv", LOAD)
    write_file(landing, "dms/ora/orders/20250301-120000000.csv", CDC)
    out = tmp_path / "tables.yaml"
    code, printed = cli(capsys, "config-from-files", "-l", landing, "--format", "csv", "--header",
                        "--key", "ora.orders=id", "--database", database, "-o", out)  # fmt: skip
    assert code == 0, printed
    config = load_config(out)
    [orders] = config.tables
    assert [(c.name, c.type) for c in orders.columns] == PROPOSED
    comments = {line.split('"')[3]: line.split("  # ", 1)[1] for line in out.read_text().splitlines()
                if '{"name": ' in line}  # fmt: skip
    of_file = "value(s) of 20250301-120000000.csv: confirm it"
    counts = {"id": 4, "at_zone": 3, "note": 2}  # one NULL in each but id; at_zone also in row 4; note has ""
    remarks = {
        "big": "; integers beyond bigint",
        "flag": "; only 1 and 0 seen, as DMS writes a MySQL BOOLEAN or a SQL Server BIT: boolean if it is one",
        "at_zone": "; kept as DMS wrote it, zone and all",
    }
    assert comments == {
        **{name: f"CSV text: {kind} proposed from {counts.get(name, 2)} {of_file}{remarks.get(name, '')}"
           for name, kind in PROPOSED[:-1]},
        "empty": "CSV text: NULL in all 4 row(s) read of 20250301-120000000.csv: set this column's type",
    }  # fmt: skip

    code, printed = cli(capsys, "run", "-c", out, "-l", landing, "-w", warehouse)
    assert code == 0, printed
    code, printed = cli(capsys, "export", "-c", out, "-w", warehouse, "-o", tmp_path / "export")
    assert code == 0, printed
    assert read_jsonl(tmp_path / "export" / "ora.orders.jsonl") == [
        {"id": 1, "big": "9223372036854775808", "price": "21000.00", "ratio": _real4("+3.23800011e+01"),
         "measure": 21804.858784530072, "active": True, "flag": 1, "born": "2024-01-15",
         "at": "2024-01-15 10:30:00.123456", "at_zone": "2024-01-15 10:30:00.1234567 +02:00", "note": "12",
         "empty": None},
        {"id": 3, "big": "-42", "price": "-0.50", "ratio": _real4("-1.17549435e-38"),
         "measure": -1.7976931348623157e308, "active": False, "flag": 0, "born": "1987-06-17",
         "at": "1987-06-17 00:00:00.000000", "at_zone": "2024-01-15 10:30:00.123456789 -05:30",
         "note": 'a, "quoted"\ntext', "empty": None},
        {"id": 4, "big": None, "price": None, "ratio": None, "measure": None, "active": None, "flag": None,
         "born": None, "at": None, "at_zone": "2024-01-15 10:30:00 Europe/Paris", "note": "", "empty": None},
    ]  # fmt: skip
