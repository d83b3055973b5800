"""Trying a call again after a failure that waiting can fix: one helper, one backoff, for every retry cdc-lake makes.

Commits beaten by a concurrent one (a run's, a metadata commit's) and Glue's refusals to start a run are each
retried here under their own ``RetryPolicy``; the backoff is the same: exponential, capped, with equal jitter
(each wait between half and all of its ceiling), so callers racing each other spread out. AWS clients are
given no retries of their own where this helper retries their calls, so no call is retried twice over.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

log = logging.getLogger(__name__)

Result = TypeVar("Result")


@dataclass(frozen=True)
class RetryPolicy:
    """How many attempts a call gets, and the wait after a failed one: ``first_delay`` doubled with every
    attempt, capped at ``max_delay``."""

    attempts: int
    first_delay: float
    max_delay: float

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"a retry policy needs at least 1 attempt, got {self.attempts}")

    def delay(self, attempt: int) -> float:
        """The wait after failed attempt ``attempt`` (1-based): between half and all of its ceiling."""
        ceiling = min(self.max_delay, self.first_delay * 2 ** (attempt - 1))
        return ceiling / 2 + random.uniform(0, ceiling / 2)


def retried(
    call: Callable[[], Result],
    policy: RetryPolicy,
    retryable: Callable[[Exception], bool],
    *,
    what: str,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[Result, int]:
    """``call``'s result and the number of attempts it took. A failure ``retryable`` accepts is tried again after
    the policy's wait, logged as ``what``; the last attempt's failure, and any other, is raised as it is."""
    for attempt in range(1, policy.attempts + 1):
        try:
            return call(), attempt
        except Exception as error:
            if not retryable(error) or attempt == policy.attempts:
                raise
            delay = policy.delay(attempt)
            log.warning("%s (attempt %d/%d): %s; trying again in %.2fs", what, attempt, policy.attempts, error, delay)
            sleep(delay)
    raise AssertionError("unreachable: the last attempt returns or raises")
