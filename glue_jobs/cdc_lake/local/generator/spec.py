"""What to generate (GeneratorSpec) and what was generated (TableResult, GenerationResult)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

DEFAULT_START_TIME = datetime(2025, 3, 1, 12, 0, 0)


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
