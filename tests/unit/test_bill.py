"""The whole bill: each request kind the local endpoint counts is priced on its line at the list price, and what AWS
does not charge is on none."""

from __future__ import annotations

import pytest

from bench.bill import LINES, custom_metrics, line_of, monthly_bill, per_month


@pytest.mark.parametrize(
    ("kind", "line"),
    [
        ("s3:PUT csv", "S3 PUT/COPY/POST/LIST"),  # a write, and the applied tag (PutObjectTagging)
        ("s3:PUT metadata.json", "S3 PUT/COPY/POST/LIST"),
        ("s3:POST", "S3 PUT/COPY/POST/LIST"),
        ("s3:LIST", "S3 PUT/COPY/POST/LIST"),
        ("s3:GET avro", "S3 GET/HEAD"),
        ("s3:GET", "S3 GET/HEAD"),
        ("s3:HEAD csv", "S3 GET/HEAD"),
        ("s3:DELETE parquet", None),
        ("glue:GetTable", "Glue Data Catalog"),
        ("glue:UpdateTable", "Glue Data Catalog"),
        ("glue:StartJobRun", None),
        ("glue:GetJobRuns", None),
        ("cloudwatch:PutMetricData", "CloudWatch PutMetricData"),
        ("sts:POST", None),
    ],
)
def test_each_request_kind_is_charged_on_its_line(kind: str, line: str | None) -> None:
    assert line_of(kind) == line


def test_a_month_is_priced_line_by_line_at_list_prices() -> None:
    """The issue's month of 100 busy tables, by kind: 29.3 M listings are $146.50, 86 M reads $34.40; the catalog's
    first million requests are free."""
    bill = monthly_bill(
        {"s3:LIST": 29.3e6, "s3:GET avro": 86e6, "glue:GetTable": 56.6e6, "glue:UpdateTable": 13e6,
         "cloudwatch:PutMetricData": 4.32e6, "glue:GetJobRuns": 1e6, "s3:DELETE csv": 1e6},
        glue_compute_usd=158.0, lambda_invocations=4.32e6, lambda_gb_seconds=4.32e6 * 0.25 * 0.1,
        custom_metrics=16,
    )  # fmt: skip
    assert list(bill.usd) == list(LINES)
    assert bill.usd["S3 PUT/COPY/POST/LIST"] == pytest.approx(146.5)
    assert bill.usd["S3 GET/HEAD"] == pytest.approx(34.4)
    assert bill.usd["Glue Data Catalog"] == pytest.approx(68.6)
    assert bill.usd["CloudWatch PutMetricData"] == pytest.approx(43.2)
    assert bill.usd["CloudWatch metrics"] == pytest.approx(4.8)
    assert bill.usd["Lambda"] == pytest.approx(0.864 + 1.44, rel=1e-3)
    assert bill.total_usd == pytest.approx(sum(bill.usd.values()))
    assert monthly_bill({"glue:GetTable": 999_999}, glue_compute_usd=0).usd["Glue Data Catalog"] == 0


def test_counts_of_a_window_are_scaled_to_a_month() -> None:
    assert per_month({"s3:LIST": 10}, 60.0, 30 * 24 * 3600.0) == {"s3:LIST": 10 * 60 * 24 * 30}


def test_the_custom_metrics_are_the_jobs_and_the_triggers_each_once() -> None:
    assert custom_metrics() == 16  # 11 of the jobs (UnknownTableObjects is the trigger's), 5 of the trigger
