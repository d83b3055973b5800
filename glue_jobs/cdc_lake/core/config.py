"""The table configuration: one YAML (or JSON) file shared by the Glue jobs, the Lambda and the CDK app.

Pure Python (pydantic only): the Lambda and the CDK app import this module without Spark.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
import re
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal, cast

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cdc_lake.core.exceptions import ConfigError, UnknownTableError
from cdc_lake.core.formats import FORMATS, DmsFormat, FormatName
from cdc_lake.core.identifiers import lake_name, lake_name_problem
from cdc_lake.core.names import (
    CDC_REPLAY_TIMEOUT_MINUTES,
    FULL_LOAD_TIMEOUT_MINUTES,
    GLUE_VERSION,
    GLUE_VERSION_ENV,
    GLUE_VERSIONS,
    KEEP_SNAPSHOTS,
    LAST_ROUND_MINUTES,
    MAINTENANCE_TIMEOUT_MINUTES,
    RETAIN_DAYS,
    WARM_BATCH_MINUTES,
    WARM_END_GRACE_MINUTES,
    GlueVersion,
)
from cdc_lake.core.run_modes import RUN_MODES, RunMode, RunModeName
from cdc_lake.core.source_types import TYPED_ENGINES, SourceType, accepts, source_type

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")


def _identifier(message: str) -> AfterValidator:
    """A validator for a plain SQL identifier; ``message`` formats the refused value."""

    def check(value: str) -> str:
        if not IDENTIFIER.match(value):
            raise ValueError(message.format(value))
        return value

    return AfterValidator(check)


def _lake(what: str) -> AfterValidator:
    """A validator for a name the lake uses as it is (a database, a table or column override)."""

    def check(value: str) -> str:
        problem = lake_name_problem(value)
        if problem:
            raise ValueError(f"{what} {problem}")
        return value

    return AfterValidator(check)


def _source_problem(name: Any) -> str | None:
    """Why ``name`` cannot be a source column's name as DMS writes it, or None."""
    if not isinstance(name, str) or not name.strip():
        return f"column name {name!r} is empty"
    if any(ord(char) < 32 for char in name):
        return f"column name {name!r} holds a control character"
    return None


# A column DMS adds to every row (its timestamp, the change sequence), named in the configuration.
DmsColumnName = Annotated[str, _identifier("{!r} is not a plain column name (letters, digits, _ and $)")]

DECIMAL_TYPE = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
VARCHAR_TYPE = re.compile(r"^(?:var)?char\(\s*\d+\s*\)$")
SIMPLE_TYPES = {
    "boolean", "tinyint", "smallint", "int", "integer", "bigint", "float", "double",
    "string", "date", "timestamp", "timestamp_ntz", "timestamp_ltz", "binary", "timestamp_offset",
}  # fmt: skip
PARTITION_TRANSFORM = re.compile(
    r"^(?:(?P<col>[A-Za-z_][A-Za-z0-9_$]*)"
    r"|(?P<fn>years|months|days|hours)\(\s*(?P<tcol>[A-Za-z_][A-Za-z0-9_$]*)\s*\)"
    r"|(?P<nfn>bucket|truncate)\(\s*(?P<n>\d+)\s*,\s*(?P<ncol>[A-Za-z_][A-Za-z0-9_$]*)\s*\))$"
)


def _column_lake_name(column: Mapping[str, Any]) -> str:
    """The lake name of a configured column (``name``: the source's), its ``lake_name`` when set."""
    override = column.get("lake_name")
    return str(override) if override is not None else lake_name(column["name"])


def _partition_in_lake(transform: Any, lake_of: Mapping[str, str]) -> Any:
    """A partition transform whose column is named by its source name, named by its lake name."""
    match = PARTITION_TRANSFORM.match(transform.strip()) if isinstance(transform, str) else None
    if not match:
        return transform  # refused with the reason by TableSpec
    group = next(g for g in ("col", "tcol", "ncol") if match[g])
    start, end = match.span(group)
    text = transform.strip()
    return text[:start] + lake_of.get(match[group], match[group]) + text[end:]


def normalize_type(type_name: str) -> str:
    """Return the canonical spelling of a supported column type, or raise ValueError."""
    text = type_name.strip().lower()
    if text in SIMPLE_TYPES:
        return {"integer": "int", "timestamp_ntz": "timestamp"}.get(text, text)
    if VARCHAR_TYPE.match(text):
        return "string"
    match = DECIMAL_TYPE.match(text)
    if match:
        precision, scale = int(match[1]), int(match[2])
        if not 1 <= precision <= 38 or scale > precision:
            raise ValueError(f"decimal({precision},{scale}) is out of range: precision 1..38, scale <= precision")
        return f"decimal({precision},{scale})"
    raise ValueError(f"unsupported type {type_name!r}; use one of {sorted(SIMPLE_TYPES)}, decimal(p,s) or varchar(n)")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BeforeImage(_Model):
    """DMS's table-mapping rule ``add-before-image-columns``: the old key of a row whose key an UPDATE changed."""

    column_prefix: Annotated[
        str, _identifier("column_prefix {!r} must be letters, digits, _ and $, not starting with a digit")
    ] = "before_"
    column_filter: Literal["pk-only"] = Field(
        default="pk-only", description="Only the key columns: all a replay needs to remove the old row"
    )


# The stack's sourceEngine values (infra/source_engines.py holds each one's facts).
SourceEngine = Literal["mysql", "aurora", "mariadb", "postgres", "aurora-postgresql", "oracle", "sqlserver"]


class DmsSettings(_Model):
    """How the DMS S3 target endpoint writes files; the CDK app sets the endpoint from these."""

    format: FormatName = "csv"
    bucket_folder: str = Field(default="", description="DMS BucketFolder: prefix before <schema>/<table>/")
    timestamp_column: DmsColumnName | None = Field(default=None, description="DMS TimestampColumnName")
    include_op_for_full_load: bool = False
    csv_null_value: str = Field(
        default="",
        description="DMS CsvNullValue; empty (DMS's default) = an unquoted empty field is NULL, a quoted \"\" is ''",
    )
    csv_delimiter: str = ","
    add_column_name: bool = Field(default=False, description="CSV files carry a header row")
    compression: Literal["none", "gzip"] = "none"
    date_partition_enabled: bool = False
    date_partition_sequence: Literal["YYYYMMDD", "YYYYMMDDHH", "YYYYMM", "MMYYYYDD", "DDMMYYYY"] = "YYYYMMDD"
    date_partition_delimiter: Literal["SLASH", "DASH", "UNDERSCORE", "NONE"] = "SLASH"
    change_sequence_column: DmsColumnName | None = Field(
        default=None, description="Column added by a DMS transformation rule from $AR_H_CHANGE_SEQ; orders CDC rows"
    )
    before_image: BeforeImage | None = Field(
        default=None, description="Before-image key columns DMS appends to every row (UPDATEs of key columns)"
    )
    cdc_inserts_only: bool = Field(default=False, description="DMS CdcInsertsOnly: no UPDATEs or DELETEs captured")
    cdc_inserts_and_updates: bool = Field(default=False, description="DMS CdcInsertsAndUpdates: no DELETEs captured")
    source_engine: SourceEngine | None = Field(
        default=None,
        description="The engine DMS reads from; with oracle or sqlserver, each column's source_type is checked "
        "against DMS's type mapping (docs/source-types.md)",
    )
    cdc_max_batch_interval: int = Field(default=60, ge=1)
    cdc_min_file_size: int = Field(default=32000, ge=1)

    @field_validator("bucket_folder")
    @classmethod
    def _strip_slashes(cls, value: str) -> str:
        return value.strip("/")

    @model_validator(mode="after")
    def _cdc_modes(self) -> DmsSettings:
        if self.cdc_inserts_only and self.cdc_inserts_and_updates:
            raise ValueError("cdc_inserts_only and cdc_inserts_and_updates exclude each other (as in DMS)")
        return self

    @property
    def file_format(self) -> DmsFormat:
        return FORMATS[self.format]

    def source_mapping(self, column: ColumnSpec) -> SourceType | None:
        """How DMS writes ``column`` by its ``source_type``, from an Oracle or SQL Server source; None otherwise,
        and for a type DMS's mapping does not name."""
        if self.source_engine not in TYPED_ENGINES or column.source_type is None:
            return None
        return source_type(self.source_engine, column.source_type)

    @property
    def cdc_has_op(self) -> bool:
        """Whether CDC rows carry ``Op``: DMS leaves it out in the insert(/update)-only modes unless
        IncludeOpForFullLoad is set."""
        return self.include_op_for_full_load or not (self.cdc_inserts_only or self.cdc_inserts_and_updates)

    def before_image_columns(self, table: TableSpec) -> list[str]:
        """The before-image columns of ``table`` in file order (after every other column), or none."""
        if self.before_image is None:
            return []
        return [self.before_image.column_prefix + table.source_name(key) for key in table.primary_key]

    @field_validator("csv_delimiter")
    @classmethod
    def _one_char(cls, value: str) -> str:
        if len(value) != 1 or value in {'"', "\n", "\r"}:
            raise ValueError("csv_delimiter must be one character other than a quote or a line break")
        return value


SchemaChanges = Literal["evolve", "refuse"]
# auto: copy-on-write while a table is small (``LakeSettings.copy_on_write_up_to_mb``), merge-on-read above it.
WriteMode = Literal["auto", "merge-on-read", "copy-on-write"]


class ColumnSpec(_Model):
    """A source column and the lake column that holds it.

    In the configuration ``name`` is the source's name, as DMS writes it (a CSV header, a Parquet field), and
    ``lake_name`` may set the lake's name; otherwise it is ``identifiers.lake_name`` of the source's. Validated,
    ``name`` is the lake's name, which the engine uses everywhere, and ``source`` the source's, which only what
    reads DMS files or the source database uses.
    """

    name: Annotated[str, _lake("column")]
    source: str
    type: str
    nullable: bool = True
    dropped: bool = Field(
        default=False,
        description="The source dropped this column: files written after the drop lack it; the lake keeps it",
    )
    source_type: str | None = Field(
        default=None, description="The column's type at the source, e.g. NUMBER(10,2) or DATETIMEOFFSET(7)"
    )

    @model_validator(mode="before")
    @classmethod
    def _names(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "source" in data:
            return data  # already validated once: names are the lake's (a dumped configuration)
        source, override = data.get("name"), data.get("lake_name")
        problem = _source_problem(source)
        if problem:
            raise ValueError(problem)
        if override is not None and (problem := lake_name_problem(str(override))):
            raise ValueError(f"lake_name of {source!r}: {problem}")
        named = {k: v for k, v in data.items() if k != "lake_name"}
        return named | {"source": source, "name": _column_lake_name(data)}

    @field_validator("type")
    @classmethod
    def _type(cls, value: str) -> str:
        return normalize_type(value)


class TableSpec(_Model):
    """A source table and its lake table. ``primary_key`` and ``partition_by`` may name columns by the source's
    name or the lake's; validated, they hold the lake's."""

    name: str = Field(description="<schema>.<table> exactly as DMS names the folders")
    primary_key: list[str] = Field(min_length=1)
    columns: list[ColumnSpec] = Field(min_length=1)
    partition_by: list[str] = Field(default_factory=list)
    target: Annotated[str, _lake("target")] | None = Field(
        default=None, description="Lake table name; default the lake name of <schema>_<table>"
    )
    history: bool = Field(default=False, description="Keep an SCD2 <target>_history companion table")
    schema_changes: SchemaChanges | None = Field(
        default=None, description="evolve or refuse this table's schema changes; default: lake.schema_changes"
    )
    write_mode: WriteMode | None = Field(default=None, description="This table's write mode; default: lake.write_mode")
    on_bad_rows: Literal["refuse", "quarantine"] = Field(
        default="refuse",
        description="refuse: a bad row refuses its batch; quarantine: rows whose key is known go to <target>_rejects, "
        "with every later change of their keys, until `cdc-lake rejects replay` (docs/bad-input.md#quarantine)",
    )

    @model_validator(mode="before")
    @classmethod
    def _lake_references(cls, data: Any) -> Any:
        """Key and partition columns named by their source names, as the file has them, turned to lake names."""
        columns = data.get("columns") if isinstance(data, dict) else None
        if not isinstance(columns, list) or not all(isinstance(c, dict) and "source" not in c for c in columns):
            return data
        lake_of: dict[str, str] = {}
        for column in columns:
            if not _source_problem(column.get("name")):
                lake_of.setdefault(column["name"], _column_lake_name(column))
        data = dict(data)
        if isinstance(data.get("primary_key"), list):
            data["primary_key"] = [lake_of.get(k, k) if isinstance(k, str) else k for k in data["primary_key"]]
        if isinstance(data.get("partition_by"), list):
            data["partition_by"] = [_partition_in_lake(t, lake_of) for t in data["partition_by"]]
        return data

    @field_validator("name")
    @classmethod
    def _qualified(cls, value: str) -> str:
        parts = value.split(".")
        if len(parts) != 2 or not all(parts) or any("/" in p for p in parts):
            raise ValueError(f"table name {value!r} must be <schema>.<table>")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> TableSpec:
        names = [c.name for c in self.columns]
        sources = [c.source for c in self.columns]
        twice = sorted({s for s in sources if sources.count(s) > 1})
        if twice:
            raise ValueError(f"duplicate column(s) {twice}")
        for lake in sorted({n for n in names if names.count(n) > 1}):
            same = [c.source for c in self.columns if c.name == lake]
            raise ValueError(
                f"columns {' and '.join(repr(s) for s in same)} both map to the lake column {lake!r} (Glue and "
                f"Athena take lower-case names only): set `lake_name` on one of them, e.g. "
                f"{{name: {same[-1]!r}, lake_name: {lake}_2, ...}}"
            )
        missing = [k for k in self.primary_key if k not in names]
        if missing:
            raise ValueError(f"primary_key column(s) {missing} are not among the columns {sources}")
        if len(set(self.primary_key)) != len(self.primary_key):
            raise ValueError("primary_key lists a column twice")
        dropped_keys = [c.name for c in self.columns if c.dropped and c.name in self.primary_key]
        if dropped_keys:
            raise ValueError(f"primary_key column(s) {dropped_keys} cannot be dropped; reload the table instead")
        for transform in self.partition_by:
            match = PARTITION_TRANSFORM.match(transform.strip())
            if not match:
                raise ValueError(
                    f"partition_by {transform!r} is not an Iceberg transform: column, years/months/days/hours(col), "
                    "bucket(N, col) or truncate(N, col)"
                )
            column = match["col"] or match["tcol"] or match["ncol"]
            if column not in names:
                raise ValueError(f"partition_by {transform!r} names unknown column {column!r}")
        if self.on_bad_rows == "quarantine" and self.history:
            raise ValueError(
                "on_bad_rows: quarantine cannot be combined with history: true (a replayed row's versions would reach "
                "the history table after later ones); keep history with on_bad_rows: refuse"
            )
        if self.target is None and (problem := lake_name_problem(self.default_target)):
            raise ValueError(f"{self.name!r} does not make a lake table name ({problem}); set target")
        return self

    @property
    def schema_name(self) -> str:
        return self.name.split(".")[0]

    @property
    def table_name(self) -> str:
        return self.name.split(".")[1]

    @property
    def default_target(self) -> str:
        return lake_name(f"{self.schema_name}_{self.table_name}")

    @property
    def legacy_target(self) -> str | None:
        """The lake table's name before lake names were mapped (``<schema>_<table>`` as DMS spells it), when it
        differs: a local lake made then may hold it."""
        legacy = f"{self.schema_name}_{self.table_name}"
        return legacy if self.target is None and legacy != self.default_target else None

    @property
    def lake_table(self) -> str:
        """Table name inside the lake database."""
        return self.target or self.default_target

    @property
    def column_names(self) -> list[str]:
        """The lake's column names."""
        return [c.name for c in self.columns]

    @property
    def source_column_names(self) -> list[str]:
        """The columns as the source, and so DMS, names them."""
        return [c.source for c in self.columns]

    def source_name(self, column: str) -> str:
        """The source's name of the lake column ``column`` (itself for a column the configuration lacks)."""
        return next((c.source for c in self.columns if c.name == column), column)

    @property
    def source_primary_key(self) -> list[str]:
        return [self.source_name(k) for k in self.primary_key]

    @property
    def value_columns(self) -> list[str]:
        return [c.name for c in self.columns if c.name not in self.primary_key]


class UpkeepSettings(_Model):
    """Maintenance a replay run does itself once it has committed, when the table's own state calls for it: a busy
    table is compacted and expired often, an idle one never (docs/deploy.md#table-maintenance)."""

    compact_at_delete_files: int = Field(
        default=16,
        ge=0,
        description="Compact (rewrite data files with deletes and small ones, merge delete files, rewrite "
        "manifests) once the table holds this many delete files; 0: only the maintenance job compacts",
    )
    compact_every_commits: int = Field(
        default=50,
        ge=0,
        description="Compact after this many commits since the last compaction, whatever the delete files; 0: never "
        "by count",
    )
    keep_snapshots: int = Field(
        default=KEEP_SNAPSHOTS,
        ge=1,
        description="Expire snapshots beyond the newest this many, even younger than keep_days: every commit reads "
        "and rewrites metadata.json, which lists them all",
    )
    keep_days: int = Field(
        default=RETAIN_DAYS,
        ge=0,
        description="Expire snapshots older than this (the rollback window, within keep_snapshots)",
    )


class LakeSettings(_Model):
    database: Annotated[str, _lake("database")] = Field(
        default="cdc_lake", description="Glue database / Iceberg namespace of the lake tables"
    )
    write_mode: WriteMode = Field(
        default="auto",
        description="How a batch changes the rows of a lake table. auto: copy-on-write while the table's files hold "
        "at most copy_on_write_up_to_mb (a batch rewrites the few files it touches; a small batch is a row delta "
        "all the same, see row_delta_keys), merge-on-read above it (a batch writes delete files, which upkeep "
        "compacts); copy-on-write: every batch rewrites, for readers that must never apply a delete file; the replay "
        "switches a table as it crosses the size (docs/performance.md#write-mode)",
    )
    copy_on_write_up_to_mb: float = Field(
        default=8,
        ge=0,
        description="auto: the size of a table's files up to which it is written copy-on-write",
    )
    schema_changes: SchemaChanges = Field(
        default="evolve",
        description="evolve: files' new columns and widenings alter the lake tables; refuse: only configured ones do",
    )
    commit_retries: int = Field(default=4, ge=0, le=20)
    split_merge_from_rows: int = Field(
        default=1_000_000,
        ge=0,
        description="From this many rows in a lake table, a batch is merged as a delete of its keys (broadcast to "
        "the scan) and an append of their new rows, rather than one MERGE whose outer join shuffles every scanned "
        "key; below it the MERGE's shuffle costs less than the second write (docs/performance.md)",
    )
    small_batch_mb: float = Field(
        default=16,
        ge=0,
        description="A batch whose change files hold at most this much is read, checked, counted and reduced in one "
        "task, its changed keys collected to the driver as the MERGE's source: no shuffle and no second read, where "
        "a small batch's cost is Spark's per-job overhead, not its rows (docs/performance.md#small-batches)",
    )
    row_delta_keys: int = Field(
        default=10_000,
        ge=0,
        description="A small batch of at most this many keys into an unpartitioned table written merge-on-read, or "
        "copy-on-write by write_mode auto, is committed through Iceberg's RowDelta (its keys' rows found in the "
        "run's key index, or by one Spark read in a table too large to index; one data file and one delete file "
        "written in the driver, one metadata commit), not Spark's MERGE; "
        "0: always the MERGE (docs/performance.md#small-batches)",
    )
    upkeep: UpkeepSettings = Field(default_factory=UpkeepSettings)
    glue_version: GlueVersion = Field(
        default=GLUE_VERSION,
        description="The AWS Glue version of the stack's jobs and of the local runtime; GLUE_VERSION overrides it "
        "for make targets (glue_version())",
    )

    @field_validator("glue_version", mode="before")
    @classmethod
    def _version_text(cls, value: Any) -> Any:
        # YAML reads an unquoted 6.0 as a number.
        return str(value) if isinstance(value, float) else value


class WarmSettings(_Model):
    """``runs.mode: warm``: long-lived replay runs on Glue's smallest workers (G.025X, a ``gluestreaming`` job),
    each owning a fixed share of the tables (docs/runs.md#warm-runs-runsmode-warm)."""

    tables_per_job: int = Field(
        default=100, ge=1, le=1000, description="Tables one warm run owns: the stack makes ceil(tables / this) shards"
    )
    quiet_seconds: int = Field(
        default=600, ge=0, description="A warm run stops after this long without a commit; a new file starts the next"
    )
    handover_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1,
        description="A table with more pending bytes than this goes to the G.1X cdc_replay job, as do LOAD files",
    )
    lifetime_hours: int = Field(
        default=24, ge=1, le=160, description="A warm run ends after this long; the next landed file starts another"
    )
    workers: int = Field(default=2, ge=2, le=20, description="G.025X workers of each warm run")
    parallel_tables: int = Field(
        default=8,
        ge=1,
        le=64,
        description="Tables one warm run applies at once; more than runs.parallel_tables because a warm small batch "
        "mostly waits on Glue and S3 round trips, which overlap, while its CPU is a fraction of it "
        "(docs/cost-simulation.md#warm-runs-runsmode-warm)",
    )
    round_seconds: float = Field(
        default=20,
        ge=0,
        le=600,
        description="A warm run starts a round, which lists each of its tables, at most this often: S3 bills each "
        "listing, and unpaced rounds of fast batches list 100 tables every few seconds (41 M listings a month, "
        "$204, measured); a landed file waits up to this long more for its round (docs/runs.md)",
    )
    sweep_seconds: int = Field(
        default=300,
        ge=1,
        le=3600,
        description="A warm run told by its shard's event queue which tables a file landed for lists only those, and "
        "every table at least this often: a file whose event was lost waits at most this long more (docs/runs.md)",
    )
    commit_interval_seconds: int = Field(
        default=0,
        ge=0,
        le=3600,
        description="The shortest time between two commits of one table by a warm run: a landed file waits up to this "
        "long more, and each table's commits, listings and requests come once an interval instead of once a landed "
        "file; at most quiet_seconds (docs/runs.md#freshness-you-can-buy)",
    )

    @model_validator(mode="after")
    def _rests_within_quiet_time(self) -> WarmSettings:
        if self.commit_interval_seconds > self.quiet_seconds:
            raise ValueError(
                f"runs.warm.commit_interval_seconds ({self.commit_interval_seconds}) is longer than "
                f"runs.warm.quiet_seconds ({self.quiet_seconds}): a run would stop while a table waits out its "
                "interval. Raise quiet_seconds to at least the interval"
            )
        return self

    def shards(self, tables: int) -> int:
        """How many warm runs share ``tables`` tables."""
        return max(1, math.ceil(tables / self.tables_per_job))

    @property
    def live_span(self) -> dt.timedelta:
        """No warm run is live longer after its start (Glue's ``StartedOn``): its lifetime, the batch it may finish
        past it (``WARM_BATCH_MINUTES``), and an hour for a run's queueing and start. Who looks for a shard's live
        runs reads Glue's runs back to this far, not further (``core.shards.runs_since``)."""
        return dt.timedelta(hours=self.lifetime_hours, minutes=WARM_BATCH_MINUTES + 60)


class RunSettings(_Model):
    """How job runs follow the data rather than the files (docs/runs.md).

    coalesced: the Lambda starts a run only when no run of the job is still waiting or starting (such a
    run lists the bucket after the new file landed), and each run applies everything landed for every
    table, several tables at once, round after round while files keep landing, up to its time budget.
    per_file: one run per file, applying its table's files up to it (the original behaviour).
    warm: the Lambda starts, for CDC files, the warm run of the file's shard unless it is live (``warm``);
    LOAD files and large backlogs go to the G.1X jobs, each run for one table.
    """

    mode: RunModeName = "coalesced"
    parallel_tables: int = Field(default=4, ge=1, le=64, description="Tables applied at once within one run")
    time_budget_seconds: int = Field(
        default=900, ge=0, description="A run starts no new round after this; files landing later start the next run"
    )
    idle_seconds: int = Field(
        default=30, ge=0, description="A run waits this long for new files after a round that found none"
    )
    poll_seconds: float = Field(default=5.0, gt=0, description="Pause between rounds while waiting for files")
    workers: int = Field(default=2, ge=2, le=299, description="G.1X workers of the deployed replay job")
    lag_alarm_seconds: int = Field(
        default=900, ge=60, description="Alarm when a commit lands this long after its oldest file landed"
    )
    warm: WarmSettings = Field(default_factory=WarmSettings)

    @model_validator(mode="after")
    def _alarm_past_the_interval(self) -> RunSettings:
        rest = self.warm.commit_interval_seconds + self.warm.round_seconds
        if self.mode == "warm" and self.warm.commit_interval_seconds and self.lag_alarm_seconds <= rest:
            raise ValueError(
                f"runs.lag_alarm_seconds ({self.lag_alarm_seconds}) is within what runs.warm.commit_interval_seconds "
                f"and round_seconds let a file wait on purpose ({rest:g} s): the alarm would fire on every interval. "
                "Raise lag_alarm_seconds above it"
            )
        return self

    @property
    def run_mode(self) -> RunMode:
        """The mode's row in ``core.run_modes``: what every reader of the mode reads."""
        return RUN_MODES[self.mode]

    @property
    def replay_timeout_minutes(self) -> int:
        """The replay job's timeout: a coalesced run's time budget and its last round."""
        if not self.run_mode.every_table:
            return CDC_REPLAY_TIMEOUT_MINUTES
        return max(CDC_REPLAY_TIMEOUT_MINUTES, math.ceil(self.time_budget_seconds / 60) + LAST_ROUND_MINUTES)

    @property
    def longest_run(self) -> dt.timedelta:
        """No commit of any job lasts longer: a run branch older than this is a dead run's. A warm run lives for
        days, but ends itself when one of its batches outlives ``WARM_BATCH_MINUTES`` (engine.runs.warm), within
        ``WARM_END_GRACE_MINUTES``, so its lifetime does not count: only that bound does."""
        minutes = max(FULL_LOAD_TIMEOUT_MINUTES, MAINTENANCE_TIMEOUT_MINUTES, self.replay_timeout_minutes)
        return dt.timedelta(minutes=max(minutes, WARM_BATCH_MINUTES + WARM_END_GRACE_MINUTES))


class PipelineConfig(_Model):
    dms: DmsSettings = Field(default_factory=DmsSettings)
    lake: LakeSettings = Field(default_factory=LakeSettings)
    runs: RunSettings = Field(default_factory=RunSettings)
    tables: list[TableSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> PipelineConfig:
        names = [t.name for t in self.tables]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"table name(s) {twice} appear more than once")
        lake_tables = [t.lake_table for t in self.tables]
        for lake in sorted({n for n in lake_tables if lake_tables.count(n) > 1}):
            same = [t.name for t in self.tables if t.lake_table == lake]
            raise ValueError(
                f"tables {' and '.join(repr(s) for s in same)} both map to the lake table {lake!r} (Glue and Athena "
                f"take lower-case names only): set `target` on one of them, e.g. target: {lake}_2"
            )
        reserved = {c for c in (self.dms.timestamp_column, self.dms.change_sequence_column) if c}
        for table in self.tables:
            clash = reserved.union(self.dms.before_image_columns(table)).intersection(table.source_column_names)
            if clash:
                raise ValueError(f"table {table.name}: column(s) {sorted(clash)} clash with the DMS extra columns")
            self._check_source_types(table)
        return self

    @property
    def version(self) -> str:
        """What tells one deployment's configuration from another's: a digest of every setting, defaults included
        (a change of this code's defaults is a new configuration too). A warm run lives for a day; the Lambda counts
        on a run only of its own version, and a run ends once a run of another version asks for its shard
        (``engine.runs.warm``). Not cached: ``model_copy`` would carry a cached digest into a changed copy."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:16]

    def source_type_notes(self, table: TableSpec) -> list[str]:
        """What DMS does not carry exactly into ``table``'s columns, one line per column with a ``source_type`` whose
        value arrives as NULL, cut, rounded or as DMS's text (``check-config`` shows them)."""
        notes = []
        for column in table.columns:
            mapped = self.dms.source_mapping(column)
            if mapped is not None and mapped.note is not None:
                notes.append(f"{column.source} ({column.source_type} -> {mapped.dms} -> {column.type}): {mapped.note}")
        return notes

    def _check_source_types(self, table: TableSpec) -> None:
        """Each ``source_type`` of an Oracle or SQL Server source against what DMS writes for it."""
        engine, file_format = self.dms.source_engine, self.dms.format
        if engine not in TYPED_ENGINES:
            return
        for column in table.columns:
            if column.source_type is None:
                continue
            where = f"table {table.name}, column {column.source} ({column.source_type})"
            mapped = self.dms.source_mapping(column)
            if mapped is None:
                raise ValueError(
                    f"{where}: not a {engine} type DMS's mapping names; write it as the source's catalog shows it "
                    "(e.g. NUMBER(10,2)), or leave source_type out"
                )
            if mapped.fate == "unsupported":
                raise ValueError(
                    f"{where}: DMS does not replicate this type; leave the column out of the task "
                    "(a table-mapping remove-column rule) and of this table"
                )
            if mapped.fate == "null" and not column.nullable:
                raise ValueError(f"{where}: DMS replicates this type as NULL; the column cannot be nullable: false")
            if not accepts(mapped, file_format, column.type):
                raise ValueError(
                    f"{where}: DMS writes it as {mapped.dms} to {file_format} files, which {column.type} does not "
                    f"keep; configure type: {mapped.lake(file_format)}"
                )

    @cached_property
    def _by_name(self) -> dict[str, TableSpec]:
        return {t.name: t for t in self.tables}

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> PipelineConfig:
        """pydantic's copy, without the copied table lookup: a copy given other ``tables`` must look them up."""
        copied = super().model_copy(update=update, deep=deep)
        copied.__dict__.pop("_by_name", None)
        return copied

    def table(self, name: str) -> TableSpec:
        """The table named <schema>.<table>; raises UnknownTableError naming the configured ones."""
        try:
            return self._by_name[name]
        except KeyError:
            raise UnknownTableError(
                f"table {name!r} is not in the configuration (configured: {', '.join(sorted(self._by_name))})"
            ) from None

    def schema_changes(self, table: TableSpec) -> SchemaChanges:
        return table.schema_changes or self.lake.schema_changes

    def write_mode(self, table: TableSpec) -> WriteMode:
        return table.write_mode or self.lake.write_mode

    def has_table(self, name: str) -> bool:
        return name in self._by_name

    def table_prefix(self, table: TableSpec) -> str:
        """Key prefix under which DMS writes this table's files."""
        folder = f"{self.dms.bucket_folder}/" if self.dms.bucket_folder else ""
        return f"{folder}{table.schema_name}/{table.table_name}/"


def glue_version(config: PipelineConfig, environ: Mapping[str, str] | None = None) -> GlueVersion:
    """The Glue version in force: ``GLUE_VERSION`` from the environment when set (``make test GLUE_VERSION=6.0``
    switches a whole make target without editing the file), else ``lake.glue_version``. A value that is no
    supported version is refused rather than ignored, so a typo never runs the other runtime unnoticed."""
    override = (os.environ if environ is None else environ).get(GLUE_VERSION_ENV, "").strip()
    if not override:
        return config.lake.glue_version
    if override not in GLUE_VERSIONS:
        raise ConfigError(
            f"{GLUE_VERSION_ENV}={override!r} is not a Glue version the stack runs: use one of "
            f"{', '.join(GLUE_VERSIONS)}, or unset it to follow lake.glue_version"
        )
    return cast(GlueVersion, override)


def parse_config(data: Any, source: str = "<config>") -> PipelineConfig:
    """Validate already-parsed configuration data; errors name the offending field."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping with 'tables', got {type(data).__name__}")
    try:
        return PipelineConfig.model_validate(data)
    except ValidationError as error:
        lines = []
        for problem in error.errors():
            location = _describe_location(data, problem["loc"])
            lines.append(f"  {location}: {problem['msg']}")
        raise ConfigError(f"{source}: invalid table configuration:\n" + "\n".join(lines)) from None


def parse_config_text(text: str, source: str = "<config>") -> PipelineConfig:
    """Parse YAML or JSON text (JSON is tried first so the Lambda needs no YAML library)."""
    try:
        data = json.loads(text)
    except ValueError:
        try:
            import yaml
        except ImportError as missing:  # pragma: no cover - only where PyYAML is absent
            raise ConfigError(f"{source}: YAML needs PyYAML; ship the configuration as JSON instead") from missing
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise ConfigError(f"{source}: not valid YAML: {error}") from None
    return parse_config(data, source)


def load_config(path: str | Path) -> PipelineConfig:
    """Read and validate a configuration file (YAML or JSON)."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"cannot read configuration {file}: {error.strerror or error}") from None
    return parse_config_text(text, str(file))


def load_config_uri(uri: str, *, s3_client: Any = None, label: str = "") -> PipelineConfig:
    """Read and validate the configuration at a local path (YAML or JSON) or an ``s3://bucket/key`` URI.

    ``s3_client`` defaults to ``boto3.client("s3")``, built (and boto3 imported) only for an s3:// URI.
    ``label`` names where the URI came from (an environment variable, say) in the message of a malformed URI.
    Every failure is a ConfigError naming the URI.
    """
    if not uri.startswith("s3://"):
        return load_config(uri)
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    if not bucket or not key:
        raise ConfigError(f"{label + '=' if label else ''}{uri!r}: expected s3://bucket/key")
    from botocore.exceptions import ClientError

    if s3_client is None:
        import boto3

        s3_client = boto3.client("s3")
    try:
        body = s3_client.get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as error:
        raise ConfigError(f"cannot read configuration {uri}: {error}") from error
    return parse_config_text(body.decode("utf-8"), uri)


def _describe_location(data: Any, location: tuple[Any, ...]) -> str:
    """Render a pydantic error location, naming tables by their name rather than list index."""
    parts: list[str] = []
    node: Any = data
    for step in location:
        if isinstance(step, int) and isinstance(node, list) and step < len(node):
            item = node[step]
            label = item.get("name") if isinstance(item, dict) else None
            parts.append(f"[{label}]" if label else f"[{step}]")
            node = item
        else:
            parts.append(f".{step}" if parts else str(step))
            node = node.get(step) if isinstance(node, dict) else None
    return "".join(parts) or "configuration"
