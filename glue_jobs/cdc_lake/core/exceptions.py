"""Errors raised by cdc-lake: the library, the Lambda, the CDK app. Messages name the file, row and column at fault.

Only the exception classes live here, so the Lambda, the Glue jobs and the CDK app share one hierarchy without
importing each other.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Protocol


class CdcLakeError(Exception):
    """Base class of every error this library raises on purpose."""

    def without_values(self) -> str:
        """The message without any value of the data, for places more people read than may read the data (a table
        property, which Lake Formation's column filters do not hide): the message itself unless it quotes one."""
        return str(self)


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

    # How a bad row's line ends (engine.changes.describe_problems): `` (value <its text as Python's repr>)``, a
    # quoted string with every quote and line break inside escaped, or `` (value NULL)`` for none.
    ROW_VALUE = re.compile(r""" \(value ('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|NULL)\)""")
    VALUE_MARK = " (value "
    WITHHELD = " (value withheld)"

    def __init__(
        self, table: str, problems: list[str], total: int | None = None, *, quarantinable: bool = True
    ) -> None:
        self.table = table
        self.problems = problems
        self.total = total if total is not None else len(problems)
        self.quarantinable = quarantinable
        super().__init__(self._message(problems))

    def without_values(self) -> str:
        """The message with each bad row's value withheld: its file, row, column and fault kept."""
        return self._message([self._without_value(problem) for problem in self.problems])

    def _message(self, problems: list[str]) -> str:
        shown = "\n  ".join(problems)
        more = f"\n  … and {self.total - len(problems)} more" if self.total > len(problems) else ""
        why = (
            ""
            if self.quarantinable
            else "These rows cannot be quarantined: their key or their place in DMS order is not known, or they "
            "move a quarantined key. "
        )
        return (
            f"{self.table}: refused {self.total} bad row(s); nothing was applied and no file was removed:\n  {shown}"
            f"{more}\n{why}Fix the file(s) in place (or have DMS write them again) and trigger the run again; the "
            "table stays at its previous snapshot until then (docs/bad-input.md)"
        )

    @classmethod
    def _without_value(cls, problem: str) -> str:
        """A bad row's line with its value withheld (NULL, no value, is kept); a line of another shape that names
        a value loses everything from it on."""
        shown, found = cls.ROW_VALUE.subn(lambda m: m[0] if m[1] == "NULL" else cls.WITHHELD, problem)
        if found or cls.VALUE_MARK not in problem:
            return shown
        return problem.partition(cls.VALUE_MARK)[0] + cls.WITHHELD


class UnreadableFileError(CdcLakeError):
    """Raised when a landed file cannot be read at all (cut off, or not the format its name says); nothing is
    applied and no file is removed."""

    def __init__(self, table: str, key: str, what: str, cause: str) -> None:
        self.key = key
        super().__init__(
            f"{key}: cannot be read as {what} ({cause}): it is cut off or not a {what} file. {table} was left as "
            "it was and no file was removed. Have DMS write the file again, or put the complete file under the "
            "same key, then trigger the run again (docs/bad-input.md)"
        )


class OtherFormatError(CdcLakeError):
    """Raised when a landed file is of another DMS format than the configuration's; nothing is applied."""

    def __init__(self, table: str, key: str, label: str, configured: str) -> None:
        self.key = key
        super().__init__(
            f"{key}: a {label} file, but the configuration's dms.format is {configured}. DMS writes the format its "
            "endpoint's DataFormat sets: make dms.format say the same (and deploy it), or move the file out of the "
            f"DMS folder if it does not belong there, then trigger the run again. {table} was left as it was and no "
            "file was removed"
        )


class JobArgumentError(CdcLakeError):
    """Raised when a job run's arguments contradict each other (e.g. --table is not the table of --key)."""


class UnreachableSourceError(CdcLakeError):
    """Raised when a source URL or the stack's sourceEngine names an engine the source commands cannot reach
    (Oracle, SQL Server: no real server runs in the tests, so no code for them ships; docs/sources.md)."""


class ReplayOrderError(CdcLakeError):
    """Raised when applying the landed files would break DMS order (e.g. a file landed late or changed)."""


class HistoryGapError(ReplayOrderError):
    """Raised when the landing lacks files the lake table's history needs: applying what is left would skip their
    changes (``engine.continuity``)."""


class CommitConflictError(CdcLakeError):
    """Raised when concurrent runs kept conflicting on the table after every retry."""


class ConcurrentCommitError(CdcLakeError):
    """Raised when a concurrent commit beat this one (Iceberg refused it or found it conflicting): it is made again
    from the table as it is now."""


class TableMovedError(CdcLakeError):
    """Raised when another commit moved the table's main branch after a run planned from it: the run plans again."""


class RollbackRefusedError(CdcLakeError):
    """Raised when a rollback would undo files the landing no longer holds (the re-apply could not restore them):
    nothing was moved."""


class HandOver(Exception):  # not an error (no CdcLakeError): the batch goes to another run
    """Raised when a run leaves a batch to a run of ``job`` for its table alone, up to ``key``
    (``ReplayContext.admit`` raises it: a warm run hands over LOAD files and large backlogs)."""

    def __init__(self, table: str, job: str, key: str, reason: str) -> None:
        super().__init__(f"{table}: {reason}; handed to a {job} run up to {key}")
        self.table, self.job, self.key, self.reason = table, job, key, reason


class TableFailuresError(CdcLakeError):
    """Raised at the end of a run that left one or more tables unapplied; the others were applied."""

    def __init__(self, failures: Mapping[str, str]) -> None:
        self.failures = dict(failures)
        lines = [f"  {table}: {error}" for table, error in sorted(failures.items())]
        super().__init__(
            f"{len(failures)} table(s) left as they were, their files kept in place; the other tables were "
            "applied:\n" + "\n".join(lines)
        )


class SchemaChangeError(CdcLakeError):
    """Raised when the source's schema changed in a way the lake cannot follow, or not without configuration;
    the message says what changed and what to do. The table is left untouched."""


class LandedFileChangedError(CdcLakeError):
    """Raised when a landed file a run listed is gone, or no longer the same, when the run reads it; nothing is
    applied and no file is removed."""

    def __init__(
        self, table: str, key: str, listed: tuple[str | None, int], now: tuple[str | None, int] | None
    ) -> None:
        self.key = key
        if now is None:
            super().__init__(
                f"{key}: gone from the landing bucket after this run listed it; nothing was applied and no file was "
                "removed. Trigger the run again once the file is back (a file lost for good leaves a gap in DMS "
                f"order: reload the table in DMS, then run `cdc-lake reload -t {table}`, docs/deploy.md#reload)"
            )
        else:
            super().__init__(
                f"{key}: changed after this run listed it (ETag/size {listed} -> {now}); nothing was applied and no "
                "file was removed. Trigger the run again: it applies the file as it is then (a LOAD file rewritten "
                "after it was applied is refused as a DMS reload, with what to do)"
            )


class AccessDeniedError(CdcLakeError):
    """Raised when AWS refuses the job's role an action a run needs; names the resource and the permission."""

    def __init__(self, resource: str, action: str) -> None:
        self.resource = resource
        self.action = action
        super().__init__(
            f"{resource}: access denied: the job's role lacks {action} on it; nothing was applied and no file was "
            "removed. The stack grants the role what a run needs: find what took it away (the role's policies, a "
            "bucket or key policy, Lake Formation, an SCP), then trigger the run again"
        )


class LakeDatabaseMissingError(CdcLakeError):
    """Raised when the lake database does not exist and the run may not create it (the stack creates it)."""


class LakeTableMissingError(CdcLakeError):
    """Raised when the lake table disappeared (dropped, or its database) while a run applied it."""


class LakeTableCreateError(CdcLakeError):
    """Raised when the catalog refuses to create a lake table; carries the catalog's own error."""


class RecordLostError(CdcLakeError):
    """Raised when a table's record of applied files is neither in its snapshots nor in its table property."""


class LegacyLakeTableError(CdcLakeError):
    """Raised when a local lake holds a table under its name from before lake names were lower case."""


class DeployedStackError(CdcLakeError):
    """Raised when a cloud assembly cannot be read as the cdc-lake stack (missing file, stack or resource)."""


class UnsupportedIntrinsicError(DeployedStackError):
    """Raised when a template value uses an intrinsic function or attribute the stack reader does not know."""


class ProvisionError(DeployedStackError):
    """Raised when an AWS endpoint cannot be given what ``cdk deploy`` would create."""


class EndpointStartError(CdcLakeError):
    """Raised when the local AWS endpoint's subprocess exits or stays silent instead of reporting ready."""


class TrinoStartError(CdcLakeError):
    """Raised when the local Trino server exits or does not answer a query before its start-up timeout."""


class UnrecognizedEventError(CdcLakeError):
    """Raised when an invocation event is neither an S3 notification, an S3 test event nor an S3 EventBridge event."""


class RefusedRun(Protocol):
    """What JobStartError names of a job run Glue refused (the Lambda's ``JobRunRequest``)."""

    @property
    def job(self) -> str: ...

    @property
    def bucket(self) -> str: ...

    @property
    def key(self) -> str: ...

    @property
    def table(self) -> str: ...


class JobStartError(CdcLakeError):
    """Raised when Glue refused one or more job runs after every retry; the invocation fails and the event is kept."""

    def __init__(self, failures: Sequence[tuple[RefusedRun, Exception]]) -> None:
        self.failures = list(failures)
        lines = [f"  {r.job} for s3://{r.bucket}/{r.key} ({r.table}): {error}" for r, error in failures]
        super().__init__(f"Glue refused {len(failures)} job run(s):\n" + "\n".join(lines))


class CaptureError(CdcLakeError):
    """Raised when the PostgreSQL capture meets something DMS's output cannot express or that it does not support."""


class UnchangedToastError(CaptureError):
    """Raised when an UPDATE left a TOASTed value out of the WAL and no old row image holds it."""


class SettingsError(CdcLakeError):
    """Raised when the CDK app's context values are missing or invalid; the message lists every problem."""


class PackagingError(CdcLakeError):
    """Raised when a source file the deployment needs is missing."""
