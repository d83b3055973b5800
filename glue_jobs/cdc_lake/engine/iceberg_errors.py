"""Java failures told apart by the classes (and Spark's error conditions) in their cause chain, never by their text.

The failures: a commit beaten by another (``is_commit_conflict``: Iceberg's ``CommitFailedException``, which its
``GlueCatalog`` also raises when Glue refuses an ``UpdateTable`` at a stale ``VersionId``), raised as the project's
``ConcurrentCommitError`` by ``conflicts_raised``; a table or column another run created first
(``is_already_exists``); and an action AWS refused the job's role (``aws_denial``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException

from cdc_lake.core.exceptions import ConcurrentCommitError

COMMIT_FAILED = "org.apache.iceberg.exceptions.CommitFailedException"
VALIDATION_FAILED = "org.apache.iceberg.exceptions.ValidationException"
ICEBERG_ALREADY_EXISTS = "org.apache.iceberg.exceptions.AlreadyExistsException"
SPARK_TABLE_EXISTS = "org.apache.spark.sql.catalyst.analysis.TableAlreadyExistsException"
ICEBERG_NOT_FOUND = "org.apache.iceberg.exceptions.NotFoundException"
_FILE_NOT_FOUND = "java.io.FileNotFoundException"
_SPARK_THROWABLE = "org.apache.spark.SparkThrowable"
_ILLEGAL_ARGUMENT = "java.lang.IllegalArgumentException"
_REMOVE_SNAPSHOTS = "org.apache.iceberg.RemoveSnapshots"
# Spark's error conditions for a CREATE TABLE or an ADD COLUMN of what is already there (Spark 4 names the
# second FIELD_ALREADY_EXISTS).
_ALREADY_EXISTS_CONDITIONS = frozenset(
    {"TABLE_OR_VIEW_ALREADY_EXISTS", "FIELDS_ALREADY_EXISTS", "FIELD_ALREADY_EXISTS"}
)
_AWS_SERVICE_EXCEPTION = "software.amazon.awssdk.awscore.exception.AwsServiceException"
_FILE_ACCESS_DENIED = "java.nio.file.AccessDeniedException"  # S3A's translation of S3's 403
_AWS_DENIED_CODES = frozenset({"AccessDenied", "AccessDeniedException"})
# An AWS SDK v2 client method in a stack trace: its service and operation name the refused action.
_SDK_CLIENT = re.compile(r"^software\.amazon\.awssdk\.services\.(\w+)\.Default\w*Client$")
# S3 operations whose IAM action has another name.
_S3_ACTIONS = {
    "ListObjectsV2": "ListBucket",
    "ListObjects": "ListBucket",
    "HeadObject": "GetObject",
    "HeadBucket": "ListBucket",
}
_MAX_CAUSES = 32


@dataclass(frozen=True)
class Denial:
    """An action AWS refused, as IAM names it (``glue:UpdateTable``), and the path refused when the error names it."""

    action: str
    resource: str | None = None


def java_causes(error: BaseException) -> list[Any]:
    """The Java exceptions behind ``error`` (a Py4J error, or PySpark's conversion of one), outermost first; empty
    for an error raised in Python."""
    throwable = getattr(error, "java_exception", None)
    if throwable is None:
        throwable = getattr(error, "_origin", None)
    causes: list[Any] = []
    while throwable is not None and len(causes) < _MAX_CAUSES:
        causes.append(throwable)
        throwable = throwable.getCause()
    return causes


def root_cause(error: BaseException) -> str:
    """The first line of the innermost Java exception behind ``error`` (the one that says why), or the Python
    error itself when no Java one is behind it."""
    causes = java_causes(error)
    cause = str(causes[-1].toString()) if causes else f"{type(error).__name__}: {error}"
    return cause.splitlines()[0] if cause else cause


def class_names(throwable: Any) -> list[str]:
    """The names of a Java object's class, its superclasses and the interfaces they implement."""
    names = []
    java_class = throwable.getClass()
    while java_class is not None:
        names.append(str(java_class.getName()))
        names += [str(interface.getName()) for interface in java_class.getInterfaces()]
        java_class = java_class.getSuperclass()
    return names


def is_commit_conflict(error: BaseException) -> bool:
    """Whether a commit was beaten by a concurrent one: refused because the table changed since it was read
    (``CommitFailedException``: a concurrent commit, or on the Glue catalog Glue's refusal of an ``UpdateTable``
    at a stale ``VersionId``), or found conflicting when Iceberg validated it against what landed since (a
    ``ValidationException`` of Iceberg's own; one that wraps an AWS error, Glue's validation of a request, is
    not a conflict)."""
    for cause in java_causes(error):
        classes = class_names(cause)
        if COMMIT_FAILED in classes or (VALIDATION_FAILED in classes and cause.getCause() is None):
            return True
    return False


def is_expiry_beaten_by_a_branch(error: BaseException) -> bool:
    """Whether a snapshot expiry was refused because a concurrent run made a branch at a snapshot it was expiring:
    retrying its commit on newer metadata, Iceberg's ``RemoveSnapshots`` refuses the whole expiry (a precondition,
    "Still referenced by refs"), removing nothing."""
    for cause in java_causes(error):
        if _ILLEGAL_ARGUMENT in class_names(cause) and any(
            str(frame.getClassName()) == _REMOVE_SNAPSHOTS for frame in cause.getStackTrace()[:4]
        ):
            return True
    return False


def is_file_gone(error: BaseException) -> bool:
    """Whether a read failed because a file of the table's metadata or data is not there (Iceberg's
    ``NotFoundException``, or the file system's ``FileNotFoundException`` under it)."""
    return any(
        ICEBERG_NOT_FOUND in classes or _FILE_NOT_FOUND in classes
        for classes in (class_names(cause) for cause in java_causes(error))
    )


def is_concurrent(error: Exception) -> bool:
    """Whether ``error`` is a commit beaten by a concurrent one, as ``conflicts_raised`` raises it: worth retrying."""
    return isinstance(error, ConcurrentCommitError)


@contextmanager
def conflicts_raised() -> Iterator[None]:
    """Iceberg's refusal of a commit beaten by a concurrent one (``is_commit_conflict``), raised as the project's
    ``ConcurrentCommitError`` whatever Spark or Py4J wrapped it in; every other failure as it was."""
    try:
        yield
    except (Py4JJavaError, PySparkException) as error:
        if not is_commit_conflict(error):
            raise
        raise ConcurrentCommitError(f"a concurrent commit beat this one: {type(error).__name__}") from error


def is_already_exists(error: BaseException) -> bool:
    """Whether a CREATE TABLE or an ADD COLUMN failed because the table or column is already there (another run
    made it first): Spark's ``TableAlreadyExistsException`` or Iceberg's ``AlreadyExistsException``, or Spark's
    error condition for either."""
    for cause in java_causes(error):
        classes = class_names(cause)
        if SPARK_TABLE_EXISTS in classes or ICEBERG_ALREADY_EXISTS in classes:
            return True
        if _SPARK_THROWABLE in classes and str(cause.getErrorClass()) in _ALREADY_EXISTS_CONDITIONS:
            return True
    return False


def aws_denial(error: BaseException) -> Denial | None:
    """The action AWS refused the job's role, when ``error``'s Java cause chain holds such a refusal: an AWS SDK
    error with an access-denied code (its client's method names the action), or S3A's ``AccessDeniedException``
    (a read of the path it names)."""
    for cause in java_causes(error):
        classes = class_names(cause)
        if _FILE_ACCESS_DENIED in classes:
            path = str(cause.getFile())
            return Denial("s3:GetObject" if path.startswith("s3") else "read access", path)
        if _AWS_SERVICE_EXCEPTION in classes:
            details = cause.awsErrorDetails()
            code = str(details.errorCode()) if details is not None else None
            if cause.statusCode() == 403 or code in _AWS_DENIED_CODES:
                return Denial(_sdk_action(cause) or "the AWS permission its request needed")
    return None


def _sdk_action(throwable: Any) -> str | None:
    for frame in throwable.getStackTrace():
        client = _SDK_CLIENT.match(str(frame.getClassName()))
        if client is not None:
            method = str(frame.getMethodName())
            operation = method[:1].upper() + method[1:]
            service = client.group(1)
            return f"{service}:{_S3_ACTIONS.get(operation, operation) if service == 's3' else operation}"
    return None
