"""The Glue jobs' log lines: one JSON object each, of the shape the trigger Lambda's Powertools logger writes.

The keys are Powertools' own (``level``, ``location``, ``message``, ``timestamp``, ``service``, and ``exception``
with ``exception_name``), the job's (``job``, ``job_name``, ``run_id``: what the Lambda logs of a run it started),
and whatever a log call passes as ``extra`` (``table``, ``batch``), so one Logs Insights query reads both. The
standard library's logging is enough for this: Powertools is not among the jobs' packages.
"""

from __future__ import annotations

import itertools
import json
import logging
import time
from collections.abc import Mapping, Sequence

# The service name of every job's lines; ``job`` tells the jobs apart (as the Lambda's lines say which job it started).
JOBS_SERVICE_NAME = "cdc-lake-jobs"
# What every LogRecord carries of itself: everything else on a record came from a call's ``extra``.
_RECORD_ATTRIBUTES = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """A record as one JSON line: Powertools' keys, the run's ``context``, then the call's ``extra``."""

    def __init__(self, context: Mapping[str, str]) -> None:
        super().__init__()
        self.context = dict(context)

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "level": record.levelname,
            "location": f"{record.funcName}:{record.lineno}",
            "message": record.getMessage(),
            "timestamp": self.formatTime(record),
            "service": JOBS_SERVICE_NAME,
            **self.context,
        }
        line.update({key: value for key, value in record.__dict__.items() if key not in _RECORD_ATTRIBUTES})
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
            line["exception_name"] = record.exc_info[0].__name__ if record.exc_info[0] else None
        return json.dumps(line, default=str)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """UTC, as Powertools writes it in Lambda: ``2025-03-01 12:00:00,123+0000``."""
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(record.created)) + f",{int(record.msecs):03d}+0000"


def run_context(job: str, argv: Sequence[str]) -> dict[str, str]:
    """What every line of a run says of it: the job's row name, and Glue's ``--JOB_NAME`` and ``--JOB_RUN_ID``."""
    given = dict(itertools.pairwise(argv[1:]))
    context = {"job": job}
    for flag, key in (("--JOB_NAME", "job_name"), ("--JOB_RUN_ID", "run_id")):
        if given.get(flag):
            context[key] = given[flag]
    return context


def structure_job_logs(job: str, argv: Sequence[str], root: logging.Logger | None = None) -> None:
    """Log INFO and above as JSON lines to stderr, unless logging is set up already (a laptop runs the job under
    the CLI, which shows plain lines to people): ``logging.basicConfig``'s rule. ``root``: the root logger."""
    root = root or logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter(run_context(job, argv)))
    root.addHandler(handler)
    root.setLevel(logging.INFO)
