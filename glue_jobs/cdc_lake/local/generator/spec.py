"""What to generate (GeneratorSpec) and what was generated (TableResult, GenerationResult)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from cdc_lake.core.config import DECIMAL_TYPE, normalize_type

DEFAULT_START_TIME = datetime(2025, 3, 1, 12, 0, 0)


SchemaChangeKind = Literal["add", "widen", "drop"]
_WIDER_INT = {"tinyint": 0, "smallint": 1, "int": 2, "bigint": 3}


def widens(old: str, new: str) -> bool:
    """Whether a source column of type ``old`` can become ``new`` in place (as Iceberg widens: int→bigint,
    float→double, decimal precision up at the same scale); both in config.normalize_type spelling."""
    if old in _WIDER_INT and new in _WIDER_INT:
        return _WIDER_INT[old] < _WIDER_INT[new]
    if (old, new) == ("float", "double"):
        return True
    old_decimal, new_decimal = DECIMAL_TYPE.match(old), DECIMAL_TYPE.match(new)
    if old_decimal and new_decimal:
        return old_decimal[2] == new_decimal[2] and int(old_decimal[1]) < int(new_decimal[1])
    return False


@dataclass(frozen=True)
class SchemaChange:
    """A DDL on one source table between two CDC files: files up to CDC file ``after_file`` (0-based) have the
    old shape, later ones the new shape.

    The configuration given to ``generate`` is the one after every change, as a user writes it:
    ``add``: ``column`` is configured (added columns last, in order of addition); files before lack it, and
    rows existing at the ALTER stay NULL in it (PostgreSQL ``ADD COLUMN`` without a default) until changed.
    ``widen``: ``column`` is configured with the wide type; files before carry ``from_type`` (values fit it).
    ``drop``: ``column`` is configured ``dropped: true``; files after lack it, and rows written after the drop
    hold NULL in it (UPDATEs carry no value for it), rows not changed since keep their value.
    """

    table: str
    after_file: int
    kind: SchemaChangeKind
    column: str
    from_type: str | None = None

    def __post_init__(self) -> None:
        if self.after_file < 0:
            raise ValueError(f"SchemaChange.after_file must be >= 0, got {self.after_file}")
        if self.kind not in ("add", "widen", "drop"):
            raise ValueError(f"SchemaChange.kind must be add, widen or drop, got {self.kind!r}")
        if (self.kind == "widen") != (self.from_type is not None):
            raise ValueError("SchemaChange.from_type is required for a widen, and only for a widen")
        if self.from_type is not None:
            object.__setattr__(self, "from_type", normalize_type(self.from_type))


@dataclass(frozen=True)
class GeneratorSpec:
    """How much to generate and which DMS behaviours to exercise; defaults make a small source with every edge case."""

    seed: int = 7
    initial_rows: int = 1000
    cdc_files: int = 5
    changes_per_file: int = 200
    load_file_rows: int | None = None
    insert_ratio: float = 0.3
    update_ratio: float = 0.5
    edge_cases: bool = True
    timestamp_ties: bool = True
    cached_changes: int = 20
    boolean_style: Literal["mysql", "postgres"] = "mysql"
    start_time: datetime = DEFAULT_START_TIME
    schema_changes: tuple[SchemaChange, ...] = ()
    key_updates: bool | None = None  # script key UPDATEs; None: when the endpoint writes before-image columns

    def __post_init__(self) -> None:
        for name in ("initial_rows", "cdc_files", "changes_per_file", "cached_changes"):
            if getattr(self, name) < 0:
                raise ValueError(f"GeneratorSpec.{name} must be >= 0, got {getattr(self, name)}")
        if self.load_file_rows is not None and self.load_file_rows < 1:
            raise ValueError(f"GeneratorSpec.load_file_rows must be >= 1 or None, got {self.load_file_rows}")
        ratios_ok = 0 <= self.insert_ratio <= 1 and 0 <= self.update_ratio <= 1
        if not ratios_ok or self.insert_ratio + self.update_ratio > 1:
            raise ValueError("GeneratorSpec insert_ratio and update_ratio must be in [0, 1] and sum to at most 1")
        if self.boolean_style not in ("mysql", "postgres"):
            raise ValueError(f"GeneratorSpec.boolean_style must be 'mysql' or 'postgres', got {self.boolean_style!r}")
        if self.start_time.tzinfo is not None:
            raise ValueError("GeneratorSpec.start_time must be naive (DMS timestamps carry no zone)")


DEFAULT_SPEC = GeneratorSpec()


@dataclass
class TableResult:
    """What was generated for one table; keys are relative to the landing folder, in DMS order."""

    table: str
    load_files: list[str]
    cdc_files: list[str]
    expected_rows: int
    changes: dict[str, int]  # CDC rows written per Op: {"I": .., "U": .., "D": ..}


@dataclass
class GenerationResult:
    landing: Path
    expected: Path
    tables: list[TableResult]
