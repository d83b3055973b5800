"""Which of a warm run's tables a file landed for, as the trigger Lambda tells it: one SQS queue per shard.

The Lambda sends each landed CDC file's table and key to its shard's queue (``core.names.WARM_QUEUES_ENV``); a warm
run receives them between rounds and lists only those tables, not all of them, so a steady run lists what landed
(``coalesced.drain``). A message is a hint, never the record: the listing decides what a batch applies, so a
duplicated message costs one listing of its table and nothing else. A lost one (a send that failed, a run killed
with messages received) is found by the listing every run makes of every table at its start, at its last look and
every ``runs.warm.sweep_seconds`` between (``Budget.sweep_seconds``).

Messages are deleted once received: what a run received is in its memory until its table is listed, and a run that
dies with it lost leaves it to the next run's first round, which lists every table.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from cdc_lake.core.shards import SQS_MOST_PER_REQUEST, hinted_table

log = logging.getLogger(__name__)

# SQS's longest wait of a receive.
LONGEST_WAIT_SECONDS = 20


class Landings(Protocol):
    """What a warm run learns of landed files between its listings."""

    def tables(self, wait_seconds: float) -> set[str] | None:
        """The tables told since the last call, waiting up to ``wait_seconds`` for the first if none was; None when
        it cannot tell (the queue did not answer): then every table is listed."""
        ...


@dataclass
class QueueLandings:
    """A shard's queue, read by its warm run with boto3's SQS client."""

    client: Any
    url: str

    def tables(self, wait_seconds: float) -> set[str] | None:
        told: set[str] = set()
        wait = min(LONGEST_WAIT_SECONDS, max(0, math.floor(wait_seconds)))
        try:
            while True:
                messages = self.client.receive_message(
                    QueueUrl=self.url, MaxNumberOfMessages=SQS_MOST_PER_REQUEST, WaitTimeSeconds=wait
                ).get("Messages", [])
                self._delete([m["ReceiptHandle"] for m in messages])
                for message in messages:
                    table = hinted_table(message.get("Body", ""))
                    if table is None:
                        body = message.get("Body", "")[:200]
                        log.warning("%s: a message naming no table, ignored: %r", self.url, body)
                    else:
                        told.add(table)
                if len(messages) < SQS_MOST_PER_REQUEST:
                    return told
                wait = 0  # more may wait: take them at once
        except (ClientError, BotoCoreError) as error:
            log.warning("%s did not answer (%s): listing every table this round", self.url, error)
            return None

    def _delete(self, receipts: Sequence[str]) -> None:
        if not receipts:
            return
        entries = [{"Id": str(i), "ReceiptHandle": r} for i, r in enumerate(receipts)]
        failed = self.client.delete_message_batch(QueueUrl=self.url, Entries=entries).get("Failed", [])
        if failed:
            # Received again after the queue's visibility timeout: one more listing of its table, nothing else.
            log.info("%s: %d message(s) not deleted (%s)", self.url, len(failed), failed[0].get("Message", ""))
