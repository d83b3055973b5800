"""Deployment settings read from CDK context (``cdk.json`` or ``cdk deploy -c key=value``), validated once.

Every key is documented in docs/deploy.md. Values given with ``-c`` arrive as strings, values in cdk.json
may be JSON numbers, booleans or lists: both are accepted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from cdc_lake.core.exceptions import SettingsError
from infra.packaging import REPO_ROOT
from infra.source_engines import ENGINE_NAMES, SOURCE_ENGINES, SourceEngine, SourceEngineFacts

DmsMode = Literal["instance", "serverless"]

DMS_MODES: tuple[DmsMode, ...] = ("instance", "serverless")
SERVERLESS_CAPACITY_UNITS = (1, 2, 4, 8, 16, 32, 64, 128, 192, 256, 384)

# Context keys (the names users type after -c).
STACK_NAME = "stackName"
TABLE_CONFIG = "tableConfig"
VPC_ID = "vpcId"
SUBNET_IDS = "subnetIds"
SOURCE_ENGINE = "sourceEngine"
SOURCE_PORT = "sourcePort"
SOURCE_DATABASE = "sourceDatabase"
SOURCE_SECRET_ARN = "sourceSecretArn"
SOURCE_SECRET_KMS_KEY_ARN = "sourceSecretKmsKeyArn"
DRIFT_SECRET_ARN = "driftSecretArn"
SOURCE_SECURITY_GROUP_ID = "sourceSecurityGroupId"
SOURCE_CA_FILE = "sourceCaFile"
SOURCE_WITHOUT_TLS = "sourceWithoutTls"
SOURCE_ORACLE_WALLET = "sourceOracleWallet"
DMS_MODE = "dmsMode"
DMS_INSTANCE_CLASS = "dmsInstanceClass"
DMS_ALLOCATED_STORAGE_GB = "dmsAllocatedStorageGb"
DMS_SERVERLESS_MAX_CAPACITY_UNITS = "dmsServerlessMaxCapacityUnits"
CREATE_DMS_SERVICE_ROLES = "createDmsServiceRoles"
ALARM_EMAIL = "alarmEmail"
RAW_RETENTION_DAYS = "rawRetentionDays"
RAW_UNAPPLIED_RETENTION_DAYS = "rawUnappliedRetentionDays"
LAKE_NONCURRENT_DAYS = "lakeNoncurrentDays"
LOG_RETENTION_DAYS = "logRetentionDays"
# The retentions CloudWatch Logs accepts.
LOG_RETENTIONS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)
POWERTOOLS_LAYER_VERSION = "powertoolsLayerVersion"
TRIGGER_RESERVED_CONCURRENCY = "triggerReservedConcurrency"
MAINTENANCE_SCHEDULE = "maintenanceSchedule"
MAINTENANCE_ENABLED = "maintenanceEnabled"
SOURCE_CHECK_SCHEDULE = "sourceCheckSchedule"
SOURCE_CHECK_ENABLED = "sourceCheckEnabled"
DRIFT_CHECK_SCHEDULE = "driftCheckSchedule"
DRIFT_CHECK_ENABLED = "driftCheckEnabled"
WARM_MAINTENANCE_WINDOW = "warmMaintenanceWindow"
EXAMPLE_VALUES = "exampleValues"

# Daily at 03:30 UTC. Glue schedules are six-field cron expressions (no rate()), always in UTC.
DEFAULT_MAINTENANCE_SCHEDULE = "cron(30 3 * * ? *)"
# Daily at 03:00 UTC: the configuration checked against the source's catalog before the day's changes pile up.
DEFAULT_SOURCE_CHECK_SCHEDULE = "cron(0 3 * * ? *)"
# Sundays at 04:00 UTC: every table verified against the source once a week.
DEFAULT_DRIFT_CHECK_SCHEDULE = "cron(0 4 ? * SUN *)"
# Sundays from 03:00 GMT: when Glue may restart a warm run for its own maintenance (runs.mode warm only).
DEFAULT_WARM_MAINTENANCE_WINDOW = "Sun:03"

REQUIRED_KEYS = (VPC_ID, SUBNET_IDS, SOURCE_ENGINE, SOURCE_SECRET_ARN)

# exampleValues=true (`make synth`) fills the required values that are missing with these, so the app can be
# checked on a fresh clone without an AWS account. All-zero ids and account 000000000000 exist nowhere and
# still pass the validation below, so the example synth exercises the same code as a real one.
EXAMPLE_CONTEXT: dict[str, str] = {
    VPC_ID: "vpc-00000000000000000",
    SUBNET_IDS: "subnet-0000000000000000a,subnet-0000000000000000b",
    SOURCE_ENGINE: "mysql",
    SOURCE_SECRET_ARN: "arn:aws:secretsmanager:us-east-1:000000000000:secret:cdc-lake/example-source-000000",
}
EXAMPLE_SOURCE_DATABASE = "example"

_VPC_ID = re.compile(r"^vpc-[0-9a-f]{8,17}$")
_SUBNET_ID = re.compile(r"^subnet-[0-9a-f]{8,17}$")
_SECURITY_GROUP_ID = re.compile(r"^sg-[0-9a-f]{8,17}$")
# A full secret ARN ends with "-" and six random characters; DMS and IAM need the full ARN.
_SECRET_ARN = re.compile(r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+-[A-Za-z0-9]{6}$")
_KMS_KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[0-9a-f-]{36}$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_STACK_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,63}$")
_INSTANCE_CLASS = re.compile(r"^dms\.[a-z0-9]+\.[a-z0-9]+$")
# cron(Minutes Hours Day-of-month Month Day-of-week Year); one of the two day fields must be "?".
_GLUE_CRON = re.compile(r"^cron\(\S+ \S+ (\? \S+ \S+|\S+ \S+ \?) \S+\)$")
# A Glue streaming job's MaintenanceWindow: a day and an hour (GMT), the pattern of Glue's API.
_MAINTENANCE_WINDOW = re.compile(r"^(Sun|Mon|Tue|Wed|Thu|Fri|Sat):([01]?[0-9]|2[0-3])$")


class ContextSource(Protocol):
    def try_get_context(self, key: str) -> Any: ...


@dataclass(frozen=True)
class DeploySettings:
    """Everything the stack needs besides the table configuration."""

    vpc_id: str
    subnet_ids: tuple[str, ...]
    source_engine: SourceEngine
    source_secret_arn: str
    source_port: int
    source_database: str | None = None
    source_secret_kms_key_arn: str | None = None
    drift_secret_arn: str | None = None
    source_security_group_id: str | None = None
    # A PEM file of the CAs that may sign the source's certificate (default: Amazon RDS's, infra/packaging.py).
    source_ca_file: str | None = None
    source_without_tls: bool = False
    # An Oracle wallet file (cwallet.sso) holding the CAs of an Oracle source's certificate: DMS's verify-ca.
    source_oracle_wallet: str | None = None
    stack_name: str = "CdcLake"
    table_config: str = "glue_jobs/cdc_lake/demo.yaml"
    dms_mode: DmsMode = "instance"
    dms_instance_class: str = "dms.t3.medium"
    dms_allocated_storage_gb: int = 50
    dms_serverless_max_capacity_units: int = 4
    create_dms_service_roles: bool = True
    alarm_email: str | None = None
    raw_retention_days: int = 30
    raw_unapplied_retention_days: int = 365
    lake_noncurrent_days: int = 10
    log_retention_days: int = 90
    powertools_layer_version: int = 38
    trigger_reserved_concurrency: int = 10
    maintenance_schedule: str = DEFAULT_MAINTENANCE_SCHEDULE
    maintenance_enabled: bool = True
    source_check_schedule: str = DEFAULT_SOURCE_CHECK_SCHEDULE
    source_check_enabled: bool = True
    drift_check_schedule: str = DEFAULT_DRIFT_CHECK_SCHEDULE
    drift_check_enabled: bool = True
    warm_maintenance_window: str = DEFAULT_WARM_MAINTENANCE_WINDOW
    # Context keys that exampleValues=true filled with placeholders; empty for a deployable synth.
    example_values: tuple[str, ...] = ()

    @property
    def engine(self) -> SourceEngineFacts:
        """The source engine's row of infra.source_engines.SOURCE_ENGINES."""
        return SOURCE_ENGINES[self.source_engine]

    @property
    def resource_prefix(self) -> str:
        """Lower-case stack name, for DMS identifiers and Glue names (letters, digits, hyphens)."""
        return self.stack_name.lower()

    @classmethod
    def from_context(cls, node: ContextSource) -> DeploySettings:
        """Read and validate every context key; raise SettingsError naming all problems at once."""
        reader = _Reader(node)
        example_values: tuple[str, ...] = ()
        if reader.boolean(EXAMPLE_VALUES, default=False):
            examples = _ExampleContext(node)
            node = reader.node = examples
            example_values = examples.filled
        engine = reader.choice(SOURCE_ENGINE, ENGINE_NAMES, default=None)
        settings = cls(
            vpc_id=reader.pattern(VPC_ID, _VPC_ID, required=True) or "",
            subnet_ids=reader.subnets(),
            source_engine=engine or "mysql",
            source_secret_arn=reader.pattern(SOURCE_SECRET_ARN, _SECRET_ARN, required=True) or "",
            source_port=reader.integer(SOURCE_PORT, SOURCE_ENGINES[engine or "mysql"].default_port, 1, 65535),
            source_database=reader.text(SOURCE_DATABASE),
            source_secret_kms_key_arn=reader.pattern(SOURCE_SECRET_KMS_KEY_ARN, _KMS_KEY_ARN),
            drift_secret_arn=reader.pattern(DRIFT_SECRET_ARN, _SECRET_ARN),
            source_security_group_id=reader.pattern(SOURCE_SECURITY_GROUP_ID, _SECURITY_GROUP_ID),
            source_ca_file=reader.text(SOURCE_CA_FILE),
            source_without_tls=reader.boolean(SOURCE_WITHOUT_TLS, default=False),
            source_oracle_wallet=reader.text(SOURCE_ORACLE_WALLET),
            stack_name=reader.pattern(STACK_NAME, _STACK_NAME) or "CdcLake",
            table_config=reader.text(TABLE_CONFIG) or "glue_jobs/cdc_lake/demo.yaml",
            dms_mode=reader.choice(DMS_MODE, DMS_MODES, default="instance") or "instance",
            dms_instance_class=reader.pattern(DMS_INSTANCE_CLASS, _INSTANCE_CLASS) or "dms.t3.medium",
            dms_allocated_storage_gb=reader.integer(DMS_ALLOCATED_STORAGE_GB, 50, 5, 6144),
            dms_serverless_max_capacity_units=reader.integer(DMS_SERVERLESS_MAX_CAPACITY_UNITS, 4, 1, 384),
            create_dms_service_roles=reader.boolean(CREATE_DMS_SERVICE_ROLES, default=True),
            alarm_email=reader.pattern(ALARM_EMAIL, _EMAIL),
            raw_retention_days=reader.integer(RAW_RETENTION_DAYS, 30, 1, 3650),
            raw_unapplied_retention_days=reader.integer(RAW_UNAPPLIED_RETENTION_DAYS, 365, 2, 3650),
            lake_noncurrent_days=reader.integer(LAKE_NONCURRENT_DAYS, 10, 1, 365),
            log_retention_days=reader.integer(LOG_RETENTION_DAYS, 90, 1, 3653),
            powertools_layer_version=reader.integer(POWERTOOLS_LAYER_VERSION, 38, 1, 10_000),
            trigger_reserved_concurrency=reader.integer(TRIGGER_RESERVED_CONCURRENCY, 10, 0, 1000),
            maintenance_schedule=reader.pattern(MAINTENANCE_SCHEDULE, _GLUE_CRON) or DEFAULT_MAINTENANCE_SCHEDULE,
            maintenance_enabled=reader.boolean(MAINTENANCE_ENABLED, default=True),
            source_check_schedule=reader.pattern(SOURCE_CHECK_SCHEDULE, _GLUE_CRON) or DEFAULT_SOURCE_CHECK_SCHEDULE,
            source_check_enabled=reader.boolean(SOURCE_CHECK_ENABLED, default=True),
            drift_check_schedule=reader.pattern(DRIFT_CHECK_SCHEDULE, _GLUE_CRON) or DEFAULT_DRIFT_CHECK_SCHEDULE,
            drift_check_enabled=reader.boolean(DRIFT_CHECK_ENABLED, default=True),
            warm_maintenance_window=reader.pattern(WARM_MAINTENANCE_WINDOW, _MAINTENANCE_WINDOW)
            or DEFAULT_WARM_MAINTENANCE_WINDOW,
            example_values=example_values,
        )
        if engine is None and node.try_get_context(SOURCE_ENGINE) in (None, ""):
            reader.problems.append(f"{SOURCE_ENGINE} is required: one of {', '.join(ENGINE_NAMES)}")
        if settings.engine.needs_database and not settings.source_database:
            what = "its service name or SID" if settings.engine.wallet else "the database DMS reads"
            reader.problems.append(
                f"{SOURCE_DATABASE} is required when {SOURCE_ENGINE} is {settings.source_engine} ({what})"
            )
        reader.problems.extend(_wallet_problems(settings))
        if settings.raw_unapplied_retention_days < 2 * settings.raw_retention_days:
            reader.problems.append(
                f"{RAW_UNAPPLIED_RETENTION_DAYS} ({settings.raw_unapplied_retention_days}) must be at least twice "
                f"{RAW_RETENTION_DAYS} ({settings.raw_retention_days}): it keeps the files no replay applied yet, "
                "long after the alarm on the oldest waiting file"
            )
        if settings.log_retention_days not in LOG_RETENTIONS:
            reader.problems.append(f"{LOG_RETENTION_DAYS} must be one of {list(LOG_RETENTIONS)} (CloudWatch Logs')")
        if settings.dms_serverless_max_capacity_units not in SERVERLESS_CAPACITY_UNITS:
            reader.problems.append(
                f"{DMS_SERVERLESS_MAX_CAPACITY_UNITS} must be one of {list(SERVERLESS_CAPACITY_UNITS)}"
            )
        if reader.problems:
            raise SettingsError(
                "invalid or missing CDK context values (see docs/deploy.md):\n  - " + "\n  - ".join(reader.problems)
            )
        return settings


def example_values_message(settings: DeploySettings) -> str | None:
    """What to tell the user when placeholders were used: which keys, and how to set them for a deploy."""
    if not settings.example_values:
        return None
    keys = ", ".join(settings.example_values)
    flags = " ".join(f"-c {key}=..." for key in settings.example_values)
    return (
        f"EXAMPLE VALUES ({EXAMPLE_VALUES}=true): {keys} are placeholders, so this template is for checking "
        f"only and cannot be deployed. For a real deploy set them with {flags} or in cdk.json's context, "
        f"and drop -c {EXAMPLE_VALUES}=true (see docs/deploy.md)."
    )


class _ExampleContext:
    """The user's context, with EXAMPLE_CONTEXT standing in for the required values it lacks."""

    def __init__(self, node: ContextSource) -> None:
        self.node = node
        placeholders = dict(EXAMPLE_CONTEXT)
        engine = str(_given(node.try_get_context(SOURCE_ENGINE)) or placeholders[SOURCE_ENGINE]).strip()
        if engine in SOURCE_ENGINES and SOURCE_ENGINES[engine].needs_database:  # type: ignore[index]
            placeholders[SOURCE_DATABASE] = EXAMPLE_SOURCE_DATABASE
        self.placeholders = {k: v for k, v in placeholders.items() if _given(node.try_get_context(k)) is None}
        self.filled = tuple(self.placeholders)

    def try_get_context(self, key: str) -> Any:
        return self.placeholders.get(key, self.node.try_get_context(key))


def _wallet_problems(settings: DeploySettings) -> list[str]:
    """An Oracle source's checked TLS needs a wallet (DMS takes no PEM bundle for Oracle); other engines take none."""
    wallet, engine = settings.source_oracle_wallet, settings.source_engine
    if not settings.engine.wallet:
        return [f"{SOURCE_ORACLE_WALLET} is for {SOURCE_ENGINE}=oracle only, not {engine}"] if wallet else []
    if settings.source_without_tls:
        return []
    if not wallet:
        return [
            f"{SOURCE_ENGINE}=oracle needs {SOURCE_ORACLE_WALLET}: the path of an Oracle wallet file (cwallet.sso, "
            "made with orapki from the CA certificate that signed the source's) for DMS's verify-ca TLS; or set "
            f"{SOURCE_WITHOUT_TLS}=true to reach the source unencrypted (docs/deploy.md#oracle-a-wallet-and-verify-ca)"
        ]
    try:
        size = wallet_path(wallet).stat().st_size
    except OSError as error:
        return [f"{SOURCE_ORACLE_WALLET}={wallet!r}: cannot read it ({error.strerror})"]
    return [] if size else [f"{SOURCE_ORACLE_WALLET}={wallet!r} is empty: not an Oracle wallet"]


def wallet_path(wallet: str) -> Path:
    """The wallet file, relative to the repository root unless absolute (as sourceCaFile is)."""
    path = Path(wallet)
    return path if path.is_absolute() else REPO_ROOT / path


def _given(value: Any) -> Any:
    """The value, or None when it is absent or blank (how every reader treats an empty -c key=)."""
    return None if value is None or (isinstance(value, str) and not value.strip()) else value


class _Reader:
    """Reads context values one by one and collects problems instead of stopping at the first."""

    def __init__(self, node: ContextSource) -> None:
        self.node = node
        self.problems: list[str] = []

    def _raw(self, key: str) -> Any:
        return _given(self.node.try_get_context(key))

    def text(self, key: str) -> str | None:
        value = self._raw(key)
        return None if value is None else str(value).strip()

    def pattern(self, key: str, regex: re.Pattern[str], *, required: bool = False) -> str | None:
        value = self.text(key)
        if value is None:
            if required:
                self.problems.append(f"{key} is required")
            return None
        if not regex.match(value):
            self.problems.append(f"{key}={value!r} is not valid (expected to match {regex.pattern})")
            return None
        return value

    def choice(self, key: str, allowed: tuple[str, ...], *, default: Any) -> Any:
        value = self.text(key)
        if value is None:
            return default
        if value not in allowed:
            self.problems.append(f"{key}={value!r} must be one of {', '.join(allowed)}")
            return default
        return value

    def integer(self, key: str, default: int, low: int, high: int) -> int:
        value = self._raw(key)
        if value is None:
            return default
        try:
            number = int(str(value).strip())
        except ValueError:
            self.problems.append(f"{key}={value!r} is not a whole number")
            return default
        if not low <= number <= high:
            self.problems.append(f"{key}={number} must be between {low} and {high}")
            return default
        return number

    def boolean(self, key: str, *, default: bool) -> bool:
        value = self._raw(key)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in {"true", "yes", "1"}:
            return True
        if text in {"false", "no", "0"}:
            return False
        self.problems.append(f"{key}={value!r} must be true or false")
        return default

    def subnets(self) -> tuple[str, ...]:
        value = self._raw(SUBNET_IDS)
        if value is None:
            self.problems.append(f"{SUBNET_IDS} is required (comma-separated, at least two, in two AZs)")
            return ()
        items = value if isinstance(value, list) else str(value).split(",")
        subnet_ids = tuple(str(item).strip() for item in items if str(item).strip())
        bad = [s for s in subnet_ids if not _SUBNET_ID.match(s)]
        if bad:
            self.problems.append(f"{SUBNET_IDS} has invalid subnet id(s) {bad}")
        if len(subnet_ids) < 2:
            self.problems.append(f"{SUBNET_IDS} needs at least two subnets in different AZs (a DMS requirement)")
        return subnet_ids
