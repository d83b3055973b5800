"""runs.mode warm: one SQS standard queue per shard, by which the trigger Lambda tells a live warm run which of its
tables a CDC file landed for, so the run lists those tables instead of all of them (engine.runs.events).

The queues are named by CloudFormation, like the trigger's failure queue and the buckets: nothing reaches them by
name, only by URL through the Lambda's ``WARM_QUEUES_ENV`` and the warm job's ``WARM_QUEUES_ARGUMENT``, and a
generated name lets CloudFormation replace a queue without a clash with the old one."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, Fn
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from cdk_nag import NagSuppressions
from constructs import Construct

# A hint older than this is of no use: the run's sweep listing (runs.warm.sweep_seconds) found its file long before.
EVENTS_RETENTION = Duration.days(1)
NO_DLQ_REASONS = [
    {
        "id": "AwsSolutions-SQS3",
        "reason": "Its messages are hints: a lost one is found by the warm run's sweep listing within "
        "runs.warm.sweep_seconds (docs/runs.md), so a message that cannot be handled is dropped, not kept.",
    }
]


@dataclass(frozen=True)
class WarmEvents:
    """The shards' queues, in shard order (construct ids ``WarmEvents<shard>``)."""

    queues: tuple[sqs.Queue, ...]

    @classmethod
    def create(cls, scope: Construct, shards: int) -> WarmEvents:
        queues = []
        for shard in range(shards):
            queue = sqs.Queue(
                scope,
                f"WarmEvents{shard}",
                encryption=sqs.QueueEncryption.SQS_MANAGED,  # no KMS key: neither side needs kms:* rights
                enforce_ssl=True,
                retention_period=EVENTS_RETENTION,
            )
            NagSuppressions.add_resource_suppressions(queue, NO_DLQ_REASONS)
            queues.append(queue)
        return cls(tuple(queues))

    @property
    def urls(self) -> str:
        """The queues' URLs, comma-joined in shard order (``core.shards.shard_queue`` reads them)."""
        return Fn.join(",", [queue.queue_url for queue in self.queues])

    # Statements, not Queue.grant_*: those add GetQueueAttributes and GetQueueUrl, which neither side calls.
    def send_statement(self) -> iam.PolicyStatement:
        """The Lambda's: SendMessage (which SendMessageBatch is authorized by), nothing else."""
        return iam.PolicyStatement(
            sid="SendWarmEvents", actions=["sqs:SendMessage"], resources=[q.queue_arn for q in self.queues]
        )

    def receive_statement(self) -> iam.PolicyStatement:
        """A warm run's: receive and delete (DeleteMessageBatch is authorized by sqs:DeleteMessage), on every shard's
        queue: a run's shard is its argument, not its role's."""
        return iam.PolicyStatement(
            sid="ReceiveWarmEvents",
            actions=["sqs:ReceiveMessage", "sqs:DeleteMessage"],
            resources=[q.queue_arn for q in self.queues],
        )
