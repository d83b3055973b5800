"""How job runs follow the configuration's ``runs`` settings: the trigger may read the jobs' runs, the
replay jobs run one at a time in coalesced mode (as before in per_file mode), publish their metrics, and
the stack alarms on freshness and refused tables."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from aws_cdk.assertions import Annotations, Match

from cdc_lake.core.config import RunSettings
from cdc_lake.core.names import (
    INPUT_NOTICES_METRIC,
    LANDED_LAG_METRIC,
    METRICS_NAMESPACE,
    PIPELINE_DIMENSION,
    TABLE_FAILURES_METRIC,
    UNKNOWN_TABLE_OBJECTS_METRIC,
)
from tests.infra.conftest import DEMO_CONFIG, Synthesized, only, render, resources_of_type, synthesize

# Every value differs from its default, so each assertion below proves the value is read from the config.
TUNED_RUNS = {"workers": 6, "time_budget_seconds": 1830, "lag_alarm_seconds": 1234}
TUNED_DATABASE = "tuned_lake"


def synthesize_with(tmp: Path, runs: dict[str, Any], database: str | None = None) -> Synthesized:
    """The default deployment with the demo configuration's ``runs`` (and lake database) replaced."""
    config = yaml.safe_load(DEMO_CONFIG.read_text(encoding="utf-8"))
    config["runs"] = runs
    if database is not None:
        config["lake"]["database"] = database
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return synthesize(tmp, {"tableConfig": str(path)})


@pytest.fixture(scope="module")
def per_file(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize_with(tmp_path_factory.mktemp("per-file"), {"mode": "per_file"})


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """Coalesced (the default mode) with non-default workers, time budget, lag threshold and database."""
    return synthesize_with(tmp_path_factory.mktemp("tuned"), TUNED_RUNS, TUNED_DATABASE)


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def job_properties(synth: Synthesized, job: Any) -> dict[str, Any]:
    return synth.json["Resources"][synth.logical_id(job)]["Properties"]


def policy_statements(synth: Synthesized, role: Any) -> list[dict[str, Any]]:
    """Statements of every AWS::IAM::Policy attached to ``role``."""
    role_ref = {"Ref": synth.logical_id(role)}
    return [
        statement
        for policy in resources_of_type(synth, "AWS::IAM::Policy").values()
        if role_ref in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def all_statements(synth: Synthesized) -> list[dict[str, Any]]:
    return [
        statement
        for policy in resources_of_type(synth, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def job_arns(synth: Synthesized, *jobs: Any) -> list[str]:
    return sorted(
        f"arn:${{AWS::Partition}}:glue:${{AWS::Region}}:${{AWS::AccountId}}:job/${{{synth.logical_id(job)}}}"
        for job in jobs
    )


def alarm_on(synth: Synthesized, metric_name: str) -> dict[str, Any]:
    _id, alarm = only(
        synth.template.find_resources("AWS::CloudWatch::Alarm", {"Properties": {"MetricName": metric_name}})
    )
    return alarm["Properties"]


# --- the trigger reads the jobs' runs ------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["demo", "tuned"])
def test_coalesced_trigger_reads_runs_of_exactly_the_two_jobs_it_starts(
    variant: str, request: pytest.FixtureRequest
) -> None:
    synth: Synthesized = request.getfixturevalue(variant)
    glue = synth.stack.glue
    readers = [s for s in all_statements(synth) if "glue:GetJobRuns" in as_list(s["Action"])]
    assert len(readers) == 1
    (statement,) = readers
    assert statement in policy_statements(synth, synth.stack.trigger.role)
    assert "Condition" not in statement and statement["Effect"] == "Allow"
    assert sorted(render(as_list(statement["Resource"]))) == job_arns(synth, glue.full_load, glue.cdc_replay)
    # Read what it may start, and nothing more (no glue:GetJobRun, glue:GetJobs, wildcards).
    assert sorted(as_list(statement["Action"])) == ["glue:GetJobRuns", "glue:StartJobRun"]


def test_per_file_trigger_does_not_read_job_runs(per_file: Synthesized) -> None:
    glue = per_file.stack.glue
    granted = [action for s in all_statements(per_file) for action in as_list(s["Action"])]
    assert "glue:GetJobRuns" not in granted
    (starter,) = [s for s in all_statements(per_file) if "glue:StartJobRun" in as_list(s["Action"])]
    assert as_list(starter["Action"]) == ["glue:StartJobRun"]
    assert sorted(render(as_list(starter["Resource"]))) == job_arns(per_file, glue.full_load, glue.cdc_replay)


# --- job sizing ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["demo", "tuned"])
def test_coalesced_jobs_run_one_at_a_time_with_the_configured_workers(
    variant: str, request: pytest.FixtureRequest
) -> None:
    synth: Synthesized = request.getfixturevalue(variant)
    runs = synth.config.runs
    assert runs.mode == "coalesced"
    replay = job_properties(synth, synth.stack.glue.cdc_replay)
    full_load = job_properties(synth, synth.stack.glue.full_load)
    assert replay["ExecutionProperty"] == {"MaxConcurrentRuns": 1}
    assert full_load["ExecutionProperty"] == {"MaxConcurrentRuns": 1}
    # Later starts wait in the queue (WAITING, what the trigger looks for) instead of failing.
    assert replay["JobRunQueuingEnabled"] is True and full_load["JobRunQueuingEnabled"] is True
    assert replay["NumberOfWorkers"] == runs.workers
    assert full_load["NumberOfWorkers"] == 10
    assert full_load["Timeout"] == 480
    # The last round started within the budget gets an hour to finish on top of it.
    assert replay["Timeout"] == math.ceil(runs.time_budget_seconds / 60) + 60
    assert replay["Timeout"] * 60 > runs.time_budget_seconds


def test_tuned_values_are_the_ones_read() -> None:
    """Guards the fixture: the tuned values must differ from the defaults the demo deploys."""
    defaults = RunSettings()
    for name, value in TUNED_RUNS.items():
        assert getattr(defaults, name) != value, name


def test_tuned_replay_job_is_sized_from_the_config(tuned: Synthesized) -> None:
    replay = job_properties(tuned, tuned.stack.glue.cdc_replay)
    assert (replay["NumberOfWorkers"], replay["Timeout"]) == (6, 31 + 60)


def test_per_file_jobs_keep_the_per_file_sizes(per_file: Synthesized) -> None:
    assert per_file.config.runs.mode != "coalesced"
    replay = job_properties(per_file, per_file.stack.glue.cdc_replay)
    full_load = job_properties(per_file, per_file.stack.glue.full_load)
    assert replay["ExecutionProperty"] == {"MaxConcurrentRuns": 10}
    assert full_load["ExecutionProperty"] == {"MaxConcurrentRuns": 10}
    assert (replay["NumberOfWorkers"], replay["Timeout"]) == (2, 60)
    assert (full_load["NumberOfWorkers"], full_load["Timeout"]) == (10, 480)


# --- metrics the jobs publish --------------------------------------------------------------------------


def test_glue_role_publishes_metrics_only_in_the_pipeline_and_glue_namespaces(demo: Synthesized) -> None:
    statements = policy_statements(demo, demo.stack.glue.role)
    publishers = [s for s in statements if "cloudwatch:PutMetricData" in as_list(s["Action"])]
    by_sid = {s["Sid"]: s for s in publishers}
    assert sorted(by_sid) == ["JobMetrics", "PipelineMetrics"]
    pipeline = by_sid["PipelineMetrics"]
    assert as_list(pipeline["Action"]) == ["cloudwatch:PutMetricData"]
    assert pipeline["Resource"] == "*"
    assert pipeline["Condition"] == {"StringEquals": {"cloudwatch:namespace": "CdcLake"}}
    # Every PutMetricData grant is held to one namespace.
    for statement in publishers:
        assert set(statement["Condition"]) == {"StringEquals"}
        assert isinstance(statement["Condition"]["StringEquals"]["cloudwatch:namespace"], str)


@pytest.mark.parametrize("variant", ["demo", "tuned", "per_file"])
def test_no_unacknowledged_cdk_nag_findings(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synthesized = request.getfixturevalue(variant)
    annotations = Annotations.from_stack(synth.stack)
    assert annotations.find_error("*", Match.string_like_regexp("AwsSolutions-.*")) == []
    assert annotations.find_warning("*", Match.string_like_regexp("AwsSolutions-.*")) == []


# --- alarms --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["demo", "tuned", "per_file"])
def test_landed_lag_alarm_uses_the_configured_threshold_and_database(
    variant: str, request: pytest.FixtureRequest
) -> None:
    synth: Synthesized = request.getfixturevalue(variant)
    alarm = alarm_on(synth, LANDED_LAG_METRIC)
    assert alarm["Namespace"] == METRICS_NAMESPACE
    assert alarm["Dimensions"] == [{"Name": PIPELINE_DIMENSION, "Value": synth.config.lake.database}]
    assert alarm["Statistic"] == "Maximum"
    assert alarm["Period"] == 300
    assert alarm["Threshold"] == synth.config.runs.lag_alarm_seconds
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["EvaluationPeriods"] == 1
    assert alarm["TreatMissingData"] == "notBreaching"
    assert alarm["AlarmActions"] == [{"Ref": synth.logical_id(synth.stack.monitoring.topic)}]
    assert "behind" in alarm["AlarmDescription"]


def test_tuned_lag_alarm_threshold_and_dimension_are_the_configured_ones(tuned: Synthesized) -> None:
    alarm = alarm_on(tuned, LANDED_LAG_METRIC)
    assert alarm["Threshold"] == 1234
    assert alarm["Dimensions"] == [{"Name": "Pipeline", "Value": TUNED_DATABASE}]


@pytest.mark.parametrize("variant", ["demo", "tuned"])
def test_table_failures_alarm_fires_on_one_refused_table(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synthesized = request.getfixturevalue(variant)
    alarm = alarm_on(synth, TABLE_FAILURES_METRIC)
    assert alarm["Namespace"] == "CdcLake"
    assert alarm["Dimensions"] == [{"Name": "Pipeline", "Value": synth.config.lake.database}]
    assert alarm["Statistic"] == "Sum"
    assert alarm["Period"] == 300
    assert alarm["Threshold"] == 1
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["EvaluationPeriods"] == 1
    assert alarm["TreatMissingData"] == "notBreaching"
    assert alarm["AlarmActions"] == [{"Ref": synth.logical_id(synth.stack.monitoring.topic)}]
    assert "cdc-lake changes" in alarm["AlarmDescription"]


@pytest.mark.parametrize("variant", ["demo", "tuned"])
def test_input_notices_alarm_fires_on_one_announced_input(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synthesized = request.getfixturevalue(variant)
    alarm = alarm_on(synth, INPUT_NOTICES_METRIC)
    assert alarm["Namespace"] == METRICS_NAMESPACE
    assert alarm["Dimensions"] == [{"Name": PIPELINE_DIMENSION, "Value": synth.config.lake.database}]
    assert (alarm["Statistic"], alarm["Threshold"], alarm["ComparisonOperator"]) == (
        "Sum",
        1,
        "GreaterThanOrEqualToThreshold",
    )
    assert "docs/bad-input.md" in alarm["AlarmDescription"]


def test_unknown_table_alarm_watches_the_trigger_lambda_metric(demo: Synthesized) -> None:
    alarm = alarm_on(demo, UNKNOWN_TABLE_OBJECTS_METRIC)
    function = demo.json["Resources"][demo.logical_id(demo.stack.trigger.function)]
    environment = function["Properties"]["Environment"]["Variables"]
    # The Lambda's Powertools metrics carry its service name as their one dimension, in the same namespace.
    assert alarm["Dimensions"] == [{"Name": "service", "Value": environment["POWERTOOLS_SERVICE_NAME"]}]
    assert alarm["Namespace"] == environment["POWERTOOLS_METRICS_NAMESPACE"]
    assert (alarm["Statistic"], alarm["Threshold"]) == ("Sum", 1)
    assert "table mappings" in alarm["AlarmDescription"]


def test_every_alarm_notifies_the_topic(demo: Synthesized) -> None:
    topic = {"Ref": demo.logical_id(demo.stack.monitoring.topic)}
    alarms = resources_of_type(demo, "AWS::CloudWatch::Alarm")
    assert len(alarms) == 9
    for alarm in alarms.values():
        assert alarm["Properties"]["AlarmActions"] == [topic]
