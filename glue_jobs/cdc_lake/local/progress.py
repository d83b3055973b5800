"""A live status line while the local pipeline works, so a user waiting on a long run sees what it is doing.

The library already says what it does in its log (planning, reading, checking, appending, merging,
committing, each round of a run); while the status is shown, those INFO lines update it instead of being
printed, and lines at the level the command prints anyway are printed above it. Given the Spark session, the
status also shows the running Spark stages' tasks done out of all, refreshed twice a second, so a full load
that writes for a minute visibly moves. Nothing changes when output is not a terminal.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console
from rich.status import Status

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LIBRARY_LOGGER = "cdc_lake"
REFRESH_SECONDS = 0.5


class _StatusHandler(logging.Handler):
    def __init__(self, status: Status, console: Console, title: str, shown_level: int) -> None:
        super().__init__(level=logging.INFO)
        self._status = status
        self._console = console
        self._title = title
        self._shown_level = shown_level
        self._started = time.monotonic()
        self._step = ""
        self._tasks = ""
        self._lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if record.levelno >= self._shown_level:
            self._console.print(f"{record.levelname} {record.name}: {message}", markup=False, highlight=False)
        with self._lock:
            self._step = message.splitlines()[0][:110] if message else ""
        self.refresh()

    def tasks(self, text: str) -> None:
        with self._lock:
            self._tasks = text
        self.refresh()

    def refresh(self) -> None:
        with self._lock:
            elapsed = time.monotonic() - self._started
            tasks = f" · {self._tasks}" if self._tasks else ""
            self._status.update(f"{self._title} [{elapsed:.0f}s] {self._step}{tasks}")


def spark_tasks(spark: SparkSession) -> str:
    """The running Spark stages' progress, e.g. ``Spark tasks 5/7``; empty when none runs."""
    tracker = spark.sparkContext.statusTracker()
    done = total = 0
    for stage_id in tracker.getActiveStageIds():
        info = tracker.getStageInfo(stage_id)
        if info is not None:
            done += info.numCompletedTasks
            total += info.numTasks
    return f"Spark tasks {done}/{total}" if total else ""


@contextmanager
def live_status(title: str, console: Console | None = None, spark: SparkSession | None = None) -> Iterator[None]:
    """Show ``title`` with the library's latest step (and Spark's tasks) under a spinner until the block ends."""
    console = console or Console()
    if not console.is_terminal:
        yield
        return
    library = logging.getLogger(LIBRARY_LOGGER)
    shown_level = logging.getLogger().getEffectiveLevel()
    saved = (library.level, library.propagate)
    with console.status(title) as status:
        handler = _StatusHandler(status, console, title, shown_level)
        library.addHandler(handler)
        library.setLevel(logging.INFO)
        library.propagate = False  # INFO lines feed the status; the handler prints what the root would
        done = threading.Event()

        def follow() -> None:
            while not done.wait(REFRESH_SECONDS):
                handler.tasks(spark_tasks(spark) if spark is not None else "")

        follower = threading.Thread(target=follow, name="cdc-lake-status", daemon=True)
        follower.start()
        try:
            yield
        finally:
            done.set()
            follower.join()
            library.removeHandler(handler)
            library.setLevel(saved[0])
            library.propagate = saved[1]
