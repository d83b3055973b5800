"""The oracle: the replay contract applied to exactly the rows written, checked against the simulated source."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cdc_lake.core.config import TableSpec
from cdc_lake.core.jsonl import write_jsonl
from cdc_lake.local.generator.source import TablePlan
from cdc_lake.local.generator.values import Row


def replay(plan: TablePlan, key_of: Callable[[Row], Any], before_image: bool) -> dict[Any, Row]:
    """The replay contract on the rows as written: LOAD rows, then CDC rows in file and row order.

    Rows are as wide as the configured columns: a column a file lacks (added later, or dropped) is NULL in
    the rows it wrote, as the engine writes it. A key UPDATE removes the old row only when the files carry
    before-image columns; without them nothing in the file names the old key and it stays.
    """
    table: dict[Any, Row] = {}
    for load in plan.load_files:
        table.update(zip(map(key_of, load.rows), load.rows, strict=True))
    for cdc in plan.cdc_files:
        for change in cdc.changes:
            if change.op == "D":
                table.pop(key_of(change.row), None)
                continue
            if before_image and change.before is not None:  # a key UPDATE with before-image columns: old row goes
                table.pop(key_of(change.before), None)
            table[key_of(change.row)] = change.row  # I on an existing key and U on a missing key are upserts
    return table


def captured_changes(plan: TablePlan, captured_ops: str) -> None:
    """Keep only the changes DMS captures (CdcInsertsOnly: I; CdcInsertsAndUpdates: I and U)."""
    for cdc in plan.cdc_files:
        cdc.changes = [change for change in cdc.changes if change.op in captured_ops]


def stale_key_rows(plan: TablePlan) -> list[Row]:
    """Rows left under their old key by key UPDATEs that carry no before-image: DMS writes ``U`` with the new
    key only, so a key-based replay upserts the new row and keeps the old one (as the source had it)."""
    return [change.before for cdc in plan.cdc_files for change in cdc.changes if change.before is not None]


def check_against_source(
    table: str, replayed: dict[Any, Row], plan: TablePlan, key_of: Callable[[Row], Any], before_image: bool
) -> None:
    """The replay must equal the source, plus the rows the files cannot remove: ghost upserts and, without
    before-image columns, the old-key rows of key UPDATEs."""
    expected = {key_of(row): row for row in plan.source_rows.values()}
    expected.update((key_of(row), row) for row in plan.ghost_rows)
    if not before_image:
        stale = stale_key_rows(plan)
        if expected.keys() & {key_of(row) for row in stale}:
            raise AssertionError(f"generator bug: {table}: an old key of a key UPDATE is live again")
        expected.update((key_of(row), row) for row in stale)
    if replayed != expected:
        missing = len(expected.keys() - replayed.keys())
        extra = len(replayed.keys() - expected.keys())
        raise AssertionError(
            f"generator bug: replaying the files of {table} does not give the simulated source "
            f"({missing} key(s) missing, {extra} extra, {len(replayed)} replayed rows)"
        )


def write_expected(path: Path, table: TableSpec, replayed: dict[Any, Row]) -> None:
    """The expected table as ``cdc_lake.core.jsonl`` writes it (sorted by primary key)."""
    names = table.column_names
    with path.open("w", encoding="utf-8", newline="\n") as out:
        write_jsonl((dict(zip(names, row, strict=True)) for row in replayed.values()), table, out)
