"""Lake names from source names: the one mapping the jobs, the CLI, the CDK app and every reader share.

A source names its tables and columns as its engine spells them: Oracle in UPPER case, SQL Server and quoted
PostgreSQL identifiers in MixedCase, with ``$``, ``#`` or spaces in real schemas. DMS writes those names as they
are (folders, CSV headers, Parquet fields), and the replay reads them that way. The lake cannot keep them:
Iceberg's ``GlueCatalog`` refuses a table name that is not lower case, and Athena reads names in lower case
only ("Table names and table column names in Athena must be lowercase"), so a mixed-case column is unreadable
there. A lake name is the source name lower-cased, each run of other characters than ``a-z``, ``0-9`` and
``_`` made one ``_``, and ``_`` put before a leading digit (a name starting with a digit needs quotes in every
query). Reserved words (``order``, ``date``) stay: every engine reads them quoted, and renaming them would
surprise more than it helps. The source name is kept on the lake table (a table property and column docs).
"""

from __future__ import annotations

import re

# What Glue and Athena accept unquoted in queries: lower case, digits and _, not starting with a digit.
LAKE_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
# Glue's and Athena's limit for a database, table or column name.
MAX_LAKE_NAME = 255
_OTHER = re.compile(r"[^a-z0-9_]+")


def lake_name(source_name: str) -> str:
    """The lake's name for a source table or column named ``source_name`` (idempotent: a lake name maps to itself)."""
    name = _OTHER.sub("_", source_name.lower())
    return f"_{name}" if name[:1].isdigit() else name


def lake_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a lake database, table or column, or None when it can."""
    if len(name.encode("utf-8")) > MAX_LAKE_NAME:
        return f"{name!r} is longer than {MAX_LAKE_NAME} bytes (Glue's and Athena's limit)"
    if not LAKE_NAME.match(name):
        return (
            f"{name!r} is not a lake name: Glue and Athena take lower-case letters, digits and _, not starting "
            f"with a digit (for example {lake_name(name)!r})"
        )
    return None
