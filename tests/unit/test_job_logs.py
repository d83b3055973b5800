"""The Glue jobs log one JSON shape with the trigger Lambda's keys; under the CLI they leave its plain lines alone."""

from __future__ import annotations

import io
import json
import logging

import pytest
from aws_lambda_powertools import Logger

from cdc_lake.jobs.logs import JOBS_SERVICE_NAME, JsonFormatter, run_context, structure_job_logs

ARGV = ["full_load.py", "--JOB_NAME", "cdclake-full-load", "--JOB_RUN_ID", "jr_1", "--key", "dms/shop/orders/LOAD1.csv"]


def job_line(record_logger: logging.Logger, **extra: object) -> dict[str, object]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter(run_context("full_load", ARGV)))
    record_logger.addHandler(handler)
    try:
        record_logger.warning("applied %d file(s)", 3, extra=extra)
    finally:
        record_logger.removeHandler(handler)
    return json.loads(stream.getvalue())


def test_a_jobs_line_has_every_key_the_lambdas_logger_writes() -> None:
    stream = io.StringIO()
    # A service of its own: Powertools keeps one logger per service, and the Lambda module may have made its own.
    lambda_logger = Logger(service="cdc-lake-trigger-shape", logger_handler=logging.StreamHandler(stream))
    lambda_logger.warning("started", extra={"job": "full_load", "run_id": "jr_1", "table": "shop.orders"})
    lambda_line = json.loads(stream.getvalue())

    line = job_line(logging.getLogger("cdc_lake.jobs.test"), table="shop.orders", batch={"files": 3})
    assert set(lambda_line) <= set(line)
    assert line["message"] == "applied 3 file(s)"
    assert (line["level"], line["service"]) == ("WARNING", JOBS_SERVICE_NAME)
    assert (line["job"], line["job_name"], line["run_id"]) == ("full_load", "cdclake-full-load", "jr_1")
    assert (line["table"], line["batch"]) == ("shop.orders", {"files": 3})
    assert str(line["location"]).startswith("job_line:")
    assert len(str(line["timestamp"])) == len(str(lambda_line["timestamp"]))


def test_a_failure_carries_its_exception_as_powertools_writes_it() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter({"job": "drift"}))
    failing = logging.getLogger("cdc_lake.jobs.test.failing")
    failing.addHandler(handler)
    try:
        raise ValueError("bad key")
    except ValueError:
        failing.exception("run failed")
    finally:
        failing.removeHandler(handler)
    line = json.loads(stream.getvalue())
    assert line["exception_name"] == "ValueError"
    assert "bad key" in str(line["exception"])


def test_the_run_is_named_by_what_glue_hands_the_script() -> None:
    assert run_context("maintenance", ARGV) == {"job": "maintenance", "job_name": "cdclake-full-load", "run_id": "jr_1"}
    assert run_context("maintenance", ["maintenance.py", "--action", "all"]) == {"job": "maintenance"}


@pytest.fixture
def bare_root() -> logging.Logger:
    return logging.Logger("root", logging.WARNING)  # a root logger no one set up yet


def test_on_glue_every_line_is_json(bare_root: logging.Logger) -> None:
    structure_job_logs("cdc_replay", ARGV, bare_root)
    [handler] = bare_root.handlers
    assert isinstance(handler.formatter, JsonFormatter)
    assert handler.formatter.context["job"] == "cdc_replay"
    assert bare_root.level == logging.INFO


def test_under_the_cli_the_lines_stay_plain(bare_root: logging.Logger) -> None:
    plain = logging.StreamHandler(io.StringIO())
    plain.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    bare_root.addHandler(plain)
    structure_job_logs("cdc_replay", ARGV, bare_root)
    assert bare_root.handlers == [plain]
    assert not isinstance(plain.formatter, JsonFormatter)
