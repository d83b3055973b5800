"""A run tags exactly the landed files it applied (``cdc-lake:applied``), keeping their other tags, so that the raw
bucket's lifecycle can expire them and nothing else: files pending, refused or applied only by the table and not
yet by its history stay untagged (tests/infra/test_stack.py checks the rules that read the tag). On the local
AWS endpoint's S3, as the deployed path reads the bucket."""

from __future__ import annotations

import pytest

from cdc_lake.core.exceptions import CdcLakeError
from cdc_lake.core.names import APPLIED_TAG
from tests.support.aws import aws_client
from tests.support.configs import items_config
from tests.support.lake import Lake, write_file

pytestmark = pytest.mark.spark

T = "dms/shop/items/"
on_s3 = pytest.mark.parametrize("lake", ["glue"], indirect=True)


def tags(lake: Lake) -> dict[str, dict[str, str]]:
    s3 = aws_client(lake.endpoint, "s3")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=lake.bucket).get("Contents", [])]
    return {k: {t["Key"]: t["Value"] for t in s3.get_object_tagging(Bucket=lake.bucket, Key=k)["TagSet"]} for k in keys}


def applied(lake: Lake) -> set[str]:
    name, value = APPLIED_TAG
    return {key for key, tagged in tags(lake).items() if tagged.get(name) == value}


@on_s3
def test_a_run_tags_exactly_the_files_it_applied(lake: Lake, landing) -> None:
    config = items_config()
    load = write_file(landing, T + "LOAD00000001.csv", "1,one\n2,two\n")
    first = write_file(landing, T + "20250301-120000000.csv", "U,1,uno\n")
    second = write_file(landing, T + "20250301-120100000.csv", "I,3,three\n")
    lake.store()
    s3 = aws_client(lake.endpoint, "s3")
    s3.put_object_tagging(Bucket=lake.bucket, Key=second, Tagging={"TagSet": [{"Key": "team", "Value": "shop"}]})

    assert lake.apply(config, first).applied_files == [load, first]
    assert applied(lake) == {load, first}  # the pending one is not

    bad = write_file(landing, T + "20250301-120200000.csv", "X,4,four\n")  # an unknown op: refused
    with pytest.raises(CdcLakeError):
        lake.apply(config, bad)
    assert applied(lake) == {load, first}  # a refused batch tags nothing, not even its good files

    (landing / bad).write_text("I,4,four\n")  # fixed, as DMS would write it again
    assert lake.apply(config, bad).applied_files == [second, bad]
    assert applied(lake) == {load, first, second, bad}
    assert tags(lake)[second] == {"team": "shop", APPLIED_TAG[0]: APPLIED_TAG[1]}  # its own tags kept


@on_s3
def test_a_file_is_tagged_once_the_history_table_holds_it_too(lake: Lake, landing) -> None:
    config = items_config(history=True)
    load = write_file(landing, T + "LOAD00000001.csv", "1,one\n")
    change = write_file(landing, T + "20250301-120000000.csv", "U,1,uno\n")
    result = lake.apply(config, change)
    assert result.applied_files == [load, change] and result.history_files == [load, change]
    assert applied(lake) == {load, change}
