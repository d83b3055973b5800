"""How an S3 event becomes Glue job-run requests.

Pure: no AWS calls and never PySpark (the Lambda must stay small and start fast). Keys are read with
``cdc_lake.core.dms_files.parse_key``, the same parser the jobs use, so the trigger and the jobs agree on what a
DMS file is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_plus

from aws_lambda_powertools.utilities.data_classes import S3Event, S3EventBridgeNotificationEvent

from cdc_lake.core.config import PipelineConfig
from cdc_lake.core.dms_files import JOB_FOR_FILE_KIND, parse_key
from cdc_lake.core.exceptions import (
    NotADmsFileError,
    OutsideDmsFolderError,
    UnknownTableError,
    UnrecognizedEventError,
)
from cdc_lake.core.names import EXPIRED_MARK_PREFIX, WARM_MARKER_PREFIX, StartedJob
from cdc_lake.core.shards import VERSION_ARGUMENT

# Why an object started no job run; every one is logged once by the handler.
TEST_EVENT = "test_event"
NOT_OBJECT_CREATED = "not_object_created"
FOLDER_MARKER = "folder_marker"
OUTSIDE_DMS_FOLDER = "outside_dms_folder"
EMPTY_OBJECT = "empty_object"
NOT_A_DATA_FILE = "not_a_data_file"
UNKNOWN_TABLE = "unknown_table"
DUPLICATE_RECORD = "duplicate_record"
WARM_MARKER = "warm_marker"
EXPIRY_MARK = "expiry_mark"
IGNORE_CATEGORIES = (
    TEST_EVENT,
    NOT_OBJECT_CREATED,
    FOLDER_MARKER,
    OUTSIDE_DMS_FOLDER,
    EMPTY_OBJECT,
    NOT_A_DATA_FILE,
    UNKNOWN_TABLE,
    DUPLICATE_RECORD,
    WARM_MARKER,
    EXPIRY_MARK,
)

S3_TEST_EVENT = "s3:TestEvent"
OBJECT_CREATED_PREFIX = "ObjectCreated:"
EVENTBRIDGE_SOURCE = "aws.s3"
EVENTBRIDGE_OBJECT_CREATED = "Object Created"


@dataclass(frozen=True)
class ObjectCreated:
    """One created object named by an event; ``key`` is already URL-decoded."""

    bucket: str
    key: str
    size: int | None
    etag: str | None
    sequencer: str | None = None


@dataclass(frozen=True)
class JobRunRequest:
    """One Glue job run to start: which job, for which file of which ``<schema>.<table>``; a warm run
    (``runs.mode: warm``) is for the ``shard`` that owns the table instead."""

    job: StartedJob
    bucket: str
    key: str
    table: str
    shard: int | None = None
    config_version: str = ""  # a warm run's: the configuration the Lambda routed by (``PipelineConfig.version``)

    def arguments(self) -> dict[str, str]:
        """Glue job-run arguments; the same ones re-run the file (or the shard) by hand from the Glue console."""
        if self.shard is not None:
            return {"--bucket": self.bucket, "--shard": str(self.shard), VERSION_ARGUMENT: self.config_version}
        return {"--bucket": self.bucket, "--key": self.key, "--table": self.table}


@dataclass(frozen=True)
class IgnoredObject:
    """An object (or event) that starts no job run, with the reason; ``category`` is one of IGNORE_CATEGORIES."""

    bucket: str
    key: str
    reason: str
    category: str


def read_event(event: Mapping[str, Any]) -> tuple[list[ObjectCreated], list[IgnoredObject]]:
    """Split an invocation event into created objects and records that are not object creations.

    Accepts an S3 notification (``Records[]``, one or more), the ``s3:TestEvent`` S3 sends when a
    notification is configured, and an EventBridge S3 event. Anything else raises UnrecognizedEventError,
    so the invocation fails and the event ends in the on-failure destination rather than vanishing.
    """
    if "Records" in event:
        return _read_notification(event)
    if event.get("Event") == S3_TEST_EVENT:
        test = IgnoredObject(
            bucket=str(event.get("Bucket", "")),
            key="",
            reason="s3:TestEvent, sent by S3 when the bucket notification is configured",
            category=TEST_EVENT,
        )
        return [], [test]
    if event.get("source") == EVENTBRIDGE_SOURCE and "detail" in event:
        return _read_eventbridge(event)
    raise UnrecognizedEventError(f"not an S3 event: top-level keys {sorted(event)}")


def objects_in_event(event: Mapping[str, Any]) -> list[ObjectCreated]:
    """The created objects an event names, keys decoded; other records are left out (see read_event)."""
    return read_event(event)[0]


def route(objects: Iterable[ObjectCreated], config: PipelineConfig) -> tuple[list[JobRunRequest], list[IgnoredObject]]:
    """One job-run request per DMS data file of a configured table, in event order; the rest with a reason."""
    requests: list[JobRunRequest] = []
    ignored: list[IgnoredObject] = []
    seen: set[JobRunRequest] = set()
    for created in objects:
        outcome = _route_one(created, config)
        if isinstance(outcome, IgnoredObject):
            ignored.append(outcome)
        elif outcome in seen:
            reason = f"{created.key}: named twice in one event; one job run covers it"
            ignored.append(IgnoredObject(created.bucket, created.key, reason, DUPLICATE_RECORD))
        else:
            seen.add(outcome)
            requests.append(outcome)
    return requests, ignored


def _route_one(created: ObjectCreated, config: PipelineConfig) -> JobRunRequest | IgnoredObject:
    bucket, key = created.bucket, created.key

    def ignore(reason: str, category: str) -> IgnoredObject:
        return IgnoredObject(bucket=bucket, key=key, reason=reason, category=category)

    if key.endswith("/"):
        return ignore(f"{key}: folder marker", FOLDER_MARKER)
    if key.startswith(WARM_MARKER_PREFIX):
        return ignore(f"{key}: a warm run's stop marker", WARM_MARKER)
    if key.startswith(EXPIRED_MARK_PREFIX):  # seen only when DMS writes at the bucket's root
        return ignore(f"{key}: the maintenance's mark of the landed files it removed", EXPIRY_MARK)
    if created.size == 0:
        return ignore(f"{key}: zero-byte object", EMPTY_OBJECT)
    try:
        dms_file = parse_key(key, config)
    except OutsideDmsFolderError as error:
        return ignore(str(error), OUTSIDE_DMS_FOLDER)
    except UnknownTableError as error:
        return ignore(str(error), UNKNOWN_TABLE)
    except NotADmsFileError as error:
        return ignore(str(error), NOT_A_DATA_FILE)
    return JobRunRequest(job=JOB_FOR_FILE_KIND[dms_file.kind], bucket=bucket, key=key, table=dms_file.table)


def _read_notification(event: Mapping[str, Any]) -> tuple[list[ObjectCreated], list[IgnoredObject]]:
    created: list[ObjectCreated] = []
    ignored: list[IgnoredObject] = []
    # S3Event.object_key decodes only the first record: every record's key is decoded here.
    for record in S3Event(dict(event)).records:
        if record.get("eventSource") != "aws:s3" or "s3" not in record:
            raise UnrecognizedEventError(
                f"record from {record.get('eventSource', record.get('EventSource'))!r} is not an S3 notification "
                "(events wrapped by SNS or SQS are not supported)"
            )
        s3_object = record.s3.get_object
        bucket = record.s3.bucket.name
        key = unquote_plus(s3_object.key)
        if not record.event_name.startswith(OBJECT_CREATED_PREFIX):
            reason = f"{key}: {record.event_name} is not an object creation"
            ignored.append(IgnoredObject(bucket, key, reason, NOT_OBJECT_CREATED))
            continue
        size = s3_object.get("size")
        created.append(
            ObjectCreated(
                bucket=bucket,
                key=key,
                size=None if size is None else int(size),
                etag=s3_object.get("eTag"),
                sequencer=s3_object.get("sequencer"),
            )
        )
    return created, ignored


def _read_eventbridge(event: Mapping[str, Any]) -> tuple[list[ObjectCreated], list[IgnoredObject]]:
    wrapped = S3EventBridgeNotificationEvent(dict(event))
    detail = wrapped.detail
    bucket = detail.bucket.name
    s3_object = detail.object
    # Decoded with unquote_plus like notification keys (Powertools' data class does the same).
    key = s3_object.key
    if wrapped.detail_type != EVENTBRIDGE_OBJECT_CREATED:
        return [], [
            IgnoredObject(bucket, key, f"{key}: {wrapped.detail_type} is not an object creation", NOT_OBJECT_CREATED)
        ]
    size = s3_object.size
    created = ObjectCreated(
        bucket=bucket,
        key=key,
        size=None if size is None else int(size),
        etag=s3_object.get("etag"),
        sequencer=s3_object.get("sequencer"),
    )
    return [created], []
