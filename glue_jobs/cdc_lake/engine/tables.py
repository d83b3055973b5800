"""Lake tables: where a configuration's tables live, the companions a table keeps (history, rejects), and creating
them (Iceberg format v2, key as identifier)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException, PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.types import DataType

from cdc_lake.core.config import LakeSettings, TableSpec, WriteMode
from cdc_lake.core.exceptions import LakeDatabaseMissingError, LegacyLakeTableError
from cdc_lake.core.names import GLUE_CATALOG
from cdc_lake.core.retry import retried
from cdc_lake.core.sql import quote, sql_string
from cdc_lake.engine.iceberg_errors import aws_denial, conflicts_raised, is_already_exists, is_concurrent
from cdc_lake.engine.iceberg_java import METADATA_COMMIT_RETRIES, has_table
from cdc_lake.engine.spark_types import lake_type


@dataclass(frozen=True)
class LakeLocation:
    """Where a configuration's tables live: a Spark catalog and a database (namespace) in it."""

    catalog: str
    database: str

    def table(self, table: TableSpec) -> str:
        return self.named(table.lake_table)

    def named(self, name: str) -> str:
        """A lake table of this database by name (quoted for SQL)."""
        return f"{quote(self.catalog)}.{quote(self.database)}.{quote(name)}"

    def metadata_table(self, table: TableSpec, name: str) -> str:
        return self.metadata(table.lake_table, name)

    def metadata(self, table_name: str, name: str) -> str:
        """An Iceberg metadata table (``snapshots``, ``history``…) of the named lake table."""
        return f"{self.named(table_name)}.{quote(name)}"

    def dotted(self, name: str) -> str:
        """``catalog.database.name`` unquoted, as Spark's catalog API and Iceberg's Java API take it."""
        return f"{self.catalog}.{self.database}.{name}"


@dataclass(frozen=True)
class Lake:
    """A Spark session and where a configuration's tables live: what every read and write of a lake table needs."""

    spark: SparkSession
    location: LakeLocation


@dataclass(frozen=True)
class TableSnapshot:
    """A configured table's lake table at ``location``, as of ``snapshot_id`` (None: its current snapshot)."""

    location: LakeLocation
    table: TableSpec
    snapshot_id: int | None = None


def history_name(table: TableSpec) -> str:
    return f"{table.lake_table}_history"


def rejects_name(table: TableSpec) -> str:
    return f"{table.lake_table}_rejects"


def quarantines(table: TableSpec) -> bool:
    return table.on_bad_rows == "quarantine"


def lake_tables(table: TableSpec) -> list[str]:
    """The Iceberg tables of one configured table: itself and, when kept, its history and rejects companions."""
    return [
        table.lake_table,
        *([history_name(table)] if table.history else []),
        *([rejects_name(table)] if quarantines(table) else []),
    ]


def ensure_table(lake: Lake, table: TableSpec, settings: LakeSettings) -> None:
    """Create the namespace and the Iceberg table if missing (format v2, primary key as identifier fields).

    On AWS the stack creates the database and the job's role may not (it has no ``glue:CreateDatabase``): a
    missing one is then refused, never created where the stack did not put it.
    """
    if table_exists(lake, table, own_commit=True):
        return
    ensure_database(lake)
    definition = TableDefinition(
        table.lake_table,
        [(c.name, lake_type(c.type), c.name in table.primary_key) for c in table.columns],
        table.partition_by,
        {
            "cdc-lake.source-table": table.name,
            "cdc-lake.primary-key": ",".join(table.primary_key),
            **write_mode_properties(created_write_mode(table.write_mode or settings.write_mode)),
        },
        identifier_fields=table.primary_key,
        sort_by=table.primary_key,
        docs=column_docs(table),
    )
    create_iceberg_table(lake, definition, settings)


def refuse_legacy_table(lake: Lake, table: TableSpec) -> None:
    """Refuse to replay into a new lake table while a local lake holds the table under its name from before lake
    names were lower case: replay would start it over beside the old one, unannounced. ``cdc-lake reload``
    builds the new one from the landed files; the Glue catalog never took the old names."""
    legacy = table.legacy_target
    if legacy is None or lake.location.catalog == GLUE_CATALOG or not table_exists(lake, legacy):
        return
    if table_exists(lake, table):
        return
    raise LegacyLakeTableError(
        f"{lake.location.dotted(legacy)}: this lake table was made before lake names were lower case (Glue and Athena "
        f"take no other); {table.name} now replays into {lake.location.dotted(table.lake_table)}, which does not exist "
        f"yet. Nothing was applied and no file was removed. Build it from every landed file, as the old one was, "
        f"with `cdc-lake reload -t {table.name} --since 19700101-000000` (and this run's -c, -l and -w); the old "
        "table stays for you to read, then drop"
    )


def column_docs(table: TableSpec) -> dict[str, str]:
    """Each lake column's doc: the source column it holds, as DMS names it, so a reader sees where it came from."""
    return {c.name: source_doc(c.source) for c in table.columns}


def source_doc(source: str) -> str:
    return f"source column {source}"


def ensure_database(lake: Lake) -> None:
    """Create the lake database (namespace) if missing and the catalog lets this run create it."""
    try:
        lake.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {quote(lake.location.catalog)}.{quote(lake.location.database)}")
    except (Py4JJavaError, PySparkException) as error:
        denial = aws_denial(error)
        if denial is None or denial.action != "glue:CreateDatabase":
            raise
        raise LakeDatabaseMissingError(
            f"{lake.location.catalog}.{lake.location.database}: the lake database does not exist, and the job's role "
            "may not create it (no glue:CreateDatabase, by design); nothing was applied and no file was removed. The "
            "stack creates it: check the job's --database, or deploy the stack again (cdk deploy), then trigger the run"
        ) from None


@dataclass(frozen=True)
class TableDefinition:
    """A lake table to create: its name, columns as (name, type, NOT NULL), partition transforms, properties of
    its own, identifier fields (None: none) and write order."""

    name: str
    columns: Sequence[tuple[str, DataType, bool]]
    partition_by: Sequence[str]
    properties: Mapping[str, str]
    identifier_fields: Sequence[str] | None
    sort_by: Sequence[str]
    docs: Mapping[str, str] = field(default_factory=dict)  # column -> its doc (COMMENT)


# The table properties Iceberg's Spark writes read to choose copy-on-write or merge-on-read.
WRITE_MODE_PROPERTIES = ("write.merge.mode", "write.update.mode", "write.delete.mode")


# A write mode the table keeps whatever the configuration says, which upkeep honours (the rejects tables').
PINNED_WRITE_MODE = "cdc-lake.write-mode"
# The lake table a rejects table keeps the quarantined rows of.
REJECTS_OF = "cdc-lake.rejects-of"


def write_mode_properties(mode: str, *, pinned: bool = False) -> dict[str, str]:
    return {**dict.fromkeys(WRITE_MODE_PROPERTIES, mode), **({PINNED_WRITE_MODE: mode} if pinned else {})}


def created_write_mode(mode: WriteMode) -> str:
    """The mode a new table starts in: ``auto`` starts merge-on-read, so that a first batch holding a large full load
    and its changes never rewrites the load; the replay's upkeep sets the mode that fits once the table has a size."""
    return "merge-on-read" if mode == "auto" else mode


def create_iceberg_table(lake: Lake, definition: TableDefinition, settings: LakeSettings) -> None:
    """CREATE TABLE from configuration (names, types and transforms were validated; no data is pasted).

    Rows are written ordered by ``sort_by`` (the primary key) within each write task, so each data file
    covers a narrow key range (DMS full loads come in key order or near it) and its min/max statistics let a
    MERGE skip the files that hold no changed key. Local ordering costs no shuffle; compaction
    (``maintenance.compact``) sorts the whole table by the same order.
    """
    name, partition_by = definition.name, definition.partition_by
    rendered_columns = ", ".join(
        f"{quote(column)} {data_type.simpleString()}"
        + (" NOT NULL" if not_null else "")
        + (f" COMMENT {sql_string(definition.docs[column])}" if column in definition.docs else "")
        for column, data_type, not_null in definition.columns
    )
    partitioning = f" PARTITIONED BY ({', '.join(partition_by)})" if partition_by else ""
    properties = {
        "format-version": "2",
        **write_mode_properties(created_write_mode(settings.write_mode)),
        "write.metadata.delete-after-commit.enabled": "true",
        "write.metadata.previous-versions-max": "100",
        # Appends (the full load) and merges write from the tasks that read, sorted locally: no shuffle.
        "write.distribution-mode": "none",
        # Each run makes a few metadata commits (branch, merge, fast-forward); concurrent runs contend.
        "commit.retry.num-retries": "10",
        **definition.properties,
    }
    rendered = ", ".join(f"{sql_string(k)}={sql_string(v)}" for k, v in properties.items())
    try:
        lake.spark.sql(
            f"CREATE TABLE {lake.location.named(name)} ({rendered_columns}) USING iceberg{partitioning} "
            f"TBLPROPERTIES ({rendered})"
        )
    except AnalysisException as error:
        if not is_already_exists(error):
            raise
        return  # a concurrent run created it first
    if definition.identifier_fields:
        fields = ", ".join(quote(k) for k in definition.identifier_fields)
        _alter(lake.spark, f"ALTER TABLE {lake.location.named(name)} SET IDENTIFIER FIELDS {fields}")
    # LOCALLY: WRITE ORDERED BY would also switch the table to range distribution, a shuffle on every write.
    ordered = ", ".join(quote(k) for k in definition.sort_by)
    _alter(lake.spark, f"ALTER TABLE {lake.location.named(name)} WRITE LOCALLY ORDERED BY {ordered}")


def _alter(spark: SparkSession, statement: str) -> None:
    """An ALTER of a table just created, tried again when a run that found the table first committed to it."""

    def alter() -> None:
        with conflicts_raised():
            spark.sql(statement)

    retried(alter, METADATA_COMMIT_RETRIES, is_concurrent, what=f"{statement}: concurrent metadata commit")


def table_exists(lake: Lake, table: TableSpec | str, *, own_commit: bool = False) -> bool:
    """Whether the lake table exists (``own_commit``: ``iceberg_java.has_table``'s)."""
    name = table if isinstance(table, str) else table.lake_table
    return has_table(lake.spark, lake.location.dotted(name), own_commit=own_commit)
