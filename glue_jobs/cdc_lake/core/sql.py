"""SQL text from configuration: quoted identifiers and string literals (data values never go through here)."""

from __future__ import annotations


def quote(identifier: str) -> str:
    return "`" + identifier.replace("`", "``") + "`"


def sql_string(text: str) -> str:
    """A SQL string literal for configuration text (never for data values, which go through DataFrames)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
