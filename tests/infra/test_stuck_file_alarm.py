"""The alarm on a landed file no table applied (``OldestWaitingFileSeconds``): every replay run and the scheduled
maintenance run put the metric, so where that schedule is due, a period without any datum breaches too (the
maintenance run failed, or could not tell a table's files); without a schedule the stack says at synth that the
alarm relies on replay runs alone, and a quiet day is no alarm."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from aws_cdk.assertions import Annotations, Match

from cdc_lake.core.names import OLDEST_WAITING_METRIC, PIPELINE_DIMENSION
from infra.monitoring import LONGEST_EXPECTED_DAYS, OLDEST_WAITING_WARNING, expected_every_days, schedule_gap_days
from infra.settings import DEFAULT_MAINTENANCE_SCHEDULE, DeploySettings
from tests.infra.conftest import Synthesized, only, synthesize

DAY = 86400


@pytest.fixture(scope="module")
def without_maintenance(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize(tmp_path_factory.mktemp("no-maintenance"), {"maintenanceEnabled": "false"})


def oldest_waiting_alarm(synth: Synthesized) -> dict[str, Any]:
    _id, alarm = only(
        synth.template.find_resources("AWS::CloudWatch::Alarm", {"Properties": {"MetricName": OLDEST_WAITING_METRIC}})
    )
    return alarm["Properties"]


def stuck_file_warnings(synth: Synthesized) -> list[str]:
    found = Annotations.from_stack(synth.stack).find_warning("*", Match.string_like_regexp(".*OldestWaitingFile.*"))
    return [str(warning.entry.data) for warning in found]


def test_a_daily_maintenance_makes_a_day_without_a_datum_breach(demo: Synthesized) -> None:
    """The default schedule runs every day: the alarm's period is a day, and no datum at all is breaching."""
    alarm = oldest_waiting_alarm(demo)
    assert alarm["Dimensions"] == [{"Name": PIPELINE_DIMENSION, "Value": demo.config.lake.database}]
    assert (alarm["Statistic"], alarm["Period"], alarm["EvaluationPeriods"]) == ("Maximum", DAY, 1)
    assert alarm["TreatMissingData"] == "breaching"
    # Half of rawRetentionDays (30): long before an unapplied file could expire (rawUnappliedRetentionDays, 365).
    assert alarm["Threshold"] == 15 * DAY
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["Threshold"] < demo.stack.settings.raw_unapplied_retention_days * DAY / 10
    assert alarm["AlarmActions"] == [{"Ref": demo.logical_id(demo.stack.monitoring.topic)}]
    description = alarm["AlarmDescription"]
    assert "cdc-lake status" in description
    assert f"no run has put {OLDEST_WAITING_METRIC} for more than 1 day(s)" in description
    assert "maintenance run failed" in description
    assert len(description) <= 1024  # CloudWatch's limit
    assert stuck_file_warnings(demo) == []


def test_a_weekly_maintenance_makes_a_week_without_a_datum_breach(parquet: Synthesized) -> None:
    """Sundays only (the parquet deployment's schedule): the period spans the week between two runs, CloudWatch's
    longest evaluation."""
    assert parquet.stack.settings.maintenance_schedule == "cron(0 2 ? * SUN *)"
    alarm = oldest_waiting_alarm(parquet)
    assert (alarm["Period"], alarm["TreatMissingData"]) == (7 * DAY, "breaching")
    assert alarm["Period"] * alarm["EvaluationPeriods"] <= LONGEST_EXPECTED_DAYS * DAY
    assert "for more than 7 day(s)" in alarm["AlarmDescription"]
    assert stuck_file_warnings(parquet) == []


def test_without_maintenance_the_alarm_relies_on_replay_runs_and_a_quiet_day_is_no_alarm(
    without_maintenance: Synthesized,
) -> None:
    alarm = oldest_waiting_alarm(without_maintenance)
    # A missing datum keeps the state the last replay run's datum set: a quiet day neither alarms nor clears.
    assert (alarm["Period"], alarm["TreatMissingData"]) == (DAY, "ignore")
    assert alarm["Threshold"] == 15 * DAY
    assert "no run has put" not in alarm["AlarmDescription"]
    [warning] = stuck_file_warnings(without_maintenance)
    assert warning.startswith(f"maintenanceEnabled=false: no scheduled run puts {OLDEST_WAITING_METRIC}, so the ")
    assert "relies on replay runs alone" in warning
    assert OLDEST_WAITING_WARNING in warning  # acknowledgeable by its id


@pytest.mark.parametrize(
    ("cron", "gap"),
    [
        (DEFAULT_MAINTENANCE_SCHEDULE, 1),
        ("cron(0 0/6 * * ? *)", 1),  # several runs a day
        ("cron(0 2 ? * MON-FRI *)", 3),  # Friday to Monday
        ("cron(0 2 ? * 2,5 *)", 4),  # Thursday to Monday
        ("cron(0 2 ? * SUN *)", 7),
        ("cron(0 2 ? * 1 *)", 7),  # Sunday by number
        ("cron(0 2 */2 * ? *)", 2),  # odd days of the month: the 31st to the 1st is one day, the 27th to March 1st two
        ("cron(0 2 1/7 * ? *)", 7),  # the 1st, 8th, ... 29th: then the 1st again
        ("cron(0 2 1 * ? *)", 31),
        ("cron(0 2 1 JAN ? *)", 366),
        ("cron(0 2 L * ? *)", None),  # the month's last day: not read
        ("cron(0 2 ? * 6#3 *)", None),
        ("cron(0 2 * * ? 2026)", None),  # a year: it stops
        ("rate(1 day)", None),  # no Glue schedule
    ],
)
def test_the_days_between_maintenance_runs_are_read_from_its_schedule(cron: str, gap: int | None) -> None:
    assert schedule_gap_days(cron) == gap


SETTINGS = DeploySettings(
    vpc_id="vpc-0123456789abcdef0",
    subnet_ids=("subnet-0123456789abcdef0",),
    source_engine="mysql",
    source_secret_arn="arn:aws:secretsmanager:eu-west-1:123456789012:secret:cdc-lake/source-AbCdEf",
    source_port=3306,
)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, 1),
        ({"maintenance_schedule": "cron(0 2 ? * MON-FRI *)"}, 3),
        ({"maintenance_schedule": "cron(0 2 1 * ? *)"}, None),  # monthly: beyond any alarm's evaluation
        ({"maintenance_schedule": "cron(0 2 L * ? *)"}, None),
        ({"maintenance_enabled": False}, None),
    ],
)
def test_a_datum_is_expected_only_from_a_schedule_due_within_a_week(
    changes: dict[str, Any], expected: int | None
) -> None:
    assert expected_every_days(dataclasses.replace(SETTINGS, **changes)) == expected
