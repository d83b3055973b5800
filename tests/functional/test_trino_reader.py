"""Trino, the engine Athena runs, reads the lake the deployed path wrote, as Athena would: through the Glue
catalog (its ``iceberg`` catalog of type ``glue``) and S3 on the local endpoint.

``cdc-lake aws-replay`` lands generated DMS output in two steps (the full load and the first changes, then the
rest after an ALTER TABLE), so the tables carry a changed schema, and all but the first (merge-on-read) position
deletes; every lake table read by Trino equals the generator's expected table, and the history table equals what
pyiceberg reads.
"""

from __future__ import annotations

import io
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from cdc_lake.core.config import PipelineConfig, TableSpec, load_config
from cdc_lake.core.jsonl import write_jsonl
from cdc_lake.local.demo import demo_config_path
from cdc_lake.local.generator import GeneratorSpec, SchemaChange, generate, land
from cdc_lake.local.trino import TrinoServer
from tests.functional.test_lake_names import LAKE_COLUMNS, NAMES_CONFIG
from tests.support.cli import aws_replay, aws_replay_environment
from tests.support.source_tables import glue_catalog

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.glue_path]

# Its own stack (buckets, jobs) and database on the shared endpoint, apart from the other aws-replay tests'.
STACK = "CdcLakeTrino"
DATABASE = "trino_lake"
AFTER_FILE = 1  # the ALTER TABLEs come after each table's second CDC file

# The source tables as configured after every ALTER TABLE, and the ALTERs; a table added here is replayed, read
# by Trino and compared with its expected table (name shapes such as Oracle's UPPER case, SQL Server's
# MixedCase, `$`, `#` and spaces belong here).
_DEMO_TABLES: list[dict[str, Any]] = yaml.safe_load(demo_config_path().read_text(encoding="utf-8"))["tables"]
TABLES: list[dict[str, Any]] = [
    *(t for t in _DEMO_TABLES if t["name"] != "shop.order_items"),
    {
        **next(t for t in _DEMO_TABLES if t["name"] == "shop.order_items"),
        "columns": [
            {"name": "order_id", "type": "bigint"},
            {"name": "line_no", "type": "int"},
            {"name": "sku", "type": "string"},
            {"name": "quantity", "type": "bigint"},  # int before the ALTER
            {"name": "unit_price", "type": "decimal(10,2)"},
            {"name": "weight_kg", "type": "double"},
            {"name": "gift_note", "type": "string"},  # added by the ALTER
        ],
    },
]
# Names as Oracle and SQL Server write them (UPPER case, $, #, MixedCase, a space, a leading digit, a reserved
# word): Trino reads them under their lake names, each column's comment naming its source column.
TABLES += NAMES_CONFIG["tables"]
# SQL Server's DATETIMEOFFSET (Oracle's TIMESTAMP WITH TIME ZONE alike), kept as DMS's text with its offset.
OFFSETS = {
    "name": "dbo.Shipments",
    "primary_key": ["ShipmentId"],
    "columns": [{"name": "ShipmentId", "type": "bigint"}, {"name": "PromisedAt", "type": "timestamp_offset"}],
}
TABLES.append(OFFSETS)
SCHEMA_CHANGES = (
    SchemaChange("shop.order_items", AFTER_FILE, "widen", "quantity", from_type="int"),
    SchemaChange("shop.order_items", AFTER_FILE, "add", "gift_note"),
)
# What Trino shows for the changed columns afterwards.
CHANGED_COLUMNS = {"shop.order_items": {"quantity": "bigint", "gift_note": "varchar"}}


def _config_file(path: Path, tables: list[dict[str, Any]]) -> Path:
    """The demo's configuration for these tables: the first in the default write mode (auto: these small tables go
    copy-on-write), the others merge-on-read, so Trino reads both."""
    data = yaml.safe_load(demo_config_path().read_text(encoding="utf-8"))
    data["lake"]["database"] = DATABASE
    data["tables"] = [tables[0], *({**t, "write_mode": "merge-on-read"} for t in tables[1:])]
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _before_changes(table: dict[str, Any]) -> dict[str, Any]:
    """The table as configured before the ALTERs: added columns absent, widened ones at their old type."""
    changes = [c for c in SCHEMA_CHANGES if c.table == table["name"]]
    added = {c.column for c in changes if c.kind == "add"}
    old_types = {c.column: c.from_type for c in changes if c.kind == "widen"}
    columns = [{**c, "type": old_types.get(c["name"], c["type"])} for c in table["columns"] if c["name"] not in added]
    return {**table, "columns": columns}


def _quoted(*names: str) -> str:
    return ".".join('"' + name.replace('"', '""') + '"' for name in names)


def _trino_rows(trino: TrinoServer, lake_table: str, where: str = "") -> list[dict[str, Any]]:
    columns, rows = trino.query_with_columns(f"SELECT * FROM {_quoted('iceberg', DATABASE, lake_table)} {where}")
    return [dict(zip(columns, row, strict=True)) for row in rows]


def _as_configured(rows: list[dict[str, Any]], table: TableSpec) -> list[dict[str, Any]]:
    """Rows keyed by the configured column names (Trino gives names lower-cased)."""
    return [{c.name: row[c.name.lower()] for c in table.columns} for row in rows]


def _jsonl(rows: list[dict[str, Any]], table: TableSpec) -> str:
    text = io.StringIO()
    write_jsonl(rows, table, text)
    return text.getvalue()


def _replay(steps: list[tuple[Path, list[str]]], generated_landing: Path, tmp_path: Path, endpoint: str) -> None:
    environment = {**aws_replay_environment(endpoint), "CDK_CONTEXT_JSON": json.dumps({"stackName": STACK})}
    for number, (config_path, keys) in enumerate(steps):
        landing = tmp_path / f"landing-{number}"
        land(generated_landing, landing, keys)
        code, output = aws_replay(sys.executable, config_path, landing, tmp_path / f"work-{number}", environment)
        assert code == 0, output


# Two deployed-path replays (a CDK synth and a Glue run per job each, every run a JVM of its own, as on AWS) with
# Trino starting beside them: 134 to 140 s in the 5.1 suite, 197 to 207 s in the 6.0 suite, whose Trino and Spark
# start slower (docs/testing.md, "Cases with a budget of their own").
@pytest.mark.budget(180)
def test_trino_reads_every_lake_table_as_the_source_holds_it(
    aws_endpoint: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    after = _config_file(tmp_path / "after.yaml", TABLES)
    before = _config_file(tmp_path / "before.yaml", [_before_changes(t) for t in TABLES])
    config: PipelineConfig = load_config(after)
    spec = GeneratorSpec(seed=17, initial_rows=120, cdc_files=4, changes_per_file=30, schema_changes=SCHEMA_CHANGES)
    generated = generate(config, tmp_path / "source", spec)
    first = [k for t in generated.tables for k in [*t.load_files, *t.cdc_files[: AFTER_FILE + 1]]]
    rest = [k for t in generated.tables for k in t.cdc_files[AFTER_FILE + 1 :]]
    # Trino starts while the deployed path replays: both mostly wait on processes of their own.
    with ThreadPoolExecutor(1) as pool:
        replayed = pool.submit(_replay, [(before, first), (after, rest)], generated.landing, tmp_path, aws_endpoint)
        trino: TrinoServer = request.getfixturevalue("trino")
        replayed.result()

    for table in config.tables:
        rows = _as_configured(_trino_rows(trino, table.lake_table), table)
        expected = (generated.expected / f"{table.name}.jsonl").read_text(encoding="utf-8")
        assert _jsonl(rows, table) == expected, f"{table.name}: Trino reads otherwise than the source holds"

    # The ALTERs reached the table Trino reads: the added column and the widened type.
    for name, changed in CHANGED_COLUMNS.items():
        types = dict(
            trino.query(
                "SELECT column_name, data_type FROM iceberg.information_schema.columns "
                "WHERE table_schema = ? AND table_name = ?",
                [DATABASE, config.table(name).lake_table],
            )
        )
        assert {column: types.get(column) for column in changed} == changed, types

    # Lake names as Athena wants them, and where each column came from.
    for name, (lake_table, columns) in LAKE_COLUMNS.items():
        described = trino.query(f"DESCRIBE {_quoted('iceberg', DATABASE, lake_table)}")
        assert [row[0] for row in described] == columns
        sources = config.table(name).source_column_names
        assert [row[3] for row in described] == [f"source column {source}" for source in sources]

    # The tables merged on read carry position deletes, which Trino applied to give the rows above; the small table
    # in the default mode is written copy-on-write, as Trino sees it too.
    deletes, modes = {}, {}
    for table in config.tables:
        snapshots = _quoted("iceberg", DATABASE, f"{table.lake_table}$snapshots")
        latest = trino.query(f"SELECT summary FROM {snapshots} ORDER BY committed_at DESC LIMIT 1")[0][0]
        deletes[table.lake_table] = int(latest.get("total-position-deletes", 0))
        properties = _quoted("iceberg", DATABASE, f"{table.lake_table}$properties")
        modes[table.lake_table] = trino.query(f"SELECT value FROM {properties} WHERE key = 'write.merge.mode'")[0][0]
    first, *others = config.tables
    assert modes[first.lake_table] == "copy-on-write", modes
    assert all(deletes[t.lake_table] and modes[t.lake_table] == "merge-on-read" for t in others), (deletes, modes)

    for table in (t for t in config.tables if t.history):
        _check_history(trino, aws_endpoint, table, generated.expected)

    # Athena's engine reads the text as an instant with its offset: both come back unchanged.
    shipments = _quoted("iceberg", DATABASE, config.table(OFFSETS["name"]).lake_table)
    typed = "CAST(CAST(promisedat AS timestamp(6) with time zone) AS varchar)"
    pairs = trino.query(f"SELECT promisedat, {typed} FROM {shipments} WHERE promisedat IS NOT NULL")
    utc = {text: text.removesuffix("+00:00") + "UTC" if text.endswith("+00:00") else text for text, _ in pairs}
    assert pairs and all(utc[text] == again for text, again in pairs), pairs[:3]  # Trino names +00:00 UTC
    assert {text[-6:] for text, _ in pairs} > {"+00:00"}, "several offsets, not only UTC"


def _check_history(trino: TrinoServer, endpoint: str, table: TableSpec, expected_dir: Path) -> None:
    """Every version Trino reads equals what pyiceberg reads, and the current versions are the source's rows."""
    from cdc_lake.engine.tables import history_name

    name = history_name(table)
    by_trino = _trino_rows(trino, name)
    by_pyiceberg = glue_catalog(endpoint).load_table((DATABASE, name)).scan().to_arrow().to_pylist()
    assert by_trino, f"{name} is empty"
    columns = list(by_pyiceberg[0])
    assert sorted(by_trino[0]) == sorted(columns)

    def ordered(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return sorted((tuple(row[c] for c in columns) for row in rows), key=lambda r: tuple(map(repr, r)))

    assert ordered(by_trino) == ordered(by_pyiceberg), f"{name}: Trino and pyiceberg read different versions"
    current = _as_configured(_trino_rows(trino, name, "WHERE is_current"), table)
    assert _jsonl(current, table) == (expected_dir / f"{table.name}.jsonl").read_text(encoding="utf-8")
