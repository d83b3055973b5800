"""A small batch read, checked and reduced in the driver (``engine.driver_batch``) against Spark's read of it.

The driver takes a batch only where Spark would take the same values: every value it parses, Spark's cast parses to
the same value (checked here against Spark for every form the patterns admit, and the forms beside them); every
damaged batch of the corpus (tests/functional/damage.py) is refused through both with the same words, and every
other ends the same. Tables equal to the MERGE's: ``test_write_paths_agree``.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from cdc_lake.engine import driver_batch, steps
from cdc_lake.engine.spark_types import select_sql, staged_parse
from tests.functional.damage import BASE, LOAD, Writer, tables
from tests.functional.test_bad_input import corpus_config, lake_name, lake_rows, land, run
from tests.support.lake import Lake

pytestmark = pytest.mark.spark

TYPES = ["boolean", "tinyint", "smallint", "int", "bigint", "float", "double", "date", "timestamp", "timestamp_ltz"]
TYPES += ["timestamp_offset", "decimal(6,2)", "decimal(38,10)", "decimal(18,0)"]
_PATTERNS = {
    "boolean": r"(true|false|t|f|1|0|TRUE|yes|n)",
    "double": r"[+-]?[0-9]{1,20}(\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?",
    "float": r"[+-]?[0-9]{1,12}(\.[0-9]{1,12})?([eE][+-]?[0-9]{1,2})?",
    "date": r"[0-9]{4}-[0-9]{2}-[0-9]{2}",
    "timestamp": r"[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,7})?",
}
_NUMBER = r"-?[0-9]{1,40}(\.[0-9]{1,12})?"
_NEAR = st.text(alphabet="0123456789-+.eE :Tt f", max_size=14)
_EDGES = [
    "-0", "00", "+1", " 1", "1 ", "1.", ".5", "1.0", "127", "128", "-128", "-129", "32768", "2147483648",
    "9223372036854775807", "9223372036854775808", "-9223372036854775808", "1e400", "-0.0", "1.005", "9999.99",
    "10000.00", "0.001", "2024-02-29", "2023-02-29", "2024-01-01 24:00:00", "0000-01-01", "2024-01-01T10:00:00",
    "2024-01-01 10:00:00.1234567", "1970-01-01 00:00:00.000001", "T", "t", "", "NaN", "Infinity",
]  # fmt: skip


def _moment(moment: dt.datetime, separator: str, digits: int) -> str:
    text = moment.isoformat(sep=separator, timespec="microseconds")
    return text[: len(text) - 6 + digits] if digits else text[:-7]


def _instant(moment: str, zone: str) -> str:
    return moment + zone


_MOMENTS = st.builds(_moment, st.datetimes(), st.sampled_from(" T"), st.integers(0, 6))
_ZONES = st.sampled_from(["Z", "+00", "-05", "+05:30", "+0530", "+14:00", "-12:45", "+19", "", " +01", "+1"])
_CANONICAL = {
    "date": st.dates().map(dt.date.isoformat),
    "timestamp": _MOMENTS,
    "timestamp_ltz": st.builds(_instant, _MOMENTS, _ZONES),
    "timestamp_offset": st.builds(_instant, _MOMENTS, _ZONES),
    "float": st.floats(width=32, allow_nan=False, allow_infinity=False).map(lambda f: f"{f:+.8e}"),
    "double": st.floats(allow_nan=False, allow_infinity=False).map(lambda f: f"{f:+.16e}"),  # as DMS writes them
}


def _texts(column_type: str) -> st.SearchStrategy[list[str]]:
    pattern = st.from_regex(re.compile(_PATTERNS.get(column_type, _NUMBER)), fullmatch=True)
    canonical = _CANONICAL.get(column_type, pattern)
    return st.lists(st.one_of(canonical, canonical, pattern, _NEAR), min_size=150, max_size=250)


def _shown(column_type: str, value: Any) -> Any:
    """A parsed date or time as Spark's text of it; dates and times are compared as text, for Spark parses years
    Python's datetime cannot hold (0000, 10000)."""
    if column_type == "date":
        return value.isoformat()
    if column_type == "timestamp":
        text = value.isoformat(sep=" ")
        return text.rstrip("0") if "." in text else text
    return value


def _spark_parsed(spark: SparkSession, column_type: str, texts: list[str]) -> list[tuple[Any, bool]]:
    frame = spark.createDataFrame([(t,) for t in texts], T.StructType([T.StructField("v", T.StringType())]))
    casts, value, fault = staged_parse("v", column_type, "_p")
    shown = f"CAST({value} AS STRING)" if column_type in ("date", "timestamp") else value
    shown = f"unix_micros({value})" if column_type == "timestamp_ltz" else shown
    parsed = select_sql(select_sql(frame, ["v", *casts]), [f"{shown} AS value", f"{fault} AS fault"])
    return [(row["value"], row["fault"]) for row in parsed.collect()]


@pytest.mark.each_runtime  # Spark's casts are the runtime's
@pytest.mark.parametrize("column_type", TYPES)
def test_what_the_driver_parses_spark_parses_alike(spark: SparkSession, column_type: str) -> None:
    parse = driver_batch.parser_of(column_type)
    assert parse is not None
    accepted: list[int] = []

    @settings(
        max_examples=3,
        deadline=None,
        phases=[Phase.generate],  # a Spark job an example: no shrinking
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )
    @given(_texts(column_type))
    def agrees(texts: list[str]) -> None:
        texts = [*texts, *_EDGES]
        wrong = []
        for text, (value, fault) in zip(texts, _spark_parsed(spark, column_type, texts), strict=True):
            try:
                mine = parse(text)
            except driver_batch._NotCanonical:
                continue  # Spark's to judge
            accepted.append(1)
            mine = _shown(column_type, mine)
            if fault or value != mine or type(value) is not type(mine):
                wrong.append(f"{text!r}: driver {mine!r}, Spark {value!r} (fault {fault})")
        assert not wrong, f"{column_type}: " + "; ".join(wrong[:10])

    agrees()
    assert len(accepted) >= 100, f"{column_type}: the driver parsed only {len(accepted)} texts"


def _damaged_run(lake: Lake, fmt: Any) -> tuple[dict[str, str], list[str], dict[str, Any]]:
    """The corpus's damaged run on ``lake``, every kind a table of its own (a bad row alone in its file, so that
    each is judged by the driver, not only a group's first): each refused table's message, every notice, each
    table's rows."""
    writer, corpus = Writer(fmt), tables(fmt, grouped=False)
    configured = corpus_config(fmt, corpus)
    for table in corpus:
        if table.damage.load:
            prior = table.damage.prior(writer) if table.damage.prior else {}
            land(lake, table, {writer.name(LOAD): writer.write(BASE)} | prior)
    assert not run(lake, configured).failures
    for table in corpus:
        land(lake, table, table.files(writer))
    damaged = run(lake, configured)

    def same(text: str) -> str:
        return text.replace(lake.database, "<database>")

    failures = {t: same(str(message)) for t, message in damaged.failures.items()}
    notices = sorted(same(str(n)) for n in damaged.notices)
    rows = {t.table: lake_rows(lake, t) for t in corpus if lake.head(lake_name(t)) is not None}
    return failures, notices, rows


# Two runs of the whole corpus, every kind a table of its own, on the Hadoop path: 55 s alone (2026-12-03).
@pytest.mark.budget(150)
def test_the_driver_and_spark_refuse_the_damaged_corpus_alike(
    spark: SparkSession, database: str, tmp_path: Path, aws_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken: list[bool] = []
    real = steps.driver_changes

    def counted(*args: Any) -> Any:
        changes = real(*args)
        taken.append(changes is not None)
        return changes

    monkeypatch.setattr(steps, "driver_changes", counted)
    outcomes = {}
    for path in ("driver", "spark"):
        if path == "spark":
            monkeypatch.setattr(driver_batch, "DRIVER_BATCH_BYTES", -1)  # no batch is small enough: Spark reads all
        landing = tmp_path / path
        landing.mkdir()
        outcomes[path] = _damaged_run(Lake("hadoop", spark, f"{database}_{path}", landing, aws_endpoint), "csv")
        if path == "driver":
            assert any(taken) and not all(taken), f"the driver took {sum(taken)} of {len(taken)} batches"
    driver, spark_read = outcomes["driver"], outcomes["spark"]
    assert driver[0], "the corpus refused nothing"
    for table in sorted(driver[0].keys() | spark_read[0].keys()):
        assert driver[0].get(table) == spark_read[0].get(table), table
    assert driver[1] == spark_read[1]
    assert driver[2] == spark_read[2]
