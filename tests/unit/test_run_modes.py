"""The run modes' table (``core.run_modes``) is the one list of modes: the configuration's ``runs.mode`` takes
exactly its names, and each mode's run has its module in ``engine/runs/``."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

from cdc_lake.core.config import RunSettings
from cdc_lake.core.run_modes import RUN_MODES, RunModeName

RUNS_DIR = Path(__file__).resolve().parents[2] / "glue_jobs" / "cdc_lake" / "engine" / "runs"


def test_the_configuration_takes_the_tables_modes() -> None:
    assert set(get_args(RunModeName)) == set(RUN_MODES)
    for name, mode in RUN_MODES.items():
        assert mode.name == name
        assert RunSettings(mode=name).run_mode is mode


def test_each_mode_has_its_module_in_engine_runs() -> None:
    assert {name for name in RUN_MODES if (RUNS_DIR / f"{name}.py").is_file()} == set(RUN_MODES)


def test_only_a_mode_with_a_job_of_its_own_makes_it() -> None:
    own = {mode.own_job for mode in RUN_MODES.values()} - {None}
    for mode in RUN_MODES.values():
        assert {job for job in own if mode.makes(job)} == ({mode.own_job} - {None})
        assert mode.makes("cdc_replay") and mode.makes("full_load")
