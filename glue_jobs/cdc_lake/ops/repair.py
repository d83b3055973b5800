"""``cdc-lake repair``: rewrite only the drifted keys of a lake table from the live source, without a DMS reload.

``verify`` (with its re-check of changes in flight) names the keys; their rows are read again from the source,
in one transaction that also notes the source's log position, and applied as one Iceberg commit: the keys the
source has are upserted, the others deleted. The commit's snapshot summary records the repair
(``cdc-lake.repair``: keys, upserted, deleted, the source position) and carries no replay state, so CDC replay
goes on from the state recorded before it.

Order with later changes: the repair writes each key's row as the source had it at the position noted. A
change committed before that position but landing afterwards (DMS lag) is applied after the repair, in DMS
order, and ends at that same row, since the source's later changes follow it in the files too; a change
committed after the position applies as usual. A commit that loses to a concurrent run reads and plans again.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_lake.core.config import TableSpec
from cdc_lake.core.exceptions import CdcLakeError
from cdc_lake.core.shapes import OP
from cdc_lake.engine.commit import (
    Properties,
    Transaction,
    base_snapshot,
    batch_updates,
    commit_transaction,
    summary_of,
)
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.record import REPAIR
from cdc_lake.engine.replay import committed_with_retries
from cdc_lake.engine.spark_types import lake_type
from cdc_lake.ops.source_tls import SourceAddress
from cdc_lake.ops.verify import Settle, SourceTable, TableVerify, connection_for, verify


@dataclasses.dataclass(frozen=True)
class TableRepair:
    table: str
    keys: int
    upserted: int
    deleted: int
    position: str  # the source's log position when the rows were read
    snapshot_id: int | None  # None for a dry run, or nothing to repair
    verified: TableVerify


def repair(
    context: ReplayContext,
    source: SourceAddress,
    tables: Sequence[str] | None = None,
    *,
    settle: Settle | None,
    dry_run: bool = False,
) -> list[TableRepair]:
    """Verify the chosen tables, then rewrite each one's drifted keys from the source (nothing with ``dry_run``)."""
    found = verify(context, source, tables, settle=settle)
    chosen = {t.name: t for t in context.config.tables}
    refused = [
        f"{v.table}: {why}"
        for v in found
        if v.drift and (why := _unrepairable(chosen[v.table], v))
    ]  # fmt: skip
    if refused:
        raise CdcLakeError("cannot repair, and nothing was written:\n  " + "\n  ".join(refused))
    results = []
    with connection_for(source) as (connection, dialect):
        for verified in found:
            table = chosen[verified.table]
            keys = [tuple(d.key.values()) for d in verified.drift]
            if not keys or dry_run:
                results.append(TableRepair(table.name, len(keys), 0, 0, "", None, verified))
                continue
            columns = [c for c in table.columns if not c.dropped]
            rows = SourceTable(connection, dialect, table, columns)
            results.append(_repair_table(context, table, rows, keys, verified))
    return results


def _unrepairable(table: TableSpec, verified: TableVerify) -> str:
    if verified.not_compared:
        return (
            f"columns {', '.join(verified.not_compared)} hold DMS's text of their source type, which the source "
            "cannot give: reload the table instead (docs/deploy.md#reload)"
        )
    if table.history:
        return "it keeps history (history: true), which a repair would not version: reload the table instead"
    return ""


def _repair_table(
    context: ReplayContext, table: TableSpec, source: SourceTable, keys: list[tuple[Any, ...]], verified: TableVerify
) -> TableRepair:
    def attempt() -> TableRepair:
        spark = context.spark
        base = base_snapshot(context, table.lake_table)
        position, rows = source.rows_at_position(keys)
        schema = T.StructType(
            [T.StructField(c.name, lake_type(c.type), True) for c in table.columns if not c.dropped]
            + [T.StructField(OP, T.StringType(), False)]
        )
        decimals = {c.name for c in table.columns if c.type.startswith("decimal")}
        records = []
        for key in keys:
            row = rows.get(key)
            if row is None:
                named = dict(zip(table.primary_key, key, strict=True))
                records.append([named.get(f.name) for f in schema.fields[:-1]] + ["D"])
            else:
                values = [Decimal(row[f.name]) if f.name in decimals and row[f.name] is not None else row[f.name]
                          for f in schema.fields[:-1]]  # fmt: skip
                records.append([*values, "U"])
        diff = spark.createDataFrame(records, schema).localCheckpoint(eager=True)
        deleted = sum(1 for r in records if r[-1] == "D")
        detail = {"keys": len(keys), "upserted": len(keys) - deleted, "deleted": deleted, "position": position}
        merge = batch_updates(context, table, diff.withColumn(OP, F.col(OP)), summary_of(context, table, base))
        properties = {REPAIR: json.dumps(detail, separators=(",", ":"))}
        transaction = Transaction(table.lake_table, base, merge, lambda: Properties(properties))
        committed = commit_transaction(context, transaction)
        assert committed is not None  # a merge has no check that could give the commit up
        return TableRepair(table.name, len(keys), len(keys) - deleted, deleted, position, committed.snapshot_id,
                           verified)  # fmt: skip

    result, _attempts = committed_with_retries(context, table, attempt)
    return result
