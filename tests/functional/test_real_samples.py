"""Real AWS DMS output replayed end to end: every sample in ``../shared/dms-samples`` (or
``$CDC_LAKE_DMS_SAMPLES``) lands in a temporary folder, the local pipeline (the Lambda's routing and the Glue
jobs, ``LocalPipeline``) replays it with the sample's configuration from ``tests/samples/``, and the lake
table must equal the table the sample's documented source says the database ended with. Every sample runs on
both lake paths (``on_both_paths``): the Hadoop catalog reading the landing folder, and the Glue Data Catalog
with S3FileIO on the local AWS endpoint reading a bucket the landing folder is copied to, as deployed. The
Oracle samples also go through ``cdc-lake aws-replay`` (the deployed stack on a local endpoint, each Glue run in
its own process) and are read back by pyiceberg, against the same expected tables.

How each expected table is derived (never by replaying Ops: that would share the engine's assumptions):

* ``brabster_pg_northwind_orders`` — LOAD00000001.csv parsed with the csv module into typed rows (the
  northwind orders 10248–11077; spot-checked against pthom/northwind_psql northwind.sql, which the author's
  blog links as the source database: 10248 VINET freight 32.3800011, 11077 RATTC not shipped). Then the statements the
  author ran, applied by hand, from brabster/northwind_dms_cdc ``transactions/`` (order_19998_*, order_19999_*,
  order_20001_rollback, order_20002_simulate_queuing, order_30100 at 9bb4045, order_30101, order_30102) and from
  brabster/tw-site-mkdocs ``cdc-txns.sql`` (bd313b7) and its draft post "Latest state from change data
  capture" (2024-06-08-cdc-4-timeline: orders 20000, 29999–30005), run on 2024-06-12 so CURRENT_DATE =
  2024-06-12; ``INTERVAL '10'`` without a unit is 10 seconds, so 30001's first required_date is that same day.
  19998, 19999, 20000, 30002 end deleted; 20001 and 30003 were rolled back. The draft's final "cleanup" block
  (DELETE … >= 30000) is not in the captured files, so it was not run.
* ``brabster_pg_northwind_order_details`` — LOAD parsed likewise; then the order_details statements of the same
  scripts. One change has no published statement: ``U (30001, 66)`` at 10:34:55, 12 s after 30001's script
  transaction; we take it as ``UPDATE order_details SET product_id = 66 WHERE order_id = 30001`` run by hand
  (the draft does exactly that for 30002). Without before-image columns an UPDATE of product_id reaches S3
  as ``U`` with only the new key, so a key-based replay keeps the old row: the lake holds eight ghost rows
  beyond the source table. The test asserts the source table plus exactly those ghosts, and says so.
  The post "Breaking CDC With Primary Keys" (tw-site-mkdocs, 2024-06-12) states 30004's final rows: 66, 77, 3.
* ``brabster_pg_pk_change_before_image`` — only the scripts of commit 482c74a (order_30010_*, order_30014_*,
  order_30015_*, order_30017_*), run on 2024-07-05 (CURRENT_DATE - 40 = 2024-05-26, - 3 = 2024-07-02); the
  sample has no LOAD file, so the source tables are exactly the rows those scripts left: orders 30010, 30014,
  30016 (was 30015), 30020 (was 30017 → 30018 → 30019); order_details (30010, 77), (30014, 66), (30014, 3),
  (30014, 77). With ``before_<key>`` columns the lake must equal them: no ghosts.
* ``m55hr_mysql_classicmodels_customers`` — LOAD parsed with the csv module (122 customers of the public
  MySQL classicmodels sample; spot-checked against mysqlsampledatabase.sql: 103's "Carine " with its trailing
  blank and NULL addressLine2/state, 114's quoted comma, 125's NULL salesRepEmployeeNumber, 496's "Auckland  ").
  The repository publishes no statements for customer 497; MySQL (binlog_row_image=FULL) logs full rows, so
  the CDC file itself reads as INSERT 497 (Mitesh/Valarie), UPDATE contactLastName='Ruffy', DELETE 497,
  INSERT 497 (Mitesh/Ravatka): the last INSERT's row is written out below as the expected 497.
* ``m55hr_mysql_sales_orders_notebook`` — dump.sql's four rows, then ``table updates.txt``'s statements by
  hand; equal to the final table glue-interactive.ipynb prints (rows 1–5, 2 = bachu/shoes, 5 = dadu).
* ``dhawalkp_oracle_hr_employees`` — LOAD parsed with its header (Oracle's HR sample employees 100–206 plus
  the author's generated copies "William<n> Gietz" of employee 206; spot-checked: 100 Steven King 24000.00 with
  NULL commission and manager, 178 Kimberely Grant with NULL department). The repository publishes no SQL;
  its README shows 321 as "William115 Gietzupd2": an UPDATE set LAST_NAME = 'Gietzupd2' on 321 and 2311–2326.
  Rows 2311–2326 were inserted after the LOAD was taken (the LOAD and CDC files come from different commits),
  so their U after-images are the only images: they are in the source table and in the expected one.
* ``qiushiyan_mysql_cdc_users`` — the task had no BucketFolder: the keys land at the bucket's root
  (``cdc/users/…``, as the repository's downloader strips them) and the configuration's ``bucket_folder`` is
  empty. LOAD parsed with the csv module: sql/create_db.sql's rows 0–100, except what the author changed before
  the full load without publishing it (7, 8, 9 changed, 10 deleted, 130–132 inserted; the README's first table
  shows 7–9 so). Then sql/update_test.sql by hand; its ``DELETE … user_id = 10`` found no row, so no D was
  captured. Then 136–139, inserted by hand (one CDC file each in 6d8a649, no script), written out below. The
  result equals the author's own final table, data/output at 463a9d7: the test compares the SHA-256 of the
  expected rows written as that output's lines.
* ``wuzerun_oracle_escmowner_bom_hd`` — one gzip CDC file and nothing else of the source table, so the expected
  table is the rows the file names, derived from the file read with the gzip and csv modules: every record is
  an after-image (I or U, no D) and every image of one BOM_NO is identical (asserted), so a key's row is its one
  image whatever the records' order, and U rows of keys never inserted simply give their row (upserts). Three
  rows are also written out as explicit Python data.
* ``segmentio_pg_parquet_full_load`` — a full load only: the expected rows are the file's rows read with
  pyarrow (a reader independent of Spark), and two rows are also written out as explicit Python data.

None of the CSV samples holds a quoted "" (an empty string), so "" vs NULL is checked on the Parquet sample
(empty strings stay "") and NULL (an empty unquoted CSV field) on every CSV sample (None).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import sys
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from cdc_lake.core.config import PipelineConfig, TableSpec, load_config
from cdc_lake.core.names import GLUE_CATALOG
from cdc_lake.engine.tables import LakeLocation
from cdc_lake.local.aws_endpoint import local_aws_endpoint
from cdc_lake.local.runtime import LocalPipeline, failed_runs
from tests.support.cli import aws_replay, aws_replay_environment
from tests.support.dms_samples import (
    SAMPLE_CONFIGS,
    Row,
    csv_records,
    describe_differences,
    land_sample,
    real,
    same_rows,
    sample_file,
    typed_row,
)
from tests.support.lake import Lake, on_both_paths
from tests.support.source_tables import glue_reader

pytestmark = pytest.mark.spark

UTC = dt.UTC


def replay_sample(lake: Lake, sample: str) -> PipelineConfig:
    """Land the sample and let the local pipeline apply every file on the lake's path; every run must succeed."""
    config = load_config(SAMPLE_CONFIGS / f"{sample}.yaml")
    keys = land_sample(sample, lake.landing, config.dms.bucket_folder)
    pipeline = LocalPipeline(
        config, lake.landing, lake.spark, database=lake.database, catalog=lake.catalog, store=lake.store()
    )
    runs = pipeline.run_all()
    failed = failed_runs(runs)
    assert not failed, "\n".join(f"{run.job} {run.arguments}: {run.error}" for run in failed)
    applied = sorted(key for run in runs if run.result for key in run.result.applied_files)
    assert applied == sorted(keys), "every landed file is applied exactly once"
    return config


def lake_table(lake: Lake, config: PipelineConfig, name: str) -> dict[Any, Row]:
    """The lake table, read through the lake's catalog, as {key: row}; a single-column key is the bare value, a
    composite one a tuple, each row named by the source's column names."""
    table = config.table(name)
    frame = lake.spark.table(lake.table(table.lake_table))
    # The lake's names are the configuration's mapping of the source's; rows are compared by the source's.
    assert frame.columns == table.column_names
    rows: dict[Any, Row] = {}
    for record in frame.collect():
        row = {spec.source: _python_value(record[i], spec.type) for i, spec in enumerate(table.columns)}
        key = _key(table, row)
        assert key not in rows, f"{name}: key {key!r} twice in the lake"
        rows[key] = row
    return rows


def _python_value(value: Any, column_type: str) -> Any:
    if isinstance(value, bytearray):
        return bytes(value)
    if column_type == "timestamp_ltz" and isinstance(value, dt.datetime):
        # PySpark hands out an instant as a naive local datetime; compare instants in UTC.
        return value.astimezone(UTC)
    return value


def _key(table: TableSpec, row: Row) -> Any:
    key = tuple(row[k] for k in table.source_primary_key)
    return key[0] if len(key) == 1 else key


def assert_table(actual: dict[Any, Row], expected: dict[Any, Row]) -> None:
    assert same_rows(actual, expected), describe_differences(actual, expected)


def keyed(table: TableSpec, rows: list[Row]) -> dict[Any, Row]:
    result: dict[Any, Row] = {}
    for row in rows:
        key = _key(table, row)
        assert key not in result, f"key {key!r} twice in the expected rows"
        result[key] = row
    return result


# --- brabster/northwind_dms_cdc: PostgreSQL ------------------------------------------------------------

ORDERS = "brabster_pg_northwind_orders"
ORDER_DETAILS = "brabster_pg_northwind_order_details"
BEFORE_IMAGE = "brabster_pg_pk_change_before_image"
ORDERS_PREFIX = "dms/public/orders/"
DETAILS_PREFIX = "dms/public/order_details/"

ORDERS_TYPES: list[tuple[str, Callable[[str], Any]]] = [
    ("order_id", int), ("customer_id", str), ("employee_id", int), ("order_date", dt.date.fromisoformat),
    ("required_date", dt.date.fromisoformat), ("shipped_date", dt.date.fromisoformat), ("ship_via", int),
    ("freight", real), ("ship_name", str), ("ship_address", str), ("ship_city", str), ("ship_region", str),
    ("ship_postal_code", str), ("ship_country", str),
]  # fmt: skip
DETAILS_TYPES: list[tuple[str, Callable[[str], Any]]] = [
    ("order_id", int), ("product_id", int), ("unit_price", real), ("quantity", int), ("discount", real),
]  # fmt: skip


def pg_load_rows(sample: str, relative: str, types: list[tuple[str, Callable[[str], Any]]]) -> list[Row]:
    """LOAD rows of the brabster task: Op (I, IncludeOpForFullLoad), commit timestamp, the columns, and an
    empty transaction_sequence_number."""
    _, records = csv_records(sample_file(sample, relative))
    rows = []
    for record in records:
        assert record[0] == "I" and record[-1] is None, record
        rows.append(typed_row([n for n, _ in types], [t for _, t in types], record[2:-1]))
    return rows


def vinet_order(order_id: int, order_date: str, required_date: str, shipped_date: str | None, **changes: Any) -> Row:
    """A row of the scripts' ``INSERT INTO orders VALUES(<id>, 'VINET', 5, …, 3, 32.3800011, 'Vins et alcools
    Chevalier', '59 rue de l''Abbaye', 'Reims', NULL, '51100', 'France')``, with the later UPDATEs' values."""
    row: Row = {
        "order_id": order_id,
        "customer_id": "VINET",
        "employee_id": 5,
        "order_date": dt.date.fromisoformat(order_date),
        "required_date": dt.date.fromisoformat(required_date),
        "shipped_date": dt.date.fromisoformat(shipped_date) if shipped_date else None,
        "ship_via": 3,
        "freight": real("32.3800011"),
        "ship_name": "Vins et alcools Chevalier",
        "ship_address": "59 rue de l'Abbaye",
        "ship_city": "Reims",
        "ship_region": None,
        "ship_postal_code": "51100",
        "ship_country": "France",
    }
    row.update(changes)
    return row


def detail(order_id: int, product_id: int, quantity: int) -> Row:
    """``INSERT INTO order_details VALUES(<id>, <product>, 11, 12, 0)`` with quantity as the UPDATEs left it."""
    return {"order_id": order_id, "product_id": product_id, "unit_price": real("11"), "quantity": quantity,
            "discount": real("0")}  # fmt: skip


def expected_northwind_orders(table: TableSpec) -> dict[Any, Row]:
    expected = keyed(table, pg_load_rows(ORDERS, ORDERS_PREFIX + "LOAD00000001.csv", ORDERS_TYPES))
    assert len(expected) == 830 and min(expected) == 10248 and max(expected) == 11077
    # Spot checks against the northwind data itself (northwind.sql's orders rows).
    assert expected[10248] == vinet_order(10248, "1996-07-04", "1996-08-01", "1996-07-16")
    assert expected[11077]["customer_id"] == "RATTC" and expected[11077]["shipped_date"] is None
    assert expected[11077]["freight"] == real("8.52999973")
    # 2024-06-12, transactions/ and cdc-txns.sql, in the order they ran:
    # 19998: INSERT; UPDATE shipped_date; DELETE (separate transactions) -> gone.
    # 19999: INSERT; UPDATE; DELETE in one transaction -> gone.
    # 20000: INSERT; UPDATE ship_address = '58 rue de l''Abbaye'; DELETE -> gone.  20001: ROLLBACK -> never there.
    # 20002: INSERT (1996-07-04, required 1996-07-05, shipped 1996-08-02); required 1996-09-01; 1996-08-25;
    #        ship_address '60 rue…'; shipped 1996-08-01; COMMIT; then required 1996-07-10.
    expected[20002] = vinet_order(20002, "1996-07-04", "1996-07-10", "1996-08-01", ship_address="60 rue de l'Abbaye")
    # 29999: INSERT (CURRENT_DATE-40, -3, -12); ship_address '59…' (same); required -2 day; ship_address '60…';
    #        required -1 day.
    expected[29999] = vinet_order(29999, "2024-05-03", "2024-06-11", "2024-05-31", ship_address="60 rue de l'Abbaye")
    # 30000: INSERT (CURRENT_DATE-40, -3, -12) with its order_details.
    expected[30000] = vinet_order(30000, "2024-05-03", "2024-06-09", "2024-05-31")
    # 30001: INSERT (CURRENT_DATE-10, CURRENT_DATE + INTERVAL '10' = + 10 seconds, NULL);
    #        required CURRENT_DATE + 5 day; shipped CURRENT_DATE.
    expected[30001] = vinet_order(30001, "2024-06-02", "2024-06-17", "2024-06-12")
    # 30002: INSERT, later DELETE -> gone.  30003: ROLLBACK -> never there.
    # 30004, 30005: INSERT (CURRENT_DATE-40, -3, NULL); only their order_details change afterwards.
    expected[30004] = vinet_order(30004, "2024-05-03", "2024-06-09", None)
    expected[30005] = vinet_order(30005, "2024-05-03", "2024-06-09", None)
    # 2024-06-28, second replication run: order_30100 (9bb4045), order_30101, order_30102.
    # 30100: INSERT (1996-07-04, 1996-07-05, NULL); required 1996-08-25; shipped 1996-08-01; employee_id 4.
    expected[30100] = vinet_order(30100, "1996-07-04", "1996-08-25", "1996-08-01", employee_id=4)
    # 30101: INSERT; required 1996-08-25; required 1996-07-20; shipped 1996-08-01; shipped 1996-08-02.
    expected[30101] = vinet_order(30101, "1996-07-04", "1996-07-20", "1996-08-02")
    # 30102: INSERT; shipped 1996-08-01; required 1996-08-25; employee_id 4.
    expected[30102] = vinet_order(30102, "1996-07-04", "1996-08-25", "1996-08-01", employee_id=4)
    return expected


@on_both_paths
def test_brabster_orders_equal_the_source_table(lake: Lake) -> None:
    # Input facts: PostgreSQL with the default REPLICA IDENTITY logs only the key of a deleted row.
    _, records = csv_records(sample_file(ORDERS, ORDERS_PREFIX + "20240612-103125108.csv"))
    deletes = [r for r in records if r[0] == "D"]
    assert [r[2] for r in deletes] == ["19998", "19999", "20000"]
    for record in deletes:
        assert record[1] is not None and record[-1] is not None  # commit timestamp and sequence are there
        assert record[3:-1] == [None] * 13, record  # every non-key column is empty
    config = replay_sample(lake, ORDERS)
    expected = expected_northwind_orders(config.table("public.orders"))
    actual = lake_table(lake, config, "public.orders")
    assert_table(actual, expected)
    # A key-only D deletes the whole row; rolled-back inserts never show up.
    for gone in (19998, 19999, 20000, 20001, 30002, 30003):
        assert gone not in actual
    # NULL is an empty unquoted field: ship_region of 10248, shipped_date of 11077 are None, never "".
    assert actual[10248]["ship_region"] is None and actual[11077]["shipped_date"] is None
    # REAL written as +3.23800011e+01 comes back as the same single-precision value.
    assert actual[10248]["freight"] == real("32.3800011")


DETAIL_GHOSTS = {
    # UPDATE … SET product_id = 77 (from 1) of 20000, then DELETE of (20000, 77): the old key stays.
    (20000, 1): detail(20000, 1, 1),
    # 30000: product 1 -> 77.
    (30000, 1): detail(30000, 1, 1),
    # 30001: product 1 -> 77 -> 66.
    (30001, 1): detail(30001, 1, 1),
    (30001, 77): detail(30001, 77, 1),
    # 30002: product 1 -> 77 -> 66, then DELETE of (30002, 66).
    (30002, 1): detail(30002, 1, 1),
    (30002, 77): detail(30002, 77, 1),
    # 30004: product 1 -> 66 and 2 -> 77.
    (30004, 1): detail(30004, 1, 12),
    (30004, 2): detail(30004, 2, 12),
}


def expected_order_details(table: TableSpec) -> dict[Any, Row]:
    """The source table order_details after the scripts (no ghosts)."""
    expected = keyed(table, pg_load_rows(ORDER_DETAILS, DETAILS_PREFIX + "LOAD00000001.csv", DETAILS_TYPES))
    assert len(expected) == 2155
    assert expected[(10248, 11)] == {"order_id": 10248, "product_id": 11, "unit_price": real("14"), "quantity": 12,
                                     "discount": real("0")}  # fmt: skip
    assert expected[(10248, 42)]["unit_price"] == real("9.80000019")  # northwind.sql: (10248, 42, 9.80000019, 10, 0)
    # 20000: INSERT (20000,1,11,12,0); quantity 1; product_id 77; quantity 2, 3, 4, 5; DELETE -> none left.
    # 30000: INSERT (30000,1,11,12,0); quantity 1; product_id 77.
    expected[(30000, 77)] = detail(30000, 77, 1)
    # 30001: INSERT (30001,1,11,12,0); quantity 1; product_id 77; then (unpublished, by hand) product_id 66.
    expected[(30001, 66)] = detail(30001, 66, 1)
    # 30002: INSERT; quantity 1; product_id 77; product_id 66; DELETE -> none left.
    # 30004: INSERT (30004,1); INSERT (30004,2); product 1 -> 66; INSERT (30004,3); product 2 -> 77.
    expected[(30004, 66)] = detail(30004, 66, 12)
    expected[(30004, 3)] = detail(30004, 3, 12)
    expected[(30004, 77)] = detail(30004, 77, 12)
    # 30005: INSERT (30005,1), (30005,2); quantity of 1 -> 1 -> 2; DELETE (30005,1).
    expected[(30005, 2)] = detail(30005, 2, 12)
    return expected


@on_both_paths
def test_brabster_order_details_key_updates_without_before_image_leave_ghost_rows(lake: Lake) -> None:
    """Without before-image columns nothing in a key-changing U names the old key: the lake equals the
    source table PLUS the eight rows whose key an UPDATE moved away (ghosts). This documents a limit of
    DMS's S3 output, not a goal; ``brabster_pg_pk_change_before_image`` shows the cure."""
    _, records = csv_records(sample_file(ORDER_DETAILS, DETAILS_PREFIX + "20240612-103127367.csv"))
    # UPDATE … SET product_id = 77 arrives as U with only the new key (20000, 77): no trace of (20000, 1).
    assert records[2][:4] == ["U", "2024-06-12 10:30:27.362108", "20000", "77"]
    assert len(records[2]) == 8
    config = replay_sample(lake, ORDER_DETAILS)
    table = config.table("public.order_details")
    source = expected_order_details(table)
    actual = lake_table(lake, config, "public.order_details")
    assert not DETAIL_GHOSTS.keys() & source.keys()
    assert_table(actual, {**source, **DETAIL_GHOSTS})
    ghosts = {k: actual[k] for k in actual.keys() - source.keys()}
    assert ghosts == DETAIL_GHOSTS, "the ghost rows are exactly the old keys of key-changing UPDATEs"
    # The unambiguous case (no key change) ends right: (30005, 1) deleted, (30005, 2) kept.
    assert (30005, 1) not in actual and actual[(30005, 2)] == detail(30005, 2, 12)


@on_both_paths
def test_brabster_pk_changes_with_before_image_end_equal_to_the_source_tables(lake: Lake) -> None:
    """The before-image sample: ``U,…,30016,…,<seq>,30015`` names the old key, so the replay removes it
    (the replay of ``dms.before_image``), including along the chain 30017 → 30018 → 30019 → 30020."""
    _, records = csv_records(sample_file(BEFORE_IMAGE, ORDERS_PREFIX + "20240705-202150266.csv"))
    assert [(r[0], r[2], r[-1]) for r in records] == [
        ("I", "30017", None), ("U", "30018", "30017"), ("U", "30019", "30018"), ("U", "30020", "30019"),
    ]  # fmt: skip
    config = replay_sample(lake, BEFORE_IMAGE)
    orders_table = config.table("public.orders")
    details_table = config.table("public.order_details")
    # 2024-07-05: CURRENT_DATE - 40 day = 2024-05-26, - 3 day = 2024-07-02, shipped NULL.
    # order_30010: INSERT 30010.  order_30014: INSERT 30014.  order_30015: INSERT 30015; order_id -> 30016.
    # order_30017: INSERT 30017; order_id -> 30018 -> 30019 -> 30020.
    expected_orders = keyed(
        orders_table, [vinet_order(k, "2024-05-26", "2024-07-02", None) for k in (30010, 30014, 30016, 30020)]
    )
    # order_30010: INSERT (30010,1,11,12,0); quantity 1; product_id 77.
    # order_30014: INSERT (30014,1); INSERT (30014,2); product 1 -> 66; INSERT (30014,3); product 2 -> 77.
    expected_details = keyed(
        details_table,
        [detail(30010, 77, 1), detail(30014, 66, 12), detail(30014, 3, 12), detail(30014, 77, 12)],
    )
    orders = lake_table(lake, config, "public.orders")
    details = lake_table(lake, config, "public.order_details")
    assert_table(orders, expected_orders)
    assert_table(details, expected_details)
    for ghost in (30015, 30017, 30018, 30019):
        assert ghost not in orders, f"order {ghost} was renumbered; its old key must be gone"
    assert not {(30010, 1), (30014, 1), (30014, 2)} & details.keys()


# --- m55hr: MySQL ----------------------------------------------------------------------------------------

CUSTOMERS = "m55hr_mysql_classicmodels_customers"
CUSTOMERS_PREFIX = "dms/classicmodels/customers/"
CUSTOMER_TYPES: list[tuple[str, Callable[[str], Any]]] = [
    ("customerNumber", int), ("customerName", str), ("contactLastName", str), ("contactFirstName", str),
    ("phone", str), ("addressLine1", str), ("addressLine2", str), ("city", str), ("state", str),
    ("postalCode", str), ("country", str), ("salesRepEmployeeNumber", int), ("creditLimit", Decimal),
]  # fmt: skip


def customer(*values: Any) -> Row:
    return dict(zip([n for n, _ in CUSTOMER_TYPES], values, strict=True))


@on_both_paths
def test_mysql_customers_insert_update_delete_insert_of_one_key_in_one_file(lake: Lake) -> None:
    _, changes = csv_records(sample_file(CUSTOMERS, CUSTOMERS_PREFIX + "20240809-192717787.csv"))
    assert [(r[0], r[1]) for r in changes] == [("I", "497"), ("U", "497"), ("D", "497"), ("I", "497")]
    assert changes[2][1:] == changes[1][1:], "MySQL logs the full row of a DELETE"
    config = replay_sample(lake, CUSTOMERS)
    table = config.table("classicmodels.customers")
    _, load = csv_records(sample_file(CUSTOMERS, CUSTOMERS_PREFIX + "LOAD00000001.csv"))
    names, types = [n for n, _ in CUSTOMER_TYPES], [t for _, t in CUSTOMER_TYPES]
    expected = keyed(table, [typed_row(names, types, record) for record in load])
    assert len(expected) == 122
    # Spot checks against mysqlsampledatabase.sql's customers rows.
    assert expected[103] == customer(103, "Atelier graphique", "Schmitt", "Carine ", "40.32.2555", "54, rue Royale",
                                     None, "Nantes", None, "44000", "France", 1370, Decimal("21000.00"))  # fmt: skip
    assert expected[114]["customerName"] == "Australian Collectors, Co."
    assert expected[125]["salesRepEmployeeNumber"] is None and expected[125]["creditLimit"] == Decimal("0.00")
    assert expected[496]["city"] == "Auckland  " and expected[496]["postalCode"] is None
    # INSERT 497 (Mitesh, Valarie); UPDATE contactLastName = 'Ruffy'; DELETE 497; INSERT 497 (Mitesh, Ravatka).
    expected[497] = customer(497, "Diecast Collectables", "Mitesh", "Ravatka", "6175552555", "6251 Ingle Ln.", None,
                             "Boston", "MA", "51003", "USA", 1188, Decimal("85100.00"))  # fmt: skip
    actual = lake_table(lake, config, "classicmodels.customers")
    assert_table(actual, expected)
    # Blanks are data: leading/trailing spaces survive; NULL stays None.
    assert actual[103]["contactFirstName"] == "Carine " and actual[103]["addressLine2"] is None
    assert actual[167]["country"] == "Norway  "


@on_both_paths
def test_mysql_sales_orders_match_the_notebooks_final_table(lake: Lake) -> None:
    config = replay_sample(lake, "m55hr_mysql_sales_orders_notebook")

    def order(orderid: int, customername: str, productname: str, orderamount: str) -> Row:
        return {"orderid": orderid, "customername": customername, "productname": productname,
                "orderamount": Decimal(orderamount)}  # fmt: skip

    # dump.sql: INSERT 1 john doe/laptop/1200.00, 2 jane smith/smartphone/800.00, 3 alice johnson/tablet/300.00,
    # 4 bob brown/headphones/150.00.
    expected = {
        1: order(1, "john doe", "laptop", "1200.00"),
        2: order(2, "jane smith", "smartphone", "800.00"),
        3: order(3, "alice johnson", "tablet", "300.00"),
        4: order(4, "bob brown", "headphones", "150.00"),
    }
    # table updates.txt: UPDATE 2 SET customername = 'bachu', productname = 'shoes'; INSERT 5 appu raja/watch/
    # 1000.00; INSERT 6 babu bisleri/cycle/150.00; UPDATE 5 SET customername = 'dadu'; DELETE 6.
    expected[2].update(customername="bachu", productname="shoes")
    expected[5] = order(5, "appu raja", "watch", "1000.00")
    expected[6] = order(6, "babu bisleri", "cycle", "150.00")
    expected[5]["customername"] = "dadu"
    del expected[6]
    # glue-interactive.ipynb prints this final table: 1 john doe, 2 bachu/shoes, 3, 4, 5 dadu/watch.
    actual = lake_table(lake, config, "sales.orders")
    assert_table(actual, expected)


# --- qiushiyan/pyspark-cdc: MySQL, no BucketFolder ---------------------------------------------------------

USERS = "qiushiyan_mysql_cdc_users"
USERS_FILES = "dms/cdc/users/"  # in the samples folder; landed at the bucket's root as cdc/users/…
USER_TYPES: list[tuple[str, Callable[[str], Any]]] = [
    ("user_id", int), ("name", str), ("city", str), ("last_login", dt.date.fromisoformat),
]  # fmt: skip
# SHA-256 of the author's own final table: data/output/part-*.csv at 463a9d7 (their Spark job's CSV lines
# "user_id,name,city,last_login", 110 of them), sorted by user_id, each ending in a newline.
AUTHORS_FINAL_TABLE_SHA256 = "ebc9b5045291e04d8219f269c8728bfce405d0c5bf310a051978a463b56c2e0c"


def user(user_id: int, name: str, city: str, last_login: str) -> Row:
    return {"user_id": user_id, "name": name, "city": city, "last_login": dt.date.fromisoformat(last_login)}


@on_both_paths
def test_mysql_without_bucket_folder_matches_the_authors_final_table(lake: Lake) -> None:
    names, types = [n for n, _ in USER_TYPES], [t for _, t in USER_TYPES]
    cdc_files = ["20211017-194324349.csv", "20211018-223933563.csv", "20211018-224657689.csv",
                 "20211018-225235856.csv", "20211018-225959941.csv"]  # fmt: skip
    changes = [r for name in cdc_files for r in csv_records(sample_file(USERS, USERS_FILES + name))[1]]
    assert "D" not in {r[0] for r in changes}, "DELETE … user_id = 10 found no row: 10 was gone before the LOAD"
    config = replay_sample(lake, USERS)
    assert (lake.landing / "cdc/users/LOAD00000001.csv").is_file(), "landed at the bucket's root, as DMS wrote it"
    table = config.table("cdc.users")
    _, load = csv_records(sample_file(USERS, USERS_FILES + "LOAD00000001.csv"))
    expected = keyed(table, [typed_row(names, types, record) for record in load])
    assert len(expected) == 103
    # sql/create_db.sql's rows, as the LOAD has them: 0 and 100 unchanged; 7, 8, 9 changed, 10 deleted and
    # 130–132 inserted before the full load (no script; the README's first table shows 7–9 so).
    assert expected[0] == user(0, "Herman Zimmerman", "Oklahoma city", "2020-10-10")
    assert expected[100] == user(100, "Muhammad Ahnmad", "New York", "2021-09-18")
    assert expected[8] == user(8, "Lebron James", "Denver", "2021-10-17")  # create_db.sql: Clayton Jennings
    assert expected[9] == user(9, "Darla Hayes", "Nashville", "2021-10-15")  # create_db.sql: Charlotte, 2020-09-07
    assert 10 not in expected and expected[130] == user(130, "Alica Bing", "New York", "2021-10-17")
    # sql/update_test.sql, in order:
    expected[6]["last_login"] = dt.date(2021, 10, 15)  # UPDATE … SET last_login = '2021-10-15' WHERE user_id = 6
    expected[133] = user(133, "Bob Ding", "New York", "2021-10-17")
    expected[134] = user(134, "Ross Green", "Seattle", "2021-10-17")
    expected[135] = user(135, "Monica Bing", "Portland", "2021-10-17")
    expected[8].update(name="Kevin Durant", last_login=dt.date(2021, 10, 14))
    expected[9].update(city="New York", last_login=dt.date(2021, 10, 17))
    # DELETE FROM cdc.users WHERE user_id = 10: no row left to delete.
    # Then one INSERT per CDC file of 6d8a649, by hand (no script published):
    expected[136] = user(136, "Monica Geller", "New York", "2021-10-10")
    expected[137] = user(137, "Phoebe Buffay", "New York", "2021-04-12")
    expected[138] = user(138, "Joey Tribbiani", "Los Angeles", "2020-12-25")
    expected[139] = user(139, "Jack Geller", "Long Island City", "2019-07-05")
    # The author's final table (data/output at 463a9d7) is exactly this table.
    lines = "".join(f"{r['user_id']},{r['name']},{r['city']},{r['last_login']}\n" for _, r in sorted(expected.items()))
    assert hashlib.sha256(lines.encode()).hexdigest() == AUTHORS_FINAL_TABLE_SHA256
    actual = lake_table(lake, config, "cdc.users")
    assert_table(actual, expected)


# --- dhawalkp/datalake: Oracle ---------------------------------------------------------------------------

EMPLOYEES = "dhawalkp_oracle_hr_employees"
EMPLOYEES_PREFIX = "dms/HR/EMPLOYEES/"
EMPLOYEE_TYPES: list[tuple[str, Callable[[str], Any]]] = [
    ("EMPLOYEE_ID", int), ("FIRST_NAME", str), ("LAST_NAME", str), ("EMAIL", str), ("PHONE_NUMBER", str),
    ("HIRE_DATE", dt.datetime.fromisoformat), ("JOB_ID", str), ("SALARY", Decimal), ("COMMISSION_PCT", Decimal),
    ("MANAGER_ID", int), ("DEPARTMENT_ID", int),
]  # fmt: skip


def expected_hr_employees(table: TableSpec) -> dict[Any, Row]:
    """HR.EMPLOYEES as the source ended: the LOAD's rows, then the author's UPDATE of LAST_NAME."""
    names, types = [n for n, _ in EMPLOYEE_TYPES], [t for _, t in EMPLOYEE_TYPES]
    _, load = csv_records(sample_file(EMPLOYEES, EMPLOYEES_PREFIX + "LOAD00000001.csv"), header=True)
    expected = keyed(table, [typed_row(names, types, record) for record in load])
    assert len(expected) == 1900
    # Oracle HR sample rows.
    assert expected[100] == {"EMPLOYEE_ID": 100, "FIRST_NAME": "Steven", "LAST_NAME": "King", "EMAIL": "SKING",
                             "PHONE_NUMBER": "515.123.4567", "HIRE_DATE": dt.datetime(1987, 6, 17), "JOB_ID": "AD_PRES",
                             "SALARY": Decimal("24000.00"), "COMMISSION_PCT": None, "MANAGER_ID": None,
                             "DEPARTMENT_ID": 90}  # fmt: skip
    assert expected[178]["COMMISSION_PCT"] == Decimal("0.15") and expected[178]["DEPARTMENT_ID"] is None
    # UPDATE employees SET last_name = 'Gietzupd2' on 321 (in the LOAD) and on 2311–2326, rows the author
    # inserted after the LOAD was taken: copies of employee 206 named William<n>, e-mail WGIETZ<n>.
    assert 321 in expected and not set(range(2311, 2327)) & expected.keys()
    expected[321]["LAST_NAME"] = "Gietzupd2"
    for number in range(2311, 2327):
        expected[number] = {
            **expected[206],
            "EMPLOYEE_ID": number,
            "FIRST_NAME": f"William{number}",
            "LAST_NAME": "Gietzupd2",
            "EMAIL": f"WGIETZ{number}",
        }
    return expected


@on_both_paths
def test_oracle_header_files_and_updates_of_keys_absent_from_the_load(lake: Lake) -> None:
    names = [n for n, _ in EMPLOYEE_TYPES]
    header, load = csv_records(sample_file(EMPLOYEES, EMPLOYEES_PREFIX + "LOAD00000001.csv"), header=True)
    cdc_header, changes = csv_records(sample_file(EMPLOYEES, EMPLOYEES_PREFIX + "20190118-184518184.csv"), header=True)
    assert header == names and cdc_header == ["Op", *names], "upper-case header rows, CDC's starting with Op"
    load_keys = [int(r[0]) for r in load if r[0]]
    assert load_keys != sorted(load_keys), "the LOAD rows are not in key order"
    assert len(changes) == 17 and {r[0] for r in changes} == {"U"}
    config = replay_sample(lake, EMPLOYEES)
    expected = expected_hr_employees(config.table("HR.EMPLOYEES"))
    actual = lake_table(lake, config, "HR.EMPLOYEES")
    assert_table(actual, expected)
    assert actual[2326]["LAST_NAME"] == "Gietzupd2" and actual[2326]["COMMISSION_PCT"] is None


# --- wuzerun/aws-dms-cdc-s3-kinesis-DB-master: Oracle, gzip, CDC only ------------------------------------

BOM_HD = "wuzerun_oracle_escmowner_bom_hd"
BOM_HD_KEY = "dms/ESCMOWNER/BOM_HD/20180820-084657015.csv.gz"
# The columns that are not text (tests/samples/wuzerun_oracle_escmowner_bom_hd.yaml says why).
BOM_HD_PARSERS: dict[str, Callable[[str], Any]] = {
    "STYLE_REV_NO": int, "CREATE_DATE": dt.datetime.fromisoformat, "LAST_MODI_DATE": dt.datetime.fromisoformat,
}  # fmt: skip


def bom(bom_no: str, style_no: str, create_date: dt.datetime, user_id: str, group_id: str) -> Row:
    """A BOM_HD row as every record of the file has it: revision 0, BOM_TYPE G, SC_NO = BOM_NO, the rest NULL."""
    row: Row = dict.fromkeys(
        ["BOM_NO", "STYLE_NO", "STYLE_REV_NO", "REMARKS", "SUBMAT_STATUS", "FABRIC_STATUS", "CREATE_DATE",
         "CREATE_USER_ID", "CREATE_USER_GRP_ID", "LAST_MODI_DATE", "LAST_MODI_USER_ID", "LAST_MODI_GRP_ID",
         "TRIM_LIST_STATUS", "MASTER_OR_SPEC", "MASTER_BOM_NO", "SERVER_OR_LOCAL", "ORIGINAL_BOM_NO", "SC_NO", "SC_LOT",
         "STATUS", "BOM_TYPE", "ORG_CREATE_USER_GRP_ID", "ORG_LAST_MODI_GRP_ID"]
    )  # fmt: skip
    row.update(BOM_NO=bom_no, STYLE_NO=style_no, STYLE_REV_NO=0, CREATE_DATE=create_date, CREATE_USER_ID=user_id,
               CREATE_USER_GRP_ID=group_id, SC_NO=bom_no, BOM_TYPE="G")  # fmt: skip
    return row


def expected_bom_hd(table: TableSpec) -> dict[Any, Row]:
    """The rows of ESCMOWNER.BOM_HD the file names (CDC only: nothing else of the source table is known).

    The file is read with the gzip and csv modules. Every record is an after-image (I or U; no D), and every
    image of one BOM_NO is the same: so each key's row is its one distinct image, whatever order the records
    are taken in, and whether a U's key was inserted before or not (an upsert)."""
    header, records = csv_records(sample_file(BOM_HD, BOM_HD_KEY), header=True)
    assert header == ["Op", *table.source_column_names]
    assert {r[0] for r in records} <= {"I", "U"}, "no D: every record is a row's image after its change"
    images: dict[str, set[tuple[str | None, ...]]] = {}
    for record in records:
        assert record[1] is not None, record
        images.setdefault(record[1], set()).add(tuple(record[1:]))
    assert all(len(distinct) == 1 for distinct in images.values()), "a key with differing images needs an order"
    types = [BOM_HD_PARSERS.get(name, str) for name in table.source_column_names]
    return keyed(table, [typed_row(table.source_column_names, types, image) for (image,) in images.values()])


@on_both_paths
def test_oracle_gzip_cdc_only_upserts_of_keys_never_inserted(lake: Lake) -> None:
    path = sample_file(BOM_HD, BOM_HD_KEY)
    assert path.read_bytes()[:2] == b"\x1f\x8b", "a real gzip object, as CompressionType GZIP writes it"
    _, records = csv_records(path, header=True)
    assert len(records) == 21 and [r[0] for r in records].count("I") == 1
    # Repeated identical U images of one key, and U rows of keys no I in the sample inserted.
    assert [r[1] for r in records].count("GS18W36284") == 4 and [r[1] for r in records].count("GS18W35856") == 4
    config = replay_sample(lake, BOM_HD)
    table = config.table("ESCMOWNER.BOM_HD")
    expected = expected_bom_hd(table)
    assert len(expected) == 13
    # Three rows written out from the file: the one I, a key updated four times, a STYLE_NO with blanks inside.
    assert expected["GS18W36991"] == bom("GS18W36991", "JJO-JPRNICK JR", dt.datetime(2018, 8, 20, 16, 16, 12), "wusue",
                                         "F02")  # fmt: skip
    assert expected["GS18W36284"] == bom("GS18W36284", "CTF-5PDHTINO1-8", dt.datetime(2018, 8, 15, 17, 41, 34),
                                         "gancal", "E00")  # fmt: skip
    assert expected["S18S11971"] == bom("S18S11971", "TOM-SP19 TOMMY S", dt.datetime(2018, 8, 15, 10, 51, 18), "litw",
                                        "A06")  # fmt: skip
    actual = lake_table(lake, config, "ESCMOWNER.BOM_HD")
    assert_table(actual, expected)
    # Oracle DATE without a fraction is a timestamp at whole seconds; NULL-only columns stay None, never "".
    assert actual["S18V07225"]["CREATE_DATE"] == dt.datetime(2018, 5, 29, 10, 54, 10)
    assert all(row["LAST_MODI_DATE"] is None and row["REMARKS"] is None for row in actual.values())


# --- segmentio/parquet-go: PostgreSQL full load as Parquet ----------------------------------------------

PARQUET_SAMPLE = "segmentio_pg_parquet_full_load"
PARQUET_KEY = "dms/public/dms_test_table/LOAD00000001.parquet"


@on_both_paths
def test_parquet_full_load_types_and_empty_strings(lake: Lake) -> None:
    path = sample_file(PARQUET_SAMPLE, PARQUET_KEY)
    file = pq.ParquetFile(path)
    assert file.schema_arrow.names[0] == "DMS_TIMESTAMP", "DMS puts its timestamp column first"
    config = replay_sample(lake, PARQUET_SAMPLE)
    table = config.table("public.dms_test_table")
    rows = file.read().to_pylist()
    for row in rows:
        del row["DMS_TIMESTAMP"]  # a DMS column, not one of the source table's
    expected = keyed(table, rows)
    # Two rows written out, as the file holds them (pyarrow and this data must agree).
    assert expected[1] == {
        "id": 1, "my_int": 1298498081, "my_smallint": 15887, "my_numeric": Decimal("1427131847.59"),
        "my_real": real("0.42463749647140503"), "my_double": 0.6868230728671094,
        "my_money": Decimal("47632969758.5400"), "my_varchar": "", "my_text": "mraj", "my_bytea": b"whthctcu",
        "my_timestamp": dt.datetime(2021, 10, 31, 15, 34, 12, 458000, tzinfo=UTC),
        "my_uuid": "181e9c5d-9b55-4535-8c6e-6c8c1234b807",
        "my_json": '{"key_24":"pldnjobcs","key_28":"e","key_29":"jfbcxo","key_3":"lgtem","key_47":"kqfdafp",'
                   '"key_83":"leqyhy","key_94":"frs"}',
        "my_jsonb": '{"key_5": "bzrjxawn", "key_59": "rfe", "key_63": "wjjpjz", "key_67": "dcekxba", '
                    '"key_78": "otafet", "key_90": "kr", "key_91": "mf"}',
        "my_bool": False,
    }  # fmt: skip
    assert expected[2]["my_text"] == "" and expected[2]["my_bool"] is True
    # pyarrow gives the zone-aware instant; compare instants in UTC like the lake reader does.
    for row in expected.values():
        row["my_timestamp"] = row["my_timestamp"].astimezone(UTC)
    actual = lake_table(lake, config, "public.dms_test_table")
    assert_table(actual, expected)
    # Empty strings are not NULL in Parquet: they stay "".
    assert actual[1]["my_varchar"] == "" and actual[2]["my_text"] == "" and actual[5]["my_text"] == ""
    assert all(v is not None for row in actual.values() for v in row.values())


# --- the deployed path: cdc-lake aws-replay ---------------------------------------------------------------

# The Oracle samples through ``cdc-lake aws-replay``: sample, table, its expected table (the same as above).
DEPLOYED_SAMPLES: dict[str, tuple[str, Callable[[TableSpec], dict[Any, Row]]]] = {
    EMPLOYEES: ("HR.EMPLOYEES", expected_hr_employees),
    BOM_HD: ("ESCMOWNER.BOM_HD", expected_bom_hd),
}
# make test takes HR's sample through the deployed path (header files, UPPER-case names, updates of keys absent
# from the load); the gzip CDC file of BOM_HD goes through it in make soak (CDC_LAKE_DEPLOYED_SAMPLES=all), and
# through the Glue catalog + S3 in process in both (test_oracle_gzip_cdc_only_upserts_of_keys_never_inserted).
DEPLOYED_CASES = list(DEPLOYED_SAMPLES) if os.environ.get("CDC_LAKE_DEPLOYED_SAMPLES") == "all" else [EMPLOYEES]


def iceberg_table(rows: list[Row], table: TableSpec) -> dict[Any, Row]:
    """pyiceberg's rows, which carry the lake's names, as {key: row} under the source's names."""
    result: list[Row] = []
    for row in rows:
        assert list(row) == table.column_names, list(row)
        result.append({spec.source: _python_value(row[spec.name], spec.type) for spec in table.columns})
    return keyed(table, result)


@pytest.mark.slow
@pytest.mark.glue_path
@pytest.mark.budget(90)  # one deployed-path replay, as test_aws_replay's: about 60 s here
@pytest.mark.parametrize("sample", DEPLOYED_CASES)
def test_oracle_samples_through_the_deployed_path(sample: str, tmp_path: Path) -> None:
    """``cdc-lake aws-replay`` in its own process: the stack created on a local AWS endpoint, the real Lambda
    handler, each Glue run through ``glue-run``; the table read back by pyiceberg's Glue catalog (a second
    reader) equals the expected table of the local replay. One run per configuration, each on its own endpoint
    so neither sees the other's stack, raw bucket or database."""
    name, expected_table = DEPLOYED_SAMPLES[sample]
    config_path = SAMPLE_CONFIGS / f"{sample}.yaml"
    config = load_config(config_path)
    table = config.table(name)
    landing = tmp_path / "landing"
    land_sample(sample, landing, config.dms.bucket_folder)
    with local_aws_endpoint() as endpoint:
        environment = aws_replay_environment(endpoint)
        code, output = aws_replay(sys.executable, config_path, landing, tmp_path / "work", environment, timeout=600)
        assert code == 0, output
        rows = glue_reader(endpoint)(LakeLocation(GLUE_CATALOG, config.lake.database), table)
    assert_table(iceberg_table(rows, table), expected_table(table))
