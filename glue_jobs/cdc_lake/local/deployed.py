"""The deployed stack as a laptop sees it: what ``cdk deploy`` would create, read from a synthesized cloud assembly.

``DeployedStack.load`` reads ``<stack>.template.json`` and ``<stack>.assets.json`` of a ``cdk.out``-style
directory and resolves the CloudFormation intrinsics they use for one account and region, so every job argument,
the trigger function's environment and the database input hold exactly the strings a real deployment holds
(asset locations included: ``s3://cdk-hnb659fds-assets-<account>-<region>/<hash>.<ext>``; a queue's URL on the SQS
endpoint the stack is loaded for, ``<endpoint>/<account>/<name>``). ``provision`` then creates the parts the
pipeline reads at run time (buckets, file assets, queues, the Glue database and jobs) through injected boto3
clients, i.e. on whatever endpoint the caller's environment names (``AWS_ENDPOINT_URL``).

How the parts are found, from the template alone:

- each job of ``core.glue_jobs.GLUE_JOBS`` from its script asset (the asset whose S3 location is the job's
  ``ScriptLocation``: its source file name, or its construct path ``…/Script-<name>`` when CDK staged it as
  ``asset.<hash>.py``), else from the job's logical id, which holds its construct id (``FullLoadJob``);
- the trigger function: the function with asset code that a bucket notification targets;
- the raw (DMS) bucket: the bucket whose notification targets the trigger function, else the bucket the
  ``ReadDmsFiles`` statement of an IAM policy reads;
- the lake bucket: the bucket the jobs' ``--warehouse`` argument points into, else the database's location;
- the warm runs' event queues (runs.mode warm): the queues the warm job's ``--events_queues`` lists, in shard order.

Laptop-only: never shipped to Glue; it imports neither PySpark nor the CDK app, and boto3 only in ``provision``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from cdc_lake.core.catalogs import AWS_ENDPOINT_ENV, parse_conf
from cdc_lake.core.exceptions import DeployedStackError, ProvisionError, UnsupportedIntrinsicError
from cdc_lake.core.glue_jobs import GLUE_JOBS, JOB_NAMES
from cdc_lake.core.names import WARM_JOB, WARM_QUEUES_ARGUMENT

if TYPE_CHECKING:
    from boto3.session import Session

logger = logging.getLogger(__name__)

# The environment variable naming the table configuration file (dms_trigger.handler.CONFIG_ENV,
# infra.trigger.ENV_CONFIG); the Lambda is not imported here.
LAMBDA_CONFIG_ENV = "CDC_LAKE_CONFIG"
DEFAULT_ACCOUNT = "123456789012"  # moto's default account
DEFAULT_REGION = "us-east-1"
# boto3's own variable for SQS's endpoint, which wins over AWS_ENDPOINT_URL: the endpoint a queue URL is on.
SQS_ENDPOINT_ENV = "AWS_ENDPOINT_URL_SQS"
TEMPLATE_SUFFIX = ".template.json"
ASSETS_SUFFIX = ".assets.json"
# Glue's defaults for what a job definition may leave out.
_GLUE_DEFAULT_TIMEOUT_MINUTES = 2880
_GLUE_DEFAULT_MAX_CONCURRENT_RUNS = 1

_S3_URI = re.compile(r"^s3://(?P<bucket>[^/]+)/?(?P<key>.*)$")
_SUB_VARIABLE = re.compile(r"\$\{([^}]*)\}")


# ---------------------------------------------------------------------------------------------- intrinsics


class _NoValue:
    """``{"Ref": "AWS::NoValue"}``: the property (or list item) is removed."""

    def __repr__(self) -> str:
        return "AWS::NoValue"


NO_VALUE = _NoValue()

# Resource types whose Ref is a name held in (or, when absent, generated for) this property path.
_NAME_PROPERTIES: dict[str, tuple[str, ...]] = {
    "AWS::S3::Bucket": ("BucketName",),
    "AWS::Glue::Job": ("Name",),
    "AWS::Glue::Database": ("DatabaseInput", "Name"),
    "AWS::Glue::Trigger": ("Name",),
    "AWS::Glue::SecurityConfiguration": ("Name",),
    "AWS::IAM::Role": ("RoleName",),
    "AWS::Lambda::Function": ("FunctionName",),
    "AWS::SQS::Queue": ("QueueName",),  # its Ref is its URL (TemplateResolver.physical_id)
}
_MAX_GENERATED_NAME = {"AWS::S3::Bucket": 63, "AWS::SQS::Queue": 80}
_DEFAULT_MAX_GENERATED_NAME = 64


def generated_name(stack_name: str, logical_id: str, resource_type: str) -> str:
    """The name CloudFormation would generate for an unnamed resource, made deterministic.

    ``<stack>-<logical id>`` like CloudFormation's own (without its random suffix); lower-case and limited to
    S3's characters for buckets. Too long a name is cut and ends with a short hash of the full one instead.
    """
    name = f"{stack_name}-{logical_id}"
    limit = _MAX_GENERATED_NAME.get(resource_type, _DEFAULT_MAX_GENERATED_NAME)
    if resource_type == "AWS::S3::Bucket":
        name = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")
    if len(name) > limit:
        digest = hashlib.sha256(f"{stack_name}/{logical_id}".encode()).hexdigest()[:8]
        name = f"{name[: limit - len(digest) - 1].rstrip('-')}-{digest}"
    return name


def aws_sqs_endpoint(region: str) -> str:
    """SQS's endpoint in ``region`` on AWS: where CloudFormation's queue URLs (a queue's Ref) point."""
    return f"https://sqs.{region}.amazonaws.com"


def sqs_endpoint_from_environment(region: str) -> str:
    """The SQS endpoint boto3 would use here: ``AWS_ENDPOINT_URL_SQS``, else ``AWS_ENDPOINT_URL``, else AWS's."""
    configured = os.environ.get(SQS_ENDPOINT_ENV) or os.environ.get(AWS_ENDPOINT_ENV)
    return configured.rstrip("/") if configured else aws_sqs_endpoint(region)


def is_intrinsic(value: Any) -> bool:
    """True for ``{"Ref": …}`` and ``{"Fn::…": …}``: a value CloudFormation computes at deploy time."""
    return isinstance(value, dict) and len(value) == 1 and any(key == "Ref" or key.startswith("Fn::") for key in value)


def _reference_target(value: Any) -> str | None:
    """The logical id a ``Ref`` or ``Fn::GetAtt`` names, without resolving anything."""
    if not isinstance(value, dict) or len(value) != 1:
        return None
    if isinstance(value.get("Ref"), str):
        return cast(str, value["Ref"])
    target = value.get("Fn::GetAtt")
    if isinstance(target, list) and target and isinstance(target[0], str):
        return target[0]
    if isinstance(target, str):
        return target.split(".", 1)[0]
    return None


def _references(value: Any) -> Iterator[str]:
    """Every logical id referenced anywhere inside ``value``."""
    target = _reference_target(value)
    if target is not None:
        yield target
    if isinstance(value, dict):
        for item in value.values():
            yield from _references(item)
    elif isinstance(value, list):
        for item in value:
            yield from _references(item)


class TemplateResolver:
    """Resolves the intrinsics of one template for one account and region.

    Supported: ``Ref`` (pseudo parameters, template parameters with a value or default, resources),
    ``Fn::GetAtt`` (bucket ``Arn``/``DomainName``/``RegionalDomainName``/``WebsiteURL``, role and function
    ``Arn``, queue ``Arn``/``QueueName``/``QueueUrl``), ``Fn::Join``, ``Fn::Sub`` (both forms), ``Fn::Select``
    and ``Fn::Split``. Anything else raises UnsupportedIntrinsicError naming the property path
    (``<LogicalId>.Properties.<…>``).

    A queue's URL is on ``sqs_endpoint`` (default: AWS's in ``region``), as SQS answers CreateQueue there: moto
    too builds it from the endpoint it is reached at, ``<endpoint>/<account>/<name>``.
    """

    def __init__(  # noqa: PLR0913 - keyword-only: the template, and where and how it is deployed
        self,
        template: Mapping[str, Any],
        *,
        stack_name: str,
        account: str = DEFAULT_ACCOUNT,
        region: str = DEFAULT_REGION,
        parameters: Mapping[str, str] | None = None,
        sqs_endpoint: str | None = None,
    ) -> None:
        self.stack_name = stack_name
        self.account = account
        self.region = region
        self.sqs_endpoint = (sqs_endpoint or aws_sqs_endpoint(region)).rstrip("/")
        self.resources: Mapping[str, Mapping[str, Any]] = template.get("Resources", {})
        self._declared_parameters: Mapping[str, Mapping[str, Any]] = template.get("Parameters", {})
        self._parameters = dict(parameters or {})
        self.pseudo_parameters: dict[str, str] = {
            "AWS::AccountId": account,
            "AWS::Region": region,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": stack_name,
            "AWS::StackId": f"arn:aws:cloudformation:{region}:{account}:stack/{stack_name}/local",
        }
        self._functions: dict[str, Callable[[Any, str], Any]] = {
            "Fn::GetAtt": self._get_att,
            "Fn::Join": self._join,
            "Fn::Sub": self._sub,
            "Fn::Select": self._select,
            "Fn::Split": self._split,
        }

    # -- public

    def resolve(self, value: Any, path: str) -> Any:
        """``value`` with every intrinsic replaced by its value; ``path`` names it in error messages."""
        resolved = self._resolve(value, path)
        return None if resolved is NO_VALUE else resolved

    def resolve_text(self, value: Any, path: str) -> str:
        """``resolve`` for a value that must be a string (numbers and booleans are turned into one)."""
        return self._text(self._resolve(value, path), path)

    def resource_property(self, logical_id: str, *names: str) -> Any:
        """The resolved property ``names`` (a path into Properties) of a resource; None when absent."""
        value: Any = self.resource(logical_id).get("Properties", {})
        for name in names:
            if not isinstance(value, dict) or name not in value:
                return None
            value = value[name]
        return self.resolve(value, ".".join((logical_id, "Properties", *names)))

    def resource(self, logical_id: str) -> Mapping[str, Any]:
        try:
            return self.resources[logical_id]
        except KeyError:
            raise DeployedStackError(f"the template has no resource {logical_id!r}") from None

    def of_type(self, resource_type: str) -> list[str]:
        """Logical ids of the resources of one type, in template order."""
        return [logical_id for logical_id, body in self.resources.items() if body.get("Type") == resource_type]

    def physical_id(self, logical_id: str) -> str:
        """What ``Ref`` gives for a resource: a queue's URL, the name of other named types, else its logical id."""
        if self.resource(logical_id).get("Type") == "AWS::SQS::Queue":
            return self.queue_url(logical_id)
        return self.name(logical_id)

    def queue_url(self, logical_id: str) -> str:
        """A queue's URL on ``sqs_endpoint``, as SQS's CreateQueue answers it."""
        return f"{self.sqs_endpoint}/{self.account}/{self.name(logical_id)}"

    def name(self, logical_id: str) -> str:
        """A named type's name (generated when unset), else the logical id."""
        resource_type = self.resource(logical_id).get("Type", "")
        name_path = _NAME_PROPERTIES.get(resource_type)
        if name_path is None:
            return logical_id
        name = self.resource_property(logical_id, *name_path)
        if name is None:
            return generated_name(self.stack_name, logical_id, resource_type)
        return self._text(name, ".".join((logical_id, "Properties", *name_path)))

    # -- the functions

    def _resolve(self, value: Any, path: str) -> Any:
        if isinstance(value, list):
            items = (self._resolve(item, f"{path}[{index}]") for index, item in enumerate(value))
            return [item for item in items if item is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, argument),) = value.items()
            if key == "Ref":
                return self._ref(argument, path)
            if key.startswith("Fn::"):
                function = self._functions.get(key)
                if function is None:
                    raise UnsupportedIntrinsicError(f"{path}: {key} is not supported by the local resolver")
                return function(argument, f"{path}.{key}")
        resolved = {key: self._resolve(item, f"{path}.{key}") for key, item in value.items()}
        return {key: item for key, item in resolved.items() if item is not NO_VALUE}

    def _ref(self, name: Any, path: str) -> Any:
        if not isinstance(name, str):
            raise DeployedStackError(f"{path}: Ref needs a name, got {name!r}")
        if name == "AWS::NoValue":
            return NO_VALUE
        if name in self.pseudo_parameters:
            return self.pseudo_parameters[name]
        if name.startswith("AWS::"):
            raise UnsupportedIntrinsicError(f"{path}: pseudo parameter {name} is not supported by the local resolver")
        if name in self._declared_parameters:
            if name in self._parameters:
                return self._parameters[name]
            if "Default" in self._declared_parameters[name]:
                return self._declared_parameters[name]["Default"]
            raise DeployedStackError(f"{path}: parameter {name} has no default; pass a value for it")
        if name in self.resources:
            return self.physical_id(name)
        raise DeployedStackError(f"{path}: Ref to {name!r}, which is neither a parameter nor a resource")

    def _get_att(self, argument: Any, path: str) -> str:
        if isinstance(argument, str) and "." in argument:
            logical_id, attribute = argument.split(".", 1)
        elif isinstance(argument, list) and len(argument) == 2:
            logical_id = self._text(self._resolve(argument[0], f"{path}[0]"), path)
            attribute = self._text(self._resolve(argument[1], f"{path}[1]"), path)
        else:
            raise DeployedStackError(f"{path}: expected [LogicalId, Attribute], got {argument!r}")
        if logical_id not in self.resources:
            raise DeployedStackError(f"{path}: Fn::GetAtt names {logical_id!r}, which is not a resource")
        resource_type = self.resources[logical_id].get("Type", "")
        name = self.name(logical_id)
        partition, region, account = "aws", self.region, self.account
        suffix = self.pseudo_parameters["AWS::URLSuffix"]
        attributes: dict[tuple[str, str], Callable[[], str]] = {
            ("AWS::S3::Bucket", "Arn"): lambda: f"arn:{partition}:s3:::{name}",
            ("AWS::S3::Bucket", "DomainName"): lambda: f"{name}.s3.{suffix}",
            ("AWS::S3::Bucket", "RegionalDomainName"): lambda: f"{name}.s3.{region}.{suffix}",
            ("AWS::S3::Bucket", "WebsiteURL"): lambda: f"http://{name}.s3-website-{region}.{suffix}",
            ("AWS::IAM::Role", "Arn"): lambda: (
                f"arn:{partition}:iam::{account}:role{self._role_path(logical_id, path)}{name}"
            ),
            ("AWS::Lambda::Function", "Arn"): lambda: f"arn:{partition}:lambda:{region}:{account}:function:{name}",
            ("AWS::SQS::Queue", "Arn"): lambda: f"arn:{partition}:sqs:{region}:{account}:{name}",
            ("AWS::SQS::Queue", "QueueName"): lambda: name,
            ("AWS::SQS::Queue", "QueueUrl"): lambda: self.queue_url(logical_id),
        }
        compute = attributes.get((resource_type, attribute))
        if compute is None:
            raise UnsupportedIntrinsicError(
                f"{path}: attribute {attribute} of {logical_id} ({resource_type}) is not known to the local resolver"
            )
        return compute()

    def _role_path(self, logical_id: str, path: str) -> str:
        role_path = self.resource_property(logical_id, "Path")
        return "/" if role_path is None else self._text(role_path, path)

    def _join(self, argument: Any, path: str) -> str:
        if not (isinstance(argument, list) and len(argument) == 2):
            raise DeployedStackError(f"{path}: expected [separator, [values]], got {argument!r}")
        separator = self._text(self._resolve(argument[0], f"{path}[0]"), f"{path}[0]")
        values = self._resolve(argument[1], f"{path}[1]")
        if not isinstance(values, list):
            raise DeployedStackError(f"{path}[1]: expected a list, got {values!r}")
        return separator.join(self._text(value, f"{path}[1]") for value in values)

    def _sub(self, argument: Any, path: str) -> str:
        if isinstance(argument, str):
            text, variables = argument, {}
        elif isinstance(argument, list) and len(argument) == 2 and isinstance(argument[1], dict):
            text = self._text(argument[0], f"{path}[0]")
            variables = {
                name: self._text(self._resolve(value, f"{path}[1].{name}"), f"{path}[1].{name}")
                for name, value in argument[1].items()
            }
        else:
            raise DeployedStackError(f"{path}: expected a string or [string, {{variables}}], got {argument!r}")
        return self.sub_text(text, path, variables)

    def sub_text(self, text: str, path: str, variables: Mapping[str, str] | None = None) -> str:
        """``Fn::Sub`` of one string: ``${Name}``, ``${Resource.Attribute}``, ``${!Literal}``."""
        variables = variables or {}

        def replace(match: re.Match[str]) -> str:
            name = match.group(1).strip()
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in variables:
                return variables[name]
            if "." in name and not name.startswith("AWS::"):
                return self._get_att(name, path)
            return self._text(self._ref(name, path), path)

        return _SUB_VARIABLE.sub(replace, text)

    def _select(self, argument: Any, path: str) -> Any:
        if not (isinstance(argument, list) and len(argument) == 2):
            raise DeployedStackError(f"{path}: expected [index, [values]], got {argument!r}")
        index = self._resolve(argument[0], f"{path}[0]")
        values = self._resolve(argument[1], f"{path}[1]")
        if not isinstance(values, list):
            raise DeployedStackError(f"{path}[1]: expected a list, got {values!r}")
        try:
            return values[int(index)]
        except (ValueError, IndexError):
            raise DeployedStackError(f"{path}: index {index!r} is not within the {len(values)} value(s)") from None

    def _split(self, argument: Any, path: str) -> list[str]:
        if not (isinstance(argument, list) and len(argument) == 2):
            raise DeployedStackError(f"{path}: expected [delimiter, string], got {argument!r}")
        delimiter = self._text(self._resolve(argument[0], f"{path}[0]"), f"{path}[0]")
        return self._text(self._resolve(argument[1], f"{path}[1]"), f"{path}[1]").split(delimiter)

    @staticmethod
    def _text(value: Any, path: str) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (str, int, float)):
            return str(value)
        raise DeployedStackError(f"{path}: expected a string, got {value!r}")


# ---------------------------------------------------------------------------------------------------- model


@dataclass(frozen=True)
class FileAsset:
    """One asset of the asset manifest at one destination; a ``zip`` asset is a folder CDK zips at publish time."""

    asset_hash: str
    display_name: str | None
    source_path: Path
    packaging: Literal["file", "zip"]
    bucket: str
    object_key: str

    @property
    def s3_uri(self) -> str:
        return f"s3://{self.bucket}/{self.object_key}"


@dataclass(frozen=True)
class GlueCommand:
    name: str
    python_version: str | None
    script_location: str


@dataclass(frozen=True)
class DeployedJob:
    """One ``AWS::Glue::Job``, resolved. Mappings are plain dicts: treat them as read-only."""

    kind: str  # its row in core.glue_jobs.GLUE_JOBS
    logical_id: str
    name: str
    role: str
    description: str | None
    glue_version: str | None
    worker_type: str | None
    number_of_workers: int | None
    max_concurrent_runs: int
    timeout: int
    max_retries: int
    job_run_queuing_enabled: bool | None
    security_configuration: str | None
    command: GlueCommand
    default_arguments: Mapping[str, str]
    non_overridable_arguments: Mapping[str, str]
    script_path: Path

    def arguments(self, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
        """The arguments a run gets, Glue's way: defaults, then the run's (key by key), then non-overridable ones.

        Override keys may be given with or without the ``--`` prefix.
        """
        run_arguments = {_argument_key(key): value for key, value in (overrides or {}).items()}
        return {**self.default_arguments, **run_arguments, **self.non_overridable_arguments}

    def spark_conf(self) -> dict[str, str]:
        """The job's one ``--conf`` argument as key → value (empty without one)."""
        value = self.arguments().get("--conf")
        return parse_conf(value) if value else {}

    def create_job_request(self) -> dict[str, Any]:
        """The ``glue.create_job`` arguments. SecurityConfiguration is left out: it is not created locally."""
        command: dict[str, str] = {"Name": self.command.name, "ScriptLocation": self.command.script_location}
        if self.command.python_version is not None:
            command["PythonVersion"] = self.command.python_version
        request: dict[str, Any] = {
            "Name": self.name,
            "Role": self.role,
            "Command": command,
            "DefaultArguments": dict(self.default_arguments),
            "ExecutionProperty": {"MaxConcurrentRuns": self.max_concurrent_runs},
            "MaxRetries": self.max_retries,
            "Timeout": self.timeout,
        }
        optional = {
            "Description": self.description,
            "GlueVersion": self.glue_version,
            "WorkerType": self.worker_type,
            "NumberOfWorkers": self.number_of_workers,
            "JobRunQueuingEnabled": self.job_run_queuing_enabled,
            "NonOverridableArguments": dict(self.non_overridable_arguments) or None,
        }
        request.update({key: value for key, value in optional.items() if value is not None})
        return request


@dataclass(frozen=True)
class GlueDatabase:
    logical_id: str
    name: str
    catalog_id: str | None
    database_input: Mapping[str, Any]


# The properties of an AWS::SQS::Queue that are CreateQueue attributes of the same name.
_QUEUE_ATTRIBUTES = (
    "DelaySeconds",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    "ReceiveMessageWaitTimeSeconds",
    "VisibilityTimeout",
    "SqsManagedSseEnabled",
    "FifoQueue",
    "ContentBasedDeduplication",
)


@dataclass(frozen=True)
class DeployedQueue:
    """One ``AWS::SQS::Queue``: its name, its URL on the stack's SQS endpoint, and its CreateQueue attributes."""

    logical_id: str
    name: str
    url: str
    arn: str
    attributes: Mapping[str, str]


@dataclass(frozen=True)
class TriggerFunction:
    """The trigger Lambda: what it runs, with which environment, for which keys of the raw bucket."""

    logical_id: str
    name: str
    arn: str
    handler: str
    runtime: str | None
    environment: Mapping[str, str]
    code_dir: Path
    code_asset: FileAsset
    key_prefix: str
    key_suffix: str

    def local_path(self, value: str) -> Path:
        """A path the function opens, on this machine: Lambda runs from its code folder, so a relative path is
        taken inside ``code_dir``."""
        path = Path(value)
        return path if path.is_absolute() else self.code_dir / path

    @property
    def config_path(self) -> Path:
        """The table configuration file the function reads (``CDC_LAKE_CONFIG``, relative to its code)."""
        try:
            return self.local_path(self.environment[LAMBDA_CONFIG_ENV])
        except KeyError:
            raise DeployedStackError(f"the trigger function {self.logical_id} sets no {LAMBDA_CONFIG_ENV}") from None


@dataclass(frozen=True)
class DeployedStack:
    """A synthesized stack resolved for one account and region; see the module docstring for how parts are found."""

    stack_name: str
    assembly_dir: Path
    template_path: Path
    account: str
    region: str
    buckets: Mapping[str, str]  # logical id -> physical name, every AWS::S3::Bucket of the template
    raw_bucket: str  # physical name of the bucket DMS writes to
    lake_bucket: str  # physical name of the Iceberg warehouse bucket
    database: GlueDatabase
    jobs: Mapping[str, DeployedJob]
    lambda_function: TriggerFunction
    file_assets: tuple[FileAsset, ...]
    queues: Mapping[str, DeployedQueue]  # logical id -> queue, every AWS::SQS::Queue of the template
    # runs.mode warm: the shards' event queues' URLs in shard order (the warm job's --events_queues); else empty.
    warm_queues: tuple[str, ...]
    resolver: TemplateResolver = field(repr=False, compare=False)

    @classmethod
    def load(  # noqa: PLR0913 - keyword-only past the stack: where and how it is deployed
        cls,
        assembly_dir: Path,
        stack_name: str | None = None,
        *,
        account: str = DEFAULT_ACCOUNT,
        region: str = DEFAULT_REGION,
        parameters: Mapping[str, str] | None = None,
        sqs_endpoint: str | None = None,
    ) -> DeployedStack:
        """Read a stack of a cloud assembly directory, or the stack whose ``*.template.json`` is given.

        ``stack_name`` (artifact id or stack name) may be left out when the assembly holds one stack.
        ``parameters`` gives values to template parameters that have no default. Queue URLs are on
        ``sqs_endpoint``, by default the one boto3 would reach from here (``sqs_endpoint_from_environment``), so
        the Lambda's environment and the warm job's arguments name the queues ``provision`` creates there.
        """
        artifact = _find_stack(Path(assembly_dir), stack_name)
        template = _read_json(artifact.template_path)
        manifest = _read_json(artifact.assets_path)
        resolver = TemplateResolver(
            template,
            stack_name=artifact.stack_name,
            account=account,
            region=region,
            parameters=parameters,
            sqs_endpoint=sqs_endpoint or sqs_endpoint_from_environment(region),
        )
        return _Builder(artifact, resolver, manifest).build()

    @property
    def asset_buckets(self) -> tuple[str, ...]:
        """The buckets the assets are published to (CDK's bootstrap bucket, ``cdk-hnb659fds-assets-…``)."""
        return tuple(sorted({asset.bucket for asset in self.file_assets}))

    def job(self, kind_or_name: str) -> DeployedJob:
        """A job by kind (``cdc_replay``), deployed name (``cdclake-cdc-replay``) or logical id."""
        for job in self.jobs.values():
            if kind_or_name in (job.kind, job.name, job.logical_id):
                return job
        known = ", ".join(f"{job.kind} ({job.name})" for job in self.jobs.values())
        raise DeployedStackError(f"{self.stack_name} has no Glue job {kind_or_name!r}; it has {known}")

    def job_arguments(self, kind: str, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
        """A run's arguments: DefaultArguments, ``overrides`` key by key, then NonOverridableArguments."""
        return self.job(kind).arguments(overrides)

    def spark_conf(self, kind: str) -> dict[str, str]:
        """The job's single ``--conf`` value, as key → value."""
        return self.job(kind).spark_conf()

    def asset_at(self, uri: str) -> FileAsset:
        """The file asset published at ``s3://bucket/key`` (e.g. ``--config_uri`` or ``--extra-py-files``)."""
        for asset in self.file_assets:
            if asset.s3_uri == uri:
                return asset
        raise DeployedStackError(f"{uri} is not where an asset of {self.stack_name} is published")


def load_template(
    template_path: Path, *, account: str = DEFAULT_ACCOUNT, region: str = DEFAULT_REGION
) -> DeployedStack:
    """``DeployedStack.load`` for a ``<stack>.template.json`` file; its folder is the cloud assembly."""
    return DeployedStack.load(Path(template_path), account=account, region=region)


def _argument_key(key: str) -> str:
    return key if key.startswith("--") else f"--{key}"


# ------------------------------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class _StackArtifact:
    artifact_id: str
    stack_name: str
    assembly_dir: Path
    template_path: Path
    assets_path: Path


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DeployedStackError(f"{path}: no such file (synthesize the app first)") from None
    except json.JSONDecodeError as error:
        raise DeployedStackError(f"{path}: not JSON ({error})") from None
    if not isinstance(data, dict):
        raise DeployedStackError(f"{path}: expected a JSON object")
    return data


def _find_stack(path: Path, stack_name: str | None) -> _StackArtifact:
    """The stack artifact: from the assembly's manifest.json when there is one, else by file names."""
    wanted: str | None
    if path.is_file():
        if not path.name.endswith(TEMPLATE_SUFFIX):
            raise DeployedStackError(f"{path}: expected a <stack>{TEMPLATE_SUFFIX} file or a cloud assembly folder")
        assembly_dir, wanted = path.parent, stack_name or path.name.removesuffix(TEMPLATE_SUFFIX)
    elif path.is_dir():
        assembly_dir, wanted = path, stack_name
    else:
        raise DeployedStackError(f"{path}: no such cloud assembly folder or template file")

    stacks = _stacks_of(assembly_dir)
    if wanted is None:
        if len(stacks) != 1:
            names = ", ".join(stack.artifact_id for stack in stacks) or "none"
            raise DeployedStackError(f"{assembly_dir}: name the stack to read; the assembly holds {names}")
        return stacks[0]
    for stack in stacks:
        if wanted in (stack.artifact_id, stack.stack_name) or stack.template_path.resolve() == path.resolve():
            return stack
    names = ", ".join(stack.artifact_id for stack in stacks) or "none"
    raise DeployedStackError(f"{assembly_dir}: no stack {wanted!r}; the assembly holds {names}")


def _stacks_of(assembly_dir: Path) -> list[_StackArtifact]:
    manifest_path = assembly_dir / "manifest.json"
    if not manifest_path.is_file():
        return [
            _StackArtifact(
                artifact_id=(name := template.name.removesuffix(TEMPLATE_SUFFIX)),
                stack_name=name,
                assembly_dir=assembly_dir,
                template_path=template,
                assets_path=assembly_dir / f"{name}{ASSETS_SUFFIX}",
            )
            for template in sorted(assembly_dir.glob(f"*{TEMPLATE_SUFFIX}"))
        ]
    artifacts: Mapping[str, Any] = _read_json(manifest_path).get("artifacts", {})
    stacks = []
    for artifact_id, artifact in artifacts.items():
        if artifact.get("type") != "aws:cloudformation:stack":
            continue
        properties = artifact.get("properties", {})
        assets_file = f"{artifact_id}{ASSETS_SUFFIX}"
        for dependency in artifact.get("dependencies", []):
            dependent = artifacts.get(dependency, {})
            if dependent.get("type") == "cdk:asset-manifest":
                assets_file = dependent.get("properties", {}).get("file", assets_file)
        stacks.append(
            _StackArtifact(
                artifact_id=artifact_id,
                stack_name=properties.get("stackName", artifact_id),
                assembly_dir=assembly_dir,
                template_path=assembly_dir / properties.get("templateFile", f"{artifact_id}{TEMPLATE_SUFFIX}"),
                assets_path=assembly_dir / assets_file,
            )
        )
    return stacks


@dataclass(frozen=True)
class _Notification:
    bucket_id: str
    function_id: str
    prefix: str
    suffix: str


class _Builder:
    """Turns one resolved template and its asset manifest into a DeployedStack."""

    def __init__(self, artifact: _StackArtifact, resolver: TemplateResolver, manifest: Mapping[str, Any]) -> None:
        self.artifact = artifact
        self.resolver = resolver
        self.file_assets = self._file_assets(manifest)

    def build(self) -> DeployedStack:
        resolver = self.resolver
        buckets = {logical_id: resolver.physical_id(logical_id) for logical_id in resolver.of_type("AWS::S3::Bucket")}
        notifications = self._notifications()
        function = self._trigger_function(notifications)
        database = self._database()
        jobs = self._jobs()
        queues = {logical_id: self._queue(logical_id) for logical_id in resolver.of_type("AWS::SQS::Queue")}
        return DeployedStack(
            stack_name=self.artifact.stack_name,
            assembly_dir=self.artifact.assembly_dir,
            template_path=self.artifact.template_path,
            account=resolver.account,
            region=resolver.region,
            buckets=buckets,
            raw_bucket=buckets[self._raw_bucket_id(buckets, notifications, function)],
            lake_bucket=self._lake_bucket(buckets, jobs, database),
            database=database,
            jobs=jobs,
            lambda_function=function,
            file_assets=self.file_assets,
            queues=queues,
            warm_queues=self._warm_queues(jobs, queues),
            resolver=resolver,
        )

    # -- assets

    def _file_assets(self, manifest: Mapping[str, Any]) -> tuple[FileAsset, ...]:
        assets = []
        where = self.artifact.assets_path.name
        for asset_hash, entry in manifest.get("files", {}).items():
            source = entry.get("source", {})
            if "path" not in source:
                logger.debug("asset %s is built by a command, not read from a file: left out", asset_hash)
                continue
            packaging = source.get("packaging", "file")
            if packaging not in ("file", "zip"):
                raise DeployedStackError(f"{where}: asset {asset_hash} has unknown packaging {packaging!r}")
            source_path = Path(source["path"])
            for destination_id, destination in entry.get("destinations", {}).items():
                path = f"{where}:files.{asset_hash}.destinations.{destination_id}"
                assets.append(
                    FileAsset(
                        asset_hash=asset_hash,
                        display_name=entry.get("displayName"),
                        source_path=source_path
                        if source_path.is_absolute()
                        else self.artifact.assembly_dir / source_path,
                        packaging=packaging,
                        bucket=self.resolver.sub_text(destination["bucketName"], f"{path}.bucketName"),
                        object_key=self.resolver.sub_text(destination["objectKey"], f"{path}.objectKey"),
                    )
                )
        return tuple(assets)

    def _asset_at(self, bucket: str, key: str, where: str) -> FileAsset:
        for asset in self.file_assets:
            if (asset.bucket, asset.object_key) == (bucket, key):
                return asset
        raise DeployedStackError(f"{where}: s3://{bucket}/{key} is not the destination of any asset in the manifest")

    def _asset_at_uri(self, uri: str, where: str) -> FileAsset:
        match = _S3_URI.match(uri)
        if match is None:
            raise DeployedStackError(f"{where}: {uri!r} is not an s3:// location")
        return self._asset_at(match["bucket"], match["key"], where)

    # -- trigger function and raw bucket

    def _notifications(self) -> list[_Notification]:
        """Bucket → Lambda notifications, from CDK's custom resource or a bucket's own NotificationConfiguration."""
        found = []
        resolver = self.resolver
        sources = [
            (logical_id, body.get("Properties", {}).get("BucketName"), body.get("Properties", {}))
            for logical_id, body in resolver.resources.items()
            if body.get("Type") == "Custom::S3BucketNotifications"
        ] + [
            (logical_id, {"Ref": logical_id}, body.get("Properties", {}))
            for logical_id, body in resolver.resources.items()
            if body.get("Type") == "AWS::S3::Bucket"
        ]
        for _logical_id, bucket_ref, properties in sources:
            bucket_id = _reference_target(bucket_ref)
            configuration = properties.get("NotificationConfiguration", {})
            if bucket_id is None or not isinstance(configuration, dict):
                continue
            # CDK's custom resource holds the S3 API's shape, a bucket's own property CloudFormation's.
            entries = [
                *configuration.get("LambdaFunctionConfigurations", []),
                *configuration.get("LambdaConfigurations", []),
            ]
            for entry in entries:
                function_id = _reference_target(entry.get("LambdaFunctionArn") or entry.get("Function"))
                if function_id is None:
                    continue
                key_filter = entry.get("Filter", {})
                rules = key_filter.get("Key", {}).get("FilterRules", []) or key_filter.get("S3Key", {}).get("Rules", [])
                values = {str(rule.get("Name", "")).lower(): rule.get("Value", "") for rule in rules}
                found.append(_Notification(bucket_id, function_id, values.get("prefix", ""), values.get("suffix", "")))
        return found

    def _function_code(self, logical_id: str) -> FileAsset | None:
        """The code asset of a function whose code is published from the asset manifest."""
        code = self.resolver.resource(logical_id).get("Properties", {}).get("Code", {})
        if "S3Bucket" not in code or "S3Key" not in code:
            return None
        where = f"{logical_id}.Properties.Code"
        bucket = self.resolver.resolve_text(code["S3Bucket"], f"{where}.S3Bucket")
        key = self.resolver.resolve_text(code["S3Key"], f"{where}.S3Key")
        return self._asset_at(bucket, key, where)

    def _trigger_function(self, notifications: list[_Notification]) -> TriggerFunction:
        with_code = {
            logical_id: asset
            for logical_id in self.resolver.of_type("AWS::Lambda::Function")
            if (asset := self._function_code(logical_id)) is not None
        }
        targeted = sorted({n.function_id for n in notifications if n.function_id in with_code})
        candidates = targeted or sorted(with_code)
        if len(candidates) != 1:
            raise DeployedStackError(
                f"{self.artifact.template_path}: expected one trigger function (a function with asset code that a "
                f"bucket notification targets), found {candidates or 'none'}"
            )
        logical_id = candidates[0]
        asset = with_code[logical_id]
        resolver = self.resolver
        variables = resolver.resource_property(logical_id, "Environment", "Variables") or {}
        environment = {
            name: resolver.resolve_text(value, f"{logical_id}.Properties.Environment.Variables.{name}")
            for name, value in variables.items()
        }
        notification = next((n for n in notifications if n.function_id == logical_id), None)
        return TriggerFunction(
            logical_id=logical_id,
            name=resolver.physical_id(logical_id),
            arn=resolver.resolve_text({"Fn::GetAtt": [logical_id, "Arn"]}, f"{logical_id}.Arn"),
            handler=resolver.resolve_text(resolver.resource_property(logical_id, "Handler"), f"{logical_id}.Handler"),
            runtime=resolver.resource_property(logical_id, "Runtime"),
            environment=environment,
            code_dir=asset.source_path,
            code_asset=asset,
            key_prefix=notification.prefix if notification else "",
            key_suffix=notification.suffix if notification else "",
        )

    def _raw_bucket_id(
        self, buckets: Mapping[str, str], notifications: list[_Notification], function: TriggerFunction
    ) -> str:
        notified = {n.bucket_id for n in notifications if n.function_id == function.logical_id} & buckets.keys()
        if len(notified) == 1:
            return notified.pop()
        # Else: the bucket the jobs read DMS files from (the ReadDmsFiles statement of infra/glue.py's role).
        read = {
            target
            for logical_id in self.resolver.of_type("AWS::IAM::Policy")
            for statement in _statements(self.resolver.resource(logical_id))
            if statement.get("Sid") == "ReadDmsFiles"
            for target in _references(statement.get("Resource"))
            if target in buckets
        }
        if len(read) == 1:
            return read.pop()
        raise DeployedStackError(
            f"{self.artifact.template_path}: cannot tell the raw bucket (notified: {sorted(notified) or 'none'}, "
            f"read by ReadDmsFiles: {sorted(read) or 'none'})"
        )

    # -- Glue

    def _database(self) -> GlueDatabase:
        databases = self.resolver.of_type("AWS::Glue::Database")
        if len(databases) != 1:
            raise DeployedStackError(
                f"{self.artifact.template_path}: expected one AWS::Glue::Database, found {databases or 'none'}"
            )
        logical_id = databases[0]
        database_input = self.resolver.resource_property(logical_id, "DatabaseInput") or {}
        catalog_id = self.resolver.resource_property(logical_id, "CatalogId")
        return GlueDatabase(
            logical_id=logical_id,
            name=self.resolver.physical_id(logical_id),
            catalog_id=None if catalog_id is None else str(catalog_id),
            database_input=database_input,
        )

    def _jobs(self) -> dict[str, DeployedJob]:
        jobs: dict[str, DeployedJob] = {}
        for logical_id in self.resolver.of_type("AWS::Glue::Job"):
            job = self._job(logical_id)
            if any(job.name.endswith(f"-{twin}") for twin in GLUE_JOBS[job.kind].twins):
                continue  # a twin (the drift script's repair job): what differs is its rights, not its code
            if job.kind in jobs:
                raise DeployedStackError(
                    f"{self.artifact.template_path}: {jobs[job.kind].logical_id} and {logical_id} are both "
                    f"{job.kind} jobs"
                )
            jobs[job.kind] = job
        # A stack whose source no job can reach (Oracle, SQL Server) has no source jobs, and one that does not run
        # warm (runs.mode) no warm job; every other lake job is its own.
        missing = [
            kind
            for kind in JOB_NAMES
            if kind not in jobs and GLUE_JOBS[kind].network == "lake" and not GLUE_JOBS[kind].warm
        ]
        if missing:
            raise DeployedStackError(f"{self.artifact.template_path}: no Glue job for {', '.join(missing)}")
        return {kind: jobs[kind] for kind in JOB_NAMES if kind in jobs}

    def _job(self, logical_id: str) -> DeployedJob:
        resolver = self.resolver

        def text(*names: str) -> str | None:
            value = resolver.resource_property(logical_id, *names)
            return None if value is None else resolver.resolve_text(value, ".".join((logical_id, *names)))

        def number(*names: str) -> int | None:
            value = resolver.resource_property(logical_id, *names)
            return None if value is None else int(value)

        def arguments(name: str) -> dict[str, str]:
            values = resolver.resource_property(logical_id, name) or {}
            return {
                key: resolver.resolve_text(value, f"{logical_id}.Properties.{name}.{key}")
                for key, value in values.items()
            }

        script_location = text("Command", "ScriptLocation")
        if script_location is None:
            raise DeployedStackError(f"{logical_id}.Properties.Command.ScriptLocation: the job names no script")
        script = self._asset_at_uri(script_location, f"{logical_id}.Properties.Command.ScriptLocation")
        queuing = resolver.resource_property(logical_id, "JobRunQueuingEnabled")
        return DeployedJob(
            kind=self._job_kind(logical_id, script),
            logical_id=logical_id,
            name=resolver.physical_id(logical_id),
            role=text("Role") or f"arn:aws:iam::{resolver.account}:role/{resolver.stack_name}-glue-job",
            description=text("Description"),
            glue_version=text("GlueVersion"),
            worker_type=text("WorkerType"),
            number_of_workers=number("NumberOfWorkers"),
            max_concurrent_runs=number("ExecutionProperty", "MaxConcurrentRuns") or _GLUE_DEFAULT_MAX_CONCURRENT_RUNS,
            timeout=number("Timeout") or _GLUE_DEFAULT_TIMEOUT_MINUTES,
            max_retries=number("MaxRetries") or 0,
            job_run_queuing_enabled=None if queuing is None else str(queuing).lower() == "true",
            security_configuration=text("SecurityConfiguration"),
            command=GlueCommand(
                name=text("Command", "Name") or "glueetl",
                python_version=text("Command", "PythonVersion"),
                script_location=script_location,
            ),
            default_arguments=arguments("DefaultArguments"),
            non_overridable_arguments=arguments("NonOverridableArguments"),
            script_path=script.source_path,
        )

    @staticmethod
    def _job_kind(logical_id: str, script: FileAsset) -> str:
        """By the script asset (its source file, or ``…/Script-<name>`` for a staged copy), else the logical id."""
        script_names = (script.source_path.stem, (script.display_name or "").rsplit("/", 1)[-1])
        for kind in JOB_NAMES:
            if any(name == kind or name.endswith(f"-{kind}") for name in script_names):
                return kind
        for job in GLUE_JOBS.values():
            if job.construct_id in logical_id:
                return job.name
        raise DeployedStackError(
            f"{logical_id}: cannot tell which job this is from its script {script.display_name or script.source_path} "
            f"or its logical id; expected one of {', '.join(JOB_NAMES)} (core.glue_jobs.GLUE_JOBS)"
        )

    def _lake_bucket(self, buckets: Mapping[str, str], jobs: Mapping[str, DeployedJob], database: GlueDatabase) -> str:
        locations = [
            (f"{job.logical_id} --warehouse", job.default_arguments.get("--warehouse")) for job in jobs.values()
        ]
        if not any(uri for _where, uri in locations):
            locations = [(f"{database.logical_id} LocationUri", database.database_input.get("LocationUri"))]
        names = set()
        for where, uri in locations:
            match = _S3_URI.match(uri or "")
            if match is None:
                continue
            if match["bucket"] not in buckets.values():
                raise DeployedStackError(f"{where}: {uri} is in no bucket of the template")
            names.add(match["bucket"])
        if len(names) != 1:
            raise DeployedStackError(
                f"{self.artifact.template_path}: expected one lake bucket (--warehouse), "
                f"found {sorted(names) or 'none'}"
            )
        return names.pop()

    # -- SQS

    def _queue(self, logical_id: str) -> DeployedQueue:
        resolver = self.resolver
        attributes = {
            name: resolver.resolve_text(value, f"{logical_id}.Properties.{name}")
            for name in _QUEUE_ATTRIBUTES
            if (value := resolver.resource_property(logical_id, name)) is not None
        }
        return DeployedQueue(
            logical_id=logical_id,
            name=resolver.name(logical_id),
            url=resolver.queue_url(logical_id),
            arn=resolver.resolve_text({"Fn::GetAtt": [logical_id, "Arn"]}, f"{logical_id}.Arn"),
            attributes=attributes,
        )

    def _warm_queues(self, jobs: Mapping[str, DeployedJob], queues: Mapping[str, DeployedQueue]) -> tuple[str, ...]:
        warm = jobs.get(WARM_JOB)
        listed = warm.default_arguments.get(WARM_QUEUES_ARGUMENT, "") if warm else ""
        urls = tuple(url for url in listed.split(",") if url)
        known = {queue.url for queue in queues.values()}
        if unknown := [url for url in urls if url not in known]:
            raise DeployedStackError(
                f"{self.artifact.template_path}: {WARM_QUEUES_ARGUMENT} of the warm job names {unknown}, "
                f"which are no queues of the template"
            )
        return urls


def _statements(policy: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    statements = policy.get("Properties", {}).get("PolicyDocument", {}).get("Statement", [])
    return [statement for statement in statements if isinstance(statement, dict)]


# --------------------------------------------------------------------------------------------- provisioning


def provision(
    stack: DeployedStack,
    session: Session | None = None,
    *,
    s3_client: Any | None = None,
    glue_client: Any | None = None,
    sqs_client: Any | None = None,
) -> None:
    """Create what ``cdk deploy`` creates and the pipeline reads at run time, on the clients' endpoint.

    The template's buckets and the asset buckets, every ``file`` asset at its destination (folder assets, the
    Lambda's code, are zipped by CDK at publish time and are not uploaded: the local run uses their folder),
    the template's queues (at the URLs the stack resolved, else ProvisionError), the Glue database and the Glue
    jobs (without their security configuration, which is not created).
    Clients come from ``session`` (default: a new boto3 session) when not given, so ``AWS_ENDPOINT_URL`` and the
    region come from the environment. Idempotent: what exists is left (buckets, objects are rewritten) or updated.
    """
    if s3_client is None or glue_client is None or sqs_client is None:
        import boto3

        session = session or boto3.session.Session()
        s3_client = s3_client or session.client("s3")
        glue_client = glue_client or session.client("glue")
        sqs_client = sqs_client or session.client("sqs")
    glue_region = glue_client.meta.region_name
    if glue_region and glue_region != stack.region:
        raise ProvisionError(
            f"{stack.stack_name} was resolved for region {stack.region} but the Glue client is in {glue_region}: "
            f"load the stack with region={glue_region!r} or set AWS_DEFAULT_REGION={stack.region}"
        )
    for bucket in sorted({*stack.buckets.values(), *stack.asset_buckets}):
        _ensure_bucket(s3_client, bucket)
    for asset in stack.file_assets:
        if asset.packaging != "file":
            logger.debug("not uploading folder asset %s (%s)", asset.display_name, asset.source_path)
            continue
        if not asset.source_path.is_file():
            raise ProvisionError(f"asset {asset.display_name or asset.asset_hash}: {asset.source_path} is missing")
        s3_client.put_object(Bucket=asset.bucket, Key=asset.object_key, Body=asset.source_path.read_bytes())
        logger.info("uploaded %s to %s", asset.display_name or asset.source_path.name, asset.s3_uri)
    for queue in stack.queues.values():
        _ensure_queue(sqs_client, queue)
    _ensure_database(glue_client, stack.database)
    for job in stack.jobs.values():
        _ensure_job(glue_client, job)


def _error_code(error: Exception) -> str:
    response = getattr(error, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def _ensure_bucket(s3_client: Any, bucket: str) -> None:
    from botocore.exceptions import ClientError

    region = s3_client.meta.region_name
    location = {} if region in (None, "us-east-1") else {"CreateBucketConfiguration": {"LocationConstraint": region}}
    try:
        s3_client.create_bucket(Bucket=bucket, **location)
        logger.info("created bucket %s", bucket)
    except ClientError as error:
        if _error_code(error) != "BucketAlreadyOwnedByYou":
            raise


def _ensure_queue(sqs_client: Any, queue: DeployedQueue) -> None:
    """CreateQueue, which answers an existing queue's URL when the attributes are the same; with others, they are
    set. The URL must be the one the stack resolved: the Lambda and the warm job are given that one."""
    from botocore.exceptions import ClientError

    attributes = dict(queue.attributes)
    try:
        url = sqs_client.create_queue(QueueName=queue.name, Attributes=attributes)["QueueUrl"]
        logger.info("created queue %s", queue.name)
    except ClientError as error:
        if _error_code(error) not in ("QueueAlreadyExists", "QueueNameExists"):
            raise
        url = sqs_client.get_queue_url(QueueName=queue.name)["QueueUrl"]
        settable = {name: value for name, value in attributes.items() if name != "FifoQueue"}  # fixed at creation
        sqs_client.set_queue_attributes(QueueUrl=url, Attributes=settable)
        logger.info("updated queue %s", queue.name)
    if url != queue.url:
        raise ProvisionError(
            f"queue {queue.logical_id} is at {url} on this endpoint, but the stack was resolved with {queue.url}: "
            f"load it with sqs_endpoint= the endpoint's URL (or with {AWS_ENDPOINT_ENV} set)"
        )


def _ensure_database(glue_client: Any, database: GlueDatabase) -> None:
    from botocore.exceptions import ClientError

    database_input = dict(database.database_input)
    try:
        glue_client.create_database(DatabaseInput=database_input)
        logger.info("created Glue database %s", database.name)
    except ClientError as error:
        if _error_code(error) != "AlreadyExistsException":
            raise
        glue_client.update_database(Name=database.name, DatabaseInput=database_input)
        logger.info("updated Glue database %s", database.name)


def _ensure_job(glue_client: Any, job: DeployedJob) -> None:
    from botocore.exceptions import ClientError

    request = job.create_job_request()
    try:
        glue_client.create_job(**request)
        logger.info("created Glue job %s (%s)", job.name, job.kind)
    except ClientError as error:
        if _error_code(error) not in ("AlreadyExistsException", "IdempotentParameterMismatchException"):
            raise
        update = {key: value for key, value in request.items() if key != "Name"}
        glue_client.update_job(JobName=job.name, JobUpdate=update)
        logger.info("updated Glue job %s (%s)", job.kind, job.name)
