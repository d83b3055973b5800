"""The Glue job's catalog settings, their one ``--conf`` form, and the endpoint settings a local run adds."""

from __future__ import annotations

import pytest

from cdc_lake.core.catalogs import endpoint_conf, glue_catalog_conf, glue_catalogs, parse_conf, render_conf
from cdc_lake.core.exceptions import CdcLakeError
from cdc_lake.core.names import GLUE_VERSION
from cdc_lake.local.jars import GLUE_RUNTIMES, runtime

WAREHOUSE = "s3://lake-bucket/warehouse/"


def test_conf_round_trips_through_the_single_job_argument() -> None:
    settings = glue_catalog_conf(WAREHOUSE)
    rendered = render_conf(settings)
    assert rendered.count(" --conf ") == len(settings) - 1
    assert parse_conf(rendered) == settings
    assert settings["spark.sql.catalog.glue_catalog.catalog-impl"] == "org.apache.iceberg.aws.glue.GlueCatalog"
    assert settings["spark.sql.catalog.glue_catalog.io-impl"] == "cdclake.iceberg.WrittenMetadataFileIO"


def test_conf_values_keep_their_equals_signs_and_tolerate_spacing() -> None:
    assert parse_conf("a.b=1 --conf c=x=y --conf  d=") == {"a.b": "1", "c": "x=y", "d": ""}


def test_a_setting_without_a_value_is_refused() -> None:
    with pytest.raises(ValueError, match="not key=value"):
        parse_conf("spark.sql.session.timeZone=UTC --conf spark.sql.extensions")


def test_endpoint_settings_reach_only_the_glue_catalogs() -> None:
    settings = {
        **glue_catalog_conf(WAREHOUSE, "first"),
        **glue_catalog_conf(WAREHOUSE, "second"),
        "spark.sql.catalog.lake.type": "hadoop",
    }
    assert sorted(glue_catalogs(settings)) == ["first", "second"]
    added = endpoint_conf("http://127.0.0.1:5000", glue_catalogs(settings))
    assert added["spark.sql.catalog.first.glue.endpoint"] == "http://127.0.0.1:5000"
    assert added["spark.sql.catalog.second.s3.endpoint"] == "http://127.0.0.1:5000"
    assert added["spark.sql.catalog.second.s3.path-style-access"] == "true"
    assert not [key for key in added if ".lake." in key]


def test_the_stack_glue_version_has_one_pinned_jar_set() -> None:
    jars = runtime(GLUE_VERSION).jars
    assert {(j.artifact, j.version) for j in jars} >= {
        ("iceberg-spark-runtime-3.5_2.12", "1.10.0"),
        ("iceberg-aws-bundle", "1.10.0"),
    }
    assert all(len(j.sha256) == 64 for j in jars)
    with pytest.raises(CdcLakeError, match="no local runtime"):
        runtime("0.9")
    assert set(GLUE_RUNTIMES) >= {GLUE_VERSION}
