"""The CDK CLI and aws-cdk-lib's jsii run on a Node.js LTS that still gets security fixes (make setup brings one
from the npm registry when the machine's is past its end of life)."""

from __future__ import annotations

import shutil
import subprocess

# Node.js 22 is the oldest LTS in support on this project's date (20 ended in April 2026); LTS lines are even.
OLDEST_SUPPORTED_LTS = 22


def test_the_cdk_runs_on_a_supported_node_lts() -> None:
    node = shutil.which("node")  # what jsii and npx start
    assert node is not None
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True, timeout=30).stdout
    major = int(version.strip().lstrip("v").split(".")[0])
    assert major >= OLDEST_SUPPORTED_LTS and major % 2 == 0, f"{node} is Node.js {version.strip()}"
