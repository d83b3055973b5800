"""Errors raised by the cdc-lake library. Messages name the file, row and column at fault."""

from __future__ import annotations


class CdcLakeError(Exception):
    """Base class of every error this library raises on purpose."""


class ConfigError(CdcLakeError):
    """Raised when the table configuration file is missing, unparsable or invalid."""


class UnknownTableError(CdcLakeError):
    """Raised when a file or command names a table that is not in the configuration."""


class NotADmsFileError(CdcLakeError):
    """Raised when a key is not a DMS full-load or CDC data file of a configured table."""


class OutsideDmsFolderError(NotADmsFileError):
    """Raised when a key is not under the configured DMS bucket folder at all."""


class DmsInputError(CdcLakeError):
    """Raised when a DMS file holds rows that cannot be applied; the table is left untouched."""

    def __init__(self, table: str, problems: list[str], total: int | None = None) -> None:
        self.table = table
        self.problems = problems
        self.total = total if total is not None else len(problems)
        shown = "\n  ".join(problems)
        more = f"\n  … and {self.total - len(problems)} more" if self.total > len(problems) else ""
        super().__init__(
            f"{table}: refused {self.total} bad row(s); nothing was applied and no file was removed:\n  {shown}{more}"
        )


class JobArgumentError(CdcLakeError):
    """Raised when a job run's arguments contradict each other (e.g. --table is not the table of --key)."""


class ReplayOrderError(CdcLakeError):
    """Raised when applying the landed files would break DMS order (e.g. a file landed late or changed)."""


class CommitConflictError(CdcLakeError):
    """Raised when concurrent runs kept conflicting on the table after every retry."""


class TableMovedError(CdcLakeError):
    """Raised when another commit moved the table's main branch after a run planned from it: the run plans again."""


class SchemaChangeError(CdcLakeError):
    """Raised when the source's schema changed in a way the lake cannot follow, or not without configuration;
    the message says what changed and what to do. The table is left untouched."""
