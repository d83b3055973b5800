"""Following the source's schema: the columns a run reads, and the lake tables altered in place to hold them.

What a run's table has is the configured columns, then (for files that name their fields) columns the
files carry that the configuration does not name yet, then columns the lake table gained earlier and the
configuration still lacks. Iceberg adds columns and widens types in metadata only (``ALTER TABLE``, no
rewrite), so snapshots from before a change keep their schema for time travel.

Followed: an added column (appended), a widening Iceberg can do in place (int→bigint, float→double,
decimal precision up; varchar(n) is a string), a dropped column (kept in the lake, NULL from then on).
Refused, with what to do: a rename, a narrowing, a type change Iceberg cannot make; and with
``schema_changes: refuse``, any column or widening a file shows before the configuration declares it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.errors import AnalysisException
from pyspark.sql import types as T

from cdc_lake.core.config import ColumnSpec, PipelineConfig, TableSpec
from cdc_lake.core.exceptions import SchemaChangeError
from cdc_lake.core.identifiers import lake_name
from cdc_lake.core.notices import Notice
from cdc_lake.core.shapes import FileLayout
from cdc_lake.core.sql import quote, sql_string
from cdc_lake.engine.iceberg_errors import is_already_exists
from cdc_lake.engine.iceberg_java import forget_commit
from cdc_lake.engine.spark_types import config_type, lake_type
from cdc_lake.engine.tables import Lake, source_doc

log = logging.getLogger(__name__)

_NUMERIC = (T.IntegerType, T.LongType, T.FloatType, T.DoubleType, T.DecimalType, T.ShortType, T.ByteType)


def widens(old: T.DataType, new: T.DataType) -> bool:
    """Whether Iceberg can change a column of type ``old`` to ``new`` in place (a strict widening)."""
    if isinstance(old, T.IntegerType | T.ShortType | T.ByteType) and isinstance(new, T.LongType):
        return True
    if isinstance(old, T.FloatType) and isinstance(new, T.DoubleType):
        return True
    return (
        isinstance(old, T.DecimalType)
        and isinstance(new, T.DecimalType)
        and old.scale == new.scale
        and new.precision > old.precision
    )


@dataclass(frozen=True)
class SchemaPlan:
    """The columns a run reads and writes, and the lake changes that make room for them."""

    table: TableSpec
    add: tuple[ColumnSpec, ...]
    widen: tuple[ColumnSpec, ...]
    # Each file's key → the table columns it lacks.
    missing: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    @property
    def changes_lake(self) -> bool:
        return bool(self.add or self.widen)

    def notices(self, lake_table: str) -> list[Notice]:
        """What the run announces of the schema: columns added and widened in place, and files lacking a column."""
        notices = [
            Notice("column-added", lake_table, f"column {c.name} ({c.type}) added in place; earlier rows hold NULL")
            for c in self.add
        ]
        notices += [
            Notice("type-widened", lake_table, f"column {c.name} widened in place to {c.type}") for c in self.widen
        ]
        notices += [
            Notice(
                "column-missing",
                key,
                f"lacks column(s) {', '.join(names)}: NULL in its rows. If the source dropped them, mark them "
                "`dropped: true` in the configuration; otherwise fix the file (docs/bad-input.md)",
            )
            for key, names in self.missing.items()
        ]
        return notices


def plan_schema(
    config: PipelineConfig,
    table: TableSpec,
    layouts: Mapping[str, FileLayout],
    lake: Sequence[T.StructField],
) -> SchemaPlan:
    """The run's table and the lake changes it needs, from the configuration, the files and the lake's schema.

    Spark-free given ``lake``; raises SchemaChangeError for what cannot be followed.
    """
    evolve = config.schema_changes(table) == "evolve"
    named = config.dms.file_format.names_columns(config.dms.add_column_name)
    columns = {c.name: c for c in table.columns}
    for key, layout in layouts.items():
        _follow_file(key, layout, table, columns, evolve)
    _keep_lake_columns(table, lake, columns, named)
    add, widen = [], []
    lake_by_name = {f.name.lower(): f for f in lake}
    for name, spec in list(columns.items()):
        existing = lake_by_name.get(name.lower())
        if existing is None:
            add.append(spec)
            continue
        wanted = lake_type(spec.type)
        if existing.dataType == wanted:
            continue
        if widens(existing.dataType, wanted):
            widen.append(spec)
        elif widens(wanted, existing.dataType) and name not in table.column_names:
            columns[name] = spec.model_copy(update={"type": config_type(existing.dataType)})  # an older file
        elif widens(wanted, existing.dataType):
            raise SchemaChangeError(
                f"{table.name}: column {name!r} is {existing.dataType.simpleString()} in the lake but "
                f"{spec.type} in the configuration: Iceberg cannot narrow a column. Keep "
                f"`type: {config_type(existing.dataType)}` in the configuration (the values still fit), or "
                "reload the table into a lake table configured with the narrower type"
            )
        else:
            raise SchemaChangeError(
                f"{table.name}: column {name!r} is {existing.dataType.simpleString()} in the lake but {spec.type} "
                "in the configuration; Iceberg cannot change that type in place. Restore the type in the "
                "configuration, or reload the table into a lake table configured with the new type"
            )
    effective = table.model_copy(update={"columns": list(columns.values())})
    # Files from before a column the batch adds lack it, as they should.
    expected = [c for c in effective.columns if not c.dropped and c not in add]
    missing = {
        key: lacking
        for key, layout in layouts.items()
        if (lacking := tuple(c.name for c in expected if layout.field(c.name) is None))
    }
    return SchemaPlan(effective, tuple(add), tuple(widen), missing)


def _follow_file(key: str, layout: FileLayout, table: TableSpec, columns: dict[str, ColumnSpec], evolve: bool) -> None:
    """Add a named file's new columns and widened types to ``columns``, or refuse them."""
    for name in layout.unknown(table):
        if name in columns:
            continue
        found = layout.type_of(name) or "string"
        source = layout.field(name) or name
        if not evolve:
            raise SchemaChangeError(
                f"{key}: new column {source!r} ({found}) is not in the configuration of {table.name}, whose "
                "schema_changes is 'refuse'. Add it at the end of its `columns` "
                f"(- {{name: {source}, type: {found}}}) or set schema_changes: evolve, then run the file again"
            )
        log.info("%s: %s brings new column %s (%s)", table.name, key, name, found)
        columns[name] = ColumnSpec(name=name, source=source, type=found)
    for name in table.column_names:
        found_type = layout.type_of(name)
        if found_type is None:
            continue
        configured = columns[name]
        old, new = lake_type(configured.type), lake_type(found_type)
        if old == new or widens(new, old):
            continue  # the same, or an older, narrower file
        if widens(old, new) and evolve:
            columns[name] = configured.model_copy(update={"type": found_type})
        elif widens(old, new):
            raise SchemaChangeError(
                f"{key}: column {name!r} of {table.name} is {found_type} in this file but "
                f"{configured.type} in the configuration, whose schema_changes is 'refuse'. Declare "
                f"`type: {found_type}` for it or set schema_changes: evolve, then run the file again"
            )
        elif isinstance(old, _NUMERIC) or isinstance(new, _NUMERIC):
            raise SchemaChangeError(
                f"{key}: column {name!r} of {table.name} changed type from {configured.type} to {found_type}; "
                "Iceberg cannot change that in place. Reload the table into a lake table configured with "
                "the new type (docs/schema-changes.md)"
            )


def _keep_lake_columns(
    table: TableSpec, lake: Sequence[T.StructField], columns: dict[str, ColumnSpec], named: bool
) -> None:
    """Columns the lake gained earlier stay (NULL in new rows); by position (headerless CSV) they cannot."""
    config_names = {n.lower() for n in table.column_names}
    extra_in_lake = [f for f in lake if f.name.lower() not in config_names]
    if extra_in_lake and not named:
        lake_names = {f.name.lower() for f in lake}
        new_in_config = [c for c in table.column_names if c.lower() not in lake_names]
        gone = [f.name for f in extra_in_lake]
        hint = f" and {new_in_config} are new: a rename? A rename cannot be followed" if new_in_config else ""
        raise SchemaChangeError(
            f"{table.name}: the lake table has column(s) {gone} that the configuration no longer lists{hint}. "
            "Headerless CSV is read by position, so keep every column the lake has in `columns`, in order; "
            "mark a column the source dropped `dropped: true`. To rename, reload the table into a new lake "
            "table (docs/schema-changes.md)"
        )
    for field in extra_in_lake:
        name = lake_name(field.name)
        if name not in columns:
            columns[name] = ColumnSpec(name=name, source=field.name, type=config_type(field.dataType))


def lake_fields(lake: Lake, table_name: str) -> list[T.StructField]:
    return list(lake.spark.table(lake.location.named(table_name)).schema.fields)


def align_lake_table(
    lake: Lake,
    table_name: str,
    columns: Sequence[ColumnSpec],
    fields: Sequence[T.StructField] | None = None,
) -> list[str]:
    """Alter one lake table (metadata only) so it holds ``columns``: add the missing, widen the narrower.
    ``fields``: the table's columns when the caller has read them already (``lake_fields``).

    Idempotent, so the history table and a concurrent run's table are aligned by the same call; returns
    what it changed.
    """
    fields = lake_fields(lake, table_name) if fields is None else fields
    present = {f.name.lower(): f for f in fields}
    target = lake.location.named(table_name)
    done = []
    for spec in columns:
        wanted = lake_type(spec.type)
        current = present.get(spec.name.lower())
        if current is None:
            added = f"{quote(spec.name)} {wanted.simpleString()} COMMENT {sql_string(source_doc(spec.source))}"
            try:
                lake.spark.sql(f"ALTER TABLE {target} ADD COLUMN {added}")
            except AnalysisException as error:
                if not is_already_exists(error):
                    raise  # a concurrent run adding the same column is fine; anything else is not
            done.append(f"added column {spec.name} {spec.type}")
        elif current.dataType != wanted and widens(current.dataType, wanted):
            lake.spark.sql(f"ALTER TABLE {target} ALTER COLUMN {quote(spec.name)} TYPE {wanted.simpleString()}")
            done.append(f"widened column {spec.name} to {spec.type}")
    if done:
        forget_commit(lake.spark, lake.location.dotted(table_name))  # the columns moved on from the kept commit
    for change in done:
        log.info("%s: %s", table_name, change)
    return done
