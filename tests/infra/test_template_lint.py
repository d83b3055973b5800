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


@pytest.mark.slow
def test_cdk_synth_runs_offline_with_context_values(tmp_path: Path) -> None:
    cdk = REPO_ROOT / "node_modules" / ".bin" / "cdk"
    if not cdk.exists() or shutil.which("node") is None:
        pytest.fail("the aws-cdk CLI is not installed; run `make setup` (it runs `npm ci`)")
    arguments = [str(cdk), "synth", "--quiet", "--no-notices", "-o", str(tmp_path / "cdk.out")]
    for key, value in DEPLOY_CONTEXT.items():
        arguments += ["-c", f"{key}={value}"]
    env = {
        **os.environ,
        "CDK_DISABLE_CLI_TELEMETRY": "true",
        "AWS_EC2_METADATA_DISABLED": "true",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    result = subprocess.run(arguments, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    template = json.loads((tmp_path / "cdk.out" / "CdcLake.template.json").read_text(encoding="utf-8"))
    assert {r["Type"] for r in template["Resources"].values()} >= {
        "AWS::DMS::ReplicationTask",
        "AWS::Glue::Job",
        "AWS::Lambda::Function",
        "AWS::CloudWatch::Alarm",
    }
    report = (tmp_path / "cdk.out" / "AwsSolutions--CdcLake-NagReport.csv").read_text(encoding="utf-8")
    assert '"Non-Compliant"' not in report
