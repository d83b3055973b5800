"""``cdc_lake.local.deployed``: the synthesized cloud assembly read back as what ``cdk deploy`` creates.

The demo and parquet stacks come from the session fixtures of conftest.py; ``Template.from_stack`` has already
written their cloud assemblies to the app's outdir, which is read here without synthesizing again.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from cdc_lake.core.exceptions import DeployedStackError, ProvisionError, UnsupportedIntrinsicError
from cdc_lake.core.glue_jobs import GLUE_JOBS
from cdc_lake.core.names import GLUE_CATALOG
from cdc_lake.local.deployed import (
    DeployedStack,
    TemplateResolver,
    generated_name,
    is_intrinsic,
    load_template,
    provision,
    sqs_endpoint_from_environment,
)
from infra.glue import FLEX_JOBS, MAINTENANCE_SIZING
from infra.packaging import LAKE_IO_JAR, LAMBDA_HANDLER, REPO_ROOT, config_json_text
from infra.storage import GLUE_TEMP_PREFIX, WAREHOUSE_PREFIX
from tests.infra.conftest import NON_WARM_JOBS, Synthesized

ACCOUNT = "123456789012"
REGION = "us-east-1"
ASSETS_BUCKET = f"cdk-hnb659fds-assets-{ACCOUNT}-{REGION}"
# S3's rules for a bucket name: 3-63 characters, lower-case letters, digits, dots and hyphens, letter or digit
# at both ends.
BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
VARIANTS = ("demo", "parquet")


@pytest.fixture(params=VARIANTS)
def variant(request: pytest.FixtureRequest) -> tuple[Synthesized, DeployedStack]:
    return request.getfixturevalue(request.param), request.getfixturevalue(f"{request.param}_stack")


def intrinsics_in(value: Any, path: str = "") -> Iterator[str]:
    """Where an unresolved intrinsic, or a ${…} placeholder, is left inside ``value``."""
    if isinstance(value, dict):
        if any(key == "Ref" or key.startswith("Fn::") for key in value):
            yield f"{path}: {value}"
        for key, item in value.items():
            yield from intrinsics_in(item, f"{path}.{key}")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from intrinsics_in(item, f"{path}[{index}]")
    elif isinstance(value, str) and "${" in value:
        yield f"{path}: {value}"


# ---------------------------------------------------------------------------------------- the CDK stacks


def test_no_intrinsic_is_left_in_what_the_pipeline_reads(variant: tuple[Synthesized, DeployedStack]) -> None:
    synth, stack = variant
    raw_arguments = synth.json["Resources"][stack.jobs["cdc_replay"].logical_id]["Properties"]["DefaultArguments"]
    # Not vacuous: the template holds intrinsics exactly where the pipeline's values are.
    assert is_intrinsic(raw_arguments["--warehouse"])
    assert is_intrinsic(raw_arguments["--config_uri"])
    function = synth.json["Resources"][stack.lambda_function.logical_id]["Properties"]
    assert is_intrinsic(function["Environment"]["Variables"]["FULL_LOAD_JOB_NAME"])
    resolved = {
        "jobs": {
            kind: {
                "name": job.name,
                "role": job.role,
                "script": job.command.script_location,
                "default": dict(job.default_arguments),
                "non_overridable": dict(job.non_overridable_arguments),
            }
            for kind, job in stack.jobs.items()
        },
        "lambda": dict(stack.lambda_function.environment),
        "database": dict(stack.database.database_input),
        "buckets": dict(stack.buckets),
        "assets": [(asset.bucket, asset.object_key) for asset in stack.file_assets],
    }
    assert list(intrinsics_in(resolved)) == []
    assert all(isinstance(value, str) for job in stack.jobs.values() for value in job.default_arguments.values())


def test_no_endpoint_reaches_the_deployed_template(variant: tuple[Synthesized, DeployedStack]) -> None:
    _synth, stack = variant
    text = stack.template_path.read_text(encoding="utf-8")
    for marker in ("AWS_ENDPOINT_URL", "glue.endpoint", "s3.endpoint", "path-style", "127.0.0.1", "localhost"):
        assert marker not in text, marker
    conf = stack.spark_conf("cdc_replay")
    assert not [key for key in conf if "endpoint" in key]


def test_each_job_runs_the_repository_script(variant: tuple[Synthesized, DeployedStack]) -> None:
    _synth, stack = variant
    assert set(stack.jobs) == {job.name for job in NON_WARM_JOBS}
    for kind, job in stack.jobs.items():
        assert job.kind == kind
        assert job.script_path.is_file(), job.script_path
        assert job.script_path.parent == stack.assembly_dir
        assert job.script_path.read_bytes() == (REPO_ROOT / "glue_jobs" / f"{kind}.py").read_bytes(), kind
        assert re.fullmatch(rf"s3://{ASSETS_BUCKET}/[0-9a-f]{{64}}\.py", job.command.script_location)
        assert stack.asset_at(job.command.script_location).source_path == job.script_path
    scripts = {job.script_path for job in stack.jobs.values()}
    assert len(scripts) == len(NON_WARM_JOBS)


def test_each_jobs_defaults_with_a_runs_arguments_are_what_it_declares(
    variant: tuple[Synthesized, DeployedStack],
) -> None:
    """What the stack sets, plus what the Lambda passes a triggered run, is a valid set of the job's arguments."""
    _synth, stack = variant
    for kind, job in stack.jobs.items():
        facts = GLUE_JOBS[kind]
        per_run = {"--bucket": stack.raw_bucket, "--key": "dms/shop/orders/LOAD00000001.csv", "--table": "shop.orders"}
        options = facts.arguments.from_options(job.arguments(per_run if facts.triggered else {}))
        assert options.config_uri == job.default_arguments["--config_uri"], kind


def test_config_uri_is_the_published_table_configuration(variant: tuple[Synthesized, DeployedStack]) -> None:
    synth, stack = variant
    expected = config_json_text(synth.config).encode()
    uris = {job.default_arguments["--config_uri"] for job in stack.jobs.values()}
    assert len(uris) == 1
    uri = uris.pop()
    match = re.fullmatch(rf"s3://{ASSETS_BUCKET}/(?P<hash>[0-9a-f]{{64}})\.json", uri)
    assert match, uri
    asset = stack.asset_at(uri)
    assert asset.asset_hash == match["hash"]
    assert asset.packaging == "file"
    assert asset.source_path.read_bytes() == expected
    # The Lambda reads the same configuration, from a file of its code folder (its working directory).
    function = stack.lambda_function
    assert function.environment["CDC_LAKE_CONFIG"] == "tables.json"
    assert function.config_path == function.code_dir / "tables.json"
    assert function.config_path.read_bytes() == expected


def test_warehouse_is_in_the_lake_bucket_and_the_spark_conf_matches(variant: tuple[Synthesized, DeployedStack]) -> None:
    synth, stack = variant
    assert stack.lake_bucket != stack.raw_bucket
    assert stack.lake_bucket in stack.buckets.values()
    lake_jobs = {kind: job for kind, job in stack.jobs.items() if GLUE_JOBS[kind].reads_lake}
    # The source check reads the source's catalog, never the lake.
    assert lake_jobs.keys() == {job.name for job in NON_WARM_JOBS} - {"source_check"}
    for job in stack.jobs.values():
        assert ("--warehouse" in job.default_arguments) is GLUE_JOBS[job.kind].reads_lake
    for kind, job in lake_jobs.items():
        arguments = stack.job_arguments(kind)
        warehouse = arguments["--warehouse"]
        assert warehouse == f"s3://{stack.lake_bucket}/{WAREHOUSE_PREFIX}"
        assert arguments["--TempDir"] == f"s3://{stack.lake_bucket}/{GLUE_TEMP_PREFIX}"
        assert arguments["--catalog"] == GLUE_CATALOG
        assert arguments["--database"] == synth.config.lake.database == stack.database.name
        conf = stack.spark_conf(kind)
        assert conf == job.spark_conf()
        catalog = f"spark.sql.catalog.{GLUE_CATALOG}"
        assert conf["spark.sql.extensions"] == "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
        assert conf[catalog] == "org.apache.iceberg.spark.SparkCatalog"
        assert conf[f"{catalog}.catalog-impl"] == "org.apache.iceberg.aws.glue.GlueCatalog"
        assert conf[f"{catalog}.io-impl"] == "cdclake.iceberg.WrittenMetadataFileIO"
        assert conf[f"{catalog}.warehouse"] == warehouse
    assert stack.database.database_input["LocationUri"] == (
        f"s3://{stack.lake_bucket}/{WAREHOUSE_PREFIX}{stack.database.name}.db"
    )
    assert stack.database.database_input["Name"] == stack.database.name
    assert stack.database.catalog_id == ACCOUNT


def test_maintenance_reloads_from_the_raw_bucket(variant: tuple[Synthesized, DeployedStack]) -> None:
    synth, stack = variant
    assert stack.job_arguments("maintenance")["--bucket"] == stack.raw_bucket
    # The same bucket by independent routes: DMS's target endpoint and the stack's output.
    targets = [
        logical_id
        for logical_id in stack.resolver.of_type("AWS::DMS::Endpoint")
        if stack.resolver.resource_property(logical_id, "EndpointType") == "target"
    ]
    assert len(targets) == 1
    assert stack.resolver.resource_property(targets[0], "S3Settings", "BucketName") == stack.raw_bucket
    outputs = synth.json["Outputs"]
    assert stack.resolver.resolve(outputs["RawBucketName"]["Value"], "Outputs.RawBucketName") == stack.raw_bucket
    assert stack.resolver.resolve(outputs["LakeBucketName"]["Value"], "Outputs.LakeBucketName") == stack.lake_bucket


def test_buckets_get_valid_distinct_names(variant: tuple[Synthesized, DeployedStack]) -> None:
    synth, stack = variant
    assert set(stack.buckets) == set(synth.template.find_resources("AWS::S3::Bucket"))
    assert len(set(stack.buckets.values())) == len(stack.buckets) == 3
    for name in stack.buckets.values():
        assert BUCKET_NAME.fullmatch(name), name
        assert name.startswith(f"{stack.stack_name.lower()}-")
    assert stack.asset_buckets == (ASSETS_BUCKET,)


def test_generated_names_are_cut_with_a_hash() -> None:
    long_id = "Storage" + "VeryLongConstructName" * 4 + "ABCDEF12"
    name = generated_name("CdcLake", long_id, "AWS::S3::Bucket")
    assert len(name) == 63
    assert BUCKET_NAME.fullmatch(name)
    assert name != generated_name("CdcLake", long_id + "X", "AWS::S3::Bucket")
    assert generated_name("CdcLake", "StorageRaw7E344C76", "AWS::S3::Bucket") == "cdclake-storageraw7e344c76"
    assert generated_name("CdcLake", "GlueJobRole37613AC3", "AWS::IAM::Role") == "CdcLake-GlueJobRole37613AC3"


def test_jobs_carry_the_deployed_definition(variant: tuple[Synthesized, DeployedStack]) -> None:
    synth, stack = variant
    prefix = stack.stack_name.lower()
    names = {kind: job.name for kind, job in stack.jobs.items()}
    assert names == {job.name: f"{prefix}-{job.resource_name}" for job in NON_WARM_JOBS}
    assert names["cdc_replay"] == f"{prefix}-cdc-replay"
    for job in stack.jobs.values():
        raw = synth.json["Resources"][job.logical_id]["Properties"]
        assert job.glue_version == raw["GlueVersion"] == synth.stack.glue.glue_version
        assert job.worker_type == raw["WorkerType"] == "G.1X"
        assert job.number_of_workers == raw["NumberOfWorkers"]
        assert job.timeout == raw["Timeout"]
        assert job.max_concurrent_runs == raw["ExecutionProperty"]["MaxConcurrentRuns"]
        assert job.max_retries == 0
        assert job.job_run_queuing_enabled is raw["JobRunQueuingEnabled"] is (job.kind not in FLEX_JOBS)
        assert job.command.name == "glueetl"
        assert job.command.python_version == "3"
        assert job.security_configuration == f"{prefix}-glue"
        # The jobs in the source's network have roles of their own, and so has maintenance (it deletes landed files).
        own_roles = {
            "source_check": "SourceCheckRole",
            "drift": "SourceCheckDriftRole",
            "maintenance": "GlueMaintenanceRole",
        }
        role = own_roles.get(job.kind, "GlueJobRole")
        assert re.fullmatch(rf"arn:aws:iam::{ACCOUNT}:role/{stack.stack_name}-{role}[0-9A-F]{{8}}", job.role)
        # The source's jobs hold sourceWithoutTls where no run can change it; the lake jobs lock nothing.
        locked = {"--source_without_tls": "false"} if GLUE_JOBS[job.kind].network == "source" else {}
        assert job.non_overridable_arguments == locked
        assert stack.job(job.name) is job
        assert stack.job(job.logical_id) is job
    maintenance = stack.jobs["maintenance"]
    assert (maintenance.max_concurrent_runs, maintenance.timeout) == (
        MAINTENANCE_SIZING.max_concurrent_runs,
        MAINTENANCE_SIZING.timeout_minutes,
    )
    with pytest.raises(DeployedStackError, match="no Glue job 'nightly'"):
        stack.job("nightly")


def test_trigger_function_environment_and_code(variant: tuple[Synthesized, DeployedStack]) -> None:
    synth, stack = variant
    function = stack.lambda_function
    assert function.environment["FULL_LOAD_JOB_NAME"] == stack.jobs["full_load"].name
    assert function.environment["CDC_REPLAY_JOB_NAME"] == stack.jobs["cdc_replay"].name
    assert function.handler == LAMBDA_HANDLER
    assert (function.code_dir / "dms_trigger" / "handler.py").is_file()
    assert function.code_asset.packaging == "zip"
    assert function.code_asset.bucket == ASSETS_BUCKET
    folder = synth.config.dms.bucket_folder
    assert function.key_prefix == (f"{folder}/" if folder else "")
    assert function.arn == f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{function.name}"


def test_job_arguments_apply_overrides_key_by_key(demo_stack: DeployedStack) -> None:
    job = demo_stack.jobs["maintenance"]
    defaults = dict(job.default_arguments)
    arguments = demo_stack.job_arguments(
        "maintenance", {"--action": "reload", "table": "shop.orders", "--orphan_days": "1"}
    )
    assert arguments["--action"] == "reload"  # an override wins over the default
    assert arguments["--table"] == "shop.orders"  # a new key, given without "--"
    assert arguments["--orphan_days"] == "1"
    assert arguments["--retain_last"] == defaults["--retain_last"]  # the rest stays
    assert set(arguments) == {*defaults, "--table"}
    assert dict(job.default_arguments) == defaults  # the job is not changed
    assert demo_stack.job_arguments("maintenance") == defaults

    locked = replace(job, non_overridable_arguments={"--catalog": "glue_catalog"})
    assert locked.arguments({"--catalog": "other"})["--catalog"] == "glue_catalog"
    assert locked.arguments({"catalog": "other", "action": "compact"})["--action"] == "compact"


def test_load_accepts_the_template_file_and_other_accounts(demo: Synthesized, demo_stack: DeployedStack) -> None:
    template = demo_stack.assembly_dir / "CdcLake.template.json"
    assert load_template(template).jobs == demo_stack.jobs
    assert DeployedStack.load(template).buckets == demo_stack.buckets
    assert DeployedStack.load(demo_stack.assembly_dir, "CdcLake").raw_bucket == demo_stack.raw_bucket

    elsewhere = DeployedStack.load(demo_stack.assembly_dir, account="210987654321", region="eu-west-1")
    uri = elsewhere.job_arguments("cdc_replay")["--config_uri"]
    assert uri.startswith("s3://cdk-hnb659fds-assets-210987654321-eu-west-1/")
    assert (
        elsewhere.asset_at(uri).source_path
        == demo_stack.asset_at(demo_stack.job_arguments("cdc_replay")["--config_uri"]).source_path
    )

    with pytest.raises(DeployedStackError, match=r"no stack 'Other'.*CdcLake"):
        DeployedStack.load(demo_stack.assembly_dir, "Other")
    with pytest.raises(DeployedStackError, match="no such"):
        DeployedStack.load(demo_stack.assembly_dir / "missing")


# ------------------------------------------------------------------------------------------ the resolver

SMALL_TEMPLATE: dict[str, Any] = {
    "Parameters": {"Env": {"Type": "String", "Default": "dev"}, "Owner": {"Type": "String"}},
    "Resources": {
        "Bucket": {"Type": "AWS::S3::Bucket", "Properties": {}},
        "Named": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": {"Fn::Sub": "named-${AWS::Region}"}}},
        "Job": {
            "Type": "AWS::Glue::Job",
            "Properties": {"Name": "my-job", "DefaultArguments": {"--x": {"Fn::If": ["IsProd", "a", "b"]}}},
        },
        "Queue": {"Type": "AWS::SQS::Queue", "Properties": {}},
        "Topic": {"Type": "AWS::SNS::Topic", "Properties": {}},
    },
}


@pytest.fixture
def resolver() -> TemplateResolver:
    return TemplateResolver(SMALL_TEMPLATE, stack_name="TestStack", account="111122223333", region="eu-west-1")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"Ref": "AWS::AccountId"}, "111122223333"),
        ({"Ref": "AWS::URLSuffix"}, "amazonaws.com"),
        ({"Ref": "Bucket"}, "teststack-bucket"),
        ({"Ref": "Named"}, "named-eu-west-1"),
        ({"Ref": "Job"}, "my-job"),
        # A queue's Ref is its URL, on AWS's endpoint unless the resolver is given another.
        ({"Ref": "Queue"}, "https://sqs.eu-west-1.amazonaws.com/111122223333/TestStack-Queue"),
        ({"Fn::GetAtt": ["Queue", "Arn"]}, "arn:aws:sqs:eu-west-1:111122223333:TestStack-Queue"),
        ({"Fn::GetAtt": "Queue.QueueName"}, "TestStack-Queue"),
        ({"Fn::Sub": "${Queue.QueueUrl}"}, "https://sqs.eu-west-1.amazonaws.com/111122223333/TestStack-Queue"),
        ({"Ref": "Topic"}, "Topic"),
        ({"Ref": "Env"}, "dev"),
        ({"Fn::GetAtt": ["Bucket", "Arn"]}, "arn:aws:s3:::teststack-bucket"),
        ({"Fn::GetAtt": "Bucket.RegionalDomainName"}, "teststack-bucket.s3.eu-west-1.amazonaws.com"),
        ({"Fn::GetAtt": ["Named", "DomainName"]}, "named-eu-west-1.s3.amazonaws.com"),
        ({"Fn::Sub": "s3://${Bucket}/${AWS::StackName}/${!Literal}"}, "s3://teststack-bucket/TestStack/${Literal}"),
        (
            {"Fn::Sub": ["${Greeting}-${Bucket.Arn}", {"Greeting": {"Ref": "Env"}}]},
            "dev-arn:aws:s3:::teststack-bucket",
        ),
        ({"Fn::Select": [1, {"Fn::Split": [",", "a,b,c"]}]}, "b"),
        ({"Fn::Join": ["-", ["a", {"Ref": "AWS::NoValue"}, {"Ref": "AWS::Region"}]]}, "a-eu-west-1"),
        ({"Keep": 1, "Drop": {"Ref": "AWS::NoValue"}}, {"Keep": 1}),
    ],
)
def test_resolver_resolves(resolver: TemplateResolver, value: Any, expected: Any) -> None:
    assert resolver.resolve(value, "Test") == expected


def test_queue_urls_are_on_the_endpoint_given_else_the_one_boto3_would_reach(monkeypatch: pytest.MonkeyPatch) -> None:
    local = TemplateResolver(SMALL_TEMPLATE, stack_name="TestStack", sqs_endpoint="http://127.0.0.1:5000/")
    assert local.resolve({"Ref": "Queue"}, "Test") == f"http://127.0.0.1:5000/{ACCOUNT}/TestStack-Queue"
    assert local.resolve({"Fn::GetAtt": ["Queue", "Arn"]}, "Test") == f"arn:aws:sqs:{REGION}:{ACCOUNT}:TestStack-Queue"
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SQS"):
        monkeypatch.delenv(name, raising=False)
    assert sqs_endpoint_from_environment("eu-west-1") == "https://sqs.eu-west-1.amazonaws.com"
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:5000/")
    assert sqs_endpoint_from_environment("eu-west-1") == "http://127.0.0.1:5000"
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:6000")  # boto3's own for SQS wins
    assert sqs_endpoint_from_environment("eu-west-1") == "http://127.0.0.1:6000"


def test_resolver_names_the_resource_and_path_of_what_it_cannot_resolve(resolver: TemplateResolver) -> None:
    with pytest.raises(UnsupportedIntrinsicError, match=r"Job\.Properties\.DefaultArguments\.--x: Fn::If"):
        resolver.resource_property("Job", "DefaultArguments")
    with pytest.raises(UnsupportedIntrinsicError, match=r"Job\.Properties\.Tags\.Fn::Join\[1\]\[0\]: Fn::ImportValue"):
        resolver.resolve({"Fn::Join": ["", [{"Fn::ImportValue": "x"}]]}, "Job.Properties.Tags")
    with pytest.raises(UnsupportedIntrinsicError, match=r"attribute TopicName of Topic \(AWS::SNS::Topic\)"):
        resolver.resolve({"Fn::GetAtt": ["Topic", "TopicName"]}, "Job.Properties.Topic")
    with pytest.raises(DeployedStackError, match="parameter Owner has no default"):
        resolver.resolve({"Ref": "Owner"}, "Test")
    with pytest.raises(DeployedStackError, match="'Nowhere', which is neither"):
        resolver.resolve({"Ref": "Nowhere"}, "Test")
    given = TemplateResolver(SMALL_TEMPLATE, stack_name="TestStack", parameters={"Owner": "data"})
    assert given.resolve({"Fn::Sub": "${Owner}@${Env}"}, "Test") == "data@dev"


# ----------------------------------------------------------------------------------------- provisioning


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Dummy credentials, us-east-1, and nothing that could point boto3 at a real endpoint or profile."""
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_GLUE", "AWS_PROFILE", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))


@pytest.mark.usefixtures("aws_env")
def test_provision_creates_what_the_pipeline_reads_and_can_run_twice(demo_stack: DeployedStack) -> None:
    stack = demo_stack
    with mock_aws():
        session = boto3.session.Session()
        provision(stack, session)
        provision(stack, session)

        s3 = session.client("s3")
        glue = session.client("glue")
        assert {bucket["Name"] for bucket in s3.list_buckets()["Buckets"]} == {*stack.buckets.values(), ASSETS_BUCKET}

        config = stack.asset_at(stack.job_arguments("full_load")["--config_uri"])
        stored = s3.get_object(Bucket=config.bucket, Key=config.object_key)["Body"].read()
        assert stored == config.source_path.read_bytes()
        for job in stack.jobs.values():
            script = stack.asset_at(job.command.script_location)
            body = s3.get_object(Bucket=script.bucket, Key=script.object_key)["Body"].read()
            assert body == job.script_path.read_bytes()
        library = stack.asset_at(stack.job_arguments("cdc_replay")["--extra-py-files"])
        assert s3.head_object(Bucket=library.bucket, Key=library.object_key)["ContentLength"] > 0
        for kind in stack.jobs:  # the lake's FileIO the jobs load is the jar the local sessions run (make setup's)
            if "--conf" in stack.job_arguments(kind):
                jar = stack.asset_at(stack.job_arguments(kind)["--extra-jars"])
                stored = s3.get_object(Bucket=jar.bucket, Key=jar.object_key)["Body"].read()
                assert stored == LAKE_IO_JAR.read_bytes(), kind

        database = glue.get_database(Name=stack.database.name)["Database"]
        assert database["LocationUri"] == stack.database.database_input["LocationUri"]
        assert database["Description"] == stack.database.database_input["Description"]

        assert sorted(job["Name"] for job in glue.get_jobs()["Jobs"]) == sorted(j.name for j in stack.jobs.values())
        for job in stack.jobs.values():
            created = glue.get_job(JobName=job.name)["Job"]
            assert created["DefaultArguments"] == dict(job.default_arguments)
            assert created["Command"]["ScriptLocation"] == job.command.script_location
            assert created["Role"] == job.role
            assert created["GlueVersion"] == job.glue_version
            assert (created["WorkerType"], created["NumberOfWorkers"]) == (job.worker_type, job.number_of_workers)
            assert created["ExecutionProperty"] == {"MaxConcurrentRuns": job.max_concurrent_runs}
            assert (created["Timeout"], created["MaxRetries"]) == (job.timeout, job.max_retries)
            assert (created.get("NonOverridableArguments") or {}) == dict(job.non_overridable_arguments)


class GlueThatHasEverything:
    """A Glue client on which the database and jobs already exist, as real Glue answers a second create."""

    meta = SimpleNamespace(region_name=REGION)

    def __init__(self) -> None:
        self.updates: list[tuple[str, dict[str, Any]]] = []

    @staticmethod
    def _exists(operation: str) -> ClientError:
        return ClientError({"Error": {"Code": "AlreadyExistsException", "Message": "exists"}}, operation)

    def create_database(self, **_: Any) -> None:
        raise self._exists("CreateDatabase")

    def update_database(self, **request: Any) -> None:
        self.updates.append(("database", request))

    def create_job(self, **_: Any) -> None:
        raise self._exists("CreateJob")

    def update_job(self, **request: Any) -> None:
        self.updates.append(("job", request))


@pytest.mark.usefixtures("aws_env")
def test_provision_updates_what_exists(demo_stack: DeployedStack) -> None:
    glue = GlueThatHasEverything()
    with mock_aws():
        provision(demo_stack, s3_client=boto3.client("s3"), glue_client=glue)
    database_update = dict(glue.updates[0][1])
    assert database_update == {"Name": demo_stack.database.name, "DatabaseInput": demo_stack.database.database_input}
    job_updates = {request["JobName"]: request["JobUpdate"] for kind, request in glue.updates if kind == "job"}
    assert set(job_updates) == {job.name for job in demo_stack.jobs.values()}
    for job in demo_stack.jobs.values():
        update = job_updates[job.name]
        assert "Name" not in update
        assert update["DefaultArguments"] == dict(job.default_arguments)
        assert update["JobRunQueuingEnabled"] is (job.kind not in FLEX_JOBS)  # Flex runs are not queued


@pytest.mark.usefixtures("aws_env")
def test_provision_creates_the_queues_where_the_stack_resolved_them(demo_stack: DeployedStack) -> None:
    (failure_queue,) = demo_stack.queues.values()  # the trigger's on-failure queue; no warm queues here
    assert demo_stack.warm_queues == ()
    assert failure_queue.attributes == {"MessageRetentionPeriod": "1209600", "SqsManagedSseEnabled": "true"}
    with mock_aws():
        provision(demo_stack)
        sqs = boto3.client("sqs")
        assert sqs.get_queue_url(QueueName=failure_queue.name)["QueueUrl"] == failure_queue.url
        attributes = sqs.get_queue_attributes(QueueUrl=failure_queue.url, AttributeNames=["All"])["Attributes"]
        assert attributes["QueueArn"] == failure_queue.arn
        assert attributes["MessageRetentionPeriod"] == "1209600"
        # An attribute changed since: set again, as a redeploy would.
        sqs.set_queue_attributes(QueueUrl=failure_queue.url, Attributes={"MessageRetentionPeriod": "60"})
        provision(demo_stack)
        attributes = sqs.get_queue_attributes(QueueUrl=failure_queue.url, AttributeNames=["All"])["Attributes"]
        assert attributes["MessageRetentionPeriod"] == "1209600"

        elsewhere = DeployedStack.load(demo_stack.assembly_dir, sqs_endpoint="http://127.0.0.1:9")
        with pytest.raises(ProvisionError, match=r"is at https://sqs\.us-east-1\.amazonaws\.com/.*sqs_endpoint="):
            provision(elsewhere)


@pytest.mark.usefixtures("aws_env")
def test_provision_refuses_a_client_in_another_region(demo_stack: DeployedStack) -> None:
    with mock_aws(), pytest.raises(ProvisionError, match="resolved for region us-east-1 but the Glue client is in"):
        provision(demo_stack, s3_client=boto3.client("s3"), glue_client=boto3.client("glue", region_name="eu-west-1"))
