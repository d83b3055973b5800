"""The table configuration: valid files load, invalid ones fail with a message naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml

from cdc_lake.core.config import PipelineConfig, glue_version, load_config, parse_config, parse_config_text
from cdc_lake.core.exceptions import ConfigError, UnknownTableError
from cdc_lake.core.names import GLUE_VERSION, GLUE_VERSION_ENV, GLUE_VERSIONS, GlueVersion
from cdc_lake.local.demo import demo_config_path

MINIMAL = {
    "dms": {"format": "csv", "timestamp_column": "dms_timestamp", "include_op_for_full_load": False},
    "tables": [
        {
            "name": "shop.orders",
            "primary_key": ["order_id"],
            "columns": [{"name": "order_id", "type": "bigint"}, {"name": "amount", "type": "decimal(12,2)"}],
            "partition_by": ["bucket(16, order_id)"],
        }
    ],
}  # fmt: skip


def test_the_issue_example_loads_with_defaults():
    config = parse_config(MINIMAL)
    table = config.table("shop.orders")
    assert table.lake_table == "shop_orders"
    assert table.value_columns == ["amount"]
    assert config.lake.database == "cdc_lake"
    assert config.table_prefix(table) == "shop/orders/"
    assert config.dms.csv_null_value == ""  # DMS's default: an unquoted empty field is NULL


def test_a_copy_with_other_tables_looks_up_its_own():
    config = parse_config(MINIMAL)
    assert not config.table("shop.orders").history  # the lookup is made, and kept by the original
    with_history = config.model_copy(update={"tables": [config.tables[0].model_copy(update={"history": True})]})
    assert with_history.table("shop.orders").history
    assert not config.table("shop.orders").history


def test_demo_config_is_valid_and_yaml_equals_json(tmp_path: Path):
    config = load_config(demo_config_path())
    assert [t.name for t in config.tables] == ["shop.customers", "shop.orders", "shop.order_items"]
    as_json = tmp_path / "tables.json"
    as_json.write_text(json.dumps(config.model_dump(mode="json")))
    assert load_config(as_json) == config


def test_types_are_normalized():
    data = json.loads(json.dumps(MINIMAL))
    data["tables"][0]["columns"] += [
        {"name": "a", "type": "INTEGER"},
        {"name": "b", "type": "varchar(20)"},
        {"name": "c", "type": "Decimal(5, 0)"},
        {"name": "d", "type": "timestamp_ntz"},
    ]
    types = [c.type for c in parse_config(data).tables[0].columns]
    assert types == ["bigint", "decimal(12,2)", "int", "string", "decimal(5,0)", "timestamp"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["tables"][0].update(primary_key=["nope"]), "tables[shop.orders]: Value error, primary_key"),
        (lambda d: d["tables"][0]["columns"].append({"name": "x", "type": "geometry"}), "unsupported type 'geometry'"),
        (lambda d: d["tables"][0].update(name="orders"), "must be <schema>.<table>"),
        (lambda d: d["tables"][0].update(partition_by=["bucket(16, missing)"]), "unknown column 'missing'"),
        (lambda d: d["tables"][0].update(partition_by=["drop table x"]), "is not an Iceberg transform"),
        (lambda d: d["dms"].update(format="avro"), "dms.format"),
        (lambda d: d["dms"].update(extra_setting=1), "dms.extra_setting: Extra inputs are not permitted"),
        (lambda d: d["tables"].append(dict(d["tables"][0])), "appear more than once"),
        (lambda d: d["tables"][0]["columns"].append({"name": "dms_timestamp", "type": "string"}), "clash"),
        (lambda d: d["tables"][0]["columns"].append({"name": "bad\tname", "type": "string"}), "control character"),
        (lambda d: d["tables"][0]["columns"].append({"name": "Amount", "type": "string"}), "both map to the lake"),
        (
            lambda d: d.update(runs={"mode": "warm", "warm": {"commit_interval_seconds": 900}}),
            "is longer than runs.warm.quiet_seconds (600): a run would stop while a table waits out its interval",
        ),
        (
            lambda d: d.update(runs={"mode": "warm", "warm": {"commit_interval_seconds": 900, "quiet_seconds": 900}}),
            "runs.lag_alarm_seconds (900) is within what runs.warm.commit_interval_seconds and round_seconds let a "
            "file wait on purpose (920 s)",
        ),
    ],
)
def test_invalid_configuration_names_the_field(change, message):
    data = json.loads(json.dumps(MINIMAL))
    change(data)
    with pytest.raises(ConfigError) as raised:
        parse_config(data, "tables.yaml")
    assert message in str(raised.value)
    assert str(raised.value).startswith("tables.yaml: invalid table configuration")


def test_unreadable_and_unparsable_files(tmp_path: Path):
    with pytest.raises(ConfigError, match="cannot read configuration"):
        load_config(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="not valid YAML"):
        parse_config_text("tables: [unclosed", "x.yaml")
    with pytest.raises(ConfigError, match="expected a mapping"):
        parse_config_text("- 1\n- 2\n", "x.yaml")


def test_unknown_table_lists_the_configured_ones():
    with pytest.raises(
        UnknownTableError, match=r"'shop\.nope' is not in the configuration \(configured: shop\.orders\)"
    ):
        parse_config(MINIMAL).table("shop.nope")


def with_lake(**lake: Any) -> PipelineConfig:
    return parse_config({**MINIMAL, "lake": lake})


def test_glue_version_defaults_to_the_stack_default_and_takes_each_supported_version():
    assert parse_config(MINIMAL).lake.glue_version == GLUE_VERSION == "5.1"
    assert with_lake(glue_version="6.0").lake.glue_version == "6.0"
    assert set(GLUE_VERSIONS) == set(get_args(GlueVersion)) == {"5.1", "6.0"}


@pytest.mark.parametrize(("written", "version"), [(6.0, "6.0"), (5.1, "5.1")])
def test_glue_version_written_unquoted_in_yaml_is_read_as_text(written: float, version: str):
    text = yaml.safe_dump({**MINIMAL, "lake": {"glue_version": written}})
    assert f"glue_version: {written}" in text  # a YAML number, not a string
    assert parse_config_text(text, "tables.yaml").lake.glue_version == version


@pytest.mark.parametrize("value", ["5.0", "6", 6, "4.0", ""])
def test_other_glue_versions_are_refused_naming_the_field(value: Any):
    with pytest.raises(ConfigError, match=r"lake\.glue_version: Input should be '5\.1' or '6\.0'"):
        with_lake(glue_version=value)


@pytest.mark.parametrize(
    ("configured", "environ", "expected"),
    [
        ("5.1", {}, "5.1"),
        ("6.0", {}, "6.0"),
        ("5.1", {GLUE_VERSION_ENV: "6.0"}, "6.0"),
        ("6.0", {GLUE_VERSION_ENV: "5.1"}, "5.1"),
        ("6.0", {GLUE_VERSION_ENV: ""}, "6.0"),  # `make test GLUE_VERSION=` is no override
        ("5.1", {GLUE_VERSION_ENV: " 6.0\n"}, "6.0"),
    ],
)
def test_glue_version_from_the_environment_overrides_the_configuration(
    configured: str, environ: dict[str, str], expected: str
):
    assert glue_version(with_lake(glue_version=configured), environ) == expected


@pytest.mark.parametrize("value", ["6", "5.0", "latest"])
def test_glue_version_from_the_environment_must_be_a_supported_one(value: str):
    with pytest.raises(ConfigError, match=rf"^GLUE_VERSION='{value}' is not a Glue version .* 5\.1, 6\.0"):
        glue_version(parse_config(MINIMAL), {GLUE_VERSION_ENV: value})


def test_glue_version_reads_the_process_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(GLUE_VERSION_ENV, "6.0")
    assert glue_version(parse_config(MINIMAL)) == "6.0"
    monkeypatch.delenv(GLUE_VERSION_ENV)
    assert glue_version(parse_config(MINIMAL)) == "5.1"


def test_every_glue_version_has_one_local_runtime_and_its_pinned_pyspark():
    """The versions the stack runs (core.names), the runtimes that reproduce them (local.jars) and the pyspark pins
    make setup installs (requirements-glue<version>.txt) are three lists; they must name the same versions."""
    from pathlib import Path

    from cdc_lake.core.names import GLUE_VERSIONS
    from cdc_lake.local.jars import GLUE_RUNTIMES

    root = Path(__file__).resolve().parents[2]
    pins = {p.stem.removeprefix("requirements-glue"): p.read_text() for p in root.glob("requirements-glue*.txt")}
    assert set(GLUE_VERSIONS) == set(GLUE_RUNTIMES) == set(pins)
    for version, glue_runtime in GLUE_RUNTIMES.items():
        assert f"pyspark=={glue_runtime.spark_version}\n" in pins[version], version


def test_a_commit_interval_within_the_quiet_time_and_under_the_alarm_is_taken():
    runs = {"mode": "warm", "lag_alarm_seconds": 960, "warm": {"commit_interval_seconds": 900, "quiet_seconds": 900}}
    assert parse_config(MINIMAL | {"runs": runs}).runs.warm.commit_interval_seconds == 900
    # The alarm only binds a warm run's interval: another mode never reads it.
    coalesced = {"mode": "coalesced", "warm": {"commit_interval_seconds": 600}}
    assert parse_config(MINIMAL | {"runs": coalesced}).runs.lag_alarm_seconds == 900
