"""The table configuration proposed from landed DMS files (``cdc-lake config-from-files``), when the source
cannot be reached: Parquet files name and type their fields; CSV files with a header (``AddColumnName``) name
them, but carry no types, so every column is proposed as a string, marked to be set.

A table's newest data file in DMS order is read (its footer or its first line): it has the table's current
columns. Keys cannot be seen in files, so they are given by name (``--key shop.orders=order_id``); a table
without one is listed in a comment, as are folders whose files are not DMS's.
"""

from __future__ import annotations

import csv
import io
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import assert_never

from pyspark.sql import SparkSession

from cdc_lake.core.config import DmsSettings
from cdc_lake.core.dms_files import order_key_for
from cdc_lake.core.exceptions import CdcLakeError
from cdc_lake.core.storage import ObjectStore
from cdc_lake.engine.spark_types import config_type
from cdc_lake.ops.source_catalog import CatalogColumn, CatalogTable

HEADER_BYTES = 1 << 16
CSV_TYPE_NOTE = "CSV files carry no types: set this column's type"


@dataclass(frozen=True)
class FileColumns:
    """What a landed file says of its table: its data file, and its fields as (name, type or None)."""

    key: str
    fields: list[tuple[str, str | None]]


def read_landing(
    spark: SparkSession, store: ObjectStore, dms: DmsSettings, keys: Mapping[str, list[str]]
) -> list[CatalogTable]:
    """A table entry for each ``<schema>/<table>/`` folder under the DMS folder holding a DMS data file, typed from
    its newest one; ``keys`` gives primary keys by table name."""
    root = f"{dms.bucket_folder}/" if dms.bucket_folder else ""
    tables = []
    for schema_prefix in store.folders(root):
        for table_prefix in store.folders(schema_prefix):
            name = ".".join(table_prefix[len(root) :].strip("/").split("/"))
            newest = _newest_data_file(store, table_prefix)
            if newest is None:
                continue
            found = _file_columns(spark, store, dms, newest)
            tables.append(_table(name, found, dms, keys.get(name)))
    unknown = sorted(set(keys) - {t.name for t in tables})
    if unknown:
        raise CdcLakeError(f"--key names table(s) with no DMS files under {root or 'the landing root'}: {unknown}")
    return tables


def _newest_data_file(store: ObjectStore, prefix: str) -> str | None:
    data = []
    for item in store.list(prefix):
        order = order_key_for(item.key.rsplit("/", 1)[-1])
        if order is not None and item.size > 0:
            data.append((order, item.key))
    # The newest CDC file (CDC files sort after LOAD files in order_key's phase), else the newest LOAD file.
    return max(data)[1] if data else None


def _file_columns(spark: SparkSession, store: ObjectStore, dms: DmsSettings, key: str) -> FileColumns:
    match dms.file_format.name:
        case "parquet":
            schema = spark.read.parquet(store.uri(key)).schema
            return FileColumns(key, [(f.name, config_type(f.dataType)) for f in schema.fields])
        case "csv":
            return _header_columns(store, dms, key)
        case unhandled:
            assert_never(unhandled)


def _header_columns(store: ObjectStore, dms: DmsSettings, key: str) -> FileColumns:
    if not dms.add_column_name:
        raise CdcLakeError(
            "CSV files without a header name no columns: propose from Parquet files, or from CSV files written with "
            "AddColumnName (dms.add_column_name: true), or write the configuration from the source "
            "(cdc-lake config-from-source)"
        )
    head = store.read_head(key, HEADER_BYTES)
    if key.endswith(".gz"):
        head = zlib.decompressobj(zlib.MAX_WBITS | 16).decompress(head)
    first = next(csv.reader(io.StringIO(head.decode("utf-8", "replace")), delimiter=dms.csv_delimiter), [])
    return FileColumns(key, [(field, None) for field in first])


def _table(name: str, found: FileColumns, dms: DmsSettings, key: list[str] | None) -> CatalogTable:
    dms_fields = {"op", *(c.lower() for c in (dms.timestamp_column, dms.change_sequence_column) if c)}
    if dms.before_image is not None:
        prefix = dms.before_image.column_prefix.lower()
        dms_fields |= {f.lower() for f, _ in found.fields if f.lower().startswith(prefix)}
    columns = [
        CatalogColumn(
            field,
            f"{found.key.rsplit('/', 1)[-1]}: {kind or 'CSV text'}",
            kind or "string",
            kind or "string",
            True,
            None if kind else CSV_TYPE_NOTE,
        )
        for field, kind in found.fields
        if field.lower() not in dms_fields
    ]
    names = [c.name for c in columns]
    if key is not None:
        missing = [k for k in key if k not in names]
        if missing:
            raise CdcLakeError(f"--key {name}={','.join(key)}: {missing} not among its fields {names}")
    return CatalogTable(
        name,
        list(key or []),
        columns,
        no_key=f"files name no key: give it, e.g. --key {name}={names[0] if names else '<column>'}",
    )
