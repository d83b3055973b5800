"""The configuration -> DMS translation, without CDK: what the reader expects is what DMS is told to write."""

from __future__ import annotations

from cdc_lake.config import load_config, parse_config
from infra.table_mappings import dms_literal, s3_settings, table_mappings
from tests.infra.conftest import DEMO_CONFIG, PARQUET_CONFIG


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
    transformations = [rule for rule in mappings["rules"] if rule["rule-type"] == "transformation"]
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
    assert ids == ["1", "2", "3", "4"]


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
        "CsvNullValue": "",
        "AddColumnName": True,
        "Rfc4180": True,
    }


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
        "BucketFolder": "cdc/landing",
        "DataFormat": "parquet",
        "CompressionType": "GZIP",
        "EncryptionMode": "SSE_S3",
        "IncludeOpForFullLoad": True,
        "CdcInsertsOnly": False,
        "CdcInsertsAndUpdates": False,
        "PreserveTransactions": False,
        "CdcMaxBatchInterval": 120,
        "CdcMinFileSize": 64000,
        "DatePartitionEnabled": True,
        "DatePartitionSequence": "YYYYMMDDHH",
        "DatePartitionDelimiter": "DASH",
        "ParquetVersion": "PARQUET_2_0",
        "ParquetTimestampInMillisecond": False,
        "EnableStatistics": True,
        "ExpectedBucketOwner": "1",
    }
    assert "TimestampColumnName" not in settings
