"""Monitoring: one encrypted SNS topic that hears about failed Glue runs, Lambda errors, events the
trigger could not deliver (its on-failure queue), a lake falling behind its landed files and tables whose
batch a replay run refused; and a dashboard of the pipeline at a glance, drawn from the same metrics."""

from __future__ import annotations

import datetime as dt
import itertools
import re
from dataclasses import dataclass

from aws_cdk import Annotations, Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from cdc_lake.core.config import PipelineConfig
from cdc_lake.core.names import (
    BATCH_SECONDS_METRIC,
    BYTES_APPLIED_METRIC,
    CHANGE_LAG_METRIC,
    DRIFTED_KEYS_METRIC,
    FILES_APPLIED_METRIC,
    INPUT_NOTICES_METRIC,
    LANDED_LAG_METRIC,
    METRICS_NAMESPACE,
    OLDEST_WAITING_METRIC,
    PIPELINE_DIMENSION,
    ROWS_APPLIED_METRIC,
    SOURCE_DIFFERENCES_METRIC,
    TABLE_FAILURES_METRIC,
    TRIGGER_SERVICE_NAME,
    UNKNOWN_TABLE_OBJECTS_METRIC,
)
from infra.deployment import Deployment, stack_output
from infra.settings import MAINTENANCE_ENABLED, MAINTENANCE_SCHEDULE, DeploySettings

FAILED_GLUE_STATES = ["FAILED", "TIMEOUT", "ERROR"]
ALARM_PERIOD = Duration.minutes(5)
# CloudWatch evaluates an alarm of periods of an hour or more over seven days at most (Period x EvaluationPeriods,
# PutMetricAlarm): a datum due less often than that cannot be expected by an alarm.
LONGEST_EXPECTED_DAYS = 7
OLDEST_WAITING_WARNING = "cdc-lake:oldestWaitingFileAlarm"


@dataclass(frozen=True)
class Watched:
    """What the alarms watch: the Glue jobs (by name), the trigger's on-failure queue and its function, and whether
    the source jobs are deployed (they put the source-difference and drifted-key metrics)."""

    job_names: list[str]
    failure_queue: sqs.IQueue
    function: lambda_.IFunction
    source_jobs: bool = True


class Monitoring(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, deployment: Deployment, key: kms.IKey, watched: Watched
    ) -> None:
        super().__init__(scope, construct_id)
        config, alarm_email = deployment.config, deployment.settings.alarm_email
        job_names, failure_queue, function = watched.job_names, watched.failure_queue, watched.function
        self.topic = sns.Topic(self, "AlarmTopic", display_name="cdc-lake alarms", master_key=key, enforce_ssl=True)
        stack_output(self, "AlarmTopicArn", self.topic.topic_arn, "SNS topic for alarms and failed job runs")
        if alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(alarm_email))

        self.glue_failure_rule = events.Rule(
            self,
            "GlueJobFailed",
            description="A cdc-lake Glue job run failed, timed out or errored",
            event_pattern=events.EventPattern(
                source=["aws.glue"],
                detail_type=["Glue Job State Change"],
                detail={"jobName": job_names, "state": FAILED_GLUE_STATES},
            ),
            targets=[targets.SnsTopic(self.topic)],
        )

        self.failure_queue_alarm = self._alarm(
            "FailureQueueNotEmpty",
            "S3 events the trigger Lambda gave up on are waiting in its on-failure queue; "
            "their files were not applied until a job run covers them (see docs/deploy.md)",
            failure_queue.metric_approximate_number_of_messages_visible(period=ALARM_PERIOD, statistic="Maximum"),
        )
        self.lambda_errors_alarm = self._alarm(
            "TriggerErrors",
            "The cdc-lake trigger Lambda raised errors (it retries twice, then uses the queue)",
            function.metric_errors(period=ALARM_PERIOD, statistic="Sum"),
        )
        # The replay jobs publish these after every commit, under one dimension: the lake database.
        # No commit, no datum: a lake with nothing landing is not late (a stalled run is caught by the
        # failed-run rule and the job timeout).
        self.landed_lag_alarm = self._alarm(
            "LandedLagHigh",
            f"A cdc-lake commit applied files that had landed more than "
            f"{config.runs.lag_alarm_seconds} s earlier: the lake is falling behind DMS. Look for replay runs "
            "waiting, failing or reaching their time budget (Glue job runs, the replay job's log); if runs are "
            "busy all the time, raise runs.workers or runs.parallel_tables (docs/runs.md)",
            _pipeline_metric(config, LANDED_LAG_METRIC, "Maximum"),
            threshold=config.runs.lag_alarm_seconds,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        )
        # Put by every replay run (the tables it saw) and by the scheduled maintenance run (every table). A file no
        # table applied is kept by the raw bucket's catch-all rule (rawUnappliedRetentionDays), so this fires long
        # before anything could expire. Where the schedule is due, a period without any datum breaches too.
        settings = deployment.settings
        waited_days = max(1, settings.raw_retention_days // 2)
        expected = expected_every_days(settings)
        description = (
            f"A landed DMS file has waited {waited_days} days or more without any table applying it (a refused "
            f"table, replay runs failing or not started). It is kept until {settings.raw_unapplied_retention_days} "
            "days after it landed, then expired unapplied: `cdc-lake status` names the table and why"
        )
        if expected is not None:
            description += (
                f"; or no run has put {OLDEST_WAITING_METRIC} for more than {expected} day(s): the scheduled "
                "maintenance run failed, did not start, or could not tell a table's waiting files (its log names the "
                "table and the error; a new stack waits for its first run)"
            )
        # Not through _alarm: the one alarm that may read a missing datum as breaching, where a datum is due.
        self.oldest_waiting_alarm = cloudwatch.Alarm(
            self,
            "OldestWaitingFile",
            alarm_description=description + " (docs/deploy.md#when-something-fails)",
            metric=_pipeline_metric(config, OLDEST_WAITING_METRIC, "Maximum", period=Duration.days(expected or 1)),
            threshold=waited_days * 86400,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            # Without a datum due, no datum is no news: the alarm keeps the state the last datum set.
            treat_missing_data=cloudwatch.TreatMissingData.BREACHING
            if expected
            else cloudwatch.TreatMissingData.IGNORE,
        )
        if expected is None:
            Annotations.of(self).add_warning_v2(OLDEST_WAITING_WARNING, _unexpected_reason(settings))
        self.table_failures_alarm = self._alarm(
            "TableFailures",
            "A cdc-lake replay run refused a table's batch (bad input); the table's files stay "
            "unapplied in the raw bucket. Read the replay job's log for the file, row and column at fault, and "
            "`cdc-lake changes` for what the table last applied",
            _pipeline_metric(config, TABLE_FAILURES_METRIC, "Sum"),
        )
        self.input_notices_alarm = self._alarm(
            "InputNotices",
            "A cdc-lake replay run accepted input that it announced rather than applied as usual: an empty object, "
            "a file lacking a column, a column added or widened, LOAD files holding a key twice, files of a table "
            "the configuration lacks, an object that is no DMS file, or rows a quarantining table kept out "
            "(docs/bad-input.md; the table stays diverged until `cdc-lake rejects replay`). The replay job's log "
            "names each (NOTICE), and `cdc-lake changes` shows those a commit recorded",
            _pipeline_metric(config, INPUT_NOTICES_METRIC, "Sum"),
        )
        self.unknown_table_alarm = self._alarm(
            "UnknownTableObjects",
            "DMS wrote files of a table that the cdc-lake configuration lacks: they are not applied, so the table "
            "never reaches the lake. Add the table to the configuration and `cdk deploy`, or remove it from the DMS "
            "task's table mappings (the trigger Lambda's log names each file)",
            cloudwatch.Metric(
                namespace=METRICS_NAMESPACE,
                metric_name=UNKNOWN_TABLE_OBJECTS_METRIC,
                dimensions_map={"service": TRIGGER_SERVICE_NAME},
                statistic="Sum",
                period=ALARM_PERIOD,
            ),
        )
        self.source_differences_alarm: cloudwatch.Alarm | None = None
        self.drifted_keys_alarm: cloudwatch.Alarm | None = None
        if watched.source_jobs:
            self._source_alarms(config)
        alarms = tuple(
            alarm
            for alarm in (
                self.failure_queue_alarm,
                self.lambda_errors_alarm,
                self.landed_lag_alarm,
                self.oldest_waiting_alarm,
                self.table_failures_alarm,
                self.input_notices_alarm,
                self.unknown_table_alarm,
                self.source_differences_alarm,
                self.drifted_keys_alarm,
            )
            if alarm is not None
        )
        action = cloudwatch_actions.SnsAction(self.topic)
        for alarm in alarms:
            alarm.add_alarm_action(action)
        self.dashboard = self._dashboard(config, watched, alarms)
        stack_output(
            self,
            "DashboardName",
            self.dashboard.dashboard_name,
            "CloudWatch dashboard: lag, what was applied, refusals and notices, job and trigger failures",
        )

    def _source_alarms(self, config: PipelineConfig) -> None:
        """The alarms on what the source jobs put (infra/source_check.py)."""
        self.source_differences_alarm = self._alarm(
            "SourceDifferences",
            "The source-check job found the table configuration differs from the source's catalog: a column added "
            "or dropped, a type or key changed, or a table missing. The job's log names each (SOURCE DIFFERENCE); "
            "`cdc-lake config-check-source` shows them from a laptop. Update the configuration "
            "(docs/schema-changes.md) and `cdk deploy`",
            _pipeline_metric(config, SOURCE_DIFFERENCES_METRIC, "Maximum"),
        )
        self.drifted_keys_alarm = self._alarm(
            "DriftedKeys",
            "The drift job found lake rows that differ from the live source once the changes in flight were applied: "
            "the job's log names each key (DRIFT). Repair them with the drift job's --action repair, or "
            "`cdc-lake repair` (docs/drift.md), or reload the table when most of it differs",
            _pipeline_metric(config, DRIFTED_KEYS_METRIC, "Maximum"),
        )

    def _dashboard(
        self, config: PipelineConfig, watched: Watched, alarms: tuple[cloudwatch.Alarm, ...]
    ) -> cloudwatch.Dashboard:
        """The pipeline at a glance: each widget reads a metric the jobs, the trigger or AWS already put."""

        def graph(
            title: str,
            left: list[cloudwatch.IMetric],
            right: list[cloudwatch.IMetric] | None = None,
            limit: cloudwatch.HorizontalAnnotation | None = None,
        ) -> cloudwatch.GraphWidget:
            return cloudwatch.GraphWidget(
                title=title, left=left, right=right, left_annotations=[limit] if limit else None, width=8, height=6
            )

        def pipeline(name: str, statistic: str, label: str) -> cloudwatch.Metric:
            return _pipeline_metric(config, name, statistic, Duration.minutes(5)).with_(label=label)

        lag_limit = cloudwatch.HorizontalAnnotation(
            value=config.runs.lag_alarm_seconds, label="LandedLagHigh alarm", color=cloudwatch.Color.RED
        )
        failed_runs = cloudwatch.Metric(
            namespace="AWS/Events",
            metric_name="TriggeredRules",
            dimensions_map={"RuleName": self.glue_failure_rule.rule_name},
            statistic="Sum",
            label="Glue job runs failed, timed out or errored",
            period=Duration.minutes(5),
        )
        function, queue = watched.function, watched.failure_queue
        dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=f"cdc-lake-{config.lake.database}")
        dashboard.add_widgets(
            graph(
                "Lag (seconds)",
                [
                    pipeline(LANDED_LAG_METRIC, "Maximum", "from the oldest applied file's landing"),
                    pipeline(CHANGE_LAG_METRIC, "Maximum", "from the newest applied change (DMS timestamp)"),
                ],
                limit=lag_limit,
            ),
            graph(
                "Applied",
                [
                    pipeline(FILES_APPLIED_METRIC, "Sum", "files"),
                    pipeline(ROWS_APPLIED_METRIC, "Sum", "rows"),
                ],
                right=[pipeline(BYTES_APPLIED_METRIC, "Sum", "bytes")],
            ),
            graph(
                "Batch seconds (plan to commit)",
                [
                    pipeline(BATCH_SECONDS_METRIC, "Maximum", "longest batch"),
                    pipeline(BATCH_SECONDS_METRIC, "Sum", "all batches"),
                ],
            ),
        )
        dashboard.add_widgets(
            graph(
                "Refused and announced",
                [
                    pipeline(TABLE_FAILURES_METRIC, "Sum", "tables refused (bad input)"),
                    pipeline(INPUT_NOTICES_METRIC, "Sum", "input announced (notices)"),
                    self.unknown_table_alarm.metric.with_(label="files of unconfigured tables"),
                ],
            ),
            graph(
                "Job runs and trigger",
                [
                    failed_runs,
                    function.metric_errors(period=Duration.minutes(5), label="trigger errors"),
                    queue.metric_approximate_number_of_messages_visible(
                        period=Duration.minutes(5), statistic="Maximum", label="events in the on-failure queue"
                    ),
                ],
            ),
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=list(alarms), width=8, height=6),
        )
        return dashboard

    def _alarm(
        self,
        construct_id: str,
        description: str,
        metric: cloudwatch.IMetric,
        *,
        threshold: float = 1,
        comparison: cloudwatch.ComparisonOperator = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    ) -> cloudwatch.Alarm:
        """One period over the threshold alarms; no data is no alarm."""
        return cloudwatch.Alarm(
            self,
            construct_id,
            alarm_description=description,
            metric=metric,
            threshold=threshold,
            evaluation_periods=1,
            comparison_operator=comparison,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )


def expected_every_days(settings: DeploySettings) -> int | None:
    """The days within which the scheduled maintenance run puts the oldest waiting file's metric again: the longest
    gap between the days its schedule runs on. None when no datum can be expected: maintenance is off, or its
    schedule leaves more than ``LONGEST_EXPECTED_DAYS`` between runs, or uses what ``schedule_gap_days`` does not
    read."""
    if not settings.maintenance_enabled:
        return None
    gap = schedule_gap_days(settings.maintenance_schedule)
    return gap if gap is not None and gap <= LONGEST_EXPECTED_DAYS else None


def _unexpected_reason(settings: DeploySettings) -> str:
    if not settings.maintenance_enabled:
        why = f"{MAINTENANCE_ENABLED}=false: no scheduled run puts {OLDEST_WAITING_METRIC}"
    else:
        why = (
            f"{MAINTENANCE_SCHEDULE} {settings.maintenance_schedule} runs less often than every "
            f"{LONGEST_EXPECTED_DAYS} days, or in a way this stack does not read (L, W, #, a year): no alarm can "
            f"expect {OLDEST_WAITING_METRIC} from it"
        )
    return (
        f"{why}, so the OldestWaitingFile alarm relies on replay runs alone. It sees a file waiting only while replay "
        "runs happen (they measure the tables they reach), and a day without runs is no alarm, whatever waits. "
        "Schedule the maintenance job yourself, or look with `cdc-lake status` (docs/deploy.md#when-something-fails)"
    )


# Glue's cron (UTC): Minutes Hours Day-of-month Month Day-of-week Year; days of the week 1-7 are SUN-SAT.
_CRON = re.compile(r"^cron\((\S+) (\S+) (\S+) (\S+) (\S+) (\S+)\)$")
_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_WEEKDAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_FIELD_ITEM = re.compile(r"^(\*|[0-9A-Z]+(?:-[0-9A-Z]+)?)(?:/([0-9]+))?$")
# Four years from a leap year: every month length and weekday of every day of the month.
_CALENDAR_START, _CALENDAR_DAYS = dt.date(2024, 1, 1), 4 * 365 + 1


def schedule_gap_days(cron: str) -> int | None:
    """The longest gap, in days, between the days a Glue schedule runs on (1: every day), read over four years of
    calendar; None when it runs on fewer than two days, or uses what this does not read: L, W, #, a year."""
    found = _CRON.match(cron.strip())
    if found is None:
        return None
    _minutes, _hours, day_of_month, month, day_of_week, year = found.groups()
    days = _cron_values(day_of_month, 1, 31)
    months = _cron_values(month, 1, 12, _MONTHS)
    weekdays = _cron_values(day_of_week, 1, 7, _WEEKDAYS)
    if year != "*" or days is None or months is None or weekdays is None:
        return None
    calendar = (_CALENDAR_START + dt.timedelta(days=n) for n in range(_CALENDAR_DAYS))
    # isoweekday(): Monday 1 .. Sunday 7; Glue's day of the week: Sunday 1 .. Saturday 7.
    running = [d for d in calendar if d.day in days and d.month in months and d.isoweekday() % 7 + 1 in weekdays]
    return max(((later - earlier).days for earlier, later in itertools.pairwise(running)), default=None)


def _cron_values(field: str, low: int, high: int, names: tuple[str, ...] = ()) -> set[int] | None:
    """The values a cron field takes (``?`` and ``*``: every one), None when it uses what this does not read."""
    if field == "?":
        return set(range(low, high + 1))
    values: set[int] = set()
    for item in field.upper().split(","):
        found = _FIELD_ITEM.match(item)
        if found is None:
            return None
        span, step = found.group(1), found.group(2)
        ends = [low, high] if span == "*" else [_cron_value(end, names) for end in span.split("-")]
        first, last = ends[0], ends[-1]
        if len(ends) == 1 and step is not None:
            last = high  # "n/step": from n on
        if first is None or last is None or not low <= first <= last <= high or step == "0":
            return None
        values.update(range(first, last + 1, int(step or 1)))
    return values


def _cron_value(text: str, names: tuple[str, ...]) -> int | None:
    if text.isdigit():
        return int(text)
    return names.index(text) + 1 if text in names else None


def _pipeline_metric(
    config: PipelineConfig, name: str, statistic: str, period: Duration = ALARM_PERIOD
) -> cloudwatch.Metric:
    """A metric the replay jobs put (cdc_lake.engine.metrics), under the pipeline's one dimension."""
    return cloudwatch.Metric(
        namespace=METRICS_NAMESPACE,
        metric_name=name,
        dimensions_map={PIPELINE_DIMENSION: config.lake.database},
        statistic=statistic,
        period=period,
    )
