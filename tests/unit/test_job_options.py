"""The Glue jobs' arguments, read as Glue passes them (``sys.argv``), and refused with the argument named."""

from __future__ import annotations

import dataclasses

import pytest

from cdc_lake.core.exceptions import JobArgumentError
from cdc_lake.core.job_arguments import (
    DriftArguments,
    JobArguments,
    MaintenanceArguments,
    ReplayArguments,
    SourceCheckArguments,
    WarmArguments,
    declared_flags,
    default_text,
)
from cdc_lake.core.names import ORPHAN_DAYS, RETAIN_LAST
from cdc_lake.engine.maintenance import Retention
from cdc_lake.jobs.drift import DriftOptions
from cdc_lake.jobs.maintenance import MaintenanceOptions
from cdc_lake.jobs.replay import ReplayOptions
from cdc_lake.jobs.source_check import SourceCheckOptions
from cdc_lake.jobs.warm import WarmOptions


def test_options_from_glue_argv_like_a_console_rerun():
    argv = ["script.py", "--JOB_ID", "j_1", "--config_uri", "s3://assets/tables.json", "--catalog", "glue_catalog",
            "--bucket", "raw-bucket", "--key", "dms/shop/items/LOAD00000001.csv", "--table", "shop.items",
            "--warehouse", "s3://lake/warehouse/"]  # fmt: skip
    options = ReplayOptions.from_sys_argv(argv)
    assert options == ReplayOptions(
        config_uri="s3://assets/tables.json",
        bucket="raw-bucket",
        key="dms/shop/items/LOAD00000001.csv",
        table="shop.items",
        catalog="glue_catalog",
        database="",
    )


def test_a_warm_run_reads_glues_own_job_name_and_run_id_which_glue_reserves():
    """awsglue refuses to be asked for --JOB_RUN_ID (it always reads it): the warm run still gets it, and its name."""
    argv = ["script.py", "--JOB_ID", "j_1", "--JOB_RUN_ID", "jr_42", "--JOB_NAME", "cdclake-cdc-warm",
            "--config_uri", "s3://assets/tables.json", "--bucket", "raw", "--shard", "3",
            "--full_load_job", "cdclake-full-load", "--cdc_replay_job", "cdclake-cdc-replay"]  # fmt: skip
    options = WarmOptions.from_sys_argv(argv)
    assert (options.JOB_RUN_ID, options.JOB_NAME, options.shard) == ("jr_42", "cdclake-cdc-warm", 3)
    assert WarmOptions.from_sys_argv([a for a in argv if a not in ("--JOB_RUN_ID", "jr_42")]).JOB_RUN_ID == ""


def test_the_stack_conf_argument_is_not_taken_for_config_uri():
    # argparse reads an unknown --conf as an abbreviation of --config_uri; the stack passes --conf after it.
    conf = "spark.sql.extensions=x --conf spark.sql.catalog.glue_catalog=y"
    argv = ["script.py", "--config_uri", "s3://assets/tables.json", "--conf", conf, "--bucket", "raw-bucket",
            "--key", "dms/shop/items/LOAD00000001.csv", "--table", "shop.items", "--con", "z"]  # fmt: skip
    assert ReplayOptions.from_sys_argv(argv).config_uri == "s3://assets/tables.json"
    maintenance = ["script.py", "--config_uri", "s3://assets/tables.json", "--conf", conf, "--action", "all"]
    assert MaintenanceOptions.from_sys_argv(maintenance).config_uri == "s3://assets/tables.json"


def test_idle_seconds_is_an_optional_whole_number():
    base = {"--config_uri": "c.yaml", "--bucket": "b", "--key": "k", "--table": "t"}
    assert ReplayOptions.from_options(base).idle_seconds is None
    assert ReplayOptions.from_options({**base, "--idle_seconds": "0"}).idle_seconds == 0
    with pytest.raises(JobArgumentError, match="--idle_seconds 'soon'"):
        ReplayOptions.from_options({**base, "--idle_seconds": "soon"})


def test_missing_arguments_are_named():
    with pytest.raises(JobArgumentError, match=r"missing job argument\(s\): --key, --table"):
        ReplayOptions.from_options({"--config_uri": "c.yaml", "--bucket": "b"})


def test_maintenance_options_from_glue_argv_like_the_scheduled_trigger():
    argv = ["script.py", "--JOB_ID", "j_2", "--config_uri", "s3://assets/tables.json", "--action", "expire",
            "--retain_days", "3", "--table", "shop.items"]  # fmt: skip
    options = MaintenanceOptions.from_sys_argv(argv)
    assert options == MaintenanceOptions(
        config_uri="s3://assets/tables.json", action="expire", table="shop.items", retain_days=3
    )
    assert options.retention == Retention(days=3, last=RETAIN_LAST, orphan_days=ORPHAN_DAYS)
    defaults = MaintenanceOptions.from_options({"--config_uri": "c.yaml", "--action": "all"})
    assert defaults.table is None
    assert defaults.retention == Retention(days=None, last=RETAIN_LAST, orphan_days=ORPHAN_DAYS)  # lake.upkeep's


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"--config_uri": "c.yaml"}, r"missing job argument\(s\): --action"),
        ({"--config_uri": "c.yaml", "--action": "vacuum"}, r"--action 'vacuum': use one of compact, expire"),
        ({"--config_uri": "c.yaml", "--action": "all", "--retain_last": "-1"}, r"--retain_last '-1': expected a whole"),
    ],
)
def test_bad_maintenance_arguments_are_named(options, message):
    with pytest.raises(JobArgumentError, match=message):
        MaintenanceOptions.from_options(options)


def test_reload_job_arguments_from_glue_argv():
    argv = ["script.py", "--JOB_ID", "j_3", "--config_uri", "s3://assets/tables.json", "--action", "reload",
            "--table", "shop.items", "--bucket", "raw-bucket", "--since", "20250301-110000000"]  # fmt: skip
    options = MaintenanceOptions.from_sys_argv(argv)
    assert (options.action, options.table, options.bucket, options.since) == (
        "reload",
        "shop.items",
        "raw-bucket",
        "20250301-110000000",
    )


def test_reload_job_needs_table_and_bucket():
    with pytest.raises(
        JobArgumentError, match=r"--action reload rebuilds one table from the raw bucket: add --table, --bucket"
    ):
        MaintenanceOptions.from_options({"--config_uri": "c.yaml", "--action": "reload"})
    with pytest.raises(JobArgumentError, match=r"use one of compact, expire, orphans, all, reload"):
        MaintenanceOptions.from_options({"--config_uri": "c.yaml", "--action": "rebuild"})


def test_rejects_actions_need_a_table():
    with pytest.raises(JobArgumentError, match=r"--action rejects-accept applies one table's rejects: add --table"):
        MaintenanceOptions.from_options({"--config_uri": "c.yaml", "--action": "rejects-accept"})
    options = MaintenanceOptions.from_options(
        {"--config_uri": "c.yaml", "--action": "rejects-replay", "--table": "shop.items"}
    )
    assert (options.action, options.table) == ("rejects-replay", "shop.items")


def test_drift_options_from_glue_argv_like_the_scheduled_verify():
    conf = "spark.sql.extensions=x --conf spark.sql.catalog.glue_catalog=y"
    argv = ["script.py", "--JOB_ID", "j_4", "--conf", conf, "--config_uri", "s3://assets/tables.json",
            "--source_secret", "arn:secret", "--source_engine", "postgres", "--source_database", "shop",
            "--source_without_tls", "true", "--source_ca", "/ca.pem", "--action", "verify", "--bucket", "raw-bucket",
            "--settle_timeout", "60"]  # fmt: skip
    options = DriftOptions.from_sys_argv(argv)
    assert (options.config_uri, options.action, options.bucket, options.table) == (
        "s3://assets/tables.json", "verify", "raw-bucket", None
    )  # fmt: skip
    assert (options.source.secret, options.source.engine, options.source.database) == ("arn:secret", "postgres", "shop")
    assert (options.source.tls.required, options.source.tls.ca_file) == (False, "/ca.pem")
    assert (options.catalog, options.database, options.settle_timeout) == ("glue_catalog", "", 60.0)


def test_bad_drift_and_source_check_arguments_are_named():
    base = {"--config_uri": "c.yaml", "--source_secret": "arn:secret", "--source_engine": "mysql", "--bucket": "b"}
    with pytest.raises(JobArgumentError, match=r"missing job argument\(s\): --action"):
        DriftOptions.from_options(base)
    with pytest.raises(JobArgumentError, match=r"--action 'fix': use one of verify, repair"):
        DriftOptions.from_options({**base, "--action": "fix"})
    with pytest.raises(JobArgumentError, match=r"missing job argument\(s\): --source_secret, --source_engine"):
        SourceCheckOptions.from_options({"--config_uri": "c.yaml"})
    checked = SourceCheckOptions.from_options(base)
    assert (checked.source.engine, checked.source.database, checked.source.tls.required) == ("mysql", None, True)


# --- the declaration: each job's arguments are its dataclass fields ----------------------------------------


def test_required_and_optional_arguments_come_from_the_fields():
    assert ReplayArguments.required() == ("config_uri", "bucket", "key", "table")
    assert ReplayArguments.optional() == ("catalog", "database", "idle_seconds", "one_table")
    assert WarmArguments.required() == ("config_uri", "bucket", "shard", "full_load_job", "cdc_replay_job")
    assert DriftArguments.required() == ("config_uri", "source_secret", "source_engine", "action", "bucket")
    assert SourceCheckArguments.optional() == ("source_database", "source_without_tls", "source_ca")
    for arguments in (ReplayArguments, WarmArguments, MaintenanceArguments, SourceCheckArguments, DriftArguments):
        fields = dataclasses.fields(arguments)
        assert [a.name for a in arguments.arguments()] == [f.name for f in fields]
        assert set(arguments.required()) == {f.name for f in fields if f.default is dataclasses.MISSING}


@pytest.mark.parametrize(
    ("arguments", "given", "name", "value"),
    [
        (ReplayArguments, {"idle_seconds": "30"}, "idle_seconds", 30),
        (ReplayArguments, {"catalog": ""}, "catalog", "glue_catalog"),  # empty: the declared default
        (MaintenanceArguments, {"retain_last": "5"}, "retain_last", 5),
        (MaintenanceArguments, {"retain_days": ""}, "retain_days", None),
        (MaintenanceArguments, {"action": "rejects-accept", "table": "shop.items"}, "action", "rejects-accept"),
        (DriftArguments, {"settle_timeout": "2.5"}, "settle_timeout", 2.5),
        (DriftArguments, {"source_without_tls": "TRUE"}, "source_without_tls", True),
        (DriftArguments, {"source_without_tls": "false"}, "source_without_tls", False),
        (DriftArguments, {"action": "repair"}, "action", "repair"),
    ],
)
def test_each_argument_is_read_as_its_fields_type(arguments, given, name, value):
    base = {"config_uri": "c.yaml", "bucket": "b", "key": "k", "table": "t", "action": "all"}
    if arguments is DriftArguments:
        base = {**base, "action": "verify", "source_secret": "arn:secret", "source_engine": "postgres"}
    options = arguments.from_options({f"--{k}": v for k, v in {**base, **given}.items()})
    assert getattr(options, name) == value
    assert type(getattr(options, name)) is type(value)


@pytest.mark.parametrize(
    ("arguments", "given", "message"),
    [
        (ReplayArguments, {"--idle_seconds": "x"}, r"^--idle_seconds 'x': expected a whole number of at least 0$"),
        (DriftArguments, {"--settle_timeout": "soon"}, r"^--settle_timeout 'soon': expected a number$"),
        (DriftArguments, {"--source_without_tls": "yes"}, r"^--source_without_tls 'yes': expected true or false$"),
        (DriftArguments, {"--action": "fix"}, r"^--action 'fix': use one of verify, repair$"),
        (MaintenanceArguments, {"--action": "vacuum"}, r"^--action 'vacuum': use one of compact, .*, rejects-accept$"),
        (SourceCheckArguments, {"--source_engine": ""}, r"^missing job argument\(s\): --source_engine$"),
    ],
)
def test_a_malformed_argument_is_refused_by_name(arguments, given, message):
    base = {"--config_uri": "c.yaml", "--bucket": "b", "--key": "k", "--table": "t", "--action": "verify",
            "--source_secret": "arn:secret", "--source_engine": "mysql"}  # fmt: skip
    with pytest.raises(JobArgumentError, match=message):
        arguments.from_options({**base, **given})


def test_arguments_a_job_does_not_declare_are_left_out():
    options = ReplayArguments.from_options({"--config_uri": "c.yaml", "--bucket": "b", "--key": "k", "--table": "t",
                                            "--conf": "x=y", "--warehouse": "s3://lake/"})  # fmt: skip
    assert options == ReplayArguments(config_uri="c.yaml", bucket="b", key="k", table="t")


def test_a_field_of_a_type_glue_cannot_pass_is_refused_when_declared():
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Listed(JobArguments):
        config_uri: str
        tables: list[str]

    with pytest.raises(TypeError, match=r"Listed.tables: a job argument is str, int, float, bool or a Literal"):
        Listed.required()


def test_the_stack_sets_only_declared_arguments_with_values_they_read():
    assert declared_flags(MaintenanceArguments, {"action": "all", "retain_last": "20"}) == {
        "--action": "all",
        "--retain_last": "20",
    }
    with pytest.raises(JobArgumentError, match="MaintenanceArguments declares no argument --retain"):
        declared_flags(MaintenanceArguments, {"retain": "20"})
    with pytest.raises(JobArgumentError, match="--orphan_days 'three'"):
        declared_flags(MaintenanceArguments, {"orphan_days": "three"})
    assert default_text(MaintenanceArguments, "orphan_days") == str(ORPHAN_DAYS)
    assert default_text(DriftArguments, "source_without_tls") == "false"
