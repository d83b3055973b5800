"""The source engines beyond MySQL, Aurora MySQL and PostgreSQL, as deployed: each one's DMS source endpoint (engine
name, settings property with the secret, database name, default port), its TLS (verify-full against the PEM bundle,
Oracle's verify-ca against a wallet, with a warning), the source jobs only where they can reach the engine, and
cdk-nag and cfn-lint clean. One template per engine, synthesized once for the module."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Annotations, Match

from cdc_lake.core.exceptions import SettingsError
from infra.dms import ORACLE_VERIFY_CA_WARNING
from infra.packaging import source_ca_bundle
from infra.settings import DeploySettings
from infra.source_check import NO_SOURCE_JOBS_WARNING
from infra.source_engines import SOURCE_ENGINES
from tests.infra.conftest import DEPLOY_CONTEXT, SECRET_ARN, Synthesized, only, resources_of_type, synthesize
from tests.infra.test_template_lint import lint_findings

NEW_ENGINES = ("oracle", "sqlserver", "mariadb", "aurora-postgresql")
# What each one deploys with: DMS's EngineName, its settings property, sourceDatabase, default port, SslMode.
EXPECTED: dict[str, tuple[str, str, str | None, int, str]] = {
    "oracle": ("oracle", "OracleSettings", "ORCLPDB1", 1521, "verify-ca"),
    "sqlserver": ("sqlserver", "MicrosoftSqlServerSettings", "sales", 1433, "verify-full"),
    "mariadb": ("mariadb", "MySqlSettings", None, 3306, "verify-full"),
    "aurora-postgresql": ("aurora-postgresql", "PostgreSqlSettings", "app", 5432, "verify-full"),
}
SETTINGS_PROPERTIES = {"MySqlSettings", "PostgreSqlSettings", "OracleSettings", "MicrosoftSqlServerSettings"}
WITHOUT_SOURCE_JOBS = ("oracle", "sqlserver")
# Bytes no text encoding round-trips, as an auto-login wallet's are.
WALLET_BYTES = b"\xa1\xf8N\x07\x00\x00\x00\x06" + bytes(range(256))
SOURCE_JOB_SUFFIXES = ("-source-check", "-drift", "-repair")


def engine_context(engine: str, wallet: Path | None = None) -> dict[str, str]:
    context = {"sourceEngine": engine}
    database = EXPECTED[engine][2]
    if database:
        context["sourceDatabase"] = database
    if wallet is not None:
        context["sourceOracleWallet"] = str(wallet)
    return context


@pytest.fixture(scope="module")
def wallet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("wallet") / "cwallet.sso"
    path.write_bytes(WALLET_BYTES)
    return path


@pytest.fixture(scope="module")
def engine_stack(tmp_path_factory: pytest.TempPathFactory, wallet: Path) -> Callable[[str], Synthesized]:
    """Each engine's template, synthesized at its first use and kept for the module."""
    made: dict[str, Synthesized] = {}

    def synth(engine: str) -> Synthesized:
        if engine not in made:
            context = engine_context(engine, wallet if SOURCE_ENGINES[engine].wallet else None)  # type: ignore[index]
            made[engine] = synthesize(tmp_path_factory.mktemp(engine), context)
        return made[engine]

    return synth


def source_endpoint(synth: Synthesized) -> dict[str, Any]:
    _, endpoint = only(synth.template.find_resources("AWS::DMS::Endpoint", {"Properties": {"EndpointType": "source"}}))
    return endpoint["Properties"]


def warnings(synth: Synthesized, pattern: str) -> list[str]:
    found = Annotations.from_stack(synth.stack).find_warning("*", Match.string_like_regexp(pattern))
    return [str(message.entry.data) for message in found]


@pytest.mark.parametrize("engine", NEW_ENGINES)
def test_the_source_endpoint_names_the_engine_its_secret_database_and_port(
    engine: str, engine_stack: Callable[[str], Synthesized]
) -> None:
    synth = engine_stack(engine)
    engine_name, settings_property, database, port, ssl_mode = EXPECTED[engine]
    props = source_endpoint(synth)
    role = synth.logical_id(synth.stack.dms.secret_access_role)
    assert props["EngineName"] == engine_name
    assert props.get("DatabaseName") == database
    assert props["SslMode"] == ssl_mode
    assert props["CertificateArn"] == {"Fn::GetAtt": [synth.logical_id(synth.stack.dms.source_ca), "CertificateArn"]}
    assert props[settings_property]["SecretsManagerSecretId"] == SECRET_ARN
    assert props[settings_property]["SecretsManagerAccessRoleArn"] == {"Fn::GetAtt": [role, "Arn"]}
    assert SETTINGS_PROPERTIES & set(props) == {settings_property}
    # The secret holds host, port and user: the endpoint carries none of them ("you can't specify both").
    assert not {"ServerName", "Port", "Username", "Password"} & set(props)
    group = resources_of_type(synth, "AWS::EC2::SecurityGroup")[synth.logical_id(synth.stack.dms.security_group)]
    assert [rule["FromPort"] for rule in group["Properties"]["SecurityGroupEgress"]] == [443, port]


def test_oracle_reads_changes_with_logminer_and_leaves_supplemental_logging_to_the_dba(
    engine_stack: Callable[[str], Synthesized],
) -> None:
    settings = source_endpoint(engine_stack("oracle"))["OracleSettings"]
    assert {k: v for k, v in settings.items() if not k.startswith("SecretsManager")} == {
        "UseLogminerReader": True,
        "AddSupplementalLogging": False,
    }


@pytest.mark.parametrize("engine", ["sqlserver", "mariadb", "aurora-postgresql"])
def test_the_other_engines_set_nothing_beyond_the_secret(
    engine: str, engine_stack: Callable[[str], Synthesized]
) -> None:
    settings = source_endpoint(engine_stack(engine))[EXPECTED[engine][1]]
    assert set(settings) == {"SecretsManagerSecretId", "SecretsManagerAccessRoleArn"}


@pytest.mark.parametrize("engine", ["sqlserver", "mariadb", "aurora-postgresql"])
def test_verify_full_engines_check_against_the_pem_bundle(
    engine: str, engine_stack: Callable[[str], Synthesized]
) -> None:
    synth = engine_stack(engine)
    _, certificate = only(resources_of_type(synth, "AWS::DMS::Certificate"))
    assert certificate["Properties"] == {"CertificatePem": source_ca_bundle()}
    assert warnings(synth, ORACLE_VERIFY_CA_WARNING) == []


def test_oracle_checks_against_the_wallet_in_base64_and_warns_of_verify_ca(
    engine_stack: Callable[[str], Synthesized],
) -> None:
    synth = engine_stack("oracle")
    _, certificate = only(resources_of_type(synth, "AWS::DMS::Certificate"))
    assert certificate["Properties"] == {"CertificateWallet": base64.b64encode(WALLET_BYTES).decode("ascii")}
    (warning,) = warnings(synth, "verify-ca")
    assert "host name" in warning
    assert "docs/deploy.md#oracle-a-wallet-and-verify-ca" in warning
    assert warning.endswith(f"[ack: {ORACLE_VERIFY_CA_WARNING}]")


@pytest.mark.parametrize("engine", WITHOUT_SOURCE_JOBS)
def test_no_source_jobs_for_engines_the_jobs_cannot_reach(
    engine: str, engine_stack: Callable[[str], Synthesized]
) -> None:
    synth = engine_stack(engine)
    assert synth.stack.source_check is None
    job_names = [job["Properties"]["Name"] for job in resources_of_type(synth, "AWS::Glue::Job").values()]
    assert job_names == ["cdclake-full-load", "cdclake-cdc-replay", "cdclake-maintenance"]
    assert resources_of_type(synth, "AWS::Glue::Connection") == {}
    triggers = [t["Properties"]["Name"] for t in resources_of_type(synth, "AWS::Glue::Trigger").values()]
    assert triggers == ["cdclake-maintenance-schedule"]
    alarms = [a["Properties"]["MetricName"] for a in resources_of_type(synth, "AWS::CloudWatch::Alarm").values()]
    assert len(alarms) == 7
    assert not {"SourceDifferences", "DriftedKeys"} & set(alarms)
    outputs = synth.json["Outputs"]
    assert not {"SourceCheckJobName", "DriftJobName", "RepairJobName"} & set(outputs)
    (warning,) = warnings(synth, "no source-check")
    assert "cdc-lake config-from-files" in warning
    assert warning.endswith(f"[ack: {NO_SOURCE_JOBS_WARNING}]")
    assert warnings(synth, "sharedSourceSecret|driftSecretArn") == []


@pytest.mark.parametrize(("engine", "driver"), [("mariadb", "pymysql"), ("aurora-postgresql", "psycopg")])
def test_the_source_jobs_pass_the_engine_as_it_is(
    engine: str, driver: str, engine_stack: Callable[[str], Synthesized]
) -> None:
    synth = engine_stack(engine)
    jobs = {job["Properties"]["Name"]: job["Properties"] for job in resources_of_type(synth, "AWS::Glue::Job").values()}
    for suffix in SOURCE_JOB_SUFFIXES:
        arguments = jobs[f"cdclake{suffix}"]["DefaultArguments"]
        assert arguments["--source_engine"] == engine
        assert arguments.get("--source_database") == EXPECTED[engine][2]
        assert driver in str(arguments["--additional-python-modules"]).lower()
    alarms = {a["Properties"].get("MetricName") for a in resources_of_type(synth, "AWS::CloudWatch::Alarm").values()}
    assert {"SourceDifferences", "DriftedKeys"} <= alarms
    assert warnings(synth, "no source-check") == []


@pytest.mark.parametrize("engine", NEW_ENGINES)
def test_each_engines_template_passes_cdk_nag_and_cfn_lint(
    engine: str, engine_stack: Callable[[str], Synthesized]
) -> None:
    synth = engine_stack(engine)
    annotations = Annotations.from_stack(synth.stack)
    assert annotations.find_error("*", Match.string_like_regexp("AwsSolutions-.*")) == []
    assert annotations.find_warning("*", Match.string_like_regexp("AwsSolutions-.*")) == []
    assert lint_findings(synth) == []


@pytest.mark.parametrize("engine", NEW_ENGINES)
def test_source_without_tls_turns_tls_off_for_every_engine(engine: str, tmp_path: Path) -> None:
    synth = synthesize(tmp_path, {**engine_context(engine), "sourceWithoutTls": "true"})
    props = source_endpoint(synth)
    assert (props["SslMode"], props.get("CertificateArn")) == ("none", None)
    assert resources_of_type(synth, "AWS::DMS::Certificate") == {}
    assert len(warnings(synth, "sourceWithoutTls=true")) == 1
    assert warnings(synth, ORACLE_VERIFY_CA_WARNING) == []


def test_oracle_without_a_wallet_is_refused_naming_what_to_set(tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as refused:
        synthesize(tmp_path, engine_context("oracle"))
    message = str(refused.value)
    assert "sourceEngine=oracle needs sourceOracleWallet" in message
    assert "sourceWithoutTls=true" in message
    assert not (tmp_path / "assets").exists()  # refused before anything was built


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"sourceOracleWallet": "no/such/cwallet.sso"}, r"sourceOracleWallet='no/such/cwallet.sso': cannot read it"),
        ({"sourceOracleWallet": "{empty}"}, r"sourceOracleWallet=.* is empty"),
        ({"sourceEngine": "mariadb", "sourceOracleWallet": "{wallet}"}, r"sourceOracleWallet is for .*oracle only"),
        ({"sourceDatabase": ""}, r"sourceDatabase is required when sourceEngine is oracle \(its service name or SID\)"),
    ],
)  # fmt: skip
def test_oracle_settings_that_cannot_work_are_refused(
    overrides: dict[str, str], problem: str, tmp_path: Path, wallet: Path
) -> None:
    (tmp_path / "empty.sso").write_bytes(b"")
    values = {"{empty}": str(tmp_path / "empty.sso"), "{wallet}": str(wallet)}
    context = {**engine_context("oracle", wallet), **{k: values.get(v, v) for k, v in overrides.items()}}
    with pytest.raises(SettingsError, match=problem):
        synthesize(tmp_path, context)


@pytest.mark.parametrize("engine", ["sqlserver", "aurora-postgresql"])
def test_engines_reading_a_named_database_require_it(engine: str, tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=f"sourceDatabase is required when sourceEngine is {engine}"):
        synthesize(tmp_path, {"sourceEngine": engine})


class _Context:
    def __init__(self, context: dict[str, str]) -> None:
        self.context = context

    def try_get_context(self, key: str) -> str | None:
        return self.context.get(key)


@pytest.mark.parametrize("engine", NEW_ENGINES)
def test_each_engine_defaults_to_its_port_and_example_mode_fills_its_database(engine: str, wallet: Path) -> None:
    context = {**DEPLOY_CONTEXT, **engine_context(engine, wallet if engine == "oracle" else None)}
    assert DeploySettings.from_context(_Context(context)).source_port == EXPECTED[engine][3]
    example = DeploySettings.from_context(
        _Context({"exampleValues": "true", "sourceEngine": engine, "sourceWithoutTls": "true"})
    )
    assert example.source_database == ("example" if EXPECTED[engine][2] else None)


def test_a_stack_without_source_jobs_loads_as_deployed(engine_stack: Callable[[str], Synthesized]) -> None:
    """``cdc-lake aws-replay`` and ``glue-run`` read an Oracle stack: its lake jobs, and no source job."""
    from cdc_lake.local.deployed import DeployedStack
    from tests.infra.conftest import assembly_dir

    stack = DeployedStack.load(assembly_dir(engine_stack("oracle")))
    assert sorted(stack.jobs) == ["cdc_replay", "full_load", "maintenance"]
