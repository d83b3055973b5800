"""``cdc-lake demo``: a shop database replicated through the whole local pipeline, then checked.

DMS output is generated with its expected final tables; files land in a landing folder as DMS would
write them (full load, then CDC batches); each landing is delivered as S3 events through the Lambda's
handler; the lake is exported and compared with the expected tables.
"""

from __future__ import annotations

import shutil
import time
from collections import defaultdict
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from cdc_lake.core.config import PipelineConfig, TableSpec, glue_version, load_config
from cdc_lake.core.jsonl import read_jsonl

if TYPE_CHECKING:
    from cdc_lake.engine.context import LakeContext
    from cdc_lake.engine.tables import Lake
    from cdc_lake.local.generator import GenerationResult
    from cdc_lake.local.runtime import LocalJobRun, LocalPipeline

DEMO_CONFIG = "demo.yaml"


def demo_config_path() -> Path:
    return Path(str(resources.files("cdc_lake").joinpath(DEMO_CONFIG)))


def run_demo(workdir: Path, *, rows: int = 5000, batches: int = 4, config_path: Path | None = None) -> int:
    from cdc_lake.local.generator import land as land_files
    from cdc_lake.local.progress import live_status
    from cdc_lake.local.runtime import LocalPipeline
    from cdc_lake.local.session import local_spark_session

    started = time.monotonic()
    config = load_config(config_path or demo_config_path())
    generated, (load_keys, *cdc_batches) = _generate(config, workdir, rows, batches, ("landing", "warehouse"))

    print("2/5 starting a local Spark session with Iceberg …")
    spark = local_spark_session(workdir / "warehouse", app_name="cdc-lake-demo", glue_version=glue_version(config))
    tally = _Tally()
    pipeline = LocalPipeline(config, workdir / "landing", spark, on_run=tally.record)

    def land(batch: list[str]) -> None:
        land_files(generated.landing, workdir / "landing", batch)
        with live_status(f"applying {len(batch)} file(s)", spark=spark):
            pipeline.deliver(batch)

    step = time.monotonic()
    print(f"3/5 full load: landing {len(load_keys)} LOAD file(s) …")
    land(load_keys)
    print(f"    done in {time.monotonic() - step:.1f}s")
    for number, batch in enumerate(cdc_batches, start=1):
        step = time.monotonic()
        print(f"4/5 CDC batch {number}: landing {len(batch)} file(s) …", end="", flush=True)
        land(batch)
        print(f" {time.monotonic() - step:.1f}s")

    print("5/5 exporting the lake and comparing with the source …")
    all_equal = _summary(pipeline.context, generated.expected, workdir / "export", tally.totals)
    history_table = next((t for t in config.tables if t.history), None)
    if history_table is not None:
        _show_history(pipeline.context, history_table)
        all_equal &= _show_rollback(pipeline, history_table, generated.expected, workdir)
    _show_rows(config, workdir / "export")
    print(f"\nlake: {workdir / 'warehouse'}   export: {workdir / 'export'}   total {time.monotonic() - started:.1f}s")
    if tally.failures or not all_equal:
        print("demo FAILED: the lake does not equal the source" if not all_equal else "demo FAILED: job runs failed")
        return 1
    print("demo OK: every lake table equals its source table")
    return 0


def _generate(
    config: PipelineConfig, workdir: Path, rows: int, batches: int, outputs: tuple[str, ...]
) -> tuple[GenerationResult, list[list[str]]]:
    """The shop's DMS output and its expected tables (``workdir``'s earlier ``outputs`` removed), and its keys in
    landing batches: every LOAD file, then the CDC files in ``batches`` batches."""
    from cdc_lake.local.generator import GeneratorSpec, generate, land_order

    for part in ("source", "export", *outputs):
        shutil.rmtree(workdir / part, ignore_errors=True)
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"1/5 generating DMS output for {len(config.tables)} table(s), {rows} source rows each …")
    spec = GeneratorSpec(initial_rows=rows, cdc_files=batches, changes_per_file=max(rows // 10, 20))
    generated = generate(config, workdir / "source", spec)
    keys = land_order(generated)
    load_keys = [k for k in keys if k.rsplit("/", 1)[-1].startswith("LOAD")]
    cdc_keys = [k for k in keys if k not in set(load_keys)]
    per_batch = max(1, -(-len(cdc_keys) // batches))
    return generated, [load_keys] + [cdc_keys[i : i + per_batch] for i in range(0, len(cdc_keys), per_batch)]


class _Tally:
    """Files and I/U/D applied per table, and failed runs, as job runs finish."""

    def __init__(self) -> None:
        self.totals: dict[str, dict[str, int]] = defaultdict(lambda: {"files": 0, "I": 0, "U": 0, "D": 0})
        self.failures: list[LocalJobRun] = []

    def record(self, run: LocalJobRun) -> None:
        if run.error:
            self.failures.append(run)
            print(f"    FAILED {run.arguments.get('--key')}: {run.error}")
            return
        for result in run.result.commits if run.result else []:
            if result.counts:
                table_totals = self.totals[result.table]
                table_totals["files"] += len(result.applied_files)
                for op, count in result.counts.as_dict().items():
                    table_totals[op] += count


def _summary(lake: LakeContext, expected_dir: Path, export_dir: Path, totals: dict[str, dict[str, int]]) -> bool:
    """Print one line per table and whether the lake equals the source; True when all do."""
    from cdc_lake.engine.record import STATE, snapshot_summaries
    from cdc_lake.ops.export import export_tables

    config = lake.config
    exported = export_tables(lake, export_dir)
    header = f"{'table':<18} {'rows':>7} {'files':>6} {'I':>7} {'U':>7} {'D':>7} {'commits':>8}  equals source"
    print(f"\n{header}\n{'-' * len(header)}")
    all_equal = True
    for table in config.tables:
        equal = read_jsonl(expected_dir / f"{table.name}.jsonl") == read_jsonl(export_dir / f"{table.name}.jsonl")
        all_equal &= equal
        snapshots = sum(1 for s in snapshot_summaries(lake, table) if STATE in (s["summary"] or {}))
        t = totals[table.name]
        print(
            f"{table.name:<18} {exported[table.name]:>7} {t['files']:>6} {t['I']:>7} {t['U']:>7} {t['D']:>7} "
            f"{snapshots:>8}  {'yes' if equal else 'NO'}"
        )
    return all_equal


def _show_history(lake: Lake, table: TableSpec) -> None:
    """The versions of the row that changed most, as `cdc-lake history` prints them."""
    from pyspark.sql import functions as F

    from cdc_lake.engine.history import row_history
    from cdc_lake.engine.tables import history_name

    versions = lake.spark.table(lake.location.dotted(history_name(table)))
    busiest = versions.groupBy(*table.primary_key).count().orderBy(F.desc("count"), *table.primary_key).first()
    if busiest is None:
        return
    key = {k: str(busiest[k]) for k in table.primary_key}
    print(f"\nhistory of {table.name} {key} ({history_name(table)}):")
    for version in row_history(lake, table, key):
        values = ", ".join(f"{c}={_cell(version[c])}" for c in table.value_columns)
        valid_to = version["valid_to"] or "(open)"
        print(f"  v{version['version']} {version['op']} {version['valid_from']} .. {valid_to}  {values}")


def _show_rollback(pipeline: LocalPipeline, table: TableSpec, expected_dir: Path, workdir: Path) -> bool:
    """Roll the table back two changes, re-apply the landed files, and check it equals the source again."""
    from cdc_lake.ops.export import export_tables
    from cdc_lake.ops.operations import list_changes, reapply, rollback

    context = pipeline.context
    replays = [c for c in list_changes(context, table) if c.kind == "replay"]
    if len(replays) < 3:
        return True
    target = replays[-3]
    done = rollback(context, table, target.snapshot_id)
    rows = context.spark.table(context.location.dotted(table.lake_table)).count()
    print(
        f"\nrollback {table.name} to change {target.snapshot_id}: {rows} rows, "
        f"{done.files_to_reapply} file(s) to apply again"
    )
    result = reapply(context, table)
    applied = len(result.applied_files) if result else 0
    export_tables(context, workdir / "export", [table.name])
    equal = read_jsonl(expected_dir / f"{table.name}.jsonl") == read_jsonl(workdir / "export" / f"{table.name}.jsonl")
    print(f"reapply: {applied} file(s) applied again; {table.name} equals source: {'yes' if equal else 'NO'}")
    return equal


def _show_rows(config: PipelineConfig, export_dir: Path, limit: int = 5) -> None:
    table = config.tables[min(1, len(config.tables) - 1)]
    every_row = read_jsonl(export_dir / f"{table.name}.jsonl")
    # The first keys hold the generator's boundary values; the middle of the table reads like a shop.
    middle = len(every_row) // 2
    rows = every_row[middle : middle + limit]
    if not rows:
        return
    print(f"\n{len(rows)} row(s) of {table.name} (from row {middle + 1} of {len(every_row)}):")
    columns = table.column_names
    widths = {c: min(26, max(len(c), *(len(_cell(r[c])) for r in rows))) for c in columns}
    print("  " + "  ".join(c.ljust(widths[c]) for c in columns))
    for row in rows:
        print("  " + "  ".join(_cell(row[c])[: widths[c]].ljust(widths[c]) for c in columns))


def _cell(value: object) -> str:
    if value is None:
        return "NULL"
    return str(value).replace("\n", "\\n").replace("\r", "\\r")


def run_aws_demo(workdir: Path, *, rows: int = 2000, batches: int = 2) -> int:
    """The demo through the deployed path: the stack synthesized and created on an AWS endpoint (a local one
    unless ``AWS_ENDPOINT_URL`` names one), files landing in its raw bucket, the real Lambda handler starting
    Glue runs, each run as ``glue-run``; then a second reader (pyiceberg's Glue catalog on the same endpoint)
    checks that every table equals the source and carries the Glue parameters Athena reads, and Trino (the
    engine Athena runs) answers one query through the same catalog."""
    from cdc_lake.local.aws_replay import DeployedPipeline, aws_endpoint

    started = time.monotonic()
    config_path = demo_config_path()
    config = load_config(config_path)
    generated, batches_of_keys = _generate(config, workdir, rows, batches, ("trino",))
    with aws_endpoint() as endpoint:
        print(f"2/5 synthesizing the stack and creating it on {endpoint} …")
        pipeline = DeployedPipeline.create(config_path, workdir, report=lambda line: print(f"    {line}"))
        failures = 0
        for number, batch in enumerate(batches_of_keys):
            step = time.monotonic()
            label = "3/5 full load" if number == 0 else f"4/5 CDC batch {number}"
            print(f"{label}: {len(batch)} file(s) to s3://{pipeline.stack.raw_bucket}, one Lambda event each …")
            pipeline.land(generated.landing, batch)
            failures += sum(1 for run in pipeline.run_started() if run.error)
            print(f"    done in {time.monotonic() - step:.1f}s")
        unapplied, _ignored = pipeline.unapplied([key for batch in batches_of_keys for key in batch])
        print("5/5 reading the lake with a second reader (pyiceberg, Glue catalog on the same endpoint) …")
        all_equal = _check_with_pyiceberg(endpoint, config, pipeline.stack.database.name, generated.expected)
        _show_trino_query(endpoint, config.table("shop.orders"), pipeline.stack.database.name, workdir / "trino")
    missing = sum(len(k) for k in unapplied.values())
    print(f"\ntotal {time.monotonic() - started:.1f}s")
    if failures or missing or not all_equal:
        print(f"demo-aws FAILED: {failures} failed run(s), {missing} file(s) not applied, lake equals source: "
              f"{'yes' if all_equal else 'NO'}")  # fmt: skip
        return 1
    print("demo-aws OK: every lake table equals its source table, read through the Glue catalog")
    return 0


def _check_with_pyiceberg(endpoint: str, config: PipelineConfig, database: str, expected_dir: Path) -> bool:
    """Each table read by pyiceberg through the Glue catalog equals the expected table; its Glue table says
    ICEBERG with a metadata location, and its metadata is format v2 (what Athena reads)."""
    import io

    import boto3
    from pyiceberg.catalog.glue import GlueCatalog

    from cdc_lake.core.jsonl import write_jsonl
    from cdc_lake.local.aws_endpoint import aws_region

    region = aws_region()
    catalog = GlueCatalog(
        "demo", **{"glue.endpoint": endpoint, "glue.region": region, "s3.endpoint": endpoint, "s3.region": region}
    )
    glue = boto3.client("glue")
    header = f"{'table':<18} {'rows':>7}  {'table_type':<10} {'format':>6}  metadata_location  equals source"
    print(f"\n{header}\n{'-' * len(header)}")
    all_equal = True
    for table in config.tables:
        parameters = glue.get_table(DatabaseName=database, Name=table.lake_table)["Table"].get("Parameters", {})
        loaded = catalog.load_table((database, table.lake_table))
        rows = loaded.scan().to_arrow().to_pylist()
        text = io.StringIO()
        write_jsonl(rows, table, text)
        expected = (expected_dir / f"{table.name}.jsonl").read_text(encoding="utf-8")
        location = str(parameters.get("metadata_location", ""))
        fit = (
            text.getvalue() == expected
            and str(parameters.get("table_type", "")).upper() == "ICEBERG"
            and location.startswith("s3://")
            and loaded.format_version == 2
        )
        all_equal &= fit
        print(
            f"{table.name:<18} {len(rows):>7}  {parameters.get('table_type', '-'):<10} {loaded.format_version:>6}  "
            f"{'s3://…/' + location.rsplit('/', 1)[-1] if location else '-'}  {'yes' if fit else 'NO'}"
        )
    return all_equal


def _show_trino_query(endpoint: str, table: TableSpec, database: str, workdir: Path) -> None:
    """One query as Athena would run it: Trino's Iceberg catalog on the endpoint's Glue catalog and S3."""
    from cdc_lake.core.exceptions import CdcLakeError
    from cdc_lake.local.aws_endpoint import aws_region
    from cdc_lake.local.trino import TRINO_VERSION, trino_home, trino_server

    try:
        trino_home()
    except CdcLakeError as missing:
        print(f"\nno Trino query: {missing} (cdc_lake.local.trino --install)")
        return
    sql = (
        f'SELECT status, count(*) AS orders, sum(amount) AS amount FROM iceberg."{database}"."{table.lake_table}" '
        "GROUP BY status ORDER BY orders DESC, status LIMIT 5"
    )
    started = time.monotonic()
    with trino_server(endpoint, region=aws_region(), workdir=workdir) as server:
        took = time.monotonic() - started
        print(f"\nTrino {TRINO_VERSION} (the engine Athena runs) started in {took:.1f}s; log {server.log}")
        columns, rows = server.query_with_columns(sql)
    print(f"trino> {sql};")
    cells = [[_cell(value)[:26] for value in row] for row in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    print("  " + "  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True)))
    for row in cells:
        print("  " + "  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)))
