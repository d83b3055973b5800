"""The upgrade docs/deploy.md describes, run: a lake written by a Glue 5.1 deployment is continued by the same
deployment moved to Glue 6.0 (the setting changed, the stack deployed again, the next files landed), then moved
back, and equals the generator's expected tables. Each step is ``cdc-lake aws-replay`` in its runtime's own
environment, on one local AWS endpoint that holds the stack, the raw files and the tables in between."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
import yaml

from cdc_lake.core.config import load_config
from cdc_lake.core.jsonl import write_jsonl
from cdc_lake.core.names import GLUE_CATALOG
from cdc_lake.engine.tables import LakeLocation
from cdc_lake.local.aws_endpoint import local_aws_endpoint
from cdc_lake.local.demo import demo_config_path
from cdc_lake.local.generator import GeneratorSpec, generate, land, land_order
from cdc_lake.local.jars import installed_glue_version
from tests.support.aws import aws_client
from tests.support.cli import aws_replay, aws_replay_environment
from tests.support.source_tables import glue_catalog, glue_reader

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.glue_path]

REPO = Path(__file__).resolve().parents[2]
# The environments make setup creates: .venv for Glue 5.1, .venv-glue6.0 for Glue 6.0 (this suite's, so this
# test runs only there; make test GLUE_VERSION=6.0 makes both).
OLD_PYTHON = REPO / ".venv" / "bin" / "python"

if installed_glue_version() != "6.0":
    pytest.skip(
        "Glue 5.1 is the oldest runtime: the upgrade to 6.0 runs in the Glue 6.0 suite (make test GLUE_VERSION=6.0)",
        allow_module_level=True,
    )


def _config(tmp_path: Path, version: str) -> Path:
    data = yaml.safe_load(demo_config_path().read_text(encoding="utf-8"))
    data["lake"]["glue_version"] = version
    path = tmp_path / f"pipeline-{version}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


# Three deployed-path replays, one on each runtime in turn (a CDK synth and a Glue run per job each, every run a
# JVM of its own): 57 s each alone, 171 s in all, and 246 s in CI's 6.0 suite beside its other worker, over a
# budget of 150 s times 1.5 (docs/testing.md).
@pytest.mark.budget(210)
def test_a_lake_written_on_glue_5_1_is_continued_on_glue_6_0_and_back(tmp_path: Path) -> None:
    assert OLD_PYTHON.exists(), f"{OLD_PYTHON} is missing: run `make setup` (Glue 5.1's environment) first"
    config = load_config(demo_config_path())
    generated = generate(config, tmp_path / "source", GeneratorSpec(seed=20, initial_rows=150, cdc_files=4))
    keys = land_order(generated)
    loads = sum(1 for key in keys if "/LOAD" in key)
    third = (len(keys) - loads) // 3
    assert third > 0, "the generator wrote too few changes to split in three"
    # The full load and a third of the changes on 5.1, the next third on 6.0, the rest on 5.1 again.
    steps = [
        ("5.1", OLD_PYTHON, keys[: loads + third]),
        ("6.0", Path(sys.executable), keys[loads + third : loads + 2 * third]),
        ("5.1", OLD_PYTHON, keys[loads + 2 * third :]),
    ]

    with local_aws_endpoint() as endpoint:
        environment = aws_replay_environment(endpoint)
        # The setting decides, as in a deployment; each step's Spark workers run its own environment's Python.
        for name in ("GLUE_VERSION", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
            environment.pop(name, None)
        glue = aws_client(endpoint, "glue")
        for number, (version, python, landed) in enumerate(steps):
            landing = tmp_path / f"landed-{number}"
            land(generated.landing, landing, landed)
            code, output = aws_replay(
                python, _config(tmp_path, version), landing, tmp_path / f"work-{number}", environment
            )
            assert code == 0, output
            assert {job["GlueVersion"] for job in glue.get_jobs()["Jobs"]} == {version}, output

        read, catalog = glue_reader(endpoint), glue_catalog(endpoint)
        location = LakeLocation(GLUE_CATALOG, config.lake.database)
        for table in config.tables:
            text = io.StringIO()
            write_jsonl(read(location, table), table, text)
            assert text.getvalue() == (generated.expected / f"{table.name}.jsonl").read_text(encoding="utf-8"), table
            iceberg = catalog.load_table((config.lake.database, table.lake_table))
            # Both runtimes committed to the same table, which stays on format v2 (Athena reads no v3).
            engines = {(s.summary or {}).get("engine-version") for s in iceberg.snapshots()}
            assert {"3.5.6", "4.1.1"} <= engines, (table.name, engines)
            assert iceberg.metadata.format_version == 2, table.name
