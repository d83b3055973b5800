"""A small batch's row delta through Iceberg's Java API (``engine.row_delta`` decides when; ``iceberg_java`` loads the
table and keeps its commit). Checked against Apache Iceberg 1.10, as ``iceberg_java``:

- A small batch's row delta (``engine.row_delta``): ``IcebergGenerics`` projecting ``MetadataColumns.FILE_PATH`` and
  ``ROW_POSITION`` (where the batch's keys' rows are, read in the driver, when neither the key index nor a Spark read
  found them); a data file and a position delete file written by pyarrow in the driver, each field carrying its
  Iceberg field id (``MetadataColumns.DELETE_FILE_PATH`` and ``DELETE_FILE_POS`` for the deletes), put through the
  table's ``FileIO`` (``createOrOverwrite``), and described by ``DataFiles.builder`` and
  ``FileMetadata.deleteFileBuilder`` with ``ParquetUtil.fileMetrics`` over an ``InMemoryInputFile`` of its bytes;
  ``Transactions.newTransaction`` with ``RowDelta``, ``startMetadata``/``currentMetadata`` and
  ``TableOperations.commit`` (the snapshot and the record's table property in one metadata commit, from one read);
  ``StaticTableOperations`` over the metadata committed (``kept_commit``: the next batch plans from it).
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from py4j.java_gateway import JavaObject
from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_type

from cdc_lake.core.exceptions import TableMovedError
from cdc_lake.engine.iceberg_errors import conflicts_raised
from cdc_lake.engine.iceberg_java import (
    as_dict,
    forget_commit,
    java_class,
    java_list,
    keep_commit,
    kept_commit,
    loaded_table,
)

# Key types whose values Iceberg binds from what py4j passes (numbers, text, decimals) or from their ISO text (dates),
# and whose values read back compare equal in Python: the row delta finds a batch's keys by them.
ROW_DELTA_KEY_TYPES = frozenset({"BOOLEAN", "INTEGER", "LONG", "STRING", "DECIMAL", "DATE"})
# Column types the row delta's Arrow writer writes as Iceberg's writers do (a Spark-made table's); a table with
# another (time, uuid, fixed, nested) keeps the MERGE.
ROW_DELTA_TYPES = ROW_DELTA_KEY_TYPES | {"FLOAT", "DOUBLE", "TIMESTAMP", "BINARY"}


@dataclass(frozen=True)
class RowDeltaTarget:
    """A table a row delta may write (``row_delta_target``): ``table``, the one this thread keeps loaded, which it
    commits through; ``reading``, the version its batch planned from (the kept commit, or that table), which it
    finds the keys' rows in; and the table's columns as Iceberg orders them."""

    table: Any
    reading: Any
    columns: tuple[T.StructField, ...]
    schema_id: int  # of ``columns``: the commit refuses a table whose columns moved on since


def row_delta_target(
    spark: SparkSession, dotted_name: str, keys: Sequence[str], *, copy_on_write: bool = False
) -> RowDeltaTarget | None:
    """The table, when a row delta may write it: merge-on-read (or copy-on-write too, with ``copy_on_write``),
    unpartitioned, format 2, and keys of ``ROW_DELTA_KEY_TYPES``; read as the batch's plan read it when that was
    this process's own commit (``kept_commit``), else anew: the batch may have altered its columns."""
    own = kept_commit(spark, dotted_name)
    table = loaded_table(spark, dotted_name, as_kept=True)
    reading = own if own is not None else table  # its mode: as planned
    metadata = reading.operations().current()
    properties = as_dict(spark, metadata.properties())
    modes = {"merge-on-read", "copy-on-write"} if copy_on_write else {"merge-on-read"}
    if (
        properties.get("write.merge.mode", "copy-on-write") not in modes
        or properties.get("write.delete.mode", "copy-on-write") not in modes
        or int(metadata.formatVersion()) != 2
        or not metadata.spec().isUnpartitioned()
        or not _arrow_writes(properties)
    ):
        return None
    if own is None:
        table = reading = loaded_table(spark, dotted_name)  # its columns read anew: the batch may have altered them
    schema = reading.schema()
    for key in keys:
        field_ = schema.findField(key)
        if field_ is None or str(field_.type().typeId().toString()) not in ROW_DELTA_KEY_TYPES:
            return None
    if any(str(f.type().typeId().toString()) not in ROW_DELTA_TYPES for f in schema.columns()):
        return None
    converted = java_class(spark, "org.apache.iceberg.spark.SparkSchemaUtil").convert(schema)
    fields = tuple(T.StructType.fromJson(json.loads(converted.json())).fields)
    return RowDeltaTarget(table, reading, fields, int(schema.schemaId()))


def key_positions(
    spark: SparkSession,
    target: RowDeltaTarget,
    snapshot_id: int,
    keys: Sequence[str],
    values: Sequence[tuple[Any, ...]],
) -> list[tuple[str, int]]:
    """Where the rows of these keys live in snapshot ``snapshot_id``: (data file, row position), ordered as a position
    delete file must be. Read by Iceberg's generic reader in the driver, over the files the keys' statistics do not
    rule out, with the deletes already there applied; no Spark job, no catalog call."""
    expressions = java_class(spark, "org.apache.iceberg.expressions.Expressions")
    condition = expressions.alwaysTrue()
    for index, key in enumerate(keys):
        distinct = java_list(spark, sorted({_literal(row[index]) for row in values}, key=repr))
        condition = getattr(expressions, "and")(condition, getattr(expressions, "in")(key, distinct))
    schema = target.reading.schema()
    metadata_columns = java_class(spark, "org.apache.iceberg.MetadataColumns")
    columns = [schema.findField(key) for key in keys] + [metadata_columns.FILE_PATH, metadata_columns.ROW_POSITION]
    projection = java_class(spark, "org.apache.iceberg.Schema")(java_list(spark, columns))
    generics = java_class(spark, "org.apache.iceberg.data.IcebergGenerics")
    rows = generics.read(target.reading).useSnapshot(snapshot_id).where(condition).project(projection).build()
    wanted = {tuple(_literal(v) for v in row) for row in values} if len(keys) > 1 else None
    found: list[tuple[str, int]] = []
    try:
        iterator = rows.iterator()
        while iterator.hasNext():
            record = iterator.next()
            if wanted is not None and tuple(_literal(record.get(i)) for i in range(len(keys))) not in wanted:
                continue  # each key column's IN matched, the combination did not
            found.append((str(record.get(len(keys))), int(record.get(len(keys) + 1))))
    finally:
        rows.close()
    return sorted(found)


def snapshot_records(target: RowDeltaTarget, snapshot_id: int) -> int:
    """The rows of snapshot ``snapshot_id``'s data files (before deletes), from its summary in the version read."""
    snapshot = target.reading.snapshot(snapshot_id)
    total = snapshot.summary().get("total-records") if snapshot is not None else None
    return int(total) if total is not None else 2**63 - 1


def _literal(value: Any) -> Any:
    """A key's value as Iceberg binds it and as it reads back into Python alike: a date as its ISO text."""
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, JavaObject):
        return str(value.toString())  # a LocalDate read back
    return value


@dataclass(frozen=True)
class RowDelta:
    """A batch as one Iceberg ``RowDelta`` from ``base``: ``rows`` (the table's columns in its order, each of its
    ``wire_type``) added as one data file, ``positions`` deleted as one position delete file,
    ``summary`` kept by its snapshot, and ``table_properties`` (given the new snapshot's id and sequence number)
    set by the same commit."""

    base: int
    rows: pa.Table
    positions: Sequence[tuple[str, int]]
    summary: Mapping[str, str]
    table_properties: Callable[[int, int], Mapping[str, str]] | None
    # Told the new snapshot's id and the data file's location (None: no rows) once the commit landed.
    committed: Callable[[int, str | None], None] | None = None


def commit_row_delta(spark: SparkSession, dotted_name: str, target: RowDeltaTarget, delta: RowDelta) -> int:
    """Write ``delta``'s files and commit them in one metadata commit that moves main from ``delta.base`` to the new
    snapshot; returns its id. Any commit since ``base`` refuses it (``TableMovedError``), as the branch protocol's
    (``commit.commit_transaction``) is refused: the batch plans again.

    On the Glue catalog that is one ``GetTable`` to read the table (and its metadata file only when it moved), and
    the commit's own ``GetTable`` and ``UpdateTable`` (Iceberg's compare-and-swap). The snapshot and the table
    properties are made in an Iceberg transaction on the metadata just read, and that metadata is committed as it
    stands: ``Transaction.commitTransaction`` would read the table once more. The metadata committed is kept
    (``kept_commit``) for the next batch's plan."""
    table = target.table
    operations = table.operations()
    transaction = java_class(spark, "org.apache.iceberg.Transactions").newTransaction(table.name(), operations)
    base = transaction.startMetadata()  # the batch's one read of the table
    if _main_of(base) != delta.base or int(base.currentSchemaId()) != target.schema_id:
        forget_commit(spark, dotted_name)
        raise TableMovedError(f"{dotted_name}: main or the columns moved on since snapshot {delta.base}")
    pending = transaction.table()
    written: list[Any] = []
    try:
        # Rows alone are an append, as Spark's MERGE commits new keys: incremental readers (a streaming read)
        # take appends and stop at or skip an overwrite.
        operation = transaction.newRowDelta() if delta.positions else transaction.newAppend()
        rows, deletes = _write_both(spark, pending, target.columns, delta, written)
        if rows is not None:
            operation = operation.addRows(rows) if delta.positions else operation.appendFile(rows)
        if deletes is not None:
            paths = java_list(spark, sorted({path for path, _ in delta.positions}))
            operation = operation.addDeletes(deletes).validateDataFilesExist(paths).validateDeletedFiles()
        if delta.positions:  # main is at base: what it validates since then is nothing
            operation = operation.validateFromSnapshot(delta.base)
        for key, value in delta.summary.items():
            operation = operation.set(key, value)
        operation.commit()  # into the transaction: no catalog call
        snapshot = pending.currentSnapshot()
        if delta.table_properties is not None:
            values = delta.table_properties(int(snapshot.snapshotId()), int(snapshot.sequenceNumber()))
            update = transaction.updateProperties()
            for key, value in values.items():
                update = update.set(key, value)
            update.commit()
        committed = transaction.currentMetadata()
        with conflicts_raised():
            operations.commit(base, committed)
        data_file = str(written[0].location()) if delta.rows.num_rows else None
        written.clear()
        keep_commit(spark, dotted_name, table, committed)
        if delta.committed is not None:
            delta.committed(int(snapshot.snapshotId()), data_file)
        return int(snapshot.snapshotId())
    except BaseException:
        forget_commit(spark, dotted_name)
        raise
    finally:
        for content_file in written:  # not committed: nothing refers to them
            with suppress(Py4JJavaError):  # else an orphan, which maintenance removes
                table.io().deleteFile(str(content_file.location()))


def _write_both(
    spark: SparkSession, table: Any, columns: Sequence[T.StructField], delta: RowDelta, written: list[Any]
) -> tuple[Any | None, Any | None]:
    """The delta's data file and position delete file, written at once (each is a PUT: one round trip for both);
    each file written is added to ``written`` even when the other failed, which is then raised."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        rows = pool.submit(_write_rows, spark, table, columns, delta.rows) if delta.rows.num_rows else None
        deletes = pool.submit(_write_positions, spark, table, delta.positions) if delta.positions else None
    futures = [f for f in (rows, deletes) if f is not None]
    written += [f.result() for f in futures if f.exception() is None]
    failed = next((error for error in (f.exception() for f in futures) if error is not None), None)
    if failed is not None:
        raise failed
    return (rows.result() if rows is not None else None), (deletes.result() if deletes is not None else None)


def _main_of(metadata: Any) -> int | None:
    main = metadata.ref("main")
    return int(main.snapshotId()) if main is not None else None


def wire_type(data_type: T.DataType) -> pa.DataType:
    """The Arrow type ``RowDelta.rows`` holds a lake column of ``data_type`` as: an instant as its microseconds."""
    return pa.int64() if isinstance(data_type, T.TimestampType) else to_arrow_type(data_type)


def _write_rows(spark: SparkSession, table: Any, columns: Sequence[T.StructField], rows: pa.Table) -> Any:
    """The rows (``RowDelta.rows``) as one Parquet data file of the table."""
    schema = table.schema()
    fields = []
    for column in columns:
        field_ = schema.findField(column.name)
        arrow_type = to_arrow_type(column.dataType)
        fields.append(pa.field(column.name, arrow_type, nullable=bool(field_.isOptional()), metadata=_field_id(field_)))
    arrays = [rows.column(i).cast(f.type) for i, f in enumerate(fields)]
    data = _parquet(spark, pa.Table.from_arrays(arrays, schema=pa.schema(fields)), table, "write.parquet.compression")
    config = java_class(spark, "org.apache.iceberg.MetricsConfig").forTable(table)
    output, metrics = _written(spark, table, data, config)
    builder = java_class(spark, "org.apache.iceberg.DataFiles").builder(table.spec())
    return _described(builder, output, data, metrics).build()


def _write_positions(spark: SparkSession, table: Any, positions: Sequence[tuple[str, int]]) -> Any:
    """The positions, ordered as a position delete file must be, as one Parquet position delete file."""
    columns = java_class(spark, "org.apache.iceberg.MetadataColumns")
    fields = [
        pa.field(f.name(), arrow_type, nullable=False, metadata=_field_id(f))
        for f, arrow_type in ((columns.DELETE_FILE_PATH, pa.string()), (columns.DELETE_FILE_POS, pa.int64()))
    ]
    paths, rows = zip(*positions, strict=True)
    arrow = pa.Table.from_arrays([pa.array(paths, pa.string()), pa.array(rows, pa.int64())], schema=pa.schema(fields))
    data = _parquet(spark, arrow, table, "write.delete.parquet.compression")
    config = java_class(spark, "org.apache.iceberg.MetricsConfig").forPositionDelete(table)
    output, metrics = _written(spark, table, data, config)
    builder = java_class(spark, "org.apache.iceberg.FileMetadata").deleteFileBuilder(table.spec()).ofPositionDeletes()
    if len(set(paths)) == 1:  # a file-scoped delete file: readers of other files skip it without its bounds
        builder = builder.withReferencedDataFile(paths[0])
    return _described(builder, output, data, metrics).build()


# A row delta's files are written with Arrow in the driver and handed to the JVM whole: Iceberg's generic writer,
# fed a row at a time over py4j, took 0.8 ms a row (7.1 s for 9,000 new rows, 2.7 s for 8,000 positions) where the
# MERGE of the same 10,000 keys took 1.7 s. Iceberg reads Parquet by field id, which each field carries.
_FIELD_ID = b"PARQUET:field_id"
# Iceberg's codec names (``write.parquet.compression-codec``; Iceberg's default is zstd) as pyarrow's.
_CODECS = {"zstd": "zstd", "snappy": "snappy", "gzip": "gzip", "uncompressed": "none", "brotli": "brotli"}
ARROW_CODECS = frozenset(_CODECS)


def _arrow_writes(properties: Mapping[str, str]) -> bool:
    """Whether the table's files are Parquet of a codec the row delta's Arrow writer writes."""
    formats = (properties.get(f"write{kind}.format.default", "parquet") for kind in ("", ".delete"))
    codecs = (
        table_codec(properties, prefix) for prefix in ("write.parquet.compression", "write.delete.parquet.compression")
    )
    return all(f.lower() == "parquet" for f in formats) and all(c in ARROW_CODECS for c in codecs)


def _field_id(field_: Any) -> dict[bytes, bytes]:
    return {_FIELD_ID: str(int(field_.fieldId())).encode()}


def table_codec(properties: Mapping[str, str], prefix: str) -> str:
    """The Parquet codec of ``prefix`` (``write.parquet.compression`` or ``write.delete.parquet.compression``), as
    Iceberg resolves it: a delete file's falls back to a data file's."""
    data_codec = properties.get("write.parquet.compression-codec", "zstd")
    return properties.get(f"{prefix}-codec", data_codec).lower()


def _parquet(spark: SparkSession, arrow: pa.Table, table: Any, prefix: str) -> bytes:
    properties = as_dict(spark, table.properties())
    level = properties.get(f"{prefix}-level") or properties.get("write.parquet.compression-level")
    sink = pa.BufferOutputStream()
    codec = _CODECS[table_codec(properties, prefix)]  # row_delta_target takes no table of another codec
    pq.write_table(arrow, sink, compression=codec, compression_level=int(level) if level else None)
    return bytes(sink.getvalue().to_pybytes())


def _written(spark: SparkSession, table: Any, data: bytes, metrics_config: Any) -> tuple[Any, Any]:
    """``data`` written as a new file of the table (one PUT), and its metrics as Iceberg's own writers take them
    from the footer, read from the bytes in the JVM rather than from the store."""
    output = _output_file(spark, table).encryptingOutputFile()
    stream = output.createOrOverwrite()  # a new name: no HEAD asking whether it is there
    try:
        stream.write(data)
    finally:
        stream.close()
    footer = java_class(spark, "org.apache.iceberg.inmemory.InMemoryInputFile")(output.location(), data)
    metrics = java_class(spark, "org.apache.iceberg.parquet.ParquetUtil").fileMetrics(footer, metrics_config)
    return output, metrics


def _described(builder: Any, output: Any, data: bytes, metrics: Any) -> Any:
    return builder.withPath(output.location()).withFormat("PARQUET").withFileSizeInBytes(len(data)).withMetrics(metrics)


def _output_file(spark: SparkSession, table: Any) -> Any:
    """A new file under the table's data location, named as Iceberg's own writers name theirs."""
    factories = java_class(spark, "org.apache.iceberg.io.OutputFileFactory")
    return factories.builderFor(table, 0, 0).operationId(uuid.uuid4().hex).build().newOutputFile()
