"""runs.mode warm, the stack's part: the warm job (gluestreaming on G.025X, one run per shard of the tables), its role,
the trigger's rights to start it and read its runs' stop markers, the shards' event queues; and in every mode, the jobs
nobody waits for on Glue Flex. One warm template is synthesized for the module (250 tables, 100 per warm run: 3
shards)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from aws_cdk.assertions import Annotations, Match

from cdc_lake.core.glue_jobs import GLUE_JOBS
from cdc_lake.core.job_arguments import WarmArguments, declared_flags
from cdc_lake.core.names import (
    EXPIRED_MARK_PREFIX,
    WARM_JOB,
    WARM_MARKER_PREFIX,
    WARM_QUEUES_ARGUMENT,
    WARM_QUEUES_ENV,
    WARM_TIMEOUT_MINUTES,
)
from cdc_lake.core.shards import shard_count
from cdc_lake.local.aws_endpoint import endpoint_environment, local_aws_endpoint, served_requests
from cdc_lake.local.deployed import DeployedStack, provision
from infra.glue import FLEX_JOBS
from infra.packaging import REPO_ROOT
from infra.settings import DEFAULT_WARM_MAINTENANCE_WINDOW
from infra.trigger import ENV_WARM_JOB
from tests.infra.conftest import (
    DEMO_CONFIG,
    Synthesized,
    allows,
    assembly_dir,
    job_role_statements,
    render,
    resources_of_type,
    synthesize,
)
from tests.infra.test_runs import all_statements, as_list, job_arns, job_properties, policy_statements
from tests.infra.test_template_lint import lint_findings

TABLES, TABLES_PER_JOB, SHARDS = 250, 100, 3
WARM_WORKERS = 3  # not WarmSettings' default (2), so the template's value is the configuration's
WARM_JOB_NAME = f"cdclake-{GLUE_JOBS[WARM_JOB].resource_name}"
WEEK_MINUTES = 7 * 24 * 60


def warm_config(tmp: Path) -> Path:
    """The demo configuration run warm, with 247 more small tables beside its own."""
    config = yaml.safe_load(DEMO_CONFIG.read_text(encoding="utf-8"))
    extra = TABLES - len(config["tables"])
    config["tables"] += [
        {
            "name": f"shop.extra_{number:03d}",
            "primary_key": ["id"],
            "columns": [{"name": "id", "type": "bigint"}, {"name": "value", "type": "string"}],
        }
        for number in range(extra)
    ]
    config["runs"] = {"mode": "warm", "warm": {"tables_per_job": TABLES_PER_JOB, "workers": WARM_WORKERS}}
    path = tmp / "warm.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    tmp = tmp_path_factory.mktemp("warm")
    return synthesize(tmp, {"tableConfig": str(warm_config(tmp))})


def jobs_by_name(synth: Synthesized) -> dict[str, dict[str, Any]]:
    return {job["Properties"]["Name"]: job["Properties"] for job in resources_of_type(synth, "AWS::Glue::Job").values()}


def statement(synth: Synthesized, role: Any, sid: str) -> dict[str, Any]:
    (found,) = [s for s in policy_statements(synth, role) if s.get("Sid") == sid]
    return found


def test_the_configuration_needs_three_shards(warm: Synthesized) -> None:
    assert len(warm.config.tables) == TABLES
    assert shard_count(warm.config) == SHARDS


# --- the warm job -----------------------------------------------------------------------------------------------


def test_warm_job_is_a_streaming_job_on_the_smallest_workers_one_run_per_shard(warm: Synthesized) -> None:
    job = warm.stack.glue.warm
    assert job is not None
    props = job_properties(warm, job)
    assert props["Name"] == WARM_JOB_NAME
    assert props["Command"]["Name"] == "gluestreaming"
    replay_script = job_properties(warm, warm.stack.glue.cdc_replay)["Command"]["ScriptLocation"]
    assert render(props["Command"]["ScriptLocation"]) != render(replay_script)
    assert (props["GlueVersion"], props["WorkerType"], props["NumberOfWorkers"]) == ("5.1", "G.025X", WARM_WORKERS)
    assert props["ExecutionProperty"] == {"MaxConcurrentRuns": 2 * SHARDS}  # room for a shard's next run
    assert props["Timeout"] == WARM_TIMEOUT_MINUTES < WEEK_MINUTES  # Glue refuses a streaming timeout of 7 days
    assert props["MaxRetries"] == 0
    assert props["MaintenanceWindow"] == DEFAULT_WARM_MAINTENANCE_WINDOW
    assert "ExecutionClass" not in props  # Flex is for glueetl jobs only
    assert props["Role"] == {"Fn::GetAtt": [warm.logical_id(warm.stack.glue.warm_role), "Arn"]}


def test_warm_job_runs_the_lake_jobs_arguments_and_names_the_jobs_it_hands_over_to(warm: Synthesized) -> None:
    glue = warm.stack.glue
    assert glue.warm is not None
    arguments = render(job_properties(warm, glue.warm)["DefaultArguments"])
    replay = render(job_properties(warm, glue.cdc_replay)["DefaultArguments"])
    for shared in (
        "--conf",
        "--datalake-formats",
        "--extra-py-files",
        "--additional-python-modules",
        "--custom-logGroup-prefix",
        "--warehouse",
        "--TempDir",
        "--config_uri",
        "--catalog",
        "--database",
    ):
        assert arguments[shared] == replay[shared], shared
    assert arguments["--bucket"] == "${" + warm.logical_id(warm.stack.storage.raw) + "}"
    assert arguments["--full_load_job"] == "${" + warm.logical_id(glue.full_load) + "}"
    assert arguments["--cdc_replay_job"] == "${" + warm.logical_id(glue.cdc_replay) + "}"
    assert "--shard" not in arguments  # the Lambda's, per run


def test_replay_jobs_keep_the_per_file_sizes_for_the_one_table_runs_handed_over(warm: Synthesized) -> None:
    full_load = job_properties(warm, warm.stack.glue.full_load)
    replay = job_properties(warm, warm.stack.glue.cdc_replay)
    assert (full_load["NumberOfWorkers"], full_load["Timeout"], full_load["ExecutionProperty"]) == (
        10,
        480,
        {"MaxConcurrentRuns": 10},
    )
    assert (replay["NumberOfWorkers"], replay["Timeout"], replay["ExecutionProperty"]) == (
        2,
        60,
        {"MaxConcurrentRuns": 10},
    )
    assert full_load["WorkerType"] == replay["WorkerType"] == "G.1X"
    assert full_load["JobRunQueuingEnabled"] is replay["JobRunQueuingEnabled"] is True


# --- its rights -----------------------------------------------------------------------------------------------


def test_warm_role_starts_and_reads_exactly_the_replay_jobs_and_its_own_runs(warm: Synthesized) -> None:
    glue = warm.stack.glue
    starts = statement(warm, glue.warm_role, "StartReplayRuns")
    assert sorted(as_list(starts["Action"])) == ["glue:GetJobRun", "glue:GetJobRuns", "glue:StartJobRun"]
    assert sorted(render(as_list(starts["Resource"]))) == job_arns(warm, glue.full_load, glue.cdc_replay)
    # Its own job's: the other runs of its shard, and its shard's next run (``WarmShift.successor``).
    reads = statement(warm, glue.warm_role, "WarmRuns")
    assert sorted(as_list(reads["Action"])) == ["glue:GetJobRun", "glue:GetJobRuns", "glue:StartJobRun"]
    assert render(as_list(reads["Resource"])) == [
        f"arn:${{AWS::Partition}}:glue:${{AWS::Region}}:${{AWS::AccountId}}:job/{WARM_JOB_NAME}"
    ]
    assert "Condition" not in starts and "Condition" not in reads


def test_warm_role_writes_and_lists_only_its_stop_markers_in_the_raw_bucket(warm: Synthesized) -> None:
    glue, raw = warm.stack.glue, warm.logical_id(warm.stack.storage.raw)
    markers = statement(warm, glue.warm_role, "WriteStopMarkers")
    assert sorted(as_list(markers["Action"])) == ["s3:DeleteObject", "s3:GetObject", "s3:PutObject"]
    assert render(as_list(markers["Resource"])) == [f"${{{raw}.Arn}}/{WARM_MARKER_PREFIX}*"]
    listing = statement(warm, glue.warm_role, "ListStopMarkers")
    assert as_list(listing["Action"]) == ["s3:ListBucket"]
    assert render(as_list(listing["Resource"])) == [f"${{{raw}.Arn}}"]
    assert listing["Condition"] == {"StringLike": {"s3:prefix": f"{WARM_MARKER_PREFIX}*"}}
    assert WARM_MARKER_PREFIX == "cdc-lake-warm/"


def test_only_the_warm_role_and_the_trigger_may_start_runs_and_only_the_warm_role_writes_markers(
    warm: Synthesized,
) -> None:
    glue, trigger = warm.stack.glue, warm.stack.trigger
    runs = {"glue:StartJobRun", "glue:GetJobRun", "glue:GetJobRuns"}
    for role in (glue.role, warm.stack.source_check.role):  # the lake jobs' role and the source check's
        assert not runs & {action for s in policy_statements(warm, role) for action in as_list(s["Action"])}
    # The warm role holds the lake jobs' policy too, as the repair job does.
    assert {"ReadJobAssets", "WriteWarehouseAndTemp", "LakeCatalog"} <= {
        s.get("Sid") for s in policy_statements(warm, glue.warm_role)
    }
    allowed = [s for role in (glue.warm_role, trigger.role) for s in policy_statements(warm, role)]
    for found in all_statements(warm):
        if runs & set(as_list(found["Action"])):
            assert found in allowed, found
        if WARM_MARKER_PREFIX in str(render(found["Resource"])):
            assert found.get("Sid") == "WriteStopMarkers" or (
                found in policy_statements(warm, trigger.role) and as_list(found["Action"]) == ["s3:GetObject"]
            ), found


def test_warm_runs_read_the_expiry_marks_but_delete_no_landed_file(warm: Synthesized) -> None:
    """A warm run applies a lake table's first batch too, so it reads the maintenance's mark of the table; like the
    replay jobs, it never deletes a landed file (only the maintenance job's role does) nor writes a mark."""
    raw = warm.logical_id(warm.stack.storage.raw)
    landed = f"${{{raw}.Arn}}/dms/shop/orders/20250301-110000000.csv"
    mark = f"${{{raw}.Arn}}/{EXPIRED_MARK_PREFIX}dms/shop/orders/expired.json"
    by_job = job_role_statements(warm)
    warm_role = by_job[WARM_JOB_NAME]
    assert allows(warm_role, "s3:GetObject", mark) and allows(warm_role, "s3:GetObject", landed)
    assert not allows(warm_role, "s3:PutObject", mark)
    assert sorted(job for job, found in by_job.items() if allows(found, "s3:DeleteObject", landed)) == [
        "cdclake-maintenance"
    ]


def test_lambda_gets_the_warm_job_and_may_start_it_and_read_the_stop_markers(warm: Synthesized) -> None:
    trigger, glue = warm.stack.trigger, warm.stack.glue
    assert glue.warm is not None
    function = warm.json["Resources"][warm.logical_id(trigger.function)]["Properties"]
    assert function["Environment"]["Variables"][ENV_WARM_JOB] == {"Ref": warm.logical_id(glue.warm)}
    starts = statement(warm, trigger.role, "StartWarmRuns")
    assert sorted(as_list(starts["Action"])) == ["glue:GetJobRuns", "glue:StartJobRun"]
    assert render(as_list(starts["Resource"])) == job_arns(warm, glue.warm)
    # One statement for both keys it reads (a run's stop marker, then its hold): a 403 means absent for both alike.
    reading = statement(warm, trigger.role, "ReadWarmRunMarkers")
    assert as_list(reading["Action"]) == ["s3:GetObject"]
    raw = warm.logical_id(warm.stack.storage.raw)
    assert render(as_list(reading["Resource"])) == [f"${{{raw}.Arn}}/{WARM_MARKER_PREFIX}*"]
    assert "Condition" not in reading
    # Nothing else of S3 (no listing), and the replay jobs only to start (a LOAD file's run), as per file.
    granted = [(a, s) for s in policy_statements(warm, trigger.role) for a in as_list(s["Action"])]
    assert [a for a, _s in granted if a.startswith("s3:")] == ["s3:GetObject"]
    (replay_starts,) = [s for a, s in granted if a == "glue:StartJobRun" and s.get("Sid") != "StartWarmRuns"]
    assert as_list(replay_starts["Action"]) == ["glue:StartJobRun"]
    assert sorted(render(as_list(replay_starts["Resource"]))) == job_arns(warm, glue.full_load, glue.cdc_replay)


def test_lambda_env_name_is_the_handlers() -> None:
    from dms_trigger.handler import WARM_JOB_ENV

    assert ENV_WARM_JOB == WARM_JOB_ENV


def test_failed_warm_runs_reach_the_failed_run_rule(warm: Synthesized) -> None:
    assert warm.stack.glue.warm is not None
    (rule,) = [
        r["Properties"]
        for r in resources_of_type(warm, "AWS::Events::Rule").values()
        if r["Properties"]["EventPattern"].get("source") == ["aws.glue"]
    ]
    assert {"Ref": warm.logical_id(warm.stack.glue.warm)} in rule["EventPattern"]["detail"]["jobName"]


def test_warm_template_passes_cdk_nag_and_cfn_lint(warm: Synthesized) -> None:
    annotations = Annotations.from_stack(warm.stack)
    assert annotations.find_error("*", Match.string_like_regexp("AwsSolutions-.*")) == []
    assert annotations.find_warning("*", Match.string_like_regexp("AwsSolutions-.*")) == []
    assert lint_findings(warm) == []


def test_a_deployed_warm_stack_loads_its_warm_job(warm: Synthesized) -> None:
    stack = DeployedStack.load(assembly_dir(warm))
    job = stack.job(WARM_JOB)
    assert (job.kind, job.name, job.command.name, job.worker_type) == (
        WARM_JOB,
        WARM_JOB_NAME,
        "gluestreaming",
        "G.025X",
    )
    assert job.max_concurrent_runs == 2 * SHARDS
    assert job.script_path.read_bytes() == (REPO_ROOT / "glue_jobs" / GLUE_JOBS[WARM_JOB].script).read_bytes()


# --- the shards' event queues ----------------------------------------------------------------------------------


def warm_queue_ids(synth: Synthesized) -> list[str]:
    """The event queues' logical ids, in shard order."""
    events = synth.stack.glue.warm_events
    assert events is not None
    assert [queue.node.id for queue in events.queues] == [f"WarmEvents{shard}" for shard in range(len(events.queues))]
    return [synth.logical_id(queue) for queue in events.queues]


def test_one_event_queue_per_shard_encrypted_tls_only_and_kept_a_day(warm: Synthesized) -> None:
    ids = warm_queue_ids(warm)
    assert len(ids) == SHARDS
    queues = resources_of_type(warm, "AWS::SQS::Queue")
    assert set(queues) == {*ids, warm.logical_id(warm.stack.trigger.failure_queue)}
    for logical_id in ids:
        # SQS-managed encryption (no KMS key to grant), no name (CloudFormation's), no dead-letter queue.
        assert queues[logical_id]["Properties"] == {"MessageRetentionPeriod": 24 * 3600, "SqsManagedSseEnabled": True}
        suppressed = queues[logical_id]["Metadata"]["cdk_nag"]["rules_to_suppress"]
        assert [rule["id"] for rule in suppressed] == ["AwsSolutions-SQS3"]
        assert "sweep" in suppressed[0]["reason"]
        (policy,) = [
            p["Properties"]
            for p in resources_of_type(warm, "AWS::SQS::QueuePolicy").values()
            if p["Properties"]["Queues"] == [{"Ref": logical_id}]
        ]
        assert policy["PolicyDocument"]["Statement"] == [
            {
                "Action": "sqs:*",
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                "Effect": "Deny",
                "Principal": {"AWS": "*"},
                "Resource": {"Fn::GetAtt": [logical_id, "Arn"]},
            }
        ]


def test_the_lambda_and_the_warm_job_get_the_queue_urls_in_shard_order(warm: Synthesized) -> None:
    glue, trigger = warm.stack.glue, warm.stack.trigger
    urls = {"Fn::Join": [",", [{"Ref": logical_id} for logical_id in warm_queue_ids(warm)]]}
    function = warm.json["Resources"][warm.logical_id(trigger.function)]["Properties"]
    assert function["Environment"]["Variables"][WARM_QUEUES_ENV] == urls
    assert job_properties(warm, glue.warm)["DefaultArguments"][WARM_QUEUES_ARGUMENT] == urls
    # The argument is one the warm script declares and reads.
    assert declared_flags(WarmArguments, {WARM_QUEUES_ARGUMENT.removeprefix("--"): "a,b"})


def test_the_lambda_may_only_send_to_the_queues_and_the_warm_role_only_receive_and_delete(warm: Synthesized) -> None:
    glue, trigger = warm.stack.glue, warm.stack.trigger
    arns = [{"Fn::GetAtt": [logical_id, "Arn"]} for logical_id in warm_queue_ids(warm)]
    send = statement(warm, trigger.role, "SendWarmEvents")
    assert (send["Action"], send["Resource"]) == ("sqs:SendMessage", arns)
    receive = statement(warm, glue.warm_role, "ReceiveWarmEvents")
    assert (sorted(as_list(receive["Action"])), receive["Resource"]) == (
        ["sqs:DeleteMessage", "sqs:ReceiveMessage"],
        arns,
    )
    assert "Condition" not in send and "Condition" not in receive
    # No other grant names them, and no SQS action is granted on any other resource or on a wildcard.
    for found in all_statements(warm):
        if any(arn in as_list(found["Resource"]) for arn in arns):
            assert found in (send, receive), found
        sqs_actions = [action for action in as_list(found["Action"]) if action.startswith("sqs:")]
        if sqs_actions and found not in (send, receive):
            assert found["Resource"] == {"Fn::GetAtt": [warm.logical_id(trigger.failure_queue), "Arn"]}, found
    # The lake jobs' role, which the warm role shares a policy with, gets none of it.
    assert "sqs:" not in str([s["Action"] for s in policy_statements(warm, glue.role)])


def test_provisioned_queues_carry_the_lambdas_hints_to_the_warm_run_on_a_local_endpoint(
    warm: Synthesized, monkeypatch: pytest.MonkeyPatch
) -> None:
    with local_aws_endpoint() as endpoint:
        for name, value in endpoint_environment(endpoint).items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("AWS_ENDPOINT_URL_SQS", raising=False)
        stack = DeployedStack.load(assembly_dir(warm))  # on the endpoint of the environment, as aws_replay loads it
        provision(stack)
        provision(stack)  # idempotent

        lambda_urls = stack.lambda_function.environment[WARM_QUEUES_ENV].split(",")
        assert lambda_urls == list(stack.warm_queues) == stack.job_arguments(WARM_JOB)[WARM_QUEUES_ARGUMENT].split(",")
        assert len(lambda_urls) == SHARDS
        sqs = boto3.client("sqs")
        assert set(lambda_urls) <= set(sqs.list_queues()["QueueUrls"])
        served_requests(endpoint, reset=True)
        for shard, url in enumerate(lambda_urls):
            assert url.startswith(f"{endpoint}/{stack.account}/")
            attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
            assert (attributes["MessageRetentionPeriod"], attributes["SqsManagedSseEnabled"]) == ("86400", "true")
            sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "0", "MessageBody": f"shard {shard}"}])
        for shard, url in enumerate(lambda_urls):
            (message,) = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
            assert message["Body"] == f"shard {shard}"
            entries = [{"Id": "0", "ReceiptHandle": message["ReceiptHandle"]}]
            assert not sqs.delete_message_batch(QueueUrl=url, Entries=entries).get("Failed")
        served = served_requests(endpoint)
        assert (served["sqs:SendMessageBatch"], served["sqs:ReceiveMessage"]) == (SHARDS, SHARDS)


# --- other modes ---------------------------------------------------------------------------------------------


def test_no_warm_job_outside_warm_mode(demo: Synthesized, demo_stack: DeployedStack) -> None:
    assert demo.config.runs.mode != "warm"
    assert demo.stack.glue.warm is None and demo.stack.glue.warm_role is None
    assert WARM_JOB_NAME not in jobs_by_name(demo)
    assert not [job for job in resources_of_type(demo, "AWS::Glue::Job").values() if "MaintenanceWindow" in job]
    function = demo.json["Resources"][demo.logical_id(demo.stack.trigger.function)]["Properties"]
    assert ENV_WARM_JOB not in function["Environment"]["Variables"]
    assert WARM_MARKER_PREFIX not in str(all_statements(demo))
    assert "CdcWarmJobName" not in demo.json["Outputs"]
    assert WARM_JOB not in demo_stack.jobs  # and the deployed stack loads without one
    # No event queues: the trigger's on-failure queue is its only one, and nothing names queues to tell.
    assert demo.stack.glue.warm_events is None
    assert list(resources_of_type(demo, "AWS::SQS::Queue")) == [demo.logical_id(demo.stack.trigger.failure_queue)]
    assert WARM_QUEUES_ENV not in function["Environment"]["Variables"]
    assert not [job for job in jobs_by_name(demo).values() if WARM_QUEUES_ARGUMENT in job["DefaultArguments"]]
    assert demo_stack.warm_queues == ()


# --- Flex --------------------------------------------------------------------------------------------------------


def test_the_jobs_nobody_waits_for_run_flex_without_queuing(demo: Synthesized) -> None:
    flex = {f"cdclake-{name}" for job in FLEX_JOBS for name in GLUE_JOBS[job].resource_names}
    assert flex == {"cdclake-maintenance", "cdclake-drift", "cdclake-repair", "cdclake-source-check"}
    for name, props in jobs_by_name(demo).items():
        if name in flex:
            assert (props["ExecutionClass"], props["Command"]["Name"], props["WorkerType"]) == (
                "FLEX",
                "glueetl",
                "G.1X",
            )
            assert props["JobRunQueuingEnabled"] is False  # Flex runs are not queued
            assert props["ExecutionProperty"] == {"MaxConcurrentRuns": 1}
        else:  # the replay jobs: the lake's freshness waits for them, and the Lambda's starts queue
            assert "ExecutionClass" not in props
            assert props["JobRunQueuingEnabled"] is True
