"""The synthesized templates pass cfn-lint, and ``cdk synth`` works offline through the pinned npm CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cfnlint.api import ManualArgs, lint

from infra.packaging import REPO_ROOT
from tests.infra.conftest import DEPLOY_CONTEXT, Synthesized

LINT_REGIONS = ["us-east-1", "eu-west-1"]


def lint_findings(synth: Synthesized) -> list[str]:
    """cfn-lint findings, minus one documented exception.

    W3005 (redundant DependsOn) is ignored on Lambda functions only: the L2 ``Function`` construct adds a
    DependsOn on its role *and* the role's policy so the policy exists before the first invocation; the
    role half duplicates the ``Role`` GetAtt. It affects CDK's own BucketNotificationsHandler too.
    """
    template = synth.json
    functions = {name for name, r in template["Resources"].items() if r["Type"] == "AWS::Lambda::Function"}
    findings = []
    for match in lint(json.dumps(template), config=ManualArgs(regions=LINT_REGIONS)):
        path = list(match.path) if getattr(match, "path", None) else []
        resource = path[1] if len(path) > 1 and path[0] == "Resources" else None
        if match.rule.id == "W3005" and resource in functions:
            continue
        findings.append(f"{match.rule.id} {'/'.join(map(str, path))}: {match.message}")
    return findings


def test_default_template_passes_cfn_lint(demo: Synthesized) -> None:
    assert lint_findings(demo) == []


def test_parquet_serverless_template_passes_cfn_lint(parquet: Synthesized) -> None:
    assert lint_findings(parquet) == []


def cdk_synth(out_dir: Path, context: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``npx cdk synth --quiet`` as a user runs it from the repository root, with ``-c`` for each value."""
    cdk = REPO_ROOT / "node_modules" / ".bin" / "cdk"
    if not cdk.exists() or shutil.which("node") is None:
        pytest.fail("the aws-cdk CLI is not installed; run `make setup` (it runs `npm ci`)")
    arguments = [str(cdk), "synth", "--quiet", "--no-notices", "-o", str(out_dir)]
    for key, value in context.items():
        arguments += ["-c", f"{key}={value}"]
    env = {
        **os.environ,
        "CDK_DISABLE_CLI_TELEMETRY": "true",
        "AWS_EC2_METADATA_DISABLED": "true",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    return subprocess.run(arguments, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.slow
def test_cdk_synth_runs_offline_with_context_values(tmp_path: Path) -> None:
    result = cdk_synth(tmp_path / "cdk.out", DEPLOY_CONTEXT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "EXAMPLE VALUES" not in result.stderr
    template = json.loads((tmp_path / "cdk.out" / "CdcLake.template.json").read_text(encoding="utf-8"))
    assert {r["Type"] for r in template["Resources"].values()} >= {
        "AWS::DMS::ReplicationTask",
        "AWS::Glue::Job",
        "AWS::Lambda::Function",
        "AWS::CloudWatch::Alarm",
    }
    report = (tmp_path / "cdk.out" / "AwsSolutions--CdcLake-NagReport.csv").read_text(encoding="utf-8")
    assert '"Non-Compliant"' not in report


@pytest.mark.slow
def test_make_synth_example_mode_synthesizes_and_names_the_values_to_set(tmp_path: Path) -> None:
    """What `make synth` runs on a fresh clone: cdk.json has no deployment values, only exampleValues=true."""
    result = cdk_synth(tmp_path / "cdk.out", {"exampleValues": "true"})
    assert result.returncode == 0, result.stderr[-3000:]
    to_set = "-c vpcId=... -c subnetIds=... -c sourceEngine=... -c sourceSecretArn=..."
    printed = [line for line in result.stderr.splitlines() if line.startswith("cdc-lake: EXAMPLE VALUES")]
    assert len(printed) == 1
    assert to_set in printed[0]
    # The stack's warning annotation, as the CLI reports it.
    assert any(line.startswith("WARNING EXAMPLE VALUES") and to_set in line for line in result.stderr.splitlines())
    template = json.loads((tmp_path / "cdk.out" / "CdcLake.template.json").read_text(encoding="utf-8"))
    (subnet_group,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::DMS::ReplicationSubnetGroup"]
    assert subnet_group["Properties"]["SubnetIds"] == ["subnet-0000000000000000a", "subnet-0000000000000000b"]


@pytest.mark.slow
def test_cdk_synth_without_example_values_refuses_missing_values(tmp_path: Path) -> None:
    result = cdk_synth(tmp_path / "cdk.out", {})
    assert result.returncode != 0
    for problem in (
        "vpcId is required",
        "subnetIds is required",
        "sourceEngine is required",
        "sourceSecretArn is required",
    ):
        assert problem in result.stderr
    assert "EXAMPLE VALUES" not in result.stderr
