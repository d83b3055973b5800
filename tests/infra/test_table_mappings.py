"""The configuration -> DMS translation, without CDK: what the reader expects is what DMS is told to write."""

from __future__ import annotations

import pytest

from cdc_lake.core.config import DmsSettings, load_config, parse_config
from cdc_lake.core.formats import FORMATS, DmsFormat
from infra.table_mappings import dms_literal, s3_settings, table_mappings
from tests.infra.conftest import DEMO_CONFIG, PARQUET_CONFIG, PARQUET_S3_SETTINGS


def test_dms_literal_escapes_wildcards_only() -> None:
    assert dms_literal("order_items") == "order[_]items"
    assert dms_literal("pct%off") == "pct[%]off"
    assert dms_literal("Customers$2") == "Customers$2"


def test_demo_table_mappings_select_each_configured_table_and_nothing_else() -> None:
    assert table_mappings(load_config(DEMO_CONFIG)) == {
        "rules": [
            {
                "rule-type": "selection",
                "rule-id": "1",
                "rule-name": "include-shop.customers",
                "object-locator": {"schema-name": "shop", "table-name": "customers"},
                "rule-action": "include",
            },
            {
                "rule-type": "selection",
                "rule-id": "2",
                "rule-name": "include-shop.orders",
                "object-locator": {"schema-name": "shop", "table-name": "orders"},
                "rule-action": "include",
            },
            {
                "rule-type": "selection",
                "rule-id": "3",
                "rule-name": "include-shop.order_items",
                "object-locator": {"schema-name": "shop", "table-name": "order[_]items"},
                "rule-action": "include",
            },
        ]
    }


def test_change_sequence_column_adds_one_transformation_rule_per_table() -> None:
    mappings = table_mappings(load_config(PARQUET_CONFIG))
    transformations = [rule for rule in mappings["rules"] if rule["rule-action"] == "add-column"]
    assert transformations == [
        {
            "rule-type": "transformation",
            "rule-id": "3",
            "rule-name": "change-sequence-sales.invoices",
            "rule-target": "column",
            "object-locator": {"schema-name": "sales", "table-name": "invoices"},
            "rule-action": "add-column",
            "value": "change_seq",
            "expression": "$AR_H_CHANGE_SEQ",
            "data-type": {"type": "string", "length": 50},
        },
        {
            "rule-type": "transformation",
            "rule-id": "4",
            "rule-name": "change-sequence-sales.invoice_lines",
            "rule-target": "column",
            "object-locator": {"schema-name": "sales", "table-name": "invoice[_]lines"},
            "rule-action": "add-column",
            "value": "change_seq",
            "expression": "$AR_H_CHANGE_SEQ",
            "data-type": {"type": "string", "length": 50},
        },
    ]
    ids = [rule["rule-id"] for rule in mappings["rules"]]
    assert ids == ["1", "2", "3", "4", "5", "6"]  # 5, 6: the before-image rules come last


def test_csv_settings_carry_every_reader_relevant_choice() -> None:
    config = parse_config(
        {
            "dms": {
                "bucket_folder": "landing/",
                "timestamp_column": "commit_ts",
                "include_op_for_full_load": True,
                "csv_null_value": "",
                "csv_delimiter": "|",
                "add_column_name": True,
            },
            "tables": [{"name": "a.b", "primary_key": ["id"], "columns": [{"name": "id", "type": "int"}]}],
        }
    )
    assert s3_settings(config.dms, bucket_name="raw", service_access_role_arn="arn:role") == {
        "BucketName": "raw",
        "ServiceAccessRoleArn": "arn:role",
        "BucketFolder": "landing",
        "DataFormat": "csv",
        "CompressionType": "NONE",
        "EncryptionMode": "SSE_S3",
        "IncludeOpForFullLoad": True,
        "CdcInsertsOnly": False,
        "CdcInsertsAndUpdates": False,
        "PreserveTransactions": False,
        "CdcMaxBatchInterval": 60,
        "CdcMinFileSize": 32000,
        "DatePartitionEnabled": False,
        "TimestampColumnName": "commit_ts",
        "CsvDelimiter": "|",
        "CsvRowDelimiter": "\n",
        "AddColumnName": True,
        "Rfc4180": True,
    }


def _dms(**dms: object) -> DmsSettings:
    table = {"name": "a.b", "primary_key": ["id"], "columns": [{"name": "id", "type": "int"}]}
    return parse_config({"dms": dms, "tables": [table]}).dms


def test_dms_default_null_leaves_csv_null_value_unset_and_a_marker_is_passed_on() -> None:
    """DMS's default (no CsvNullValue) writes NULL as an unquoted empty field, as in every real sample."""
    default = s3_settings(_dms(), bucket_name="raw", service_access_role_arn="arn:role")
    assert "CsvNullValue" not in default
    marker = s3_settings(_dms(csv_null_value="NULL"), bucket_name="raw", service_access_role_arn="arn:role")
    assert marker["CsvNullValue"] == "NULL"
    assert "CsvNullValue" not in s3_settings(
        _dms(format="parquet", csv_null_value="NULL"), bucket_name="raw", service_access_role_arn="arn:role"
    )


@pytest.mark.parametrize("file_format", FORMATS.values(), ids=FORMATS.keys())
def test_every_format_sets_its_own_endpoint_settings_and_no_other_formats(file_format: DmsFormat) -> None:
    # Every setting a format takes from the configuration is set (a NULL marker too).
    dms = _dms(format=file_format.name, csv_null_value="NULL")
    settings = s3_settings(dms, bucket_name="raw", service_access_role_arn="arn:role")
    own = file_format.endpoint_settings(dms)
    assert settings["DataFormat"] == file_format.name
    assert own
    assert own.items() <= settings.items()
    others = {key for other in FORMATS.values() if other != file_format for key in other.endpoint_settings(dms)}
    assert not others & settings.keys(), f"{file_format.name} takes another format's settings"


@pytest.mark.parametrize(
    ("dms", "inserts_only", "inserts_and_updates"),
    [({}, False, False), ({"cdc_inserts_only": True}, True, False), ({"cdc_inserts_and_updates": True}, False, True)],
)
def test_cdc_modes_come_from_the_configuration(dms: dict[str, bool], inserts_only: bool, inserts_and_updates: bool):
    settings = s3_settings(_dms(**dms), bucket_name="raw", service_access_role_arn="arn:role")
    assert (settings["CdcInsertsOnly"], settings["CdcInsertsAndUpdates"]) == (inserts_only, inserts_and_updates)


def test_before_image_rules_follow_the_change_sequence_rules() -> None:
    tables = [
        {"name": "shop.orders", "primary_key": ["order_id"], "columns": [{"name": "order_id", "type": "int"}]},
        {
            "name": "shop.order_lines",
            "primary_key": ["order_id", "line_no"],
            "columns": [{"name": "order_id", "type": "int"}, {"name": "line_no", "type": "int"}],
        },
    ]
    config = parse_config(
        {
            "dms": {"change_sequence_column": "seq", "before_image": {"column_prefix": "old_"}},
            "tables": tables,
        }
    )
    rules = table_mappings(config)["rules"]
    assert [(rule["rule-id"], rule["rule-action"]) for rule in rules] == [
        ("1", "include"),
        ("2", "include"),
        ("3", "add-column"),
        ("4", "add-column"),
        ("5", "add-before-image-columns"),
        ("6", "add-before-image-columns"),
    ]
    assert rules[5] == {
        "rule-type": "transformation",
        "rule-id": "6",
        "rule-name": "before-image-shop.order_lines",
        "rule-target": "column",
        "object-locator": {"schema-name": "shop", "table-name": "order[_]lines"},
        "rule-action": "add-before-image-columns",
        "before-image-def": {"column-prefix": "old_", "column-suffix": "", "column-filter": "pk-only"},
    }
    assert config.dms.before_image_columns(config.table("shop.order_lines")) == ["old_order_id", "old_line_no"]


def test_before_image_defaults_mirror_the_dms_rule_and_nothing_without_it() -> None:
    table = {"name": "a.b", "primary_key": ["id"], "columns": [{"name": "id", "type": "int"}]}
    rules = table_mappings(parse_config({"dms": {"before_image": {}}, "tables": [table]}))["rules"]
    assert rules[-1]["before-image-def"] == {
        "column-prefix": "before_",
        "column-suffix": "",
        "column-filter": "pk-only",
    }
    assert rules[-1]["rule-id"] == "2"
    plain = table_mappings(parse_config({"tables": [table]}))["rules"]
    assert [rule["rule-action"] for rule in plain] == ["include"]


def test_parquet_settings_have_date_folders_and_no_csv_options() -> None:
    settings = s3_settings(
        load_config(PARQUET_CONFIG).dms,
        bucket_name="raw",
        service_access_role_arn="arn:role",
        expected_bucket_owner="1",
    )
    assert settings == {
        "BucketName": "raw",
        "ServiceAccessRoleArn": "arn:role",
        "ExpectedBucketOwner": "1",
        **PARQUET_S3_SETTINGS,
    }
    assert "TimestampColumnName" not in settings
