"""A replay run in a process of its own, for the kill tests: ``python -m tests.functional.killable_run CONFIG LANDING
WAREHOUSE DATABASE [--die-after fast_forward|commit_history]``.

It prints ``ready`` once its Spark session is up, then drains every landed file of every table, as a replay job
run does. ``--die-after`` kills the process itself (SIGKILL) right after the first call of that step returns:
after main moved to a run's branch, or after a history commit, before the run records anything more.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Any

from cdc_lake.core.config import load_config
from cdc_lake.core.storage import LocalFolderStore
from cdc_lake.engine import commit, replay
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.drain import Budget, drain
from cdc_lake.engine.tables import LakeLocation
from cdc_lake.local.session import LOCAL_CATALOG, local_spark_session

# Where each step is looked up at call time: the module that calls it.
STEPS = {"fast_forward": (commit, "fast_forward"), "commit_history": (replay, "commit_history")}


def die_after(step: str) -> None:
    module, name = STEPS[step]
    original = getattr(module, name)

    def dying(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(module, name, dying)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("config", type=Path)
    parser.add_argument("landing", type=Path)
    parser.add_argument("warehouse", type=Path)
    parser.add_argument("database")
    parser.add_argument("--die-after", choices=sorted(STEPS))
    args = parser.parse_args(argv)
    if args.die_after:
        die_after(args.die_after)
    config = load_config(args.config)
    spark = local_spark_session(args.warehouse, app_name="cdc-lake-killable", cores=2)
    print("ready", flush=True)
    context = ReplayContext(spark, config, LakeLocation(LOCAL_CATALOG, args.database), LocalFolderStore(args.landing))
    outcome = drain(context, Budget.of(config, idle_seconds=0))
    print(f"done: {len(outcome.commits)} commit(s), failures {outcome.failures}", flush=True)
    return 1 if outcome.failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
