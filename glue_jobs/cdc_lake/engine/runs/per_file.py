"""A per-file run (``runs.mode: per_file``, and any replay run given ``--one_table``): the pending files of the
triggering file's table, up to that file, in one commit (``replay.replay``).

At its end it tells how long the files of its table still wait, from the listing its batch made: none for a run
that committed up to the newest file that listing showed; nothing for a run that found its file applied (later
files may be applied or not).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from cdc_lake.core.dms_files import DmsFile
from cdc_lake.engine.context import ReplayContext
from cdc_lake.engine.replay import RunResult, replay
from cdc_lake.engine.runs.listings import ListingLog
from cdc_lake.engine.runs.outcome import DrainResult
from cdc_lake.engine.runs.waiting import still_waiting


def per_file(
    context: ReplayContext, dms_file: DmsFile, on_batch: Callable[[RunResult], None] | None = None
) -> DrainResult:
    """Apply ``dms_file``'s table up to it; ``on_batch`` sees the batch when it committed."""
    listings = ListingLog(context.store)
    single = replay(dataclasses.replace(context, store=listings), dms_file)
    if on_batch and not single.already_applied:
        on_batch(single)
    seen = {} if single.already_applied else {single.table: single}
    waiting = still_waiting(context, listings, seen)
    return DrainResult(results=[single], rounds=1, seconds=single.seconds, waiting=waiting)
