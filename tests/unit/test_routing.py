"""Routing of S3 and EventBridge events to Glue job-run requests, over recorded real-shaped events."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdc_lake.core.config import PipelineConfig, parse_config
from cdc_lake.core.exceptions import UnrecognizedEventError
from cdc_lake.core.names import EXPIRED_MARK_PREFIX
from cdc_lake.local.events import encode_key, eventbridge_object_created_event, s3_object_created_event
from dms_trigger.routing import (
    EXPIRY_MARK,
    IgnoredObject,
    JobRunRequest,
    ObjectCreated,
    objects_in_event,
    read_event,
    route,
)

EVENTS = Path(__file__).resolve().parents[1] / "events"
BUCKET = "cdc-lake-landing-123456789012"


def _table(name: str, target: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": name,
        "primary_key": ["id"],
        "columns": [{"name": "id", "type": "bigint"}, {"name": "status", "type": "varchar(20)"}],
    }
    if target:
        spec["target"] = target
    return spec


def routing_config(bucket_folder: str = "dms") -> PipelineConfig:
    # Table folders may hold a space or non-ASCII letters when a plain lake name is given as target.
    return parse_config(
        {
            "dms": {"bucket_folder": bucket_folder, "date_partition_enabled": True},
            "tables": [
                _table("shop.orders"),
                _table("shop.customers"),
                _table("shop.order lines", target="order_lines"),
                _table("shop.commandes_été", target="commandes_ete"),
            ],
        }
    )


CONFIG = routing_config()


def load_event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text(encoding="utf-8"))


def routed(name: str) -> tuple[list[JobRunRequest], list[IgnoredObject]]:
    return route(objects_in_event(load_event(name)), CONFIG)


def test_every_record_of_a_notification_is_routed_to_its_job():
    requests, ignored = routed("s3_put_multiple_records.json")

    assert requests == [
        JobRunRequest("full_load", BUCKET, "dms/shop/orders/LOAD00000001.csv", "shop.orders"),
        JobRunRequest("full_load", BUCKET, "dms/shop/customers/LOAD0000000A.csv", "shop.customers"),
        JobRunRequest("cdc_replay", BUCKET, "dms/shop/orders/2025/03/01/20250301-120500123.csv", "shop.orders"),
    ]
    assert ignored == []


def test_records_keep_size_etag_and_sequencer():
    first = objects_in_event(load_event("s3_put_multiple_records.json"))[0]

    assert first == ObjectCreated(
        bucket=BUCKET,
        key="dms/shop/orders/LOAD00000001.csv",
        size=1048576,
        etag="5d41402abc4b2a76b9719d911017c592",
        sequencer="0067C2F8DE5A1B3C40",
    )


def test_every_record_key_is_url_decoded():
    keys = [o.key for o in objects_in_event(load_event("s3_put_encoded_keys.json"))]

    assert keys == [
        "dms/shop/order lines/LOAD00000001.csv",  # '+' is a space
        "dms/shop/order+lines/LOAD00000001.csv",  # '%2B' is a literal plus
        "dms/shop/commandes_été/20250301-121000456.csv.gz",  # UTF-8 percent-encoded
        "dms/shop/orders/20250301-121001000.parquet",  # '%2F' is a slash
    ]


def test_encoded_keys_route_to_the_decoded_tables():
    requests, ignored = routed("s3_put_encoded_keys.json")

    assert requests == [
        JobRunRequest("full_load", BUCKET, "dms/shop/order lines/LOAD00000001.csv", "shop.order lines"),
        JobRunRequest("cdc_replay", BUCKET, "dms/shop/commandes_été/20250301-121000456.csv.gz", "shop.commandes_été"),
        JobRunRequest("cdc_replay", BUCKET, "dms/shop/orders/20250301-121001000.parquet", "shop.orders"),
    ]
    assert [(i.key, i.category) for i in ignored] == [("dms/shop/order+lines/LOAD00000001.csv", "unknown_table")]


def test_gzip_multipart_and_parquet_files():
    requests, ignored = routed("s3_multipart_gzip_parquet.json")

    assert requests == [
        JobRunRequest("full_load", BUCKET, "dms/shop/orders/LOAD00000010.csv.gz", "shop.orders"),
        JobRunRequest(
            "cdc_replay", BUCKET, "dms/shop/customers/2025/03/01/20250301-120700123456.parquet", "shop.customers"
        ),
    ]
    assert ignored == []


def test_eventbridge_object_created():
    event = load_event("eventbridge_object_created.json")

    assert objects_in_event(event) == [
        ObjectCreated(
            bucket=BUCKET,
            key="dms/shop/orders/2025/03/01/20250301-120500123.csv",
            size=48213,
            etag="e4d909c290d0fb1ca068ffaddf22cbd0",
            sequencer="0067C2F919D8F0A7B3",
        )
    ]
    requests, ignored = route(objects_in_event(event), CONFIG)
    assert requests == [
        JobRunRequest("cdc_replay", BUCKET, "dms/shop/orders/2025/03/01/20250301-120500123.csv", "shop.orders")
    ]
    assert ignored == []


@pytest.mark.parametrize("name", ["eventbridge_object_deleted.json", "s3_object_removed.json"])
def test_removals_are_reported_not_routed(name):
    created, ignored = read_event(load_event(name))

    assert created == []
    assert [(i.key, i.category) for i in ignored] == [
        ("dms/shop/orders/2025/03/01/20250301-120500123.csv", "not_object_created")
    ]
    assert "Delete" in ignored[0].reason


def test_s3_test_event_is_reported_and_starts_nothing():
    event = load_event("s3_test_event.json")

    created, ignored = read_event(event)

    assert created == []
    assert objects_in_event(event) == []
    assert ignored == [IgnoredObject(BUCKET, "", ignored[0].reason, "test_event")]
    assert "s3:TestEvent" in ignored[0].reason


@pytest.mark.parametrize(
    ("key", "category"),
    [
        ("dms/shop/orders/", "folder_marker"),
        ("dms/shop/orders/20250301-121100000.csv", "empty_object"),
        ("dms/shop/orders/_SUCCESS", "empty_object"),
        ("dms/shop/orders/_SUCCESS.crc", "not_a_data_file"),
        ("dms/hr/employees/LOAD00000001.csv", "unknown_table"),
        ("exports/shop/orders/LOAD00000001.csv", "outside_dms_folder"),
        ("dms/shop/orders/2025/03/01/LOAD00000001.csv", "not_a_data_file"),
        ("dms/cdc/CDC_TXN-20250301-121107000.csv", "not_a_data_file"),
    ],
)
def test_objects_that_are_not_dms_data_files_are_ignored_with_a_reason(key, category):
    requests, ignored = routed("s3_ignored_objects.json")

    assert requests == []
    by_key = {i.key: i for i in ignored}
    assert by_key[key].category == category
    assert by_key[key].bucket == BUCKET
    assert key in by_key[key].reason


def test_every_ignored_object_is_reported_once():
    event = load_event("s3_ignored_objects.json")

    _, ignored = route(objects_in_event(event), CONFIG)

    assert len(ignored) == len(event["Records"])


def test_an_unknown_size_is_not_taken_for_an_empty_object():
    created = ObjectCreated(BUCKET, "dms/shop/orders/20250301-121100000.csv", size=None, etag=None)

    requests, ignored = route([created], CONFIG)

    assert [r.job for r in requests] == ["cdc_replay"]
    assert ignored == []


def test_a_key_named_twice_in_one_event_starts_one_run():
    requests, ignored = routed("s3_put_same_key_twice.json")

    assert requests == [JobRunRequest("full_load", BUCKET, "dms/shop/orders/LOAD00000001.csv", "shop.orders")]
    assert [(i.key, i.category) for i in ignored] == [("dms/shop/orders/LOAD00000001.csv", "duplicate_record")]


@pytest.mark.parametrize(
    "key",
    [
        "dms/shop/orders/2025/03/01/20250301-120500123.csv",  # YYYYMMDD, SLASH
        "dms/shop/orders/2025/03/01/12/20250301-120500123.csv",  # YYYYMMDDHH, SLASH
        "dms/shop/orders/2025-03-01/20250301-120500123.csv",  # DASH
        "dms/shop/orders/2025_03_01/20250301-120500123.csv",  # UNDERSCORE
        "dms/shop/orders/20250301/20250301-120500123.csv",  # NONE
        "dms/shop/orders/20141029-1134010000.csv",  # no date folder, older 10-digit time
    ],
)
def test_date_partitioned_cdc_keys(key):
    requests, ignored = route([ObjectCreated(BUCKET, key, 100, "e")], CONFIG)

    assert requests == [JobRunRequest("cdc_replay", BUCKET, key, "shop.orders")]
    assert ignored == []


@pytest.mark.parametrize(
    ("file_name", "job"),
    [
        ("LOAD00000001.csv", "full_load"),
        ("LOAD0000000A.csv", "full_load"),
        ("LOAD000000FF.parquet", "full_load"),
        ("LOAD00000002.csv.gz", "full_load"),
        ("LOAD_1_00000001.csv", "full_load"),  # a parallel-load segment
        ("LOAD_3_0000000B.parquet", "full_load"),
        ("20250301-120500123.csv.gz", "cdc_replay"),
        ("20250301-120500123.parquet", "cdc_replay"),
    ],
)
def test_file_names_choose_the_job(file_name, job):
    requests, _ = route([ObjectCreated(BUCKET, f"dms/shop/customers/{file_name}", 10, "e")], CONFIG)

    assert [r.job for r in requests] == [job]


def test_without_a_bucket_folder_keys_start_at_the_schema():
    config = routing_config(bucket_folder="")
    objects = [
        ObjectCreated(BUCKET, "shop/orders/LOAD00000001.csv", 10, "e"),
        ObjectCreated(BUCKET, "dms/shop/orders/LOAD00000001.csv", 10, "e"),
    ]

    requests, ignored = route(objects, config)

    assert requests == [JobRunRequest("full_load", BUCKET, "shop/orders/LOAD00000001.csv", "shop.orders")]
    assert [(i.key, i.category) for i in ignored] == [("dms/shop/orders/LOAD00000001.csv", "not_a_data_file")]


def test_the_maintenance_expiry_mark_at_the_buckets_root_is_ignored_not_taken_for_a_table():
    """Without a bucket folder the notification covers the whole bucket, the maintenance's marks too
    (``core.expiry_marks``): each is named for what it is, not announced as an unknown table's file."""
    config = routing_config(bucket_folder="")
    key = f"{EXPIRED_MARK_PREFIX}shop/orders/expired.json"
    requests, ignored = route([ObjectCreated(BUCKET, key, 80, "e")], config)
    assert requests == []
    assert [(i.key, i.category) for i in ignored] == [(key, EXPIRY_MARK)]


def test_job_arguments_name_bucket_key_and_table():
    request = JobRunRequest("cdc_replay", BUCKET, "dms/shop/order lines/20250301-120500123.csv", "shop.order lines")

    assert request.arguments() == {
        "--bucket": BUCKET,
        "--key": "dms/shop/order lines/20250301-120500123.csv",
        "--table": "shop.order lines",
    }


@pytest.mark.parametrize(
    "event",
    [
        {},
        {"detail-type": "Scheduled Event", "source": "aws.events", "detail": {}},
        {"Records": [{"EventSource": "aws:sns", "Sns": {"Message": "{}"}}]},
        {"Records": [{"eventSource": "aws:sqs", "body": "{}"}]},
    ],
    ids=["empty", "other-eventbridge-source", "sns-wrapped", "sqs-wrapped"],
)
def test_events_that_are_not_s3_events_are_refused(event):
    with pytest.raises(UnrecognizedEventError):
        read_event(event)


# --- cdc_lake.local.events: the builders the local runtime uses must produce what AWS delivers ---


def _shape(value: Any) -> Any:
    """The nested key structure of a JSON value, ignoring values."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value[:1]]
    return type(value).__name__


def test_built_notification_has_the_recorded_record_shape():
    recorded = load_event("s3_put_multiple_records.json")
    built = s3_object_created_event(BUCKET, [("dms/shop/orders/LOAD00000001.csv", 1048576, "5d41402a")])

    assert _shape(built) == _shape(recorded)


def test_built_eventbridge_event_has_the_recorded_shape():
    recorded = load_event("eventbridge_object_created.json")
    built = eventbridge_object_created_event(BUCKET, "dms/shop/orders/LOAD00000001.csv", 10, "e")

    assert _shape(built) == _shape(recorded)


def test_keys_are_encoded_as_s3_encodes_them():
    assert encode_key("dms/shop/order lines/a+b=c.csv") == "dms/shop/order+lines/a%2Bb%3Dc.csv"
    assert (
        encode_key("dms/shop/commandes_été/20250301-121000456.csv.gz")
        == (load_event("s3_put_encoded_keys.json")["Records"][2]["s3"]["object"]["key"])
    )


def test_built_notification_carries_every_object_in_order():
    objects = [
        ("dms/shop/orders/LOAD00000001.csv", 100, "a1"),
        ("dms/shop/orders/20250301-120500123.csv", 0, "d41d8cd98f00b204e9800998ecf8427e"),
    ]

    event = s3_object_created_event(
        BUCKET, objects, event_name="ObjectCreated:CompleteMultipartUpload", region="eu-west-1"
    )

    assert [(o.key, o.size, o.etag) for o in objects_in_event(event)] == objects
    assert {r["eventName"] for r in event["Records"]} == {"ObjectCreated:CompleteMultipartUpload"}
    assert {r["awsRegion"] for r in event["Records"]} == {"eu-west-1"}
    sequencers = [o.sequencer for o in objects_in_event(event)]
    assert sequencers == sorted(sequencers)
    assert len(set(sequencers)) == 2


def test_built_removal_records_are_not_creations():
    event = s3_object_created_event(
        BUCKET, [("dms/shop/orders/LOAD00000001.csv", 0, "")], event_name="ObjectRemoved:Delete"
    )

    created, ignored = read_event(event)

    assert created == []
    assert "size" not in event["Records"][0]["s3"]["object"]
    assert [i.category for i in ignored] == ["not_object_created"]


keys = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40)


@given(key=keys)
def test_any_key_survives_a_notification_round_trip(key):
    event = json.loads(json.dumps(s3_object_created_event(BUCKET, [(key, 5, "e")])))

    assert [o.key for o in objects_in_event(event)] == [key]


@given(key=keys)
def test_any_key_survives_an_eventbridge_round_trip(key):
    event = json.loads(json.dumps(eventbridge_object_created_event(BUCKET, key, 5, "e")))

    assert [o.key for o in objects_in_event(event)] == [key]


def test_the_trigger_never_imports_spark():
    code = (
        "import sys, dms_trigger.handler, dms_trigger.routing, cdc_lake.local.events; "
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in {'pyspark', 'py4j', 'pyarrow'}); "
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)

    assert result.returncode == 0, result.stdout + result.stderr
