"""The DMS change-data generator: its files, read back here independently and replayed, must equal its oracle.

Everything below reads the landing folder itself (listing, CSV with the csv module plus a quote-aware
tokenizer, Parquet with pyarrow) and replays with a small reference implementation of the contract.
"""

from __future__ import annotations

import csv
import gzip
import io
import re
import struct
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cdc_lake
from cdc_lake.core.config import ColumnSpec, PipelineConfig, TableSpec, load_config
from cdc_lake.core.dms_files import FileKind, parse_key
from cdc_lake.core.exceptions import ConfigError, UnknownTableError
from cdc_lake.core.formats import FORMATS, DmsFormat
from cdc_lake.core.jsonl import json_row, read_jsonl, sort_key
from cdc_lake.local.generator import (
    GenerationResult,
    GeneratorSpec,
    SchemaChange,
    csv_field,
    generate,
    land_order,
)
from cdc_lake.local.generator.values import double_text, real_text
from tests.support.configs import columns

DEMO = load_config(Path(cdc_lake.__file__).parent / "demo.yaml")
ALL_TYPES: dict[str, Any] = {
    "name": "lab.all_types",
    "primary_key": ["code", "seq_no"],
    "columns": [
        *columns(
            code="varchar(20)", seq_no="smallint", flag="boolean", tiny="tinyint", big="bigint", price="decimal(12,2)",
            rate="decimal(5,5)", weight="double", score="float", born="date", seen_at="timestamp", title="string",
        ),
        {"name": "label", "type": "string", "nullable": False},
    ],
}  # fmt: skip
SMALL = GeneratorSpec(initial_rows=40, cdc_files=3, changes_per_file=60, load_file_rows=4, cached_changes=12)
LOAD_NAME = re.compile(r"^LOAD([0-9A-F]{8})\.(csv|csv\.gz|parquet)$")
CDC_NAME = re.compile(r"^(\d{8})-(\d{9})\.(csv|csv\.gz|parquet)$")
SEQUENCE = re.compile(r"^\d{35}$")


def demo_config_with(extra_tables: list[dict[str, Any]] | None = None, **dms: Any) -> PipelineConfig:
    data = DEMO.model_dump()
    data["dms"].update(dms)
    data["tables"].extend(extra_tables if extra_tables is not None else [ALL_TYPES])
    return PipelineConfig.model_validate(data)


# ---------------------------------------------------------------------------------------------------
# An independent reader and replay
# ---------------------------------------------------------------------------------------------------


@dataclass
class Record:
    file: str
    file_index: int  # position of the file in DMS order (LOAD files first)
    kind: str  # "load" | "cdc"
    op: str
    ts: str  # the DMS timestamp column, '' without one
    seq: str | None
    values: dict[str, Any]
    quoted_empty: list[bool] = field(default_factory=list)  # per empty string value: was it written ""?
    before: dict[str, Any] | None = None  # the before-image key columns, when the row changed its key


def rfc4180(text: str, delimiter: str) -> list[list[tuple[str, bool]]]:
    """Records of (value, was_quoted) fields; the csv module cannot tell a quoted empty field from a bare one."""
    records, position, end = [], 0, len(text)
    while position < end:
        fields = []
        while True:
            if text.startswith('"', position):
                parts, cursor = [], position + 1
                while True:
                    close = text.index('"', cursor)
                    parts.append(text[cursor:close])
                    if text.startswith('"', close + 1):
                        parts.append('"')
                        cursor = close + 2
                        continue
                    position = close + 1
                    break
                fields.append(("".join(parts), True))
            else:
                stop = position
                while stop < end and text[stop] not in (delimiter, "\n"):
                    stop += 1
                fields.append((text[position:stop], False))
                position = stop
            if position >= end or text[position] == "\n":
                position += 1
                break
            assert text[position] == delimiter, f"junk after a quoted field at {position}"
            position += 1
        records.append(fields)
    return records


def typed(text: str, column_type: str, booleans: dict[str, bool]) -> Any:
    if column_type in ("tinyint", "smallint", "int", "bigint"):
        return int(text)
    if column_type.startswith("decimal"):
        return Decimal(text)
    if column_type in ("double", "float"):
        digits = 16 if column_type == "double" else 8
        assert re.fullmatch(rf"[+-]\d\.\d{{{digits}}}e[+-]\d{{2,3}}", text), text
        value = float(text)
        return struct.unpack("<f", struct.pack("<f", value))[0] if column_type == "float" else value
    if column_type == "boolean":
        return booleans[text]
    if column_type == "date":
        return date.fromisoformat(text)
    if column_type == "timestamp":
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}", text), text
        return datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f")
    return text


def table_files(landing: Path, config: PipelineConfig, table: TableSpec) -> tuple[list[str], list[str]]:
    """LOAD and CDC keys of a table from the folder listing, each in DMS order."""
    root = landing / config.table_prefix(table)
    keys = [p.relative_to(landing).as_posix() for p in sorted(root.rglob("*")) if p.is_file()]
    loads = [k for k in keys if LOAD_NAME.match(k.rsplit("/", 1)[-1])]
    cdcs = [k for k in keys if CDC_NAME.match(k.rsplit("/", 1)[-1])]
    assert len(loads) + len(cdcs) == len(keys), f"unexpected files: {sorted(set(keys) - set(loads) - set(cdcs))}"
    loads.sort(key=lambda k: int(LOAD_NAME.match(k.rsplit("/", 1)[-1])[1], 16))  # type: ignore[index]
    cdcs.sort(key=lambda k: k.rsplit("/", 1)[-1])
    return loads, cdcs


@dataclass(frozen=True)
class FileRead:
    """What reading one of a table's files takes: the configuration, the table, whether the file is a CDC file,
    whether a PostgreSQL source wrote its booleans, and the table's columns in the file with their types then."""

    config: PipelineConfig
    table: TableSpec
    cdc: bool
    postgres: bool
    columns: list[ColumnSpec]

    @property
    def with_op(self) -> bool:
        return self.config.dms.cdc_has_op if self.cdc else self.config.dms.include_op_for_full_load


def read_csv_records(path: Path, read: FileRead) -> list[Record]:
    dms, table, columns, cdc = read.config.dms, read.table, read.columns, read.cdc
    booleans = {"true": True, "false": False} if read.postgres else {"1": True, "0": False}
    raw = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
    text = raw.decode("utf-8")
    tokens = rfc4180(text, dms.csv_delimiter)
    via_csv_module = list(csv.reader(io.StringIO(text, newline=""), delimiter=dms.csv_delimiter))
    assert [[value for value, _ in record] for record in tokens] == via_csv_module, path
    with_op = read.with_op
    befores = dms.before_image_columns(table)
    names = [
        *(["Op"] if with_op else []),
        *([dms.timestamp_column] if dms.timestamp_column else []),
        *(c.name for c in columns),
        *([dms.change_sequence_column] if dms.change_sequence_column else []),
        *befores,
    ]
    if dms.add_column_name:
        assert [value for value, _ in tokens[0]] == names, f"{path}: header"
        tokens = tokens[1:]
    records = []
    for fields in tokens:
        assert len(fields) == len(names), f"{path}: {len(fields)} fields, expected {len(names)}"
        by_name = dict(zip(names, fields, strict=True))
        values: dict[str, Any] = {}
        quoted_empty: list[bool] = []
        for column in columns:
            text_value, quoted = by_name[column.name]
            if text_value == dms.csv_null_value and not quoted:
                values[column.name] = None
                continue
            values[column.name] = typed(text_value, column.type, booleans)
            if column.type == "string" and text_value == "":
                quoted_empty.append(quoted)
        key_types = {c.name: c.type for c in table.columns}
        old_key = (
            {
                key: None
                if by_name[name] == (dms.csv_null_value, False)
                else typed(by_name[name][0], key_types[key], {})
                for key, name in zip(table.primary_key, befores, strict=True)
            }
            if befores
            else {}
        )
        records.append(
            Record(
                file=path.name,
                file_index=-1,
                kind="cdc" if cdc else "load",
                op=by_name["Op"][0] if with_op else "I",
                ts=by_name[dms.timestamp_column][0] if dms.timestamp_column else "",
                seq=by_name[dms.change_sequence_column][0] if dms.change_sequence_column else None,
                values=values,
                quoted_empty=quoted_empty,
                before=old_key if any(v is not None for v in old_key.values()) else None,
            )
        )
    return records


def read_parquet_records(path: Path, read: FileRead) -> list[Record]:
    dms, table, cdc, with_op = read.config.dms, read.table, read.cdc, read.with_op
    names = [c.name for c in read.columns]
    schema_names = pq.read_schema(path).names
    assert [n for n in schema_names if n in table.column_names] == names, f"{path}: {schema_names}"
    befores = dict(zip(table.primary_key, dms.before_image_columns(table), strict=True)) if dms.before_image else {}
    records = []
    for row in pq.read_table(path).to_pylist():
        old_key = {key: row[name] for key, name in befores.items()}
        records.append(
            Record(
                file=path.name,
                file_index=-1,
                kind="cdc" if cdc else "load",
                op=row["Op"] if with_op else "I",
                ts=row[dms.timestamp_column] if dms.timestamp_column else "",
                seq=row[dms.change_sequence_column] if dms.change_sequence_column else None,
                values={name: row[name] for name in names},
                before=old_key if any(v is not None for v in old_key.values()) else None,
            )
        )
        assert with_op == ("Op" in row)
    return records


def file_columns(table: TableSpec, changes: tuple[SchemaChange, ...], cdc_index: int) -> list[ColumnSpec]:
    """The columns (and their types then) of the file written after CDC file ``cdc_index - 1`` (-1: LOAD)."""
    done = [c for c in changes if c.table == table.name and c.after_file < cdc_index]
    pending = [c for c in changes if c.table == table.name and c.after_file >= cdc_index]
    absent = {c.column for c in done if c.kind == "drop"} | {c.column for c in pending if c.kind == "add"}
    narrow = {c.column: c.from_type for c in pending if c.kind == "widen"}
    return [
        c.model_copy(update={"type": narrow[c.name]}) if c.name in narrow else c
        for c in table.columns
        if c.name not in absent
    ]


# One per format: a format without its reader fails here, not read as another format.
RECORD_READERS = {"csv": read_csv_records, "parquet": read_parquet_records}


def read_table(
    result: GenerationResult,
    config: PipelineConfig,
    name: str,
    postgres: bool = False,
    changes: tuple[SchemaChange, ...] = (),
) -> list[Record]:
    """All rows of one table, in DMS order: LOAD files by hex counter, CDC files by name, row position."""
    table = config.table(name)
    loads, cdcs = table_files(result.landing, config, table)
    read = RECORD_READERS[config.dms.format]
    records = []
    for index, key in enumerate([*loads, *cdcs]):
        columns = file_columns(table, changes, index - len(loads))
        cdc = index >= len(loads)
        for record in read(result.landing / key, FileRead(config, table, cdc, postgres, columns)):
            record.file_index = index
            records.append(record)
    return records


@dataclass
class Replay:
    state: dict[tuple[Any, ...], dict[str, Any]]
    events: list[tuple[str, tuple[Any, ...]]]  # (what happened, key) for the interesting cases
    history: dict[tuple[Any, ...], list[Record]]


def reference_replay(records: list[Record], table: TableSpec) -> Replay:
    state: dict[tuple[Any, ...], dict[str, Any]] = {}
    events: list[tuple[str, tuple[Any, ...]]] = []
    history: dict[tuple[Any, ...], list[Record]] = defaultdict(list)
    for record in records:
        key = tuple(record.values[k] for k in table.primary_key)
        if record.kind == "cdc" and not history[key]:
            events.append(("first_seen_in_cdc_" + record.op, key))
        if record.op == "D":
            if key not in state:
                events.append(("delete_missing", key))
            state.pop(key, None)
        elif record.before is not None:
            old = tuple(record.before[k] for k in table.primary_key)
            events.append(("key_change" if old in state else "key_change_of_missing", old))
            state.pop(old, None)
            state[key] = record.values
        else:
            if record.op == "I" and key in state and record.kind == "cdc":
                events.append(("insert_existing", key))
            if record.op == "U" and key not in state:
                events.append(("update_missing", key))
            state[key] = record.values
        history[key].append(record)
    return Replay(state, events, history)


def oracle_rows(result: GenerationResult, table: TableSpec) -> list[dict[str, Any]]:
    return read_jsonl(result.expected / f"{table.name}.jsonl")


def as_json(state: dict[tuple[Any, ...], dict[str, Any]], table: TableSpec) -> list[dict[str, Any]]:
    rows = sorted(state.values(), key=lambda row: sort_key(row, table))
    return [json_row(row, table) for row in rows]


# ---------------------------------------------------------------------------------------------------
# Fixtures: one CSV run and one Parquet run with most options on
# ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def csv_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[PipelineConfig, GenerationResult]:
    config = demo_config_with()
    return config, generate(config, tmp_path_factory.mktemp("csv"), SMALL)


@pytest.fixture(scope="module")
def parquet_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[PipelineConfig, GenerationResult]:
    binary_table = {
        "name": "lab.blobs",
        "primary_key": ["blob_id"],
        "columns": [{"name": "blob_id", "type": "int"}, {"name": "payload", "type": "binary"}],
    }
    config = demo_config_with(
        [ALL_TYPES, binary_table],
        format="parquet",
        compression="gzip",
        include_op_for_full_load=True,
        change_sequence_column="change_seq",
    )
    return config, generate(config, tmp_path_factory.mktemp("parquet"), SMALL)


@pytest.fixture(params=["csv_run", "parquet_run"])
def any_run(request: pytest.FixtureRequest) -> tuple[PipelineConfig, GenerationResult]:
    run: tuple[PipelineConfig, GenerationResult] = request.getfixturevalue(request.param)
    return run


# ---------------------------------------------------------------------------------------------------
# The oracle
# ---------------------------------------------------------------------------------------------------


def test_oracle_equals_an_independent_replay_of_the_files(any_run: tuple[PipelineConfig, GenerationResult]) -> None:
    config, result = any_run
    for table in config.tables:
        replay = reference_replay(read_table(result, config, table.name), table)
        expected = oracle_rows(result, table)
        assert as_json(replay.state, table) == expected, table.name
        summary = next(t for t in result.tables if t.table == table.name)
        assert summary.expected_rows == len(expected) > 0


@pytest.mark.parametrize("file_format", FORMATS.values(), ids=FORMATS.keys())
def test_every_format_has_a_writer_whose_files_replay_to_the_oracle(tmp_path: Path, file_format: DmsFormat) -> None:
    config = demo_config_with(format=file_format.name, compression="gzip")
    result = generate(config, tmp_path, SMALL)
    for table in config.tables:
        loads, cdcs = table_files(result.landing, config, table)
        assert loads
        assert cdcs
        assert {parse_key(key, config).file_format for key in [*loads, *cdcs]} == {file_format}
        replay = reference_replay(read_table(result, config, table.name), table)
        assert as_json(replay.state, table) == oracle_rows(result, table), table.name


def test_ordering_by_the_dms_timestamp_alone_gets_a_different_table(
    csv_run: tuple[PipelineConfig, GenerationResult],
) -> None:
    """Ties make the timestamp useless for order: replaying same-time rows backwards must change the result."""
    config, result = csv_run
    table = config.table("shop.customers")
    records = read_table(result, config, table.name)
    load = [r for r in records if r.kind == "load"]
    cdc = [r for r in records if r.kind == "cdc"]
    position = {id(r): i for i, r in enumerate(cdc)}
    by_time_ties_reversed = sorted(cdc, key=lambda r: (r.ts, -position[id(r)]))
    assert as_json(reference_replay(load + by_time_ties_reversed, table).state, table) != oracle_rows(result, table)


def test_change_counts_match_the_files(any_run: tuple[PipelineConfig, GenerationResult]) -> None:
    config, result = any_run
    for summary in result.tables:
        records = read_table(result, config, summary.table)
        ops = Counter(r.op for r in records if r.kind == "cdc")
        assert summary.changes == {"I": ops["I"], "U": ops["U"], "D": ops["D"]}
        loads, cdcs = table_files(result.landing, config, config.table(summary.table))
        assert (summary.load_files, summary.cdc_files) == (loads, cdcs)


# ---------------------------------------------------------------------------------------------------
# Names, folders and order
# ---------------------------------------------------------------------------------------------------


def test_load_files_count_in_hexadecimal(csv_run: tuple[PipelineConfig, GenerationResult]) -> None:
    _, result = csv_run
    loads = next(t for t in result.tables if t.table == "shop.orders").load_files
    names = [key.rsplit("/", 1)[-1] for key in loads]
    assert names[:11] == [f"LOAD{n:08X}.csv" for n in range(1, 12)]
    assert "LOAD0000000A.csv" in names
    assert all(key.startswith("dms/shop/orders/") for key in loads)


@pytest.mark.parametrize(
    ("sequence", "delimiter", "folder_format"),
    [
        ("YYYYMMDD", "SLASH", "%Y/%m/%d"),
        ("YYYYMMDDHH", "DASH", "%Y-%m-%d-%H"),
        ("YYYYMM", "UNDERSCORE", "%Y_%m"),
        ("MMYYYYDD", "SLASH", "%m/%Y/%d"),
        ("DDMMYYYY", "NONE", "%d%m%Y"),
    ],
)
def test_cdc_files_sit_in_date_folders_and_sort_by_time(
    tmp_path: Path, sequence: str, delimiter: str, folder_format: str
) -> None:
    config = demo_config_with(
        [], date_partition_enabled=True, date_partition_sequence=sequence, date_partition_delimiter=delimiter
    )
    spec = GeneratorSpec(initial_rows=5, cdc_files=4, changes_per_file=5, start_time=datetime(2025, 3, 31, 23, 57))
    result = generate(config, tmp_path, spec)
    for summary in result.tables:
        prefix = config.table_prefix(config.table(summary.table))
        times = []
        for key in summary.cdc_files:
            assert key.startswith(prefix)
            date_folder, name = key[len(prefix) :].rsplit("/", 1)
            match = CDC_NAME.match(name)
            assert match, key
            written = datetime.strptime(match[1] + match[2], "%Y%m%d%H%M%S%f")
            assert date_folder == written.strftime(folder_format), key
            assert parse_key(key, config).kind is FileKind.CDC
            times.append(written)
        assert times == sorted(times) and len(set(times)) == len(times)
        assert {t.date() for t in times} == {date(2025, 3, 31), date(2025, 4, 1)}  # the run crosses midnight
        assert all(parse_key(key, config).kind is FileKind.FULL_LOAD for key in summary.load_files)
    order = land_order(result)
    loads = [k for t in result.tables for k in t.load_files]
    assert order[: len(loads)] == loads
    cdc_names = [k.rsplit("/", 1)[-1] for k in order[len(loads) :]]
    assert cdc_names == sorted(cdc_names)
    assert len({k.split("/")[2] for k in order[len(loads) : len(loads) + 3]}) == 3  # tables interleave by time


# ---------------------------------------------------------------------------------------------------
# Edge cases are really in the files
# ---------------------------------------------------------------------------------------------------


def test_every_edge_case_is_in_the_files(csv_run: tuple[PipelineConfig, GenerationResult]) -> None:
    config, result = csv_run
    for table in config.tables:
        records = read_table(result, config, table.name)
        replay = reference_replay(records, table)
        events = Counter(name for name, _ in replay.events)
        assert events["insert_existing"] >= 1, table.name  # cached change re-applied over the LOAD row
        assert events["update_missing"] >= 2, table.name  # ghost update and re-applied cached update
        assert events["delete_missing"] >= 2, table.name  # ghost delete and repeated delete
        ghosts_updated = {k for name, k in replay.events if name == "first_seen_in_cdc_U"}
        assert ghosts_updated & replay.state.keys(), table.name  # a U for a never-seen key ends as a row
        assert any(name == "first_seen_in_cdc_D" for name, _ in replay.events), table.name

        load_times = {r.ts for r in records if r.kind == "load"}
        first_cdc = [r for r in records if r.file_index == min(r.file_index for r in records if r.kind == "cdc")]
        cached = [r for r in first_cdc if r.ts < min(load_times)]
        assert len(cached) == SMALL.cached_changes, table.name
        assert {r.op for r in cached} == {"I", "U", "D"}

        histories = replay.history.values()
        commits = [ops for h in histories for ops in _ops_per_commit(h)]
        assert "UUU" in commits and "DI" in commits, table.name  # one key, one commit: only row order decides
        assert any(_ops_in_one_file(h, "IDI") for h in histories), table.name
        assert any(_ops_across_files(h, "UDI") for h in histories), table.name
        assert any(h[-1].op == "D" and h[-2].op == "D" and h[-2].kind == "cdc" for h in histories if len(h) > 1)


def _ops_per_commit(history: list[Record]) -> list[str]:
    """The ops of one key per (CDC file, commit timestamp), for commits that change it more than once."""
    commits: dict[tuple[int, str], str] = defaultdict(str)
    for r in history:
        if r.kind == "cdc":
            commits[(r.file_index, r.ts)] += r.op
    return [ops for ops in commits.values() if len(ops) > 1]


def _ops_in_one_file(history: list[Record], ops: str) -> bool:
    by_file: dict[int, str] = defaultdict(str)
    for r in history:
        if r.kind == "cdc":
            by_file[r.file_index] += r.op
    return any(ops in sequence for sequence in by_file.values())


def _ops_across_files(history: list[Record], ops: str) -> bool:
    cdc = [r for r in history if r.kind == "cdc"]
    return any(
        "".join(r.op for r in cdc[i : i + len(ops)]) == ops
        and len({r.file_index for r in cdc[i : i + len(ops)]}) == len(ops)
        for i in range(len(cdc))
    )


def test_text_edge_cases_are_written_and_read_back(csv_run: tuple[PipelineConfig, GenerationResult]) -> None:
    config, result = csv_run
    records = read_table(result, config, "lab.all_types")
    load_values = {r.values["title"] for r in records if r.kind == "load"}
    cdc_values = {r.values["title"] for r in records if r.kind == "cdc"}
    for texts in (load_values, cdc_values):
        joined = "\x00".join(t for t in texts if t)
        for needle in ("é", "日本", "🎉", "\r\n", "\n", ",", '"', "\\"):
            assert needle in joined, repr(needle)
        assert None in texts and "" in texts
        assert " leading space" in texts and "trailing space " in texts and "   " in texts
    table = config.table("lab.all_types")
    nullable = [c.name for c in table.columns if c.nullable and c.name not in table.primary_key]
    keys_nulled = [tuple(r.values[k] for k in table.primary_key) for r in records if r.op == "U" and r.kind == "cdc"
                   and all(r.values[name] is None for name in nullable)]  # fmt: skip
    emptied = [r for r in records if r.op == "U" and r.values["title"] == "" and r.values["label"] == ""]
    assert any(tuple(r.values[k] for k in table.primary_key) in keys_nulled for r in emptied)  # NULL, later ''
    final = {row["title"] for row in oracle_rows(result, table)}
    assert None in final and "" in final and "crlf1\r\nline2\r\n" in final
    written = [q for r in records for q in r.quoted_empty]
    assert written and all(written)  # DMS's default NULL (an unquoted empty field): '' must be written ""
    raw = "".join((result.landing / key).read_bytes().decode("utf-8") for key in land_order(result))
    for quoted in ('," leading space",', ',"trailing space ",', ',"   ",', ',"comma, inside",', ',"quote "" inside",'):
        assert quoted in raw, quoted  # RFC 4180 quoting as DMS writes it, not just something csv can read
    assert ',"crlf1\r\nline2\r\n",' in raw


def test_every_type_reaches_its_boundaries(csv_run: tuple[PipelineConfig, GenerationResult]) -> None:
    config, result = csv_run
    table = config.table("lab.all_types")
    values: dict[str, set[Any]] = defaultdict(set)
    for record in read_table(result, config, table.name):
        for name, value in record.values.items():
            values[name].add(value)
    assert {Decimal("9999999999.99"), Decimal("-9999999999.99"), Decimal("0.00"), Decimal("0.01")} <= values["price"]
    assert {Decimal("0.99999"), Decimal("-0.99999")} <= values["rate"]
    assert {-(2**63), 2**63 - 1} <= values["big"] and {-128, 127} <= values["tiny"]
    assert {date(1970, 1, 1), date(2099, 12, 31), date(2024, 2, 29)} <= values["born"]
    stamps = values["seen_at"] - {None}
    assert {t.microsecond for t in stamps} >= {1, 999999, 0}
    assert datetime(2099, 12, 31, 23, 59, 59, 999999) in stamps
    assert {True, False, None} <= values["flag"]
    assert {1.7976931348623157e308, 1e-300, -1.5} <= values["weight"]
    assert 3.4028234663852886e38 in values["score"]
    assert None not in values["label"] and None not in values["code"] and None not in values["seq_no"]


def test_keys_and_non_nullable_columns_are_never_null(any_run: tuple[PipelineConfig, GenerationResult]) -> None:
    config, result = any_run
    for table in config.tables:
        required = [c.name for c in table.columns if not c.nullable or c.name in table.primary_key]
        for record in read_table(result, config, table.name):
            assert all(record.values[name] is not None for name in required), (table.name, record)


def test_composite_keys_fan_out(csv_run: tuple[PipelineConfig, GenerationResult]) -> None:
    config, result = csv_run
    rows = oracle_rows(result, config.table("shop.order_items"))
    keys = [(row["order_id"], row["line_no"]) for row in rows]
    assert len(keys) == len(set(keys))
    lines_per_order = Counter(order for order, _ in keys)
    assert max(lines_per_order.values()) > 1


@pytest.mark.parametrize("marker", ["null", "NULL"])
def test_a_null_marker_is_written_for_null_and_never_as_a_value(tmp_path: Path, marker: str) -> None:
    config = demo_config_with(csv_null_value=marker)
    result = generate(config, tmp_path, SMALL)
    for table in config.tables:
        for record in read_table(result, config, table.name):
            assert marker not in record.values.values()
        replay = reference_replay(read_table(result, config, table.name), table)
        assert as_json(replay.state, table) == oracle_rows(result, table)
    records = read_table(result, config, "lab.all_types")
    assert any(r.values["title"] is None for r in records) and any(r.values["title"] == "" for r in records)
    written = [q for r in records for q in r.quoted_empty]
    assert True in written and False in written and written.count(False) > written.count(True)  # '' bare or ""
    raw = (result.landing / land_order(result)[0]).read_text(encoding="utf-8")
    assert f",{marker}," in raw or raw.startswith(f"{marker},")


def test_dms_default_null_is_an_unquoted_empty_field(tmp_path: Path) -> None:
    config = demo_config_with(csv_null_value="")
    assert config.dms == demo_config_with().dms  # the default
    result = generate(config, tmp_path, SMALL)
    table = config.table("lab.all_types")
    records = read_table(result, config, table.name)
    written = [q for r in records for q in r.quoted_empty]
    assert written and all(written)
    assert any(r.values["title"] is None for r in records) and any(r.values["title"] == "" for r in records)
    assert as_json(reference_replay(records, table).state, table) == oracle_rows(result, table)
    raw = "".join((result.landing / key).read_text(encoding="utf-8") for key in land_order(result))
    assert ",," in raw and ',"",' in raw and "NULL" not in raw


def test_reals_and_doubles_are_written_in_dms_exponent_form(csv_run: tuple[PipelineConfig, GenerationResult]) -> None:
    """As in the real PostgreSQL sample: REAL +3.23800011e+01, DOUBLE +2.1804858784530072e+04."""
    _, result = csv_run
    raw = "".join((result.landing / key).read_text(encoding="utf-8") for key in land_order(result))
    assert ",+1.7976931348623157e+308," in raw and ",-1.5000000000000000e+00," in raw  # weight: double
    assert ",+3.40282347e+38," in raw and ",-1.50000000e+00," in raw  # score: float (REAL)
    assert (real_text(32.38), double_text(21804.858784530072)) == ("+3.23800011e+01", "+2.1804858784530072e+04")


def test_realistic_values(tmp_path: Path) -> None:
    config = demo_config_with([])
    result = generate(config, tmp_path, GeneratorSpec(initial_rows=200, cdc_files=1, edge_cases=False))
    customers = oracle_rows(result, config.table("shop.customers"))
    assert all("@" in row["email"] for row in customers if row["email"] is not None)
    assert all(" " in row["full_name"] for row in customers if row["full_name"] is not None)
    orders = oracle_rows(result, config.table("shop.orders"))
    statuses = {row["status"] for row in orders}
    assert statuses - {None} <= {"pending", "paid", "shipped", "delivered", "cancelled", "refunded"}
    assert len(statuses) > 3
    assert all(Decimal(row["amount"]) > 0 for row in orders if row["amount"] is not None)
    items = oracle_rows(result, config.table("shop.order_items"))
    assert all(1 <= row["quantity"] <= 10 for row in items if row["quantity"] is not None)


# ---------------------------------------------------------------------------------------------------
# DMS options
# ---------------------------------------------------------------------------------------------------


def test_header_op_for_full_load_gzip_and_postgres_booleans(tmp_path: Path) -> None:
    config = demo_config_with(
        add_column_name=True, include_op_for_full_load=True, compression="gzip", csv_delimiter="|"
    )
    spec = GeneratorSpec(initial_rows=20, cdc_files=2, changes_per_file=30, boolean_style="postgres")
    result = generate(config, tmp_path, spec)
    summary = next(t for t in result.tables if t.table == "shop.customers")
    load_key, cdc_key = summary.load_files[0], summary.cdc_files[0]
    assert load_key.endswith("/LOAD00000001.csv.gz") and cdc_key.endswith(".csv.gz")
    assert parse_key(load_key, config).gzip
    with gzip.open(result.landing / load_key, "rt", encoding="utf-8", newline="") as handle:
        lines = handle.read().split("\n")
    header = "Op|dms_timestamp|customer_id|full_name|email|is_active|signed_up_on|notes"
    assert lines[0] == header and lines[1].startswith("I|2025-03-01 12:00:10.000000|")
    with gzip.open(result.landing / cdc_key, "rt", encoding="utf-8") as handle:
        assert handle.readline().rstrip("\n") == header
    flags = {r.values["is_active"] for r in read_table(result, config, "shop.customers", postgres=True)}
    assert flags == {True, False, None}  # parsed from true/false only
    for table in config.tables:
        replay = reference_replay(read_table(result, config, table.name, postgres=True), table)
        assert as_json(replay.state, table) == oracle_rows(result, table)


def test_change_sequence_increases_strictly_and_is_empty_for_the_full_load(tmp_path: Path) -> None:
    config = demo_config_with(change_sequence_column="change_seq")
    result = generate(config, tmp_path, SMALL)
    everything = []
    for table in config.tables:
        records = read_table(result, config, table.name)
        assert {r.seq for r in records if r.kind == "load"} == {""}
        sequences = [r.seq or "" for r in records if r.kind == "cdc"]
        assert all(SEQUENCE.match(s) for s in sequences)
        assert sequences == sorted(set(sequences)), table.name  # strictly increasing
        for r in records:
            if r.kind == "cdc":
                assert (r.seq or "")[:16] == re.sub(r"\D", "", r.ts)[:16]  # commit time to the hundredth
        everything += sequences
    assert len(set(everything)) == len(everything)


def test_parquet_files_have_dms_columns_and_types(parquet_run: tuple[PipelineConfig, GenerationResult]) -> None:
    config, result = parquet_run
    summary = next(t for t in result.tables if t.table == "lab.all_types")
    assert summary.load_files[0].endswith("/LOAD00000001.parquet")
    load = pq.ParquetFile(result.landing / summary.load_files[0])
    cdc = pq.ParquetFile(result.landing / summary.cdc_files[0])
    assert load.metadata.row_group(0).column(0).compression == "GZIP"
    schema = cdc.schema_arrow
    assert schema.names == ["Op", "dms_timestamp", *config.table("lab.all_types").column_names, "change_seq"]
    types = {name: str(schema.field(name).type) for name in schema.names}
    assert types["Op"] == "string" and types["dms_timestamp"] == "string" and types["change_seq"] == "string"
    assert (types["seq_no"], types["tiny"], types["big"], types["flag"]) == ("int16", "int8", "int64", "bool")
    assert (types["price"], types["rate"], types["born"]) == ("decimal128(12, 2)", "decimal128(5, 5)", "date32[day]")
    assert (types["seen_at"], types["weight"], types["score"]) == ("timestamp[us]", "double", "float")
    assert load.schema_arrow.names[0] == "Op"  # include_op_for_full_load
    assert set(load.read().column("change_seq").to_pylist()) == {None}
    sequences = cdc.read().column("change_seq").to_pylist()
    assert all(SEQUENCE.match(s) for s in sequences) and sequences == sorted(sequences)
    blobs = {row["payload"] for row in oracle_rows(result, config.table("lab.blobs"))}
    assert "" in blobs and None in blobs  # base64 of b"" and NULL


@pytest.mark.parametrize(
    ("mode", "written_ops", "include_op"),
    [("cdc_inserts_only", {"I"}, False), ("cdc_inserts_and_updates", {"I", "U"}, False),
     ("cdc_inserts_only", {"I"}, True)],
)  # fmt: skip
def test_insert_only_modes_write_only_captured_changes(
    tmp_path: Path, mode: str, written_ops: set[str], include_op: bool
) -> None:
    """DMS CdcInsertsOnly / CdcInsertsAndUpdates: the lake is LOAD + captured changes upserted, not the source."""
    options: dict[str, Any] = {mode: True, "include_op_for_full_load": include_op, "add_column_name": True}
    config = demo_config_with([ALL_TYPES], **options)
    result = generate(config, tmp_path, SMALL)
    full = generate(demo_config_with([ALL_TYPES]), tmp_path / "all", SMALL)
    for table in config.tables:
        summary = next(t for t in result.tables if t.table == table.name)
        first_cdc = (result.landing / summary.cdc_files[0]).read_text(encoding="utf-8").split("\n", 1)[0]
        assert first_cdc.startswith("Op,") == include_op  # no Op column unless IncludeOpForFullLoad
        records = read_table(result, config, table.name)
        cdc = [r for r in records if r.kind == "cdc"]
        assert cdc and {r.op for r in cdc} <= written_ops
        assert {op for op, count in summary.changes.items() if count} == written_ops
        replay = reference_replay(records, table)
        assert as_json(replay.state, table) == oracle_rows(result, table)
        # the same source with every change captured ends with fewer rows: deletes never reach the lake
        assert len(oracle_rows(result, table)) > len(oracle_rows(full, table))


@pytest.mark.parametrize("options", [{}, {"format": "parquet"}, {"csv_null_value": "NULL", "add_column_name": True}])
def test_before_image_columns_carry_the_old_key_of_key_updates(tmp_path: Path, options: dict[str, Any]) -> None:
    config = demo_config_with(change_sequence_column="change_seq", before_image={"column_prefix": "before_"}, **options)
    result = generate(config, tmp_path, SMALL)
    for table in config.tables:
        records = read_table(result, config, table.name)
        moved = [r for r in records if r.before is not None]
        assert len(moved) >= 2 and {r.op for r in moved} == {"U"} and {r.kind for r in moved} == {"cdc"}
        # a chain: the second key change starts from the first one's new key
        keys = [tuple(r.values[k] for k in table.primary_key) for r in moved]
        assert tuple(moved[1].before[k] for k in table.primary_key) == keys[0]  # type: ignore[index]
        replay = reference_replay(records, table)
        assert as_json(replay.state, table) == oracle_rows(result, table)
        assert [name for name, _ in replay.events].count("key_change") >= 2
        first_old = tuple(moved[0].before[k] for k in table.primary_key)  # type: ignore[index]
        assert first_old not in replay.state  # without the before-image the old row would stay
    if config.dms.format == "csv":
        summary = next(t for t in result.tables if t.table == "shop.order_items")
        line = (result.landing / summary.load_files[0]).read_text(encoding="utf-8").split("\n")[-2]
        null = config.dms.csv_null_value
        assert line.endswith(f",,{null},{null}")  # an empty change sequence, NULL before-image keys on LOAD rows
        if config.dms.add_column_name:
            header = (result.landing / summary.cdc_files[0]).read_text(encoding="utf-8").split("\n")[0]
            assert header.endswith(",change_seq,before_order_id,before_line_no")


def test_without_timestamp_ties_every_change_has_its_own_time(tmp_path: Path) -> None:
    config = demo_config_with([])
    result = generate(config, tmp_path, GeneratorSpec(initial_rows=30, cdc_files=2, timestamp_ties=False))
    for table in config.tables:
        times = [r.ts for r in read_table(result, config, table.name) if r.kind == "cdc"]
        assert len(times) == len(set(times)) and times == sorted(times)


# ---------------------------------------------------------------------------------------------------
# Determinism, selection and refusals
# ---------------------------------------------------------------------------------------------------


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("options", [{}, {"format": "parquet", "compression": "gzip"}, {"compression": "gzip"}])
def test_same_seed_same_bytes(tmp_path: Path, options: dict[str, Any]) -> None:
    config = demo_config_with(**options)
    spec = GeneratorSpec(initial_rows=20, cdc_files=2, changes_per_file=20)
    generate(config, tmp_path / "a", spec)
    generate(config, tmp_path / "b", spec)
    generate(config, tmp_path / "c", GeneratorSpec(seed=8, initial_rows=20, cdc_files=2, changes_per_file=20))
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")
    assert _tree(tmp_path / "a") != _tree(tmp_path / "c")


def test_tables_can_be_selected(tmp_path: Path) -> None:
    config = demo_config_with()
    result = generate(config, tmp_path, GeneratorSpec(initial_rows=5, cdc_files=1), tables=["shop.orders"])
    assert [t.table for t in result.tables] == ["shop.orders"]
    assert [p.name for p in result.expected.iterdir()] == ["shop.orders.jsonl"]
    assert {k.split("/")[2] for k in land_order(result)} == {"orders"}
    with pytest.raises(UnknownTableError, match=r"shop\.nope"):
        generate(config, tmp_path / "other", tables=["shop.nope"])


def test_refuses_binary_in_csv_and_a_used_output_folder(tmp_path: Path) -> None:
    columns = [{"name": "id", "type": "int"}, {"name": "b", "type": "binary"}]
    blobs = {"name": "lab.blobs", "primary_key": ["id"], "columns": columns}
    with pytest.raises(ConfigError, match=r"lab\.blobs, column b: .*Parquet"):
        generate(demo_config_with([blobs]), tmp_path / "blobs", GeneratorSpec(initial_rows=1))
    config = demo_config_with([])
    generate(config, tmp_path / "used", GeneratorSpec(initial_rows=1, cdc_files=1, changes_per_file=1))
    with pytest.raises(FileExistsError, match="already holds files"):
        generate(config, tmp_path / "used", GeneratorSpec(initial_rows=1))


def test_a_key_type_too_small_is_refused(tmp_path: Path) -> None:
    tiny = {"name": "lab.tiny", "primary_key": ["id"], "columns": [{"name": "id", "type": "tinyint"}]}
    with pytest.raises(ConfigError, match="cannot hold"):
        generate(demo_config_with([tiny]), tmp_path, GeneratorSpec(initial_rows=200), tables=["lab.tiny"])


@pytest.mark.parametrize(
    "bad",
    [{"initial_rows": -1}, {"load_file_rows": 0}, {"insert_ratio": 0.7, "update_ratio": 0.5}, {"boolean_style": "x"}],
)
def test_spec_is_validated(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="GeneratorSpec"):
        GeneratorSpec(**bad)


@given(st.text(alphabet=st.characters(blacklist_categories=["Cs"]), min_size=1))
def test_csv_field_round_trips_through_the_csv_module(text: str) -> None:
    line = ",".join(["a", csv_field(text), "z"]) + "\n"
    assert list(csv.reader(io.StringIO(line, newline=""))) == [["a", text, "z"]]


# ---------------------------------------------------------------------------------------------------
# Schema changes mid-stream and key updates without before-image columns
# ---------------------------------------------------------------------------------------------------

LIVING: dict[str, Any] = {
    "name": "lab.living",
    "primary_key": ["item_id"],
    "columns": [
        {"name": "item_id", "type": "bigint"},
        {"name": "title", "type": "string"},
        {"name": "stock", "type": "bigint"},  # int before the widening
        {"name": "score", "type": "double"},  # float before the widening
        {"name": "legacy_note", "type": "string", "dropped": True},
        {"name": "region", "type": "string"},  # added after CDC file 0
        {"name": "points", "type": "decimal(8,2)"},  # added after CDC file 1
    ],
}
LIVING_CHANGES = (
    SchemaChange("lab.living", 0, "add", "region"),
    SchemaChange("lab.living", 0, "widen", "stock", from_type="int"),
    SchemaChange("lab.living", 1, "add", "points"),
    SchemaChange("lab.living", 1, "drop", "legacy_note"),
    SchemaChange("lab.living", 1, "widen", "score", from_type="float"),
)
LIVING_SPEC = GeneratorSpec(
    initial_rows=40,
    cdc_files=4,
    changes_per_file=60,
    load_file_rows=10,
    cached_changes=8,
    schema_changes=LIVING_CHANGES,
)


@pytest.mark.parametrize(
    "options",
    [{}, {"add_column_name": True, "csv_null_value": "NULL"}, {"format": "parquet", "change_sequence_column": "seq"}],
)
def test_schema_changes_mid_stream_shape_the_files_and_the_oracle(tmp_path: Path, options: dict[str, Any]) -> None:
    config = demo_config_with([LIVING], **options)
    result = generate(config, tmp_path, LIVING_SPEC)
    table = config.table("lab.living")
    summary = next(t for t in result.tables if t.table == table.name)
    loads, cdcs = summary.load_files, summary.cdc_files
    assert len(cdcs) == 4
    if config.dms.format == "parquet":
        schemas = [pq.read_schema(result.landing / key) for key in (loads[0], *cdcs)]
        names = [[n for n in s.names if n not in ("Op", "dms_timestamp", "seq")] for s in schemas]
        assert names[0] == names[1] == ["item_id", "title", "stock", "score", "legacy_note"]
        assert names[2] == ["item_id", "title", "stock", "score", "legacy_note", "region"]
        assert names[3] == names[4] == ["item_id", "title", "stock", "score", "region", "points"]
        stock = [str(s.field("stock").type) for s in schemas]
        score = [str(s.field("score").type) for s in schemas]
        assert stock == ["int32", "int32", "int64", "int64", "int64"]
        assert score == ["float", "float", "float", "double", "double"]
        assert str(schemas[3].field("points").type) == "decimal128(8, 2)"
    else:
        firsts = [(result.landing / key).read_text(encoding="utf-8").split("\n", 1)[0] for key in (loads[0], *cdcs)]
        if config.dms.add_column_name:
            assert firsts[1] == "Op,dms_timestamp,item_id,title,stock,score,legacy_note"
            assert firsts[2] == "Op,dms_timestamp,item_id,title,stock,score,legacy_note,region"
            assert firsts[3] == firsts[4] == "Op,dms_timestamp,item_id,title,stock,score,region,points"
        raw = [(result.landing / key).read_text(encoding="utf-8") for key in cdcs]
        assert re.search(r",[+-]\d\.\d{8}e[+-]\d\d,", raw[1]) and not re.search(r",[+-]\d\.\d{16}e", raw[1])  # REAL
        assert re.search(r",[+-]\d\.\d{16}e[+-]\d\d,", raw[2])  # DOUBLE after the widening
    records = read_table(result, config, table.name, changes=LIVING_CHANGES)
    replay = reference_replay(records, table)
    expected = oracle_rows(result, table)
    assert as_json(replay.state, table) == expected
    by_file = defaultdict(list)
    for record in records:
        by_file[record.file_index].append(record)
    cdc_files = [by_file[i] for i in sorted(by_file)][len(loads) :]
    assert {len(r.values) for f in cdc_files for r in f} == {5, 6}
    assert all(-(2**31) <= r.values["stock"] < 2**31 for f in cdc_files[:1] for r in f if r.values["stock"] is not None)
    assert any(r.values["stock"] == 2**31 for r in cdc_files[1])  # a value only the widened type holds
    assert any(r.values["score"] == 123456789.123456 for r in cdc_files[2])
    assert any(r.values["region"] is not None for r in cdc_files[1])  # new rows get values
    final = {row["item_id"]: row for row in expected}
    # ADD COLUMN without default: rows untouched since hold NULL; the dropped column keeps old values there
    untouched = [row for row in expected if row["region"] is None and row["points"] is None]
    assert untouched and any(row["legacy_note"] is not None for row in untouched)
    written_after_drop = {r.values["item_id"] for f in cdc_files[2:] for r in f if r.op != "D"}
    assert written_after_drop & final.keys()
    assert all(final[key]["legacy_note"] is None for key in written_after_drop & final.keys())
    assert any(row["points"] is not None for row in expected)


def test_the_spec_of_a_schema_change_is_checked_against_the_configuration(tmp_path: Path) -> None:
    def attempt(changes: tuple[SchemaChange, ...], table: dict[str, Any] = LIVING) -> None:
        spec = GeneratorSpec(initial_rows=5, cdc_files=3, changes_per_file=5, schema_changes=changes)
        generate(demo_config_with([table]), tmp_path / str(len(list(tmp_path.iterdir()))), spec)

    with pytest.raises(ConfigError, match=r"dropped.*script the drop"):
        attempt(LIVING_CHANGES[:3])
    with pytest.raises(ConfigError, match="last configured"):
        attempt((*LIVING_CHANGES[1:], SchemaChange("lab.living", 0, "add", "title")))
    with pytest.raises(ConfigError, match="not a widening"):
        attempt((*LIVING_CHANGES[:4], SchemaChange("lab.living", 1, "widen", "score", from_type="bigint")))
    with pytest.raises(ConfigError, match="no CDC file of the new shape"):
        attempt((*LIVING_CHANGES[:4], SchemaChange("lab.living", 2, "widen", "score", from_type="float")))
    with pytest.raises(ConfigError, match="order the source added them"):
        attempt((*LIVING_CHANGES[1:2], *LIVING_CHANGES[3:], SchemaChange("lab.living", 1, "add", "region"),
                 SchemaChange("lab.living", 0, "add", "points")))  # fmt: skip
    with pytest.raises(ValueError, match="from_type"):
        SchemaChange("lab.living", 0, "widen", "score")


@pytest.mark.parametrize("options", [{}, {"format": "parquet"}])
def test_key_updates_without_before_image_leave_the_old_rows(tmp_path: Path, options: dict[str, Any]) -> None:
    """DMS writes a key UPDATE as U with the new key only: a key-based replay keeps the old row, so must the oracle."""
    spec = GeneratorSpec(initial_rows=40, cdc_files=3, changes_per_file=60, key_updates=True)
    config = demo_config_with([ALL_TYPES], change_sequence_column="change_seq", **options)
    with_images = demo_config_with([ALL_TYPES], change_sequence_column="change_seq", before_image={}, **options)
    result = generate(config, tmp_path / "plain", spec)
    imaged = generate(with_images, tmp_path / "imaged", spec)
    for table in config.tables:
        records = read_table(result, config, table.name)
        assert all(r.before is None for r in records)
        replay = reference_replay(records, table)
        expected = oracle_rows(result, table)
        assert as_json(replay.state, table) == expected
        moved = [r for r in read_table(imaged, with_images, table.name) if r.before is not None]
        old_keys = {tuple(r.before[k] for k in table.primary_key) for r in moved}  # type: ignore[index]
        assert len(old_keys) == 2
        keys = {tuple(row[k] for k in table.primary_key) for row in expected}
        keys_imaged = {tuple(row[k] for k in table.primary_key) for row in oracle_rows(imaged, table)}
        as_keys = {tuple(json_row(dict(zip(table.primary_key, k, strict=True)), table)[c] for c in table.primary_key)
                   for k in old_keys}  # fmt: skip
        assert keys - keys_imaged == as_keys and keys_imaged <= keys
