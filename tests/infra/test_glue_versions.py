"""``lake.glue_version`` picks the Glue version of every job in the stack: the demo configuration leaves it at the
default (5.1), the same configuration with ``glue_version: "6.0"`` gives 6.0, and nothing else in the jobs changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from cdc_lake.core.names import GLUE_VERSION, GLUE_VERSIONS
from tests.infra.conftest import DEMO_CONFIG, NON_WARM_JOBS, Synthesized, render, resources_of_type, synthesize


@pytest.fixture(scope="session")
def glue6(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The default deployment with the demo configuration set to Glue 6.0."""
    tmp = tmp_path_factory.mktemp("glue6")
    config = yaml.safe_load(DEMO_CONFIG.read_text(encoding="utf-8"))
    config["lake"]["glue_version"] = "6.0"
    path: Path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return synthesize(tmp, {"tableConfig": str(path)})


def jobs_by_name(synth: Synthesized) -> dict[str, dict[str, Any]]:
    return {job["Properties"]["Name"]: job["Properties"] for job in resources_of_type(synth, "AWS::Glue::Job").values()}


@pytest.mark.parametrize(("variant", "version"), [("demo", GLUE_VERSION), ("glue6", "6.0")])
def test_every_job_runs_the_configured_glue_version(request: pytest.FixtureRequest, variant: str, version: str) -> None:
    synth: Synthesized = request.getfixturevalue(variant)
    assert synth.config.lake.glue_version == version
    jobs = jobs_by_name(synth)
    assert len(jobs) == sum(len(job.resource_names) for job in NON_WARM_JOBS)  # drift's twin, repair, too
    for name, props in jobs.items():
        assert props["GlueVersion"] == version, name
        assert props["WorkerType"] == GLUE_VERSIONS[version].worker_type == "G.1X", name


def test_the_default_version_is_5_1_until_the_suite_proves_6_0(demo: Synthesized) -> None:
    assert GLUE_VERSION == "5.1"
    assert {props["GlueVersion"] for props in jobs_by_name(demo).values()} == {"5.1"}


def test_only_the_version_and_the_shipped_configuration_differ(demo: Synthesized, glue6: Synthesized) -> None:
    """Sizes, timeouts and arguments are the same on both versions: 6.0 still takes ``--datalake-formats iceberg``
    and the same Iceberg ``--conf``, and ANSI SQL mode, on by default in 6.0, is set by the jobs' session in code
    (``engine.session``), so no argument carries it. The table configuration's asset differs: it holds the version."""
    on_5, on_6 = jobs_by_name(demo), jobs_by_name(glue6)
    assert sorted(on_5) == sorted(on_6)
    for name, props in on_5.items():
        other = on_6[name]
        assert (props["GlueVersion"], other["GlueVersion"]) == ("5.1", "6.0")
        ignored = {"GlueVersion", "DefaultArguments"}
        assert {k: v for k, v in props.items() if k not in ignored} == {
            k: v for k, v in other.items() if k not in ignored
        }, name
        arguments, other_arguments = render(props["DefaultArguments"]), render(other["DefaultArguments"])
        assert arguments.pop("--config_uri") != other_arguments.pop("--config_uri")
        # The same packages, each built for its Glue's Python (3.11, 3.13) where it has native code.
        wheels_5, wheels_6 = (
            arguments.pop("--additional-python-modules"),
            other_arguments.pop("--additional-python-modules"),
        )
        assert "cp311" in wheels_5 and "cp313" not in wheels_5 and "cp313" in wheels_6 and "cp311" not in wheels_6
        assert wheels_5.replace("cp311", "cp313") == wheels_6, name
        assert arguments == other_arguments, name
        assert "ansi" not in arguments.get("--conf", "")
