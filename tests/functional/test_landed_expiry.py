"""The scheduled maintenance removes exactly the landed files a table's record holds once they are rawRetentionDays
old (``engine.landed_expiry``), marking what it removed, and nothing else: files pending, refused, late, reloaded,
applied by the table but not by its history, or of a table with no lake table, stay. The table goes on exact after
the removal. On S3 it removes a thousand keys a request, and the maintenance job does it from its arguments as the
stack passes them (tests/infra checks the grant and the argument)."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from cdc_lake.core.exceptions import CdcLakeError
from cdc_lake.core.expiry_marks import ExpiryMark, read_mark
from cdc_lake.core.storage import LocalFolderStore, S3Store
from cdc_lake.engine.landed_expiry import expire_table
from cdc_lake.engine.metrics import CloudWatchPublisher
from cdc_lake.jobs.entry import JobClients, job_context
from cdc_lake.jobs.maintenance import MaintenanceOptions, run
from cdc_lake.local.aws_endpoint import served_requests
from tests.support.aws import aws_client
from tests.support.configs import items_config
from tests.support.lake import Lake, write_file

T = "dms/shop/items/"
NOW = dt.datetime.now(dt.UTC)
on_s3 = pytest.mark.parametrize("lake", ["glue"], indirect=True)


class Metrics:
    """A CloudWatch client that takes what is put (the scheduled run puts the oldest waiting file's age)."""

    def put_metric_data(self, **_: object) -> None:
        pass


def land(landing: Path, name: str, text: str, days_ago: float) -> str:
    return write_file(landing, T + name, text, NOW - dt.timedelta(days=days_ago))


def kept(landing: Path) -> list[str]:
    return sorted(p.relative_to(landing).as_posix() for p in (landing / T).iterdir())


@pytest.mark.spark
def test_only_files_the_record_holds_and_old_enough_are_removed_and_the_table_goes_on_exact(
    lake: Lake, landing: Path
) -> None:
    config = items_config()
    table = config.table("shop.items")
    load = land(landing, "LOAD00000001.csv", "1,one\n2,two\n", 40)
    first = land(landing, "20250301-120000000.csv", "U,1,uno\n", 35)
    second = land(landing, "20250302-120000000.csv", "I,3,three\n", 31)
    third = land(landing, "20250320-120000000.csv", "D,2\n", 20)  # applied, younger than 30 days
    assert lake.apply(config, third).applied_files == [load, first, second, third]
    pending = land(landing, "20250321-120000000.csv", "I,4,four\n", 39)  # old, but not applied yet
    bad = land(landing, "20250322-120000000.csv", "X,5,five\n", 39)  # refused: an unknown op
    with pytest.raises(CdcLakeError, match="unknown Op"):
        lake.apply(config, bad)

    result = expire_table(lake.context(config), table, NOW - dt.timedelta(days=30))

    assert result.removed == 3 and result.kept_because is None
    assert kept(landing) == [third, pending, bad]
    mark = read_mark(LocalFolderStore(landing), config, table)
    assert mark is not None and (mark.files, mark.newest_key) == (3, second)
    assert abs((mark.newest_landed - (NOW - dt.timedelta(days=31))).total_seconds()) < 1
    (landing / bad).write_text("I,5,five\n")  # fixed, as DMS would write it again
    os.utime(landing / bad, ((NOW - dt.timedelta(days=39)).timestamp(),) * 2)
    assert lake.apply(config, bad).applied_files == [pending, bad]
    assert lake.rows() == [(1, "uno"), (3, "three"), (4, "four"), (5, "five")]

    # A later removal adds to the mark; what is left younger stays.
    again = expire_table(lake.context(config), table, NOW - dt.timedelta(days=30))
    assert again.removed == 2 and kept(landing) == [third]
    mark = read_mark(LocalFolderStore(landing), config, table)
    assert mark is not None and (mark.files, mark.newest_key) == (5, bad)


@pytest.mark.spark
def test_a_reloaded_load_file_and_a_late_cdc_file_are_not_removed(lake: Lake, landing: Path) -> None:
    config = items_config()
    table = config.table("shop.items")
    land(landing, "LOAD00000001.csv", "1,one\n", 50)
    first = land(landing, "20250301-120000000.csv", "U,1,uno\n", 45)
    newest = land(landing, "20250303-120000000.csv", "I,2,two\n", 44)
    lake.apply(config, newest)
    late = land(landing, "20250302-120000000.csv", "I,9,nine\n", 40)  # sorts before the newest, written after it
    reload = land(landing, "LOAD00000001.csv", "1,uno\n", 40)  # DMS wrote the table's LOAD file again
    assert expire_table(lake.context(config), table, NOW - dt.timedelta(days=30)).removed == 2
    assert kept(landing) == sorted([late, reload])
    assert first not in kept(landing)


@pytest.mark.spark
def test_a_table_whose_history_table_is_gone_or_that_has_no_lake_table_keeps_every_file(
    lake: Lake, landing: Path
) -> None:
    config = items_config(history=True)
    table = config.table("shop.items")
    load = land(landing, "LOAD00000001.csv", "1,one\n", 40)
    assert expire_table(lake.context(config), table, NOW).kept_because == (
        f"the lake table {table.lake_table} does not exist"
    )
    lake.apply(config, load)
    lake.spark.sql(f"DROP TABLE {lake.table('shop_items_history')}")
    result = expire_table(lake.context(config), table, NOW)
    assert (result.removed, result.kept_because) == (0, "the lake table shop_items_history does not exist")
    assert kept(landing) == [load]
    assert read_mark(LocalFolderStore(landing), config, table) is None


@pytest.mark.spark
def test_a_table_that_applied_files_none_old_enough_gets_a_mark_of_none_removed(lake: Lake, landing: Path) -> None:
    config = items_config()
    table = config.table("shop.items")
    load = land(landing, "LOAD00000001.csv", "1,one\n", 2)
    lake.apply(config, load)
    assert expire_table(lake.context(config), table, NOW - dt.timedelta(days=30)).removed == 0
    assert kept(landing) == [load]
    assert read_mark(LocalFolderStore(landing), config, table) == ExpiryMark(0)


@pytest.mark.spark
@on_s3
def test_the_scheduled_maintenance_job_removes_applied_files_from_the_bucket_and_marks_them(
    lake: Lake, landing: Path
) -> None:
    config = items_config()
    load = write_file(landing, T + "LOAD00000001.csv", "1,one\n")
    first = write_file(landing, T + "20250301-120000000.csv", "U,1,uno\n")
    lake.apply(config, load)
    write_file(landing, T + "20250302-120000000.csv", "I,2,two\n")  # landed, not applied
    store = lake.store()
    arguments = {"config_uri": "(local)", "action": "all", "bucket": lake.bucket, "catalog": lake.catalog}
    options = MaintenanceOptions.from_options({**arguments, "database": lake.database, "raw_retention_days": "0"})
    clients = JobClients(s3=None, secrets=None, metrics=CloudWatchPublisher(Metrics(), lake.database))
    results = run(options, job_context(options, lake.spark, config=config, store=store), clients)
    assert [(r.table, r.detail) for r in results if r.action == "expire-landed"] == [("shop.items", {"removed": 1})]
    s3 = aws_client(lake.endpoint, "s3")
    left = [o["Key"] for o in s3.list_objects_v2(Bucket=lake.bucket, Prefix=T)["Contents"]]
    assert left == [first, T + "20250302-120000000.csv"]
    mark = read_mark(S3Store(lake.bucket, s3), config, config.table("shop.items"))
    assert mark is not None and (mark.files, mark.newest_key) == (1, load)


def test_s3_removes_a_thousand_keys_a_request_and_a_key_already_gone_is_no_error(aws_endpoint: str) -> None:
    s3 = aws_client(aws_endpoint, "s3")
    bucket = "landing-delete-many"
    s3.create_bucket(Bucket=bucket)
    keys = [f"{T}2025030{i % 9 + 1}-12{i:07d}.csv" for i in range(1001)]
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=b"I,1,one\n")
    served_requests(aws_endpoint, reset=True)
    S3Store(bucket, s3).delete_many([*keys, f"{T}gone.csv"])
    deletes = sum(n for kind, n in served_requests(aws_endpoint).items() if kind.startswith("s3:POST"))
    assert deletes == 2
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix=T)
