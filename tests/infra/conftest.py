"""Fixtures for the CDK tests: two synthesized stacks shared by the whole session (jsii start-up and synth
are slow), built through ``infra.app.create_app`` exactly as ``cdk synth`` builds them. Each takes its Glue version
from its configuration, never from ``GLUE_VERSION``, so ``make test GLUE_VERSION=6.0`` checks the same templates."""

from __future__ import annotations

import os
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest

# jsii prints a banner on every start under Node 20; the tests do not need it.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")

from aws_cdk import Stack, Stage
from aws_cdk.assertions import Template

from cdc_lake.core.config import PipelineConfig, load_config
from cdc_lake.core.glue_jobs import GLUE_JOBS
from cdc_lake.core.names import GLUE_VERSION_ENV
from cdc_lake.local.deployed import DEFAULT_REGION, DeployedStack, aws_sqs_endpoint
from infra.app import cdk_json_context, create_app
from infra.packaging import REPO_ROOT, SourceLayout
from infra.pipeline_stack import PipelineStack

HERE = Path(__file__).resolve().parent
PARQUET_CONFIG = HERE / "parquet_config.yaml"
DEMO_CONFIG = REPO_ROOT / "glue_jobs" / "cdc_lake" / "demo.yaml"

# The jobs of a stack that does not run warm (runs.mode coalesced or per_file): all but the warm job, which only a
# warm stack makes (tests/infra/test_warm_stack.py).
NON_WARM_JOBS = tuple(job for job in GLUE_JOBS.values() if not job.warm)

SECRET_ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:cdc-lake/source-AbCdEf"
SOURCE_KEY_ARN = "arn:aws:kms:eu-west-1:123456789012:key/01234567-89ab-cdef-0123-456789abcdef"
SOURCE_SECURITY_GROUP = "sg-0123456789abcdef0"
# What a user passes with -c for a deployment (the CLI test passes the same values).
DEPLOY_CONTEXT: dict[str, str] = {
    "vpcId": "vpc-0123456789abcdef0",
    "subnetIds": "subnet-0123456789abcdef0,subnet-0fedcba9876543210",
    "sourceEngine": "mysql",
    "sourceSecretArn": SECRET_ARN,
}
# The DMS S3 target settings parquet_config.yaml makes, beside the bucket, the role and the bucket's owner.
PARQUET_S3_SETTINGS: dict[str, Any] = {
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
}
PARQUET_CONTEXT: dict[str, str] = {
    "tableConfig": str(PARQUET_CONFIG.relative_to(REPO_ROOT)),
    "sourceEngine": "postgres",
    "sourceDatabase": "sales",
    "sourceSecurityGroupId": SOURCE_SECURITY_GROUP,
    "sourceSecretKmsKeyArn": SOURCE_KEY_ARN,
    "dmsMode": "serverless",
    "dmsServerlessMaxCapacityUnits": "8",
    "createDmsServiceRoles": "false",
    "alarmEmail": "data-ops@example.com",
    "stackName": "SalesLake",
    "maintenanceSchedule": "cron(0 2 ? * SUN *)",
}


@dataclass(frozen=True)
class Synthesized:
    stack: PipelineStack
    template: Template
    config: PipelineConfig

    @property
    def json(self) -> dict[str, Any]:
        return self.template.to_json()

    def logical_id(self, construct: Any) -> str:
        return self.stack.resolve(Stack.of(construct).get_logical_id(construct.node.default_child or construct))


def synthesize(tmp: Path, overrides: dict[str, str]) -> Synthesized:
    context = {**cdk_json_context(), **DEPLOY_CONTEXT, **overrides}
    with pytest.MonkeyPatch.context() as env:
        env.delenv(GLUE_VERSION_ENV, raising=False)
        _app, stack = create_app(context, asset_dir=tmp / "assets", sources=SourceLayout(), outdir=str(tmp / "out"))
    config = load_config(REPO_ROOT / context["tableConfig"])
    return Synthesized(stack=stack, template=Template.from_stack(stack), config=config)


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The demo configuration (CSV), MySQL source, replication instance: the default deployment."""
    return synthesize(tmp_path_factory.mktemp("demo"), {})


@pytest.fixture(scope="session")
def parquet(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """Parquet + gzip + date folders + AR_H_CHANGE_SEQ, PostgreSQL source, DMS Serverless, weekly maintenance."""
    return synthesize(tmp_path_factory.mktemp("parquet"), PARQUET_CONTEXT)


def assembly_dir(synth: Synthesized) -> Path:
    """The app's outdir, holding the cloud assembly ``Template.from_stack`` wrote (written now if it did not)."""
    stage = Stage.of(synth.stack)
    assert stage is not None
    outdir = Path(stage.outdir)
    if not (outdir / synth.stack.template_file).is_file():
        stage.synth(force=True)
    return outdir


# Queue URLs on AWS's endpoint, as moto's mock_aws answers CreateQueue, whatever endpoint the shell names.
AWS_SQS = aws_sqs_endpoint(DEFAULT_REGION)


@pytest.fixture(scope="session")
def demo_stack(demo: Synthesized) -> DeployedStack:
    return DeployedStack.load(assembly_dir(demo), sqs_endpoint=AWS_SQS)


@pytest.fixture(scope="session")
def parquet_stack(parquet: Synthesized) -> DeployedStack:
    return DeployedStack.load(assembly_dir(parquet), "SalesLake", sqs_endpoint=AWS_SQS)


def render(value: Any) -> Any:
    """Render CloudFormation intrinsics as text with ${Ref}/${Id.Attr} placeholders, for readable asserts."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, list):
        return [render(item) for item in value]
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(str(render(part)) for part in parts)
    if "Ref" in value:
        return "${" + value["Ref"] + "}"
    if "Fn::GetAtt" in value:
        return "${" + ".".join(value["Fn::GetAtt"]) + "}"
    if "Fn::Sub" in value:
        return value["Fn::Sub"]
    return {key: render(item) for key, item in value.items()}


def resources_of_type(synth: Synthesized, resource_type: str) -> dict[str, dict[str, Any]]:
    return synth.template.find_resources(resource_type)


def only(resources: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    assert len(resources) == 1, f"expected one resource, found {sorted(resources)}"
    return next(iter(resources.items()))


def job_role_statements(synth: Synthesized) -> dict[str, list[dict[str, Any]]]:
    """Each Glue job's name -> the statements of every policy attached to the role it runs as."""
    policies = resources_of_type(synth, "AWS::IAM::Policy").values()
    found = {}
    for job in resources_of_type(synth, "AWS::Glue::Job").values():
        role = {"Ref": job["Properties"]["Role"]["Fn::GetAtt"][0]}
        found[job["Properties"]["Name"]] = [
            statement
            for policy in policies
            if role in policy["Properties"]["Roles"]
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        ]
    return found


def allows(statements: list[dict[str, Any]], action: str, resource: str) -> bool:
    """Whether one of ``statements`` allows ``action`` on ``resource`` (a rendered ARN), with IAM's ``*`` wildcards
    in the statements' actions and resources."""

    def listed(value: Any) -> list[Any]:
        return value if isinstance(value, list) else [value]

    return any(
        statement["Effect"] == "Allow"
        and any(fnmatchcase(action, granted) for granted in listed(statement["Action"]))
        and any(fnmatchcase(resource, str(granted)) for granted in listed(render(statement["Resource"])))
        for statement in statements
    )
