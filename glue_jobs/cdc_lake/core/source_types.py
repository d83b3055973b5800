"""How Oracle's and SQL Server's column types arrive through DMS, and the lake type that keeps each.

No source connection is possible for these engines (``config-from-source`` refuses them), so the configuration
may name a column's ``source_type`` beside ``dms.source_engine``: the configuration is then checked against
DMS's documented mapping (AWS DMS user guide, "Source data types for Oracle" and "... for SQL Server"), and
``check-config`` announces what DMS does not carry exactly. Pure Python: the CDK app and the Lambda import it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

# What becomes of a value: kept exactly; kept as DMS's text; inexact (DMS rounds or cuts it); always NULL
# (DMS replicates the type as NULL); or refused (DMS cannot replicate the type at all).
Fate = Literal["exact", "text", "inexact", "null", "unsupported"]
# The engines no source connection reaches (no real server of theirs runs in the tests), by their names.
TYPED_ENGINES = {"oracle": "Oracle", "sqlserver": "SQL Server"}

# The stack's task runs DMS's limited LOB mode (infra/dms.py REPLICATION_SETTINGS: LobMaxSize 32 KB).
LOB_NOTE = "a LOB: DMS's limited LOB mode (the stack's task: LobMaxSize 32 KB) cuts longer values"
BYTES_CSV_NOTE = "bytes: CSV carries DMS's text of them, kept as a string; Parquet keeps the bytes (binary)"
MICROS_NOTE = "DMS's S3 output holds microseconds: a 7th to 9th fractional digit is cut"
NULL_NOTE = "DMS replicates this type as NULL: the lake column is NULL in every row"


@dataclass(frozen=True)
class SourceType:
    """One source type as DMS writes it to S3, and the lake type chosen for CSV and for Parquet output."""

    dms: str
    csv: str
    parquet: str
    fate: Fate = "exact"
    note: str | None = None
    digits: int | None = None  # fractional digits of a timestamp's text, when DMS writes a fixed number

    def lake(self, file_format: str) -> str:
        return self.parquet if file_format == "parquet" else self.csv


def _same(dms: str, lake: str, fate: Fate = "exact", note: str | None = None) -> SourceType:
    return SourceType(dms, lake, lake, fate, note)


_BYTES = SourceType("BYTES", "string", "binary", "text", BYTES_CSV_NOTE)
_BLOB = SourceType("BLOB", "string", "binary", "inexact", f"{BYTES_CSV_NOTE}; {LOB_NOTE}")
_OFFSET_NOTE = "text with its zone (instant and offset both kept; Athena: from_iso8601_timestamp or CAST)"


def _offset(dms: str, args: list[str], default: int) -> SourceType:
    digits = int(args[0]) if args and args[0].isdigit() else default
    return SourceType(dms, "timestamp_offset", "timestamp_offset", "text", _OFFSET_NOTE, digits)


_TYPE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_ ]*)(?:\(\s*([^)]*)\))?(.*)$")


def _parts(source_type: str) -> tuple[str, list[str], str]:
    """``TIMESTAMP(6) WITH TIME ZONE`` -> ("TIMESTAMP", ["6"], "WITH TIME ZONE")."""
    match = _TYPE.match(source_type)
    if not match:
        return source_type.strip().upper(), [], ""
    args = [a.strip().upper() for a in match[2].split(",")] if match[2] else []
    return " ".join(match[1].upper().split()), args, " ".join(match[3].upper().split())


def _number(args: list[str]) -> SourceType:
    """Oracle NUMBER(p,s), by the rules of DMS's Oracle mapping."""
    if not args or args[0] == "*":
        scale = int(args[1]) if len(args) > 1 else None
        if scale is None:
            note = (
                "NUMBER without precision arrives as NUMERIC(38,10) (the endpoint's NumberDataTypeScale): DMS rounds "
                "a value to 10 decimal places"
            )
            return _same("NUMERIC(38,10)", "decimal(38,10)", "inexact", note)
        args = ["38", str(scale)]
    precision, scale = int(args[0]), int(args[1]) if len(args) > 1 else 0
    if scale == 0:
        for top, dms, lake in ((2, "INT1", "tinyint"), (4, "INT2", "smallint"), (9, "INT4", "int")):
            if precision <= top:
                return _same(dms, lake)
        return _same(f"NUMERIC({precision},0)", f"decimal({min(precision, 38)},0)")
    if 0 < scale <= precision:
        return _same(f"NUMERIC({precision},{scale})", f"decimal({precision},{scale})")
    return _same("REAL8", "double", "inexact", "DMS writes it as REAL8 (a double): about 15 significant digits")


def _float(args: list[str], default_bits: int) -> SourceType:
    bits = int(args[0]) if args and args[0].isdigit() else default_bits
    return _same("REAL4", "float") if bits <= 24 else _same("REAL8", "double")


def _timestamp(args: list[str], default: int) -> SourceType:
    digits = int(args[0]) if args and args[0].isdigit() else default
    return _same("DATETIME", "timestamp", "inexact", MICROS_NOTE) if digits > 6 else _same("DATETIME", "timestamp")


def oracle(source_type: str) -> SourceType | None:
    name, args, rest = _parts(source_type)
    if name == "NUMBER":
        return _number(args)
    if name == "FLOAT":
        return _float(args, 126)
    if name.split()[0] == "TIMESTAMP":
        words = f"{name} {rest}".strip()
        if words.endswith("WITH LOCAL TIME ZONE"):
            return _same("STRING", "string", "text", "kept as DMS's text of it")
        if words.endswith("WITH TIME ZONE"):
            return _offset("STRING", args, 6)
        return _timestamp(args, 6)
    if name.startswith("INTERVAL"):
        return _same("STRING", "string", "text", "an interval, kept as DMS's text of it")
    simple = {
        "BINARY_FLOAT": _same("REAL4", "float"),
        "BINARY_DOUBLE": _same("REAL8", "double"),
        "REAL": _same("REAL8", "double"),
        # Oracle's DATE holds seconds: DMS writes `1987-06-17 00:00:00` (a real sample, dms-samples/dhawalkp_*).
        "DATE": SourceType("DATETIME", "timestamp", "timestamp", digits=0),
        "CHAR": _same("STRING", "string"),
        "VARCHAR2": _same("STRING", "string"),
        "VARCHAR": _same("STRING", "string"),
        "NCHAR": _same("WSTRING", "string"),
        "NVARCHAR2": _same("WSTRING", "string"),
        "RAW": _BYTES,
        "LONG RAW": _BLOB,
        "BLOB": _BLOB,
        "CLOB": _same("CLOB", "string", "inexact", LOB_NOTE),
        "NCLOB": _same("NCLOB", "string", "inexact", LOB_NOTE),
        "LONG": _same("CLOB", "string", "inexact", LOB_NOTE),
        "XMLTYPE": _same("CLOB", "string", "inexact", LOB_NOTE),
    }
    if name in simple:
        return simple[name]
    if name in ("BFILE", "ROWID", "UROWID", "REF", "ANYDATA", "VARRAY"):
        return _same("NULL", "string", "null", NULL_NOTE)
    return None


def sqlserver(source_type: str) -> SourceType | None:
    name, args, _rest = _parts(source_type)
    if name in ("CURSOR", "SQL_VARIANT", "TABLE"):
        return _same("-", "string", "unsupported", "DMS does not replicate this type")
    if name in ("DECIMAL", "NUMERIC"):
        precision = int(args[0]) if args else 18
        scale = int(args[1]) if len(args) > 1 else 0
        return _same(f"NUMERIC({precision},{scale})", f"decimal({precision},{scale})")
    if name == "FLOAT":
        return _float(args, 53)
    if name == "DATETIME2":
        return _timestamp(args, 7)
    if name == "DATETIMEOFFSET":
        return _offset("WSTRING", args, 7)
    large = args == ["MAX"]
    if name in ("VARCHAR", "NVARCHAR"):
        wide = name == "NVARCHAR"
        if large:
            return _same("NCLOB" if wide else "CLOB", "string", "inexact", LOB_NOTE)
        return _same("WSTRING" if wide else "STRING", "string")
    if name == "VARBINARY":
        return _BLOB if large else _BYTES
    simple = {
        "BIGINT": _same("INT8", "bigint"),
        "INT": _same("INT4", "int"),
        "SMALLINT": _same("INT2", "smallint"),
        "TINYINT": _same("UINT1", "smallint"),
        "BIT": _same("BOOLEAN", "boolean"),
        "MONEY": _same("NUMERIC(19,4)", "decimal(19,4)"),
        "SMALLMONEY": _same("NUMERIC(10,4)", "decimal(10,4)"),
        "REAL": _same("REAL4", "float"),
        "DATE": _same("DATE", "date"),
        "DATETIME": _same("DATETIME", "timestamp"),
        "SMALLDATETIME": _same("DATETIME", "timestamp"),
        "TIME": _same("TIME", "string", "text", "a time of day, kept as DMS's text of it"),
        "CHAR": _same("STRING", "string"),
        "NCHAR": _same("WSTRING", "string"),
        "UNIQUEIDENTIFIER": _same("STRING", "string"),
        "HIERARCHYID": _same("WSTRING", "string", "text", "kept as DMS's text of it (WSTRING(250))"),
        "TEXT": _same("CLOB", "string", "inexact", LOB_NOTE),
        "NTEXT": _same("NCLOB", "string", "inexact", LOB_NOTE),
        "XML": _same("NCLOB", "string", "inexact", LOB_NOTE),
        "GEOMETRY": _same("CLOB", "string", "inexact", LOB_NOTE),
        "GEOGRAPHY": _same("CLOB", "string", "inexact", LOB_NOTE),
        "BINARY": _BYTES,
        "TIMESTAMP": _BYTES,
        "ROWVERSION": _BYTES,
        "IMAGE": _BLOB,
    }
    return simple.get(name)


def source_type(engine: str, type_text: str) -> SourceType | None:
    """How DMS writes ``type_text`` of ``engine``; None for an engine or a type not mapped here."""
    if engine == "oracle":
        return oracle(type_text)
    if engine == "sqlserver":
        return sqlserver(type_text)
    return None


_WIDER = {"tinyint": 0, "smallint": 1, "int": 2, "bigint": 3}


def accepts(mapped: SourceType, file_format: str, configured: str) -> bool:
    """Whether a column configured as ``configured`` keeps what DMS writes for ``mapped``: the chosen type, a
    wider integer, or a string (which keeps any text, but not Parquet's bytes); a NULL-replicated type takes any."""
    chosen = mapped.lake(file_format)
    if mapped.fate == "null" or configured == chosen or (configured == "string" and chosen != "binary"):
        return True
    return chosen in _WIDER and configured in _WIDER and _WIDER[chosen] <= _WIDER[configured]
