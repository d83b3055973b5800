"""The whole bill: every request a pipeline asks of AWS priced by kind at us-east-1 list prices, beside Glue compute.

Prices: ../shared/dms-format.md, "AWS request prices" (S3 Standard, the Glue Data Catalog, CloudWatch, Lambda).
Requests come as the local endpoint counts them (``aws_endpoint.served_requests``: ``s3:PUT csv``, ``s3:LIST``,
``glue:GetTable``, ``cloudwatch:PutMetricData``); the Lambda's invocations and their duration as the caller
measured them. DMS's replication instance is the same in every design here, so it is left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

S3_WRITE_USD_PER_1000 = 0.005  # PUT, COPY, POST, LIST (PutObjectTagging is a PUT)
S3_READ_USD_PER_1000 = 0.0004  # GET, HEAD, SELECT and the rest; DELETE is free
CATALOG_USD_PER_MILLION = 1.0
CATALOG_FREE_PER_MONTH = 1_000_000
PUT_METRIC_DATA_USD_PER_1000 = 0.01
CUSTOM_METRIC_USD_PER_MONTH = 0.30  # each metric name and dimension set, the first 10,000
LAMBDA_USD_PER_MILLION = 0.20
SQS_USD_PER_MILLION = 0.40  # standard queues: the warm runs' event queues
SQS_FREE_PER_MONTH = 1_000_000
LAMBDA_USD_PER_GB_SECOND = 0.0000133334  # arm64, as the trigger runs
LAMBDA_GB = 0.25  # the trigger's memory (infra/trigger.py)
# Glue's job API (starting and reading job runs) is not charged; every other Glue action is a Data Catalog request.
GLUE_JOB_ACTIONS = frozenset({"StartJobRun", "GetJobRun", "GetJobRuns", "BatchStopJobRun", "GetJob", "GetJobs"})
_S3_WRITES = frozenset({"PUT", "POST", "LIST", "COPY"})
_S3_FREE = frozenset({"DELETE"})

# The bill's lines, in the order tables show them.
LINES = (
    "Glue compute",
    "S3 PUT/COPY/POST/LIST",
    "S3 GET/HEAD",
    "Glue Data Catalog",
    "CloudWatch PutMetricData",
    "CloudWatch metrics",
    "Lambda",
    "SQS",
)


def line_of(kind: str) -> str | None:
    """The bill's line a request kind is charged on; None for what is not charged (a DELETE, Glue's job API, STS)."""
    service, _, rest = kind.partition(":")
    action = rest.partition(" ")[0]
    if service == "s3":
        if action in _S3_FREE:
            return None
        return "S3 PUT/COPY/POST/LIST" if action in _S3_WRITES else "S3 GET/HEAD"
    if service == "glue":
        return None if action in GLUE_JOB_ACTIONS else "Glue Data Catalog"
    if service == "cloudwatch" and action == "PutMetricData":
        return "CloudWatch PutMetricData"
    if service == "sqs":
        return "SQS"
    return None


@dataclass(frozen=True)
class Bill:
    """A month's requests and dollars on each line (``LINES``)."""

    requests: Mapping[str, float]
    usd: Mapping[str, float]

    @property
    def total_usd(self) -> float:
        return sum(self.usd.values())

    def as_dict(self) -> dict[str, object]:
        return {
            "requests_per_month": {line: round(n) for line, n in self.requests.items()},
            "usd_per_month": {line: round(usd, 2) for line, usd in self.usd.items()},
            "total_usd_per_month": round(self.total_usd, 2),
        }


def monthly_bill(
    requests_per_month: Mapping[str, float],
    *,
    glue_compute_usd: float,
    lambda_invocations: float = 0.0,
    lambda_gb_seconds: float = 0.0,
    custom_metrics: int = 0,
) -> Bill:
    """A month's bill from its requests by kind (a month's worth), Glue compute priced by the caller, the Lambda's
    invocations and GB-seconds, and the custom metrics the pipeline keeps (a metric name and dimension set each)."""
    requests = dict.fromkeys(LINES, 0.0)
    for kind, count in requests_per_month.items():
        line = line_of(kind)
        if line is not None:
            requests[line] += count
    requests["Lambda"] = lambda_invocations
    usd = {
        "Glue compute": glue_compute_usd,
        "S3 PUT/COPY/POST/LIST": requests["S3 PUT/COPY/POST/LIST"] / 1000 * S3_WRITE_USD_PER_1000,
        "S3 GET/HEAD": requests["S3 GET/HEAD"] / 1000 * S3_READ_USD_PER_1000,
        "Glue Data Catalog": max(0.0, requests["Glue Data Catalog"] - CATALOG_FREE_PER_MONTH)
        / 1e6
        * CATALOG_USD_PER_MILLION,
        "CloudWatch PutMetricData": requests["CloudWatch PutMetricData"] / 1000 * PUT_METRIC_DATA_USD_PER_1000,
        "CloudWatch metrics": custom_metrics * CUSTOM_METRIC_USD_PER_MONTH,
        "Lambda": lambda_invocations / 1e6 * LAMBDA_USD_PER_MILLION + lambda_gb_seconds * LAMBDA_USD_PER_GB_SECOND,
        "SQS": max(0.0, requests["SQS"] - SQS_FREE_PER_MONTH) / 1e6 * SQS_USD_PER_MILLION,
    }
    return Bill(requests, usd)


def per_month(counts: Mapping[str, float], seconds: float, month_seconds: float) -> dict[str, float]:
    """Counts made in ``seconds``, at that rate for a month of ``month_seconds``."""
    return {kind: n / seconds * month_seconds for kind, n in counts.items()}


def custom_metrics() -> int:
    """The custom metrics the pipeline keeps, each a name and one dimension set: the jobs' (``core.names``, by
    pipeline) and the trigger's (Powertools, by service)."""
    from cdc_lake.core import names
    from dms_trigger import handler

    jobs = {value for name, value in vars(names).items() if name.endswith("_METRIC")}
    trigger = {
        handler.JOB_RUNS_STARTED,
        handler.RUNS_COALESCED,
        handler.JOB_START_FAILURES,
        handler.IGNORED_OBJECTS,
        handler.UNKNOWN_TABLE_OBJECTS,
    }
    return len(jobs | trigger)
