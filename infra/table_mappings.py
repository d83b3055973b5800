"""Pure translation of the table configuration into what DMS reads: table mappings and S3 target settings.

No CDK imports: these functions return plain dicts (CloudFormation / DMS API names) that the DMS construct
passes on and the tests compare with expected dicts. The S3 settings here are the contract with the reader
in ``glue_jobs/cdc_lake`` (format, Op column, timestamp column, NULL spelling, date folders, batching).
"""

from __future__ import annotations

from typing import Any

from cdc_lake.core.config import DmsSettings, PipelineConfig, TableSpec

CHANGE_SEQUENCE_EXPRESSION = "$AR_H_CHANGE_SEQ"
CHANGE_SEQUENCE_LENGTH = 50  # AR_H_CHANGE_SEQ is 35 digits; DMS docs use string(50)


def dms_literal(name: str) -> str:
    """Escape DMS table-mapping wildcards so a schema or table name matches itself only.

    In object-locator names ``%`` matches any run of characters and ``_`` any single character; ``[_]`` is a
    literal underscore (DMS "Wildcards in table mapping"). Without escaping, ``order_items`` would also
    select ``orderXitems``.
    """
    return "".join(f"[{char}]" if char in "_%" else char for char in name)


def _object_locator(table: TableSpec) -> dict[str, str]:
    return {"schema-name": dms_literal(table.schema_name), "table-name": dms_literal(table.table_name)}


def _rule(
    rule_id: int, name: str, table: TableSpec, action: str, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    """One table's rule: ``include`` selects it, any other action transforms its columns."""
    rule: dict[str, Any] = {
        "rule-type": "selection" if action == "include" else "transformation",
        "rule-id": str(rule_id),
        "rule-name": f"{name}-{table.schema_name}.{table.table_name}",
    }
    if action != "include":
        rule["rule-target"] = "column"
    return {**rule, "object-locator": _object_locator(table), "rule-action": action, **(details or {})}


def table_mappings(config: PipelineConfig) -> dict[str, Any]:
    """DMS table mappings: one include rule per configured table, then per table the change-sequence column
    (``add-column``) and the before-image key columns (``add-before-image-columns``) when configured.

    The before-image rules come last, as in the real output under ``dms-samples`` (rule 2 ``add-column``
    ``$AR_H_CHANGE_SEQ``, rule 3 ``add-before-image-columns``: the ``before_<key>`` columns follow the sequence
    column), which is the column order the reader expects (``DmsSettings.before_image_columns``).
    Rule ids are stable for a given configuration order, so redeploying an unchanged configuration
    does not modify the task.
    """
    rules: list[dict[str, Any]] = []
    for table in config.tables:
        rules.append(_rule(len(rules) + 1, "include", table, "include"))
    column = config.dms.change_sequence_column
    if column:
        sequence = {
            "value": column,
            "expression": CHANGE_SEQUENCE_EXPRESSION,
            "data-type": {"type": "string", "length": CHANGE_SEQUENCE_LENGTH},
        }
        for table in config.tables:
            rules.append(_rule(len(rules) + 1, "change-sequence", table, "add-column", sequence))
    before_image = config.dms.before_image
    if before_image is not None:
        definition = {
            "before-image-def": {
                "column-prefix": before_image.column_prefix,
                "column-suffix": "",
                "column-filter": before_image.column_filter,
            }
        }
        for table in config.tables:
            rules.append(_rule(len(rules) + 1, "before-image", table, "add-before-image-columns", definition))
    return {"rules": rules}


def s3_settings(
    dms: DmsSettings,
    *,
    bucket_name: str,
    service_access_role_arn: str,
    expected_bucket_owner: str | None = None,
) -> dict[str, Any]:
    """``AWS::DMS::Endpoint.S3Settings`` for the raw bucket, derived from ``dms`` and fixed choices.

    Fixed: SSE_S3 encryption (the bucket's own default), no transaction-preserving layout. The settings of
    the configured format alone come from the format model (``DmsFormat.endpoint_settings``).
    """
    settings: dict[str, Any] = {
        "BucketName": bucket_name,
        "ServiceAccessRoleArn": service_access_role_arn,
        "DataFormat": dms.format,
        "CompressionType": dms.compression.upper(),
        "EncryptionMode": "SSE_S3",
        "IncludeOpForFullLoad": dms.include_op_for_full_load,
        "CdcInsertsOnly": dms.cdc_inserts_only,
        "CdcInsertsAndUpdates": dms.cdc_inserts_and_updates,
        "PreserveTransactions": False,
        "CdcMaxBatchInterval": dms.cdc_max_batch_interval,
        "CdcMinFileSize": dms.cdc_min_file_size,
        "DatePartitionEnabled": dms.date_partition_enabled,
    }
    if dms.bucket_folder:
        settings["BucketFolder"] = dms.bucket_folder
    if dms.timestamp_column:
        settings["TimestampColumnName"] = dms.timestamp_column
    if dms.date_partition_enabled:
        settings["DatePartitionSequence"] = dms.date_partition_sequence
        settings["DatePartitionDelimiter"] = dms.date_partition_delimiter
    settings.update(dms.file_format.endpoint_settings(dms))
    if expected_bucket_owner:
        settings["ExpectedBucketOwner"] = expected_bucket_owner
    return settings
