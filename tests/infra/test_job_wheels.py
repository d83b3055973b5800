"""The Glue jobs' Python packages come from the assets bucket, never from PyPI at run time: pinned wheels, each
checked against the SHA-256 its lock file holds, published under its own wheel name, installed with
``--no-index``, and readable by the role of every job that installs it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cdc_lake.core.exceptions import PackagingError
from infra import wheels
from infra.wheels import GLUE_PYTHONS, GROUPS, PLATFORMS, job_wheels
from tests.infra.conftest import NON_WARM_JOBS, Synthesized, render, resources_of_type


def _resolves(glue_version: str, group: str, folder: Path) -> subprocess.CompletedProcess[str]:
    """pip's resolution of ``group``'s packages, for Glue's Python and platform, from ``folder`` alone."""
    python = GLUE_PYTHONS[glue_version]
    pins = [wheels._pin(p) for p in GROUPS[group]]  # type: ignore[index]
    return subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--disable-pip-version-check", "--no-index",
         "--find-links", str(folder), "--only-binary=:all:", *(f"--platform={p}" for p in PLATFORMS),
         f"--python-version={python}", "--implementation=cp", f"--abi=cp{python.replace('.', '')}",
         "--target", str(folder / "target"), *pins],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("glue_version", sorted(GLUE_PYTHONS))
@pytest.mark.parametrize("group", sorted(GROUPS))
def test_each_group_installs_from_its_own_wheels_alone(glue_version: str, group: str, tmp_path: Path) -> None:
    shipped = job_wheels(glue_version, group)  # type: ignore[arg-type]
    for wheel in shipped:
        shutil.copy(wheel, tmp_path)
    done = _resolves(glue_version, group, tmp_path)
    assert done.returncode == 0, done.stderr
    (tmp_path / next(w.name for w in shipped if w.name.startswith("pydantic_core-"))).unlink()
    assert _resolves(glue_version, group, tmp_path).returncode != 0  # without a dependency, nothing installs


def test_a_wheel_other_than_the_locked_one_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(wheels.WHEEL_DIR / "glue5.1", tmp_path / "glue5.1")
    [pymysql] = (tmp_path / "glue5.1").glob("pymysql-*.whl")
    pymysql.write_bytes(pymysql.read_bytes() + b"\0")
    monkeypatch.setattr(wheels, "WHEEL_DIR", tmp_path)
    assert len(job_wheels("5.1", "lake")) >= 4
    with pytest.raises(PackagingError, match=r"no wheel pymysql-1\.2\.4-\*\.whl matching .*run `make setup`"):
        job_wheels("5.1", "mysql")


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _manifest(synth: Synthesized) -> dict[str, Any]:
    assembly = Path(synth.stack.node.root.outdir)  # type: ignore[attr-defined]
    return json.loads((assembly / f"{synth.stack.artifact_id}.assets.json").read_text())


def test_every_job_installs_published_wheels_only_and_its_role_reads_them(demo: Synthesized) -> None:
    published = {
        f"{entry['destinations'][d]['objectKey']}": Path(entry["source"]["path"]).name
        for entry in _manifest(demo)["files"].values()
        for d in entry["destinations"]
    }
    jobs = resources_of_type(demo, "AWS::Glue::Job")
    assert len(jobs) == sum(len(job.resource_names) for job in NON_WARM_JOBS)
    for job in jobs.values():
        arguments = render(job["Properties"]["DefaultArguments"])
        assert arguments["--python-modules-installer-option"] == "--no-index"
        urls = arguments["--additional-python-modules"].split(",")
        assert urls and all("==" not in url for url in urls)
        role = job["Properties"]["Role"]["Fn::GetAtt"][0]
        readable = {
            resource
            for policy in resources_of_type(demo, "AWS::IAM::Policy").values()
            if {"Ref": role} in policy["Properties"]["Roles"]
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
            if "s3:GetObject" in statement["Action"]
            for resource in _listed(render(statement["Resource"]))
        }  # fmt: skip
        for url in urls:
            bucket_and_key = url.removeprefix("s3://")
            key = bucket_and_key.split("/", 1)[1]
            assert key.endswith(".whl") and published[key] == f"wheel.{key}"  # named like the wheel it is
            assert f"arn:${{AWS::Partition}}:s3:::{bucket_and_key}" in readable, (job["Properties"]["Name"], key)
