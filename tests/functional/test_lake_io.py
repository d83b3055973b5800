"""The lake's FileIO (``jvm/``, ``core.catalogs.LAKE_IO``) on the local endpoint's S3: the metadata files it wrote
are read back without a request, anything else is read from S3 as S3FileIO reads it, a file it removed is gone,
and what it keeps stays within its bounds."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from cdc_lake.core.catalogs import LAKE_IO
from cdc_lake.local.aws_endpoint import served_requests
from tests.support.aws import aws_client
from tests.support.lake import GLUE_LAKE_BUCKET

pytestmark = [pytest.mark.spark, pytest.mark.glue_path]


@pytest.fixture
def io(spark: SparkSession, aws_endpoint: str) -> Iterator[Any]:
    assert LAKE_IO == "cdclake.iceberg.WrittenMetadataFileIO"
    file_io = spark._jvm.cdclake.iceberg.WrittenMetadataFileIO()
    properties = {"s3.endpoint": aws_endpoint, "s3.path-style-access": "true"}
    file_io.initialize(spark._jvm.java.util.HashMap(properties))
    yield file_io
    file_io.close()


def _folder() -> str:
    return f"s3://{GLUE_LAKE_BUCKET}/lake-io/{uuid.uuid4().hex}/metadata"


def _names() -> dict[str, str]:
    """A file of each name Iceberg writes once: a manifest list, a manifest, a metadata.json."""
    commit = str(uuid.uuid4())
    return {
        "manifest list": f"snap-{4_611_686_018_427_387_904 + 7}-1-{commit}.avro",
        "manifest": f"{commit}-m0.avro",
        "metadata": f"00042-{uuid.uuid4()}.metadata.json",
    }


def _write(io: Any, path: str, data: bytes) -> None:
    stream = io.newOutputFile(path).createOrOverwrite()
    stream.write(bytearray(data))
    stream.close()


def _read(spark: SparkSession, io: Any, path: str) -> bytes:
    file = io.newInputFile(path)
    buffer = spark._jvm.java.io.ByteArrayOutputStream()
    stream = file.newStream()
    spark._jvm.org.apache.iceberg.relocated.com.google.common.io.ByteStreams.copy(stream, buffer)
    stream.close()
    assert file.getLength() == buffer.size()
    return bytes(buffer.toByteArray())


def _s3_reads(endpoint: str) -> int:
    return sum(n for kind, n in served_requests(endpoint).items() if kind.startswith(("s3:GET", "s3:HEAD")))


@pytest.mark.parametrize("kind", ["manifest list", "manifest", "metadata"])
def test_a_metadata_file_it_wrote_is_read_back_without_a_request(
    spark: SparkSession, aws_endpoint: str, io: Any, kind: str
) -> None:
    path = f"{_folder()}/{_names()[kind]}"
    data = uuid.uuid4().bytes * 1000
    _write(io, path, data)
    key = path.removeprefix(f"s3://{GLUE_LAKE_BUCKET}/")
    assert aws_client(aws_endpoint, "s3").get_object(Bucket=GLUE_LAKE_BUCKET, Key=key)["Body"].read() == data

    served_requests(aws_endpoint, reset=True)
    assert _read(spark, io, path) == data
    assert _s3_reads(aws_endpoint) == 0
    assert spark._jvm.cdclake.iceberg.WrittenMetadataFileIO.isKept(path)


@pytest.mark.parametrize(
    "name", ["v3.metadata.json", "version-hint.text", "00000-data.parquet", "snap-1-1-not-a-uuid.avro"]
)
def test_a_file_of_a_name_written_more_than_once_is_read_from_s3(
    spark: SparkSession, aws_endpoint: str, io: Any, name: str
) -> None:
    """A name Iceberg may write again (a Hadoop table's version files) or a data file: S3 holds the truth."""
    path = f"{_folder()}/{name}"
    _write(io, path, b"first")
    key = path.removeprefix(f"s3://{GLUE_LAKE_BUCKET}/")
    aws_client(aws_endpoint, "s3").put_object(Bucket=GLUE_LAKE_BUCKET, Key=key, Body=b"written again")

    served_requests(aws_endpoint, reset=True)
    assert _read(spark, io, path) == b"written again"
    assert _s3_reads(aws_endpoint) >= 1


def test_a_file_it_removed_is_gone_for_it_too(spark: SparkSession, io: Any) -> None:
    folder, names = _folder(), _names()
    single, bulk = f"{folder}/{names['metadata']}", f"{folder}/{names['manifest list']}"
    prefixed = f"{_folder()}/{names['manifest']}"
    for path in (single, bulk, prefixed):
        _write(io, path, b"kept")
    io.deleteFile(single)
    io.deleteFiles(spark._jvm.java.util.ArrayList([bulk]))
    io.deletePrefix(prefixed.rsplit("/", 1)[0])
    for path in (single, bulk, prefixed):
        assert not io.newInputFile(path).exists(), path
        with pytest.raises(Py4JJavaError, match=r"NotFound|does not exist|404"):
            _read(spark, io, path)


def test_what_it_keeps_stays_within_its_bounds(spark: SparkSession, aws_endpoint: str, io: Any) -> None:
    lake_io = spark._jvm.cdclake.iceberg.WrittenMetadataFileIO
    most_bytes, most_file = int(lake_io.MOST_BYTES), int(lake_io.MOST_FILE_BYTES)
    folder = _folder()
    big = f"{folder}/{_names()['metadata']}"
    _write(io, big, b"x" * (most_file + 1))
    served_requests(aws_endpoint, reset=True)
    assert len(_read(spark, io, big)) == most_file + 1
    assert _s3_reads(aws_endpoint) >= 1  # too big to keep: read from S3

    paths = [f"{folder}/{_names()['manifest']}" for _ in range(most_bytes // most_file + 1)]
    for path in paths:
        _write(io, path, path.encode() + b"y" * (most_file - 1 - len(path)))
    kept = lake_io.keptSize()
    assert kept[1] <= most_bytes
    served_requests(aws_endpoint, reset=True)
    assert _read(spark, io, paths[0]).startswith(paths[0].encode())  # the oldest went first: read from S3
    assert _s3_reads(aws_endpoint) >= 1
    served_requests(aws_endpoint, reset=True)
    assert _read(spark, io, paths[-1]).startswith(paths[-1].encode())
    assert _s3_reads(aws_endpoint) == 0
