"""``cdc-lake export``: lake tables as JSON Lines, in the same form as the generator's oracle."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import DataFrame

from cdc_lake.core.config import TableSpec
from cdc_lake.core.jsonl import row_encoder
from cdc_lake.core.sql import quote
from cdc_lake.engine.context import LakeContext
from cdc_lake.engine.tables import Lake, table_exists


def read_table(lake: Lake, table: TableSpec, snapshot_id: int | None = None) -> DataFrame:
    name = f"{lake.location.catalog}.{lake.location.database}.{table.lake_table}"
    if snapshot_id is None:
        return lake.spark.table(name)
    # SQL time travel reads the same on Spark 3.5 and 4 (Iceberg 1.11 dropped the snapshot-id option, and Spark
    # 3.5's table() ignores versionAsOf). The id is an int of the table's metadata, never a row's value.
    return lake.spark.sql(f"SELECT * FROM {name} VERSION AS OF {int(snapshot_id)}")


def export_table(lake: Lake, table: TableSpec, out: Path, snapshot_id: int | None = None) -> int:
    """Write ``<schema.table>.jsonl`` sorted by primary key; a table never created exports empty."""
    out.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with out.open("w", encoding="utf-8") as handle:
        if not table_exists(lake, table):
            return 0
        frame = read_table(lake, table, snapshot_id)
        encode = row_encoder(table)
        ordered = frame.select(*[quote(c) for c in table.column_names]).orderBy(*[quote(k) for k in table.primary_key])
        for row in ordered.toLocalIterator(prefetchPartitions=True):
            handle.write(encode(row.asDict()))
            handle.write("\n")
            count += 1
    return count


def export_tables(
    lake: LakeContext, out_dir: Path, tables: Sequence[str] | None = None, *, snapshot_id: int | None = None
) -> dict[str, int]:
    """Export the named tables (all configured ones by default); returns rows written per table."""
    chosen = [lake.config.table(name) for name in tables] if tables else list(lake.config.tables)
    return {t.name: export_table(lake, t, out_dir / f"{t.name}.jsonl", snapshot_id) for t in chosen}
