"""Build S3 events shaped as AWS delivers them, so the local runtime feeds the handler what Lambda would.

Keys are encoded as S3 encodes them in notifications: ``application/x-www-form-urlencoded`` (space → ``+``,
``+`` → ``%2B``, ``=`` → ``%3D``, UTF-8 bytes percent-encoded) with ``/`` left as is.
"""

from __future__ import annotations

import secrets
import threading
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote_plus

ACCOUNT_ID = "123456789012"
NOTIFICATION_CONFIGURATION_ID = "cdc-lake-dms-files"
REQUESTER_PRINCIPAL = "AWS:AROAEXAMPLEDMSROLE0001:dms-s3-target"

_sequencer_lock = threading.Lock()
_last_sequencer = 0


def encode_key(key: str) -> str:
    """An object key as it appears in an S3 event notification."""
    return quote_plus(key, safe="/")


def s3_object_created_event(
    bucket: str,
    objects: Sequence[tuple[str, int, str]],
    *,
    event_name: str = "ObjectCreated:Put",
    region: str = "us-east-1",
) -> dict[str, Any]:
    """An S3 notification event with one record per ``(key, size, etag)``, as Lambda receives it.

    ``event_name`` is the record's eventName (``ObjectCreated:Put``, ``ObjectCreated:CompleteMultipartUpload``,
    ``ObjectRemoved:Delete``…); removal records carry no size or eTag, like the real ones.
    """
    event_time = _event_time(datetime.now(UTC))
    records = []
    for key, size, etag in objects:
        s3_object: dict[str, Any] = {"key": encode_key(key)}
        if not event_name.startswith("ObjectRemoved:"):
            s3_object["size"] = size
            s3_object["eTag"] = etag
        s3_object["sequencer"] = _next_sequencer()
        records.append(
            {
                "eventVersion": "2.1",
                "eventSource": "aws:s3",
                "awsRegion": region,
                "eventTime": event_time,
                "eventName": event_name,
                "userIdentity": {"principalId": REQUESTER_PRINCIPAL},
                "requestParameters": {"sourceIPAddress": "10.0.12.34"},
                "responseElements": {
                    "x-amz-request-id": secrets.token_hex(8).upper(),
                    "x-amz-id-2": secrets.token_urlsafe(48),
                },
                "s3": {
                    "s3SchemaVersion": "1.0",
                    "configurationId": NOTIFICATION_CONFIGURATION_ID,
                    "bucket": {
                        "name": bucket,
                        "ownerIdentity": {"principalId": "A3NL1KOZZKEXAMPLE"},
                        "arn": f"arn:aws:s3:::{bucket}",
                    },
                    "object": s3_object,
                },
            }
        )
    return {"Records": records}


def eventbridge_object_created_event(bucket: str, key: str, size: int, etag: str) -> dict[str, Any]:
    """An EventBridge ``Object Created`` event from S3 (rule pattern ``source: aws.s3``)."""
    now = datetime.now(UTC)
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Object Created",
        "source": "aws.s3",
        "account": ACCOUNT_ID,
        "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": "us-east-1",
        "resources": [f"arn:aws:s3:::{bucket}"],
        "detail": {
            "version": "0",
            "bucket": {"name": bucket},
            "object": {"key": encode_key(key), "size": size, "etag": etag, "sequencer": _next_sequencer()},
            "request-id": secrets.token_hex(8).upper(),
            "requester": ACCOUNT_ID,
            "source-ip-address": "10.0.12.34",
            "reason": "PutObject",
        },
    }


def s3_test_event(bucket: str) -> dict[str, Any]:
    """The ``s3:TestEvent`` S3 sends once when a bucket notification is configured."""
    return {
        "Service": "Amazon S3",
        "Event": "s3:TestEvent",
        "Time": _event_time(datetime.now(UTC)),
        "Bucket": bucket,
        "RequestId": secrets.token_hex(8).upper(),
        "HostId": secrets.token_urlsafe(48),
    }


def _event_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _next_sequencer() -> str:
    """An 18-hex-digit sequencer that grows with every call, like S3's per-key sequencers grow over time."""
    global _last_sequencer  # noqa: PLW0603 - one process-wide monotonic counter
    with _sequencer_lock:
        _last_sequencer = max(time.time_ns(), _last_sequencer + 1)
        return f"{_last_sequencer:018X}"
