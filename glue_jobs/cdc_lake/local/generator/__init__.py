"""Generate AWS DMS full-load and CDC files for configured tables, together with the expected final tables.

The generator simulates each source table over time: its rows before the full load, the changes made
while the full load runs (DMS's cached changes: visible in the LOAD files *and* repeated at the head of
the first CDC file with older commit timestamps), then CDC files of I/U/D changes. It writes the files
exactly as the DMS S3 target names and formats them, then replays the rows it wrote in DMS order
(LOAD files, CDC files by name, row position) into a dict: that replay is the oracle, written with
``cdc_lake.core.jsonl``, and checked against the simulated source database.

Modules: ``spec`` (what to generate, what came out), ``values`` (realistic, boundary and key values),
``source`` (the simulated source table and its scripted edge cases), ``dms_output`` (names, folders, CSV and
Parquet), ``oracle`` (the replay and its check against the source).

Choices where DMS is silent or unconfirmed (see the shared dms-format notes):
- Parquet with ``compression: gzip`` keeps the ``.parquet`` name and compresses inside the file (codec
  GZIP); CSV with gzip is ``.csv.gz``. Parquet files are written as Parquet 1.0, DMS's default version.
- CDC files are named ``YYYYMMDD-HHMMSSmmm`` by the time DMS wrote them; the change sequence is
  ``YYYYMMDDHHMMSS`` + hundredths of the commit time + a 19-digit task-wide counter.
- NULL and the empty string in CSV: under DMS's default (``csv_null_value: ""``) NULL is an unquoted empty
  field and every empty string is written quoted ``""``; with a NULL marker (``csv_null_value: NULL``) NULL is
  the marker and an empty string is written bare, except every fourth one per column and file, quoted ``""``.
- REAL and DOUBLE values are written as DMS writes them: signed exponent form, ``+3.23800011e+01`` (REAL, 9
  significant digits) and ``+2.1804858784530072e+04`` (DOUBLE, 17).
- With ``cdc_inserts_only`` / ``cdc_inserts_and_updates`` the source still updates and deletes, but the CDC
  files hold only the captured INSERTs (and UPDATEs), without ``Op`` unless ``include_op_for_full_load``. The
  expected table is then the LOAD files plus every captured change upserted by key: by the user's choice it is
  NOT the source table (deleted rows stay, and with inserts only, updated rows keep older values).
- With ``before_image``, every file carries the before-image key columns after the change sequence, empty except
  on UPDATEs that changed a key; a scripted edge case changes keys (twice in a row) so that they are exercised.
  ``GeneratorSpec.key_updates`` scripts them without before-image columns too: DMS then writes ``U`` with the new
  key only, and the expected table keeps the old-key rows (``oracle.stale_key_rows``), as a key-based replay must.
- ``GeneratorSpec.schema_changes`` scripts ALTER TABLEs between CDC files (``SchemaChange``: add a column at the
  end, widen a column, drop a column). The configuration is the one after the changes (added columns last,
  widened types, dropped columns ``dropped: true``); files are written in the source's shape at the time
  (headerless CSV: fewer or more fields; header and Parquet: the names and types then). Rows are as wide as the
  configured columns: a column the source lacks is NULL in every row it writes, so rows existing at an ADD
  COLUMN are NULL in it until changed, and rows written after a DROP are NULL in the dropped column (the
  engine's documented behaviour: an UPDATE after the drop carries no value for it).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterable
from pathlib import Path

from cdc_lake.core.config import PipelineConfig, TableSpec, normalize_type
from cdc_lake.core.dms_files import order_key_for
from cdc_lake.core.exceptions import ConfigError
from cdc_lake.local.generator.dms_output import TableWriter, csv_field
from cdc_lake.local.generator.oracle import captured_changes, check_against_source, replay, write_expected
from cdc_lake.local.generator.source import SourceSimulation, TablePlan, assign_change_sequences
from cdc_lake.local.generator.spec import (
    DEFAULT_SPEC,
    GenerationResult,
    GeneratorSpec,
    SchemaChange,
    TableResult,
    widens,
)
from cdc_lake.local.generator.values import TableModel

__all__ = [
    "DEFAULT_SPEC",
    "GenerationResult",
    "GeneratorSpec",
    "SchemaChange",
    "TableResult",
    "csv_field",
    "generate",
    "land_order",
]

logger = logging.getLogger(__name__)


def _check_schema_changes(config: PipelineConfig, spec: GeneratorSpec) -> None:
    """Scripted ALTER TABLEs must fit the configuration, which describes the table after all of them."""
    changed: set[tuple[str, str]] = set()
    for change in spec.schema_changes:
        table = config.table(change.table)
        where = f"schema change {change.kind} {change.column} of {table.name}"
        column = next((c for c in table.columns if c.name == change.column), None)
        if column is None:
            raise ConfigError(
                f"{where}: the configuration has no column {change.column!r} (list it as after the change)"
            )
        if column.name in table.primary_key:
            raise ConfigError(f"{where}: key columns cannot be changed")
        if (table.name, column.name) in changed:
            raise ConfigError(f"{where}: one schema change per column")
        changed.add((table.name, column.name))
        if change.after_file >= spec.cdc_files - 1:
            raise ConfigError(f"{where}: after_file {change.after_file} leaves no CDC file of the new shape")
        if change.kind == "add" and (column.dropped or not column.nullable):
            raise ConfigError(f"{where}: an added column is nullable (existing rows hold NULL) and not dropped")
        if change.kind == "drop" and not column.dropped:
            raise ConfigError(f"{where}: mark the column `dropped: true` in the configuration")
        if change.kind == "widen" and not widens(normalize_type(change.from_type or ""), column.type):
            raise ConfigError(f"{where}: {change.from_type} -> {column.type} is not a widening")
    for table in config.tables:
        _check_table_shapes(table, spec, changed)


def _check_table_shapes(table: TableSpec, spec: GeneratorSpec, changed: set[tuple[str, str]]) -> None:
    """Added columns last, in the order added; every column marked dropped has a scripted drop."""
    adds = [c for c in spec.schema_changes if c.table == table.name and c.kind == "add"]
    added = {c.column for c in adds}
    first = next((i for i, name in enumerate(table.column_names) if name in added), len(table.columns))
    if set(table.column_names[first:]) != added:
        raise ConfigError(f"table {table.name}: added columns {sorted(added)} must be the last configured ones")
    when = {c.column: c.after_file for c in adds}
    times = [when[name] for name in table.column_names[first:]]
    if times != sorted(times):
        raise ConfigError(f"table {table.name}: list added columns in the order the source added them")
    undropped = [c.name for c in table.columns if c.dropped and (table.name, c.name) not in changed]
    if undropped:
        raise ConfigError(f"table {table.name}: column(s) {undropped} are dropped: script the drop (SchemaChange)")


def _check_supported(config: PipelineConfig, tables: list[TableSpec], landing: Path) -> None:
    for table in tables:
        if not config.dms.file_format.keeps_binary:
            for column in table.columns:
                if column.type == "binary":
                    raise ConfigError(
                        f"table {table.name}, column {column.name}: the generator writes binary columns to Parquet "
                        "only (how DMS renders binary in CSV is unconfirmed); use dms.format: parquet"
                    )
        folder = landing / config.table_prefix(table)
        if folder.exists() and any(folder.iterdir()):
            raise FileExistsError(f"{folder} already holds files; generate into an empty output folder")


def generate(
    config: PipelineConfig, out_dir: Path, spec: GeneratorSpec = DEFAULT_SPEC, *, tables: list[str] | None = None
) -> GenerationResult:
    """Write DMS files for the tables under ``out_dir/landing`` and the oracle under ``out_dir/expected``.

    ``tables`` selects tables by ``<schema>.<table>`` name (default: all configured). The oracle holds one
    ``<schema>.<table>.jsonl`` per table: the replay of exactly the written rows, in DMS order.
    """
    out_dir = Path(out_dir)
    selected = [config.table(name) for name in tables] if tables is not None else list(config.tables)
    landing, expected = out_dir / "landing", out_dir / "expected"
    _check_supported(config, selected, landing)
    _check_schema_changes(config, spec)
    expected.mkdir(parents=True, exist_ok=True)
    captured_ops = captured_cdc_ops(config)
    work: list[tuple[TableResult, TableWriter, TablePlan]] = []
    for index, table in enumerate(selected):
        model = TableModel(table, config.dms, spec)
        plan = SourceSimulation(model, spec, config.dms.cdc_max_batch_interval, index).run()
        writer = TableWriter(config, model, landing, spec)
        load_keys = [writer.load_file(i, load) for i, load in enumerate(plan.load_files)]
        if captured_ops != "IUD":
            captured_changes(plan, captured_ops)
        replayed = replay(plan, model.key_of, model.before_image)
        if captured_ops == "IUD":  # otherwise the lake is, by the user's choice, not the source
            check_against_source(table.name, replayed, plan, model.key_of, model.before_image)
        write_expected(expected / f"{table.name}.jsonl", table, replayed)
        counts = dict.fromkeys("IUD", 0)
        for cdc in plan.cdc_files:
            for change in cdc.changes:
                counts[change.op] += 1
        work.append((TableResult(table.name, load_keys, [], len(replayed), counts), writer, plan))
        plan.source_rows = {}  # the oracle is written: free the source's copy
    assign_change_sequences([plan for _, _, plan in work])
    for result, writer, plan in work:
        result.cdc_files = [writer.cdc_file(cdc) for cdc in plan.cdc_files if cdc.changes]
        logger.info(
            "generated %s: %d LOAD file(s), %d CDC file(s) with %s changes, %d expected rows",
            result.table, len(result.load_files), len(result.cdc_files), result.changes, result.expected_rows,
        )  # fmt: skip
    return GenerationResult(landing=landing, expected=expected, tables=[result for result, _, _ in work])


def captured_cdc_ops(config: PipelineConfig) -> str:
    """The change kinds DMS writes to CDC files: all, or only INSERTs (and UPDATEs) in DMS's insert-only modes."""
    if config.dms.cdc_inserts_only:
        return "I"
    return "IU" if config.dms.cdc_inserts_and_updates else "IUD"


def _cdc_time(key: str) -> str:
    order = order_key_for(key.rsplit("/", 1)[-1])
    if order is None:
        raise ValueError(f"{key} is not a CDC file name")
    return order[1]


def land_order(result: GenerationResult) -> list[str]:
    """Every generated key in the order DMS wrote them: LOAD files per table, then all CDC files by time."""
    keys = [key for table in result.tables for key in table.load_files]
    cdc = sorted((_cdc_time(key), index, key) for index, table in enumerate(result.tables) for key in table.cdc_files)
    return keys + [key for _, _, key in cdc]


def land(source: Path, landing: Path, keys: Iterable[str]) -> None:
    """Copy generated files (keys under ``source``) into a landing folder, as DMS writing them would."""
    for key in keys:
        target = landing / key
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / key, target)
