"""``cdc-lake``: the pipeline on a laptop (run, trigger, export, generate, demo) and operations on its tables
(status, changes, history, rollback, reapply, reload, rejects, reconcile, maintain)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cdc_lake.core.config import PipelineConfig, glue_version, load_config
from cdc_lake.core.exceptions import CdcLakeError
from cdc_lake.core.formats import FORMATS
from cdc_lake.core.names import ORPHAN_DAYS, RETAIN_LAST
from cdc_lake.local.progress import live_status

if TYPE_CHECKING:
    from cdc_lake.engine.context import LakeContext, ReplayContext
    from cdc_lake.local.runtime import LocalJobRun, LocalPipeline
    from cdc_lake.ops.status import TableStatus


def _add_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", "-c", type=Path, required=True, help="table configuration (YAML or JSON)")


def _add_lake(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--warehouse", "-w", type=Path, required=True, help="local Iceberg warehouse folder")
    parser.add_argument("--database", help="lake database (default: the configuration's lake.database)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cdc-lake", description=__doc__)
    parser.add_argument("--verbose", "-v", action="store_true", help="log what each run does")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="process every landed file as if each had just landed, in DMS order")
    _add_config(run)
    run.add_argument("--landing", "-l", type=Path, required=True, help="folder standing in for the raw bucket")
    _add_lake(run)

    trigger = commands.add_parser("trigger", help="deliver S3 events for exactly these keys, in this order")
    _add_config(trigger)
    trigger.add_argument("--landing", "-l", type=Path, required=True)
    _add_lake(trigger)
    trigger.add_argument("keys", nargs="+", metavar="KEY", help="object key relative to the landing folder")

    export = commands.add_parser("export", help="write each lake table as <schema.table>.jsonl")
    _add_config(export)
    _add_lake(export)
    export.add_argument("--out", "-o", type=Path, required=True)
    export.add_argument("--table", "-t", action="append", help="only this table (repeatable)")
    export.add_argument("--as-of", type=int, metavar="SNAPSHOT", help="the table as of this snapshot id")

    generate = commands.add_parser("generate", help="write DMS files and the expected final tables")
    _add_config(generate)
    generate.add_argument("--out", "-o", type=Path, required=True, help="gets landing/ and expected/")
    generate.add_argument("--rows", type=int, default=1000, help="source rows per table before the full load")
    generate.add_argument("--cdc-files", type=int, default=5, help="CDC files per table")
    generate.add_argument("--changes", type=int, default=200, help="changes per CDC file")
    generate.add_argument("--load-file-rows", type=int, help="split the full load into LOAD files of this many rows")
    generate.add_argument("--seed", type=int, default=7)
    generate.add_argument("--no-edge-cases", action="store_true", help="plain random changes only")
    generate.add_argument("--table", "-t", action="append", help="only this table (repeatable)")

    demo = commands.add_parser("demo", help="generate a shop database, replicate it, and check the lake")
    demo.add_argument("--workdir", type=Path, default=Path("demo-output"))
    demo.add_argument("--rows", type=int, default=5000, help="source rows per table")
    demo.add_argument("--batches", type=int, default=4, help="CDC batches")
    demo.add_argument("--config", "-c", type=Path, help="another table configuration (default: the shop demo)")

    demo_aws = commands.add_parser(
        "demo-aws", help="the demo through the deployed path: Glue catalog and S3 on a local AWS endpoint"
    )
    demo_aws.add_argument("--workdir", type=Path, default=Path("demo-output-aws"))
    demo_aws.add_argument("--rows", type=int, default=2000, help="source rows per table")
    demo_aws.add_argument("--batches", type=int, default=2, help="CDC batches")

    glue_run = commands.add_parser(
        "glue-run",
        help="run one of the stack's Glue jobs as Glue would (script, arguments, --conf from the template)",
        description="Runs a Glue job of a synthesized stack here: its script with the template's DefaultArguments "
        "(overridden key by key by --ARG VALUE pairs, as a console rerun's) and --conf, on the jars of its "
        "GlueVersion, against AWS_ENDPOINT_URL (or AWS itself when unset).",
    )
    glue_run.add_argument("template", type=Path, help="a synthesized template (or its cdk.out folder)")
    glue_run.add_argument("job", help="full_load, cdc_replay or maintenance (or the job's name)")
    glue_run.add_argument("--account", default=None, help="account id the template resolves with")
    glue_run.add_argument("--region", default=None, help="region the template resolves with (default: AWS_REGION)")
    glue_run.add_argument("arguments", nargs=argparse.REMAINDER, metavar="--ARG VALUE", help="run arguments")

    replay = commands.add_parser(
        "aws-replay", help="a landing folder through the deployed path (Lambda, Glue jobs, Glue catalog, S3)"
    )
    _add_config(replay)
    replay.add_argument("--landing", "-l", type=Path, required=True, help="folder of DMS files to land")
    replay.add_argument("--workdir", type=Path, default=Path("aws-replay"), help="synthesized stack goes here")

    _add_config_commands(commands)
    _add_operation_commands(commands)
    return parser


def _table_command(commands: argparse._SubParsersAction, name: str, help_text: str) -> argparse.ArgumentParser:
    """A command on one lake table: the configuration, the lake and ``--table``."""
    parser: argparse.ArgumentParser = commands.add_parser(name, help=help_text)
    _add_config(parser)
    _add_lake(parser)
    parser.add_argument("--table", "-t", required=True)
    return parser


def _add_operation_commands(commands: argparse._SubParsersAction) -> None:
    _table_command(commands, "changes", "list a table's applied changes (snapshots) with their files")

    history = _table_command(commands, "history", "every version of one row (tables with history: true)")
    history.add_argument("--key", "-k", action="append", required=True, metavar="COLUMN=VALUE")

    back = _table_command(commands, "rollback", "return a table (and its history) to an earlier change")
    back.add_argument("--to", type=int, required=True, metavar="CHANGE", help="snapshot id from `changes`")
    back.add_argument(
        "--landing",
        "-l",
        type=Path,
        required=True,
        help="the landed DMS files (a rollback they cannot replay is refused)",
    )

    again = commands.add_parser("reapply", help="apply every landed file of a table not applied yet, in order")
    _add_config(again)
    again.add_argument("--landing", "-l", type=Path, required=True)
    _add_lake(again)
    again.add_argument("--table", "-t", required=True)

    reload = commands.add_parser(
        "reload", help="rebuild a table DMS reloaded: its current LOAD files, then the CDC files after them"
    )
    _add_config(reload)
    reload.add_argument("--landing", "-l", type=Path, required=True)
    _add_lake(reload)
    reload.add_argument("--table", "-t", required=True)
    reload.add_argument(
        "--since",
        metavar="CDC_FILE_OR_TIME",
        help="apply CDC files from this one on (a CDC file name, 20250301-120500123, or an ISO 8601 UTC time); "
        "default: those written from an hour before the reload's first LOAD file",
    )

    status = commands.add_parser(
        "status", help="every table at a glance: state, lag, files waiting, the last day's commits and Glue cost"
    )
    _add_config(status)
    status.add_argument("--landing", "-l", type=Path, help="folder standing in for the raw bucket (local lake)")
    status.add_argument("--warehouse", "-w", type=Path, help="local Iceberg warehouse folder (local lake)")
    status.add_argument("--bucket", help="the raw bucket DMS writes to: read the lake through the Glue catalog")
    status.add_argument("--lake-warehouse", help="with --bucket: the lake's s3:// warehouse (the stack's LakeBucket)")
    status.add_argument("--aws-endpoint", help="with --bucket: an AWS endpoint URL (e.g. a local one); default AWS")
    status.add_argument("--database", help="lake database (default: the configuration's lake.database)")
    status.add_argument("--table", "-t", action="append", help="only this table (repeatable; default all)")
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.add_argument("--plot", type=Path, metavar="PNG", help="draw each table's lag over the last day's commits")

    rejects = commands.add_parser(
        "rejects",
        help="a quarantining table's outstanding rejects: list them, replay them once fixed, or accept their loss",
    )
    rejects.add_argument(
        "action",
        choices=["list", "replay", "accept"],
        help="replay: apply them, with the changes held behind them, in DMS order; accept: drop the bad rows and "
        "apply the held ones",
    )
    _add_config(rejects)
    rejects.add_argument("--landing", "-l", type=Path, required=True)
    _add_lake(rejects)
    rejects.add_argument("--table", "-t", required=True)

    reconcile = _table_command(commands, "reconcile", "compare a table with an expected extract (CSV/Parquet/JSONL)")
    reconcile.add_argument("--expected", "-e", required=True, help="a local path or an s3:// URI")
    reconcile.add_argument("--format", choices=["jsonl", "csv", "parquet"], help="default: from the extension")
    reconcile.add_argument("--limit", type=int, default=10, help="differences shown")
    reconcile.add_argument("--as-of", type=int, metavar="CHANGE")

    maintain = commands.add_parser("maintain", help="compact, expire snapshots, remove orphan files")
    _add_config(maintain)
    _add_lake(maintain)
    maintain.add_argument("--table", "-t", action="append", help="only this table (repeatable; default all)")
    maintain.add_argument("--action", choices=["compact", "expire", "orphans", "all"], default="all")
    maintain.add_argument(
        "--retain-days", type=int, help="keep snapshots younger than this (rollback; default: lake.upkeep.keep_days)"
    )
    maintain.add_argument("--retain-last", type=int, default=RETAIN_LAST, help="and at least this many")
    maintain.add_argument(
        "--orphan-days", type=int, default=ORPHAN_DAYS, help="only remove orphan files older than this"
    )


SOURCE_HELP = (
    "PostgreSQL: a libpq URL or conninfo (password: PGPASSWORD, .pgpass); MySQL/MariaDB: "
    "mysql://user@host:port/database (password: MYSQL_PWD); Oracle and SQL Server are refused (docs/sources.md)"
)


def _add_source(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--source", required=True, help=SOURCE_HELP)
    parser.add_argument(
        "--source-without-tls",
        action="store_true",
        help="allow a source without TLS or whose certificate is not checked (default: refused; see "
        "docs/deploy.md#source-tls)",
    )


def _source_tls(args: argparse.Namespace) -> Any:
    from cdc_lake.ops.source_tls import SourceTls

    return SourceTls(required=not args.source_without_tls)


def _source(args: argparse.Namespace) -> Any:
    """The source the command reaches; Oracle and SQL Server refused before anything else is done."""
    from cdc_lake.ops.source_check import refuse_unreachable
    from cdc_lake.ops.source_tls import SourceAddress

    refuse_unreachable(args.source)
    return SourceAddress(args.source, _source_tls(args))


def _add_config_commands(commands: Any) -> None:
    check = commands.add_parser("check-config", help="validate a table configuration and print its tables")
    _add_config(check)
    verify = commands.add_parser("verify", help="compare lake tables with the live source, reading only what differs")
    _add_config(verify)
    _add_lake(verify)
    verify.add_argument("--table", "-t", action="append", help="only this table (repeatable; default all)")
    _add_source(verify)
    verify.add_argument("--json", action="store_true", help="one JSON object a line per differing key")
    verify.add_argument(
        "--landing", "-l", type=Path, help="where DMS files land: re-check differing keys once the lake caught up"
    )
    verify.add_argument("--settle-timeout", type=float, default=900.0, help="seconds to wait for the lake per look")
    repair = commands.add_parser("repair", help="rewrite only the drifted keys from the live source (no DMS reload)")
    _add_config(repair)
    _add_lake(repair)
    repair.add_argument("--table", "-t", action="append", help="only this table (repeatable; default all)")
    _add_source(repair)
    repair.add_argument("--landing", "-l", type=Path, required=True, help="where DMS files land (changes in flight)")
    repair.add_argument("--settle-timeout", type=float, default=900.0, help="seconds to wait for the lake per look")
    repair.add_argument("--dry-run", action="store_true", help="show what would be rewritten; write nothing")
    from_source = commands.add_parser(
        "config-from-source", help="write the table configuration from a PostgreSQL, MySQL or MariaDB source's catalog"
    )
    _add_source(from_source)
    from_source.add_argument("--schema", action="append", default=[], help="only this schema (repeatable)")
    from_source.add_argument("--table", action="append", default=[], help="only <schema>.<table> matching (glob)")
    from_source.add_argument("--format", choices=list(FORMATS), default="csv", help="the DMS target's format")
    from_source.add_argument("--database", default="", help="the lake database (default cdc_lake)")
    from_source.add_argument("--output", "-o", type=Path, help="the YAML file to write (default: print it)")
    from_source.add_argument("--force", action="store_true", help="overwrite an existing --output file")
    from_files = commands.add_parser(
        "config-from-files", help="propose the table configuration from landed DMS files (Parquet, CSV with a header)"
    )
    from_files.add_argument("--landing", "-l", type=Path, help="the folder DMS files landed in")
    from_files.add_argument("--bucket", help="or the raw bucket DMS writes to")
    from_files.add_argument("--aws-endpoint", help="with --bucket: an AWS endpoint URL (e.g. a local one)")
    from_files.add_argument("--format", choices=list(FORMATS), default="parquet", help="the DMS target's format")
    from_files.add_argument("--header", action="store_true", help="CSV files carry a header (AddColumnName)")
    from_files.add_argument("--bucket-folder", default="dms", help="DMS BucketFolder (default dms)")
    from_files.add_argument("--timestamp-column", help="DMS TimestampColumnName, when set")
    from_files.add_argument(
        "--key", action="append", default=[], metavar="SCHEMA.TABLE=COLUMN[,COLUMN]", help="a table's primary key"
    )
    from_files.add_argument("--database", default="", help="the lake database (default cdc_lake)")
    from_files.add_argument("--output", "-o", type=Path, help="the YAML file to write (default: print it)")
    from_files.add_argument("--force", action="store_true", help="overwrite an existing --output file")
    check_source = commands.add_parser(
        "config-check-source", help="every difference between a table configuration and the live source"
    )
    _add_config(check_source)
    _add_source(check_source)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(COMMANDS[args.command](args) or 0)
    except CdcLakeError as error:
        print(f"cdc-lake: {error}", file=sys.stderr)
        return 2


def _config(args: argparse.Namespace) -> PipelineConfig:
    return load_config(args.config)


def _pipeline(args: argparse.Namespace, config: PipelineConfig) -> LocalPipeline:
    from cdc_lake.local.runtime import LocalPipeline
    from cdc_lake.local.session import local_spark_session

    spark = local_spark_session(args.warehouse, glue_version=glue_version(config))
    return LocalPipeline(config, args.landing, spark, database=args.database, on_run=_print_run)


def _print_run(run: LocalJobRun) -> None:
    for notice in run.result.notices if run.result else []:
        print(f"  NOTICE  {notice}")
    key = run.arguments.get("--key", "?")
    if run.error:
        indented = run.error.replace("\n", "\n" + " " * 10)
        print(f"  FAILED  {key}  ({run.job}, {run.seconds:.1f}s)\n          {indented}")
        return
    outcome = run.result
    assert outcome is not None
    if outcome.already_applied:
        print(f"  skip    {key}  (already applied)")
        return
    for result in outcome.commits:
        counts = result.counts.as_dict() if result.counts else {}
        upto = result.trigger.key if result.trigger else "-"
        print(
            f"  applied {result.table}  {len(result.applied_files)} file(s) up to {upto}, "
            f"I {counts.get('I', 0)} U {counts.get('U', 0)} D {counts.get('D', 0)}, {result.keys_changed} key(s), "
            f"{result.seconds:.1f}s"
        )
    if len(outcome.commits) > 1 or outcome.rounds > 1:
        print(f"  run {run.run_id}: {len(outcome.commits)} commit(s) in {outcome.rounds} round(s), {run.seconds:.1f}s")


def _finish(runs: Sequence[LocalJobRun]) -> int:
    from cdc_lake.local.runtime import failed_runs

    failed = failed_runs(runs)
    applied = sum(len(r.result.applied_files) for r in runs if r.result)
    print(f"{len(runs)} job run(s): {applied} file(s) applied, {len(failed)} failed")
    return 1 if failed else 0


def cmd_run(args: argparse.Namespace) -> int:
    config = _config(args)
    pipeline = _pipeline(args, config)
    keys = pipeline.landed_keys()
    print(f"delivering {len(keys)} landed file(s) from {args.landing}")
    with live_status(f"applying {len(keys)} file(s)", spark=pipeline.spark):
        runs = pipeline.deliver(keys)
    return _finish(runs)


def cmd_trigger(args: argparse.Namespace) -> int:
    config = _config(args)
    pipeline = _pipeline(args, config)
    with live_status(f"applying {len(args.keys)} file(s)", spark=pipeline.spark):
        runs = pipeline.deliver(args.keys)
    return _finish(runs)


def cmd_export(args: argparse.Namespace) -> int:
    from cdc_lake.ops.export import export_tables

    config = _config(args)
    written = export_tables(_lake(args, config), args.out, args.table, snapshot_id=args.as_of)
    for name, rows in written.items():
        print(f"{args.out / (name + '.jsonl')}: {rows} row(s)")
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from cdc_lake.local.generator import GeneratorSpec, generate

    config = _config(args)
    spec = GeneratorSpec(
        seed=args.seed,
        initial_rows=args.rows,
        cdc_files=args.cdc_files,
        changes_per_file=args.changes,
        load_file_rows=args.load_file_rows,
        edge_cases=not args.no_edge_cases,
    )
    started = time.monotonic()
    result = generate(config, args.out, spec, tables=args.table)
    for table in result.tables:
        print(
            f"{table.table}: {len(table.load_files)} LOAD file(s), {len(table.cdc_files)} CDC file(s), "
            f"changes {table.changes}, expected {table.expected_rows} row(s)"
        )
    print(f"landing: {result.landing}\nexpected: {result.expected}\n({time.monotonic() - started:.1f}s)")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from cdc_lake.local.demo import run_demo

    return run_demo(args.workdir, rows=args.rows, batches=args.batches, config_path=args.config)


def cmd_demo_aws(args: argparse.Namespace) -> int:
    from cdc_lake.local.demo import run_aws_demo

    return run_aws_demo(args.workdir, rows=args.rows, batches=args.batches)


def cmd_glue_run(args: argparse.Namespace) -> int:
    import os

    from cdc_lake.core.catalogs import AWS_ENDPOINT_ENV
    from cdc_lake.local.aws_endpoint import aws_region
    from cdc_lake.local.deployed import DEFAULT_ACCOUNT, DeployedStack
    from cdc_lake.local.glue_run import glue_run, parse_overrides

    overrides = parse_overrides(args.arguments)
    region = args.region or aws_region()
    stack = DeployedStack.load(args.template, account=args.account or DEFAULT_ACCOUNT, region=region)
    endpoint = os.environ.get(AWS_ENDPOINT_ENV) or f"AWS itself ({AWS_ENDPOINT_ENV} is not set)"
    print(f"glue-run {stack.job(args.job).name} of {stack.stack_name} against {endpoint}")
    run_id = glue_run(stack, args.job, overrides)
    print(f"glue-run {run_id}: succeeded")
    return 0


def cmd_aws_replay(args: argparse.Namespace) -> int:
    from cdc_lake.local.aws_replay import aws_endpoint, aws_replay

    with aws_endpoint():
        outcome = aws_replay(args.config, args.landing, args.workdir)
    unapplied = {table: keys for table, keys in outcome.unapplied.items() if keys}
    applied = len(outcome.landed) - len(outcome.ignored) - sum(len(k) for k in unapplied.values())
    print(
        f"{len(outcome.landed)} file(s) landed, {applied} applied, {len(outcome.runs)} Glue run(s), "
        f"{len(outcome.failed_runs)} failed"
    )
    for key in outcome.ignored:
        print(f"  not a DMS file of a configured table: {key}")
    for table, keys in unapplied.items():
        print(f"  {table}: {len(keys)} file(s) not applied, the first {keys[0]}")
    return 0 if outcome.ok else 1


def cmd_config_from_source(args: argparse.Namespace) -> int:
    from cdc_lake.ops.source_catalog import STACK_DMS, Origin, config_text, masked
    from cdc_lake.ops.source_check import dialect

    address = _source(args)
    if args.output is not None and args.output.exists() and not args.force:
        raise CdcLakeError(f"{args.output} exists; give --force to overwrite it")
    source = dialect(address.url)
    with source.connect(address.url, address.tls) as connection:
        tables = source.read_catalog(connection, args.schema, args.table, args.format)
    if not tables:
        where = f"schema(s) {', '.join(args.schema)}" if args.schema else "any schema"
        matching = f" matching {', '.join(args.table)}" if args.table else ""
        raise CdcLakeError(f"no table in {where}{matching} at {masked(args.source)}; nothing was written")
    origin = Origin(args.source, source.mapping, {**STACK_DMS, "format": args.format}, args.database)
    return _write_config(args.output, config_text(tables, origin), tables, "without a primary key")


def cmd_config_from_files(args: argparse.Namespace) -> int:
    from cdc_lake.core.config import DmsSettings
    from cdc_lake.core.storage import LocalFolderStore, ObjectStore, S3Store
    from cdc_lake.local.files_catalog import FILES_MAPPING, read_landing
    from cdc_lake.local.session import local_spark_session
    from cdc_lake.ops.source_catalog import Origin, config_text

    if args.output is not None and args.output.exists() and not args.force:
        raise CdcLakeError(f"{args.output} exists; give --force to overwrite it")
    keys: dict[str, list[str]] = {}
    for given in args.key:
        table, _, columns = given.partition("=")
        if not columns:
            raise CdcLakeError(f"--key {given!r}: expected <schema>.<table>=<column>[,<column>...]")
        keys[table] = [c.strip() for c in columns.split(",")]
    settings = {"format": args.format, "bucket_folder": args.bucket_folder, "add_column_name": args.header}
    if args.timestamp_column:
        settings["timestamp_column"] = args.timestamp_column
    dms = DmsSettings.model_validate(settings)
    store: ObjectStore
    if args.bucket:
        import boto3

        store = S3Store(args.bucket, boto3.client("s3", endpoint_url=args.aws_endpoint) if args.aws_endpoint else None)
        spark = local_spark_session(aws_endpoint=args.aws_endpoint)
        source = f"s3://{args.bucket}/"
    elif args.landing is not None and args.landing.is_dir():
        store, spark, source = LocalFolderStore(args.landing), local_spark_session(), str(args.landing)
    else:
        raise CdcLakeError("config-from-files needs --landing (an existing folder) or --bucket")
    tables = read_landing(spark, store, dms, keys)
    if not tables:
        raise CdcLakeError(
            f"no DMS data files under {source}{dms.bucket_folder}/<schema>/<table>/; nothing was written"
        )
    written_dms = dms.model_dump(mode="json", exclude_defaults=True)
    text = config_text(tables, Origin(source, FILES_MAPPING, written_dms, args.database))
    return _write_config(args.output, text, tables, "without a key given")


def _write_config(output: Path | None, text: str, tables: Sequence[Any], keyless_as: str) -> int:
    """Print a written configuration, or write it to ``output`` and say what it holds."""
    if output is None:
        print(text, end="")
        return 0
    output.write_text(text)
    keyless = sum(1 for t in tables if not t.primary_key)
    print(f"{output}: {len(tables) - keyless} table(s); {keyless} {keyless_as} listed in a comment")
    return 0


def cmd_config_check_source(args: argparse.Namespace) -> int:
    from cdc_lake.ops.source_check import check_source

    source = _source(args)
    config = _config(args)
    _, found = check_source(config, source.url, source.tls)
    for difference in found:
        print(difference)
    print(f"{len(config.tables)} table(s) checked: {len(found)} difference(s)")
    return 1 if found else 0


def cmd_check_config(args: argparse.Namespace) -> int:
    config = _config(args)
    print(f"{args.config}: valid; DMS format {config.dms.format}, lake database {config.lake.database}")
    for table in config.tables:
        print(
            f"  {table.name} -> {config.lake.database}.{table.lake_table}  key {table.primary_key}  "
            f"{len(table.columns)} column(s)  prefix {config.table_prefix(table)}"
        )
        renamed = [f"{c.source} -> {c.name}" for c in table.columns if c.source != c.name]
        if renamed:  # Glue and Athena take lower-case names only (docs/source-types.md#names)
            print(f"    lake column names: {', '.join(renamed)}")
        for note in config.source_type_notes(table):  # docs/source-types.md#oracle
            print(f"    announced: {note}")
    return 0


def _lake(args: argparse.Namespace, config: PipelineConfig) -> LakeContext:
    from cdc_lake.engine.context import LakeContext
    from cdc_lake.engine.tables import LakeLocation
    from cdc_lake.local.session import LOCAL_CATALOG, local_spark_session

    spark = local_spark_session(args.warehouse, glue_version=glue_version(config))
    location = LakeLocation(LOCAL_CATALOG, args.database or config.lake.database)
    return LakeContext(spark=spark, location=location, config=config)


def _landed(lake: LakeContext, landing: Path) -> ReplayContext:
    """``lake``'s replay context, its DMS files read from the ``landing`` folder."""
    from cdc_lake.core.storage import LocalFolderStore
    from cdc_lake.engine.context import ReplayContext

    return ReplayContext(spark=lake.spark, location=lake.location, config=lake.config, store=LocalFolderStore(landing))


def cmd_changes(args: argparse.Namespace) -> int:
    from cdc_lake.ops.operations import list_changes

    config = _config(args)
    lake = _lake(args, config)
    table = config.table(args.table)
    changes = list_changes(lake, table)
    if not changes:
        print(f"{table.name}: no lake table yet")
        return 0
    columns = f"{'files':>5} {'I':>6} {'U':>6} {'D':>6} {'keys':>6} {'bytes':>9} {'run s':>7} {'lag s':>8}"
    columns += f" {'landed s':>8}"
    print(f"{'change (snapshot id)':<21} {'time (UTC)':<20} {'kind':<12} {columns}")
    for change in changes:
        counts, fresh = change.counts, change.freshness
        when = change.made_current_at.strftime("%Y-%m-%d %H:%M:%S")
        print(
            f"{change.snapshot_id:<21} {when:<20} {change.kind:<12} {change.file_count:>5} {counts.get('I', ''):>6} "
            f"{counts.get('U', ''):>6} {counts.get('D', ''):>6} {counts.get('keys', ''):>6} "
            f"{_shown(fresh.get('bytes')):>9} {_shown(fresh.get('seconds')):>7} "
            f"{_shown(fresh.get('change_lag_s')):>8} {_shown(fresh.get('landed_lag_s')):>8}"
        )
        named = change.files if len(change.files) == change.file_count else [change.files[0], "…", change.files[-1]]
        for key in named:
            print(f"{'':<21}   {key}")
        for notice in change.notices:
            print(f"{'':<21}   NOTICE {notice}")
        if change.rejects_replayed:
            done = change.rejects_replayed
            applied = f"{done['applied']} row(s) to {done['keys']} key(s)"
            print(f"{'':<21}   REJECTS applied {applied}, dropped {done['dropped']}")
        if change.diverged:
            mark = change.diverged
            print(
                f"{'':<21}   DIVERGED {mark['rejected']} row(s) quarantined, {mark['held']} held, in "
                f"{mark['rejects_table']} (cdc-lake rejects list)"
            )
    return 0


def _shown(value: float | None) -> str:
    """A figure of the changes table; blank when the commit did not record it."""
    if value is None:
        return ""
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def cmd_history(args: argparse.Namespace) -> int:
    from cdc_lake.engine.history import row_history

    config = _config(args)
    lake = _lake(args, config)
    table = config.table(args.table)
    if not table.history:
        raise CdcLakeError(f"{table.name} keeps no history; set `history: true` on it in the configuration")
    key = dict(part.split("=", 1) for part in args.key)
    missing = sorted(set(table.primary_key) - set(key))
    if missing:
        raise CdcLakeError(f"--key must name every primary key column of {table.name}; missing {missing}")
    versions = row_history(lake, table, key)
    if not versions:
        print(f"{table.name}: no version of {key}")
        return 1
    for version in versions:
        values = ", ".join(f"{c}={version[c]!r}" for c in table.value_columns)
        valid_to = version["valid_to"] or "(open)"
        marker = "current" if version["is_current"] else ""
        print(f"v{version['version']:<3} {version['op']}  {version['valid_from']} .. {valid_to}  {marker:<7} {values}")
        print(f"      from {version['source_file']} row {version['source_row']}")
    return 0


def cmd_rollback(args: argparse.Namespace) -> int:
    from cdc_lake.ops.operations import rollback

    config = _config(args)
    done = rollback(_landed(_lake(args, config), args.landing), config.table(args.table), args.to)
    history = f" (history at {done.history_snapshot_id})" if done.history_snapshot_id else ""
    print(
        f"{done.table}: now at change {done.snapshot_id}{history}; {done.files_to_reapply} later file(s) will be "
        "applied again by the next trigger or `cdc-lake reapply`"
    )
    return 0


def cmd_reapply(args: argparse.Namespace) -> int:
    from cdc_lake.ops.operations import reapply

    config = _config(args)
    result = reapply(_landed(_lake(args, config), args.landing), config.table(args.table))
    if result is None or result.already_applied:
        print(f"{args.table}: nothing to re-apply")
        return 0
    counts = result.counts.as_dict() if result.counts else {}
    print(f"{result.table}: applied {len(result.applied_files)} file(s) in change {result.snapshot_id}: {counts}")
    return 0


def cmd_reload(args: argparse.Namespace) -> int:
    from cdc_lake.engine.reload import reload_table
    from cdc_lake.jobs.maintenance import describe_reload

    config = _config(args)
    result = reload_table(_landed(_lake(args, config), args.landing), config.table(args.table), since=args.since)
    print(describe_reload(result))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from cdc_lake.ops.status import pipeline_status

    config = _config(args)
    context = _status_context(args, config)
    tables = [config.table(name) for name in args.table] if args.table else None
    found = pipeline_status(context, tables)
    if args.json:
        print(json.dumps([s.as_json() for s in found], indent=2))
    else:
        _print_status(found)
    if args.plot:
        from cdc_lake.local.status_plot import plot_lags

        plot_lags(found, args.plot)
        if not args.json:
            print(f"lag picture: {args.plot}")
    return 0 if all(s.healthy for s in found) else 1


def _status_context(args: argparse.Namespace, config: PipelineConfig) -> ReplayContext:
    if args.bucket:
        import boto3

        from cdc_lake.core.catalogs import glue_catalog_conf
        from cdc_lake.core.names import GLUE_CATALOG
        from cdc_lake.core.storage import S3Store
        from cdc_lake.engine.context import ReplayContext
        from cdc_lake.engine.tables import LakeLocation
        from cdc_lake.local.session import local_spark_session

        warehouse = args.lake_warehouse or f"s3://{args.bucket}/unused-warehouse/"
        spark = local_spark_session(conf=glue_catalog_conf(warehouse), aws_endpoint=args.aws_endpoint)
        client = boto3.client("s3", endpoint_url=args.aws_endpoint) if args.aws_endpoint else None
        return ReplayContext(
            spark=spark,
            location=LakeLocation(GLUE_CATALOG, args.database or config.lake.database),
            config=config,
            store=S3Store(args.bucket, client),
        )
    if args.warehouse is None or args.landing is None:
        raise CdcLakeError("status needs --warehouse and --landing (a local lake), or --bucket (the deployed one)")
    if not args.warehouse.is_dir():
        raise CdcLakeError(f"{args.warehouse}: no such warehouse folder; give the one `cdc-lake run` wrote")
    if not args.landing.is_dir():
        raise CdcLakeError(f"{args.landing}: no such landing folder; give the one DMS files land in")
    return _landed(_lake(args, config), args.landing)


def _print_status(found: Sequence[TableStatus]) -> None:
    from rich.console import Console
    from rich.table import Table

    styles = {"fresh": "green", "never loaded": "dim", "behind": "yellow", "refused": "red", "diverged": "magenta"}
    view = Table(title="cdc-lake status", title_justify="left")
    for heading in ("table", "state", "change lag", "waiting", "oldest waiting", "last commit", "24 h applied",
                    "24 h Glue"):  # fmt: skip
        view.add_column(heading, justify="left" if heading in ("table", "state", "last commit") else "right")
    for s in found:
        view.add_row(
            s.table,
            f"[{styles[s.state]}]{s.state}[/]",
            _seconds(s.change_lag_s),
            f"{s.waiting_files} file(s), {_bytes(s.waiting_bytes)}" if s.waiting_files else "none",
            _seconds(s.waiting_lag_s),
            s.last_commit.strftime("%Y-%m-%d %H:%M:%S") if s.last_commit else "never",
            f"{s.rows_24h} row(s), {s.files_24h} file(s)",
            f"{s.batch_seconds_24h:.0f} s ≈ ${s.cost_24h_usd:.2f}",
        )
    console = Console(width=160)
    console.print(view)
    for s in found:
        if s.detail:
            console.print(f"[bold]{s.table}[/] ({s.state}): {s.detail}", markup=True, highlight=False)


def _seconds(value: float | None) -> str:
    if value is None:
        return ""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} s"


def _bytes(size: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def cmd_rejects(args: argparse.Namespace) -> int:
    from cdc_lake.engine.rejects_replay import outstanding_rejects, replay_rejects

    config = _config(args)
    context = _landed(_lake(args, config), args.landing)
    table = config.table(args.table)
    if args.action == "list":
        rows = outstanding_rejects(context, table)
        shown = rows.collect() if rows is not None else []
        for row in shown:
            column = f", column {row['column']}" if row["column"] else ""
            print(f"{row['status']}: {row['file']}: row {row['row']}{column}: {row['reason']} | {row['raw']}")
        print(f"{table.name}: {len(shown)} outstanding row(s)")
        return 0
    result = replay_rejects(context, table, accept=args.action == "accept")
    dropped = f", dropped {result.dropped} bad row(s)" if args.action == "accept" else ""
    print(f"{table.name}: applied {result.applied} quarantined row(s) to {result.keys} key(s){dropped}")
    return 0


def cmd_reconcile(args: argparse.Namespace) -> int:
    from cdc_lake.engine.tables import TableSnapshot
    from cdc_lake.ops.reconcile import format_report, reconcile

    config = _config(args)
    lake = _lake(args, config)
    snapshot = TableSnapshot(lake.location, config.table(args.table), args.as_of)
    report = reconcile(lake.spark, snapshot, args.expected, file_format=args.format, limit=args.limit)
    print(format_report(report))
    return 0 if report.matches else 1


def cmd_verify(args: argparse.Namespace) -> int:
    """Exit 0 when no table drifted, 1 when one did (2, as for every command, on an error)."""
    from cdc_lake.ops.verify import Settle, verify

    source = _source(args)
    config = _config(args)
    lake = _lake(args, config)
    settle = None
    if args.landing is not None:
        interval = float(config.dms.cdc_max_batch_interval)
        settle = Settle(_landed(lake, args.landing), interval, timeout_s=args.settle_timeout)
    elif not args.json:
        print("without --landing, a change still in flight shows as drift: verify when the lake has caught up")
    results = verify(lake, source, args.table, settle=settle)
    for result in results:
        for drift in result.drift:
            if args.json:
                print(json.dumps(drift.as_json(), sort_keys=False))
            else:
                columns = f" ({', '.join(drift.columns)})" if drift.columns else ""
                key = ", ".join(f"{k}={v!r}" for k, v in drift.key.items())
                print(f"{drift.table}: {drift.kind}: {key}{columns}")
        if not args.json:
            stats = result.stats
            print(
                f"{result.table}: {len(result.drift)} differing key(s); {stats.source_queries} source queries, "
                f"{stats.source_rows} source rows and {stats.lake_rows} lake rows read, {stats.ranges} ranges, "
                f"{stats.seconds:.1f} s"
                + (
                    f"; not compared (DMS writes them as text): {', '.join(result.not_compared)}"
                    if result.not_compared
                    else ""
                )
            )
        if result.unsettled:
            print(f"{result.table}: {len(result.unsettled)} key(s) not drift but unsettled: {result.settle_note}")
    return 1 if any(r.drift for r in results) else 0


def cmd_repair(args: argparse.Namespace) -> int:
    """Exit 0 when the repaired tables then equal the source (a second verify), 1 otherwise."""
    from cdc_lake.ops.repair import repair
    from cdc_lake.ops.verify import Settle, verify

    source = _source(args)
    config = _config(args)
    context = _landed(_lake(args, config), args.landing)
    settle = Settle(context, float(config.dms.cdc_max_batch_interval), timeout_s=args.settle_timeout)
    results = repair(context, source, args.table, settle=settle, dry_run=args.dry_run)
    for result in results:
        for drift in result.verified.drift:
            key = ", ".join(f"{k}={v!r}" for k, v in drift.key.items())
            verb = "would rewrite" if args.dry_run else "rewrote"
            print(
                f"{result.table}: {verb} {key} ({drift.kind}{': ' + ', '.join(drift.columns) if drift.columns else ''})"
            )
        if result.snapshot_id is not None:
            print(
                f"{result.table}: repaired {result.keys} key(s), {result.upserted} upserted and {result.deleted} "
                f"deleted, in change {result.snapshot_id} (source position {result.position})"
            )
        elif not result.keys:
            print(f"{result.table}: nothing to repair")
    if args.dry_run:
        return 1 if any(r.keys for r in results) else 0
    repaired = [r.table for r in results if r.snapshot_id is not None]
    if not repaired:
        return 0
    again = verify(context, source, repaired, settle=settle)
    left = sum(len(v.drift) for v in again)
    print(f"verified again: {left} differing key(s) in {', '.join(repaired)}")
    return 1 if left else 0


def cmd_maintain(args: argparse.Namespace) -> int:
    from cdc_lake.engine.maintenance import Retention, maintain

    config = _config(args)
    lake = _lake(args, config)
    retention = Retention(days=args.retain_days, last=args.retain_last, orphan_days=args.orphan_days)
    for result in maintain(lake, args.action, tables=args.table, retention=retention):
        details = ", ".join(f"{k} {v}" for k, v in result.detail.items())
        print(f"{result.table}: {result.action}: {details}")
    return 0


COMMANDS = {
    "changes": cmd_changes,
    "history": cmd_history,
    "rollback": cmd_rollback,
    "reapply": cmd_reapply,
    "reload": cmd_reload,
    "rejects": cmd_rejects,
    "status": cmd_status,
    "reconcile": cmd_reconcile,
    "verify": cmd_verify,
    "repair": cmd_repair,
    "maintain": cmd_maintain,
    "run": cmd_run,
    "trigger": cmd_trigger,
    "export": cmd_export,
    "generate": cmd_generate,
    "demo": cmd_demo,
    "demo-aws": cmd_demo_aws,
    "glue-run": cmd_glue_run,
    "aws-replay": cmd_aws_replay,
    "check-config": cmd_check_config,
    "config-from-source": cmd_config_from_source,
    "config-check-source": cmd_config_check_source,
    "config-from-files": cmd_config_from_files,
}

if __name__ == "__main__":
    sys.exit(main())
