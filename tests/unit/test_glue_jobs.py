"""The table of Glue jobs: every script is a row, every row a script whose entry reads the row's declared
arguments and whose docstring names them, and the Lambda starts only the replay jobs."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import re
from pathlib import Path

import pytest

from cdc_lake.core.dms_files import JOB_FOR_FILE_KIND
from cdc_lake.core.glue_jobs import GLUE_JOBS, JOB_NAMES, GlueJobFacts
from cdc_lake.core.job_arguments import ReplayArguments
from cdc_lake.core.names import TRIGGERED_JOBS
from infra.packaging import GLUE_SCRIPTS, REPO_ROOT

SCRIPTS = REPO_ROOT / "glue_jobs"


def entry_of(script: Path) -> object:
    """The job object a Glue script hands ``glue_entry``, imported from where the script imports it."""
    tree = ast.parse(script.read_text(encoding="utf-8"))
    imported = {
        alias.asname or alias.name: (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }
    [call] = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "glue_entry"
    ]
    argument = call.args[0]
    assert isinstance(argument, ast.Name), ast.unparse(call)
    module, name = imported[argument.id]
    return getattr(importlib.import_module(module), name)


def test_every_script_is_a_row_and_every_row_a_script() -> None:
    assert {path.name for path in SCRIPTS.glob("*.py")} == {job.script for job in GLUE_JOBS.values()}
    assert {name: job.script for name, job in GLUE_JOBS.items()} == GLUE_SCRIPTS
    assert tuple(GLUE_JOBS) == JOB_NAMES


@pytest.mark.parametrize("name", JOB_NAMES)
def test_each_script_runs_its_job_with_the_rows_arguments_and_no_other(name: str) -> None:
    job = GLUE_JOBS[name]
    entry = entry_of(SCRIPTS / job.script)
    assert entry.name == name  # type: ignore[attr-defined]  # what its log lines call it
    options = entry.options  # type: ignore[attr-defined]
    # The job's options class may add behaviour (the source, the retention) but no argument of its own.
    assert issubclass(options, job.arguments)
    assert dataclasses.fields(options) == dataclasses.fields(job.arguments)


@pytest.mark.parametrize("name", JOB_NAMES)
def test_each_scripts_docstring_names_exactly_its_declared_arguments(name: str) -> None:
    job = GLUE_JOBS[name]
    docstring = ast.get_docstring(ast.parse((SCRIPTS / job.script).read_text(encoding="utf-8"))) or ""
    named = set(re.findall(r"--([A-Za-z_]+)", docstring))
    assert named == {argument.name for argument in job.arguments.arguments()}


def test_the_lambda_starts_the_replay_jobs_only() -> None:
    assert {name for name, job in GLUE_JOBS.items() if job.triggered} == set(TRIGGERED_JOBS)
    assert set(JOB_FOR_FILE_KIND.values()) == set(TRIGGERED_JOBS)
    assert all(GLUE_JOBS[name].arguments is ReplayArguments for name in TRIGGERED_JOBS)


def test_names_the_stack_gives_a_job_come_from_its_row() -> None:
    job = GlueJobFacts("full_load", ReplayArguments, "lake", "applying full-load files", ("again",))
    assert (job.script, job.construct_id, job.resource_names) == ("full_load.py", "FullLoadJob", ("full-load", "again"))
    assert GLUE_JOBS["source_check"].construct_id == "SourceCheckJob"
    assert not GLUE_JOBS["source_check"].reads_lake
    assert GLUE_JOBS["drift"].resource_names == ("drift", "repair")
