"""The pipeline's CloudWatch log groups, made by the stack so each has a retention and the pipeline's key,
rather than by the services at run time, which keep logs forever and unencrypted.

The services write to the names they look for: Glue 5.0 and later to ``<--custom-logGroup-prefix>/error`` and
``/output`` (AWS Glue's "Logging for AWS Glue jobs"), DMS to ``dms-tasks-<replication instance>`` or
``dms-serverless-replication-<replication config resource id>``, the trigger Lambda to the group its logging
configuration names.
"""

from __future__ import annotations

from aws_cdk import Aws, Fn, RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.settings import DeploySettings

R = logs.RetentionDays
RETENTION: dict[int, logs.RetentionDays] = {
    1: R.ONE_DAY, 3: R.THREE_DAYS, 5: R.FIVE_DAYS, 7: R.ONE_WEEK, 14: R.TWO_WEEKS, 30: R.ONE_MONTH,
    60: R.TWO_MONTHS, 90: R.THREE_MONTHS, 120: R.FOUR_MONTHS, 150: R.FIVE_MONTHS, 180: R.SIX_MONTHS,
    365: R.ONE_YEAR, 400: R.THIRTEEN_MONTHS, 545: R.EIGHTEEN_MONTHS, 731: R.TWO_YEARS, 1096: R.THREE_YEARS,
    1827: R.FIVE_YEARS, 2192: R.SIX_YEARS, 2557: R.SEVEN_YEARS, 2922: R.EIGHT_YEARS, 3288: R.NINE_YEARS,
    3653: R.TEN_YEARS,
}  # fmt: skip
DMS_SERVERLESS_PREFIX = "dms-serverless-replication-"


def glue_log_prefix(settings: DeploySettings) -> str:
    """The jobs' ``--custom-logGroup-prefix``: under /aws-glue/, where the job roles may write."""
    return f"/aws-glue/{settings.resource_prefix}"


def dms_instance_log_group(settings: DeploySettings) -> str:
    return f"dms-tasks-{settings.resource_prefix}-instance"


def trigger_log_group(settings: DeploySettings) -> str:
    return f"/aws/lambda/{settings.resource_prefix}-trigger"


def dms_serverless_log_group(replication_config_arn: str) -> str:
    """DMS Serverless's group, named after the resource id that ends the replication config's ARN."""
    return Fn.join("", [DMS_SERVERLESS_PREFIX, Fn.select(6, Fn.split(":", replication_config_arn))])


def key_log_group_arns(settings: DeploySettings) -> list[str]:
    """The log groups the pipeline key encrypts (the key policy's condition on CloudWatch Logs' use of it)."""
    names = [
        "/aws-glue/*",
        dms_instance_log_group(settings) if settings.dms_mode == "instance" else f"{DMS_SERVERLESS_PREFIX}*",
        trigger_log_group(settings),
    ]
    return [f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:log-group:{name}" for name in names]


def log_group(scope: Construct, construct_id: str, name: str, settings: DeploySettings, key: kms.IKey) -> logs.LogGroup:
    """A log group of the pipeline: ``logRetentionDays``, the pipeline key, gone with the stack."""
    return logs.LogGroup(
        scope,
        construct_id,
        log_group_name=name,
        retention=RETENTION[settings.log_retention_days],
        encryption_key=key,
        removal_policy=RemovalPolicy.DESTROY,
    )
