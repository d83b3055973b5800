"""A live status line while the local pipeline works, so a user waiting on a long run sees what it is doing.

The library already says what it does in its log (planning, reading, checking, merging, committing, each
round of a run); while the status is shown, those INFO lines update it instead of being printed, and lines
at the level the command prints anyway are printed above it. Nothing changes when output is not a terminal.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.status import Status

LIBRARY_LOGGER = "cdc_lake"


class _StatusHandler(logging.Handler):
    def __init__(self, status: Status, console: Console, title: str, shown_level: int) -> None:
        super().__init__(level=logging.INFO)
        self._status = status
        self._console = console
        self._title = title
        self._shown_level = shown_level
        self._started = time.monotonic()

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if record.levelno >= self._shown_level:
            self._console.print(f"{record.levelname} {record.name}: {message}", markup=False, highlight=False)
        first_line = message.splitlines()[0] if message else ""
        elapsed = time.monotonic() - self._started
        self._status.update(f"{self._title} [{elapsed:.0f}s] {first_line[:110]}")


@contextmanager
def live_status(title: str, console: Console | None = None) -> Iterator[None]:
    """Show ``title`` with the library's latest step under a spinner until the block ends."""
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
        try:
            yield
        finally:
            library.removeHandler(handler)
            library.setLevel(saved[0])
            library.propagate = saved[1]
