"""The lake under test (``Lake``: a catalog and database, and the landing folder DMS files are read from), on
either lake path, with what tests do to it: land files, apply a batch, read a table back."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.aws import aws_client

# The bucket holding the Glue path's warehouse on the local endpoint, as the stack's lake bucket does.
GLUE_LAKE_BUCKET = "cdc-lake-tests-lake"
GLUE_WAREHOUSE = f"s3://{GLUE_LAKE_BUCKET}/warehouse/"
LAKE_PATHS = ("hadoop", "glue")

# The test once on each lake path: the Hadoop catalog, and the Glue catalog + S3 as deployed.
on_both_paths = pytest.mark.parametrize("lake", LAKE_PATHS, indirect=True)


def runtime_independent(items: list[pytest.Item]) -> list[pytest.Item]:
    """The cases a second runtime's suite leaves to the first: all but those whose outcome the runtime (Glue's
    Python, Spark, Iceberg, their AWS clients) can change. Kept: the pure tests of the library (``tests/unit``:
    Glue's Python runs that code), the cases on the Glue catalog + S3 path (a lake-path parameter of ``glue``, or
    the ``glue_path`` mark), and the ``each_runtime`` ones (Spark's or Iceberg's own behaviour on the Hadoop path:
    their APIs, parsing, schema evolution). Left: the Lambda's and the CDK app's tests (neither runs on Glue), the
    local tools', the real sources' capture, and the other Spark cases on the Hadoop path, whose engine code the
    Glue-path cases run."""
    return [item for item in items if not _on_every_runtime(item)]


def _on_every_runtime(item: pytest.Item) -> bool:
    if "tests/unit/" in item.nodeid:
        return True
    if item.get_closest_marker("glue_path") or item.get_closest_marker("each_runtime"):
        return True
    return _lake_path_case(item)[0] == "glue"


def hadoop_twins(items: list[pytest.Item]) -> list[pytest.Item]:
    """The Hadoop-path cases of tests that also have a Glue-path case with the same other parameters."""
    cases = [(item, *_lake_path_case(item)) for item in items]
    on_glue = {rest for _, path, rest in cases if path == "glue"}
    return [item for item, path, rest in cases if path == "hadoop" and rest in on_glue]


def _lake_path_case(item: pytest.Item) -> tuple[str | None, str]:
    """The lake path a case runs on (None: not a parameter of its test, whatever its name), and the case named
    without it."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    paths = [name for name, value in params.items() if isinstance(value, str) and value in LAKE_PATHS]
    rest = sorted((name, repr(value)) for name, value in params.items() if name not in paths)
    return (params[paths[0]] if len(paths) == 1 else None), f"{item.nodeid.split('[')[0]}{rest}"


def landed_paths(landing: Path) -> list[Path]:
    """The files DMS landed in a landing folder: not the maintenance's expiry marks (``core.expiry_marks``)."""
    from cdc_lake.core.names import EXPIRED_MARK_PREFIX

    own = EXPIRED_MARK_PREFIX.rstrip("/")
    return sorted(p for p in landing.rglob("*") if p.is_file() and p.relative_to(landing).parts[0] != own)


def write_file(landing: Path, key: str, text: str, modified: dt.datetime | None = None) -> str:
    """Land a DMS file with exactly this text (and this LastModified, as DMS wrote it then); returns its key."""
    path = landing / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    if modified is not None:
        os.utime(path, (modified.timestamp(), modified.timestamp()))
    return key


@dataclass
class Lake:
    """One lake path under test: where the tables live (catalog, database) and where DMS files are read from.

    ``hadoop``: the Hadoop catalog on a folder, files read from the landing folder. ``glue``: the Glue Data
    Catalog with S3FileIO on the local endpoint, files read from a bucket that mirrors the landing folder
    (each ``store()`` puts what changed there since, as DMS would have written it). Its ``spark`` and ``location``
    make it an ``engine.tables.Lake`` to the library's functions that take one.
    """

    path: str
    spark: Any
    database: str
    landing: Path
    endpoint: str
    bucket: str = field(default_factory=lambda: f"landing-{uuid.uuid4().hex[:12]}")
    _put: dict[str, tuple[int, int]] | None = None

    @property
    def catalog(self) -> str:
        from cdc_lake.core.names import GLUE_CATALOG
        from cdc_lake.local.session import LOCAL_CATALOG

        return LOCAL_CATALOG if self.path == "hadoop" else GLUE_CATALOG

    @property
    def location(self) -> Any:
        from cdc_lake.engine.tables import LakeLocation

        return LakeLocation(self.catalog, self.database)

    def table(self, name: str) -> str:
        return f"{self.catalog}.{self.database}.{name}"

    def land_from(self, folder: Path, keys: list[str]) -> None:
        """Land ``keys`` as another landing folder (a generated source's) holds them."""
        for key in keys:
            (self.landing / key).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(folder / key, self.landing / key)

    def expire(self, *keys: str) -> None:
        """Remove landed files as the raw bucket's catch-all rule, or a person, removes them: no mark left (from the
        bucket too, on the Glue path)."""
        for key in keys:
            (self.landing / key).unlink()
            if self.path == "glue" and self._put is not None:
                aws_client(self.endpoint, "s3").delete_object(Bucket=self.bucket, Key=key)
                self._put.pop(key, None)

    def remove_applied(self, config: Any, *keys: str) -> None:
        """Remove landed files as the scheduled maintenance removes applied ones (``engine.landed_expiry``), its mark
        written first, but these keys picked by the test rather than by their record and age."""
        from cdc_lake.core.dms_files import parse_key
        from cdc_lake.core.expiry_marks import ExpiryMark, read_mark, write_mark

        store = self.store()
        table = config.table(parse_key(keys[0], config).table)
        listed = {o.key: o for o in store.list(config.table_prefix(table))}
        landed = max(listed[k].last_modified for k in keys)
        removed = ExpiryMark(len(keys), keys[-1], landed)  # keys in DMS order
        write_mark(store, config, table, (read_mark(store, config, table) or ExpiryMark(0)).adding(removed))
        self.expire(*keys)

    def store(self) -> Any:
        """Where the lake path reads DMS files from, holding every file landed so far."""
        from cdc_lake.core.storage import LocalFolderStore, S3Store

        if self.path == "hadoop":
            return LocalFolderStore(self.landing)
        s3 = aws_client(self.endpoint, "s3")
        if self._put is None:
            s3.create_bucket(Bucket=self.bucket)
            self._put = {}
        for path in landed_paths(self.landing):
            key = path.relative_to(self.landing).as_posix()
            info = path.stat()
            if self._put.get(key) != (info.st_size, info.st_mtime_ns):
                s3.put_object(Bucket=self.bucket, Key=key, Body=path.read_bytes())
                self._put[key] = (info.st_size, info.st_mtime_ns)
        return S3Store(self.bucket, client=s3)

    def context(self, config: Any) -> Any:
        """What a run carries for ``config`` on this lake: its ReplayContext."""
        from cdc_lake.engine.context import ReplayContext

        return ReplayContext(spark=self.spark, location=self.location, config=config, store=self.store())

    def pipeline(self, config: Any) -> Any:
        """The local pipeline of ``config`` on this lake."""
        from cdc_lake.local.runtime import LocalPipeline

        return LocalPipeline(
            config, self.landing, self.spark, database=self.database, catalog=self.catalog, store=self.store()
        )

    def apply(self, config: Any, key: str) -> Any:
        """Replay ``key``'s table up to ``key``, as a run triggered by it does; its RunResult."""
        from cdc_lake.core.dms_files import parse_key
        from cdc_lake.engine.replay import replay

        return replay(self.context(config), parse_key(key, config))

    def apply_at_once(self, config: Any, keys: list[str]) -> list[BaseException]:
        """Runs triggered by each of ``keys`` at once, one thread each (the newest first); what they raised."""
        errors: list[BaseException] = []

        def trigger(key: str) -> None:
            try:
                self.apply(config, key)
            except BaseException as error:  # returned to the test
                errors.append(error)

        threads = [threading.Thread(target=trigger, args=(k,)) for k in reversed(keys)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return errors

    def rows(self, table: str = "shop_items", snapshot: int | None = None) -> list[tuple[Any, ...]]:
        """The lake table's rows, sorted; as of ``snapshot`` when given."""
        as_of = f" VERSION AS OF {snapshot}" if snapshot is not None else ""
        return sorted(tuple(r) for r in self.spark.sql(f"SELECT * FROM {self.table(table)}{as_of}").collect())

    def head(self, table: str = "shop_items") -> int | None:
        """The lake table's main branch head; None before the table exists."""
        from cdc_lake.engine.commit import branch_head

        if not self.spark.catalog.tableExists(self.table(table)):
            return None
        return branch_head(self, table)

    def run_parts(self, table: str) -> list[str]:
        """The parts of runs (snapshots a run wrote before its last, ``PART``) in the lake table's lineage, oldest
        first: main's history shows only where runs moved it."""
        from cdc_lake.engine.iceberg_java import branch_lineage
        from cdc_lake.engine.record import PART

        lineage = branch_lineage(self.spark, self.location.dotted(table))
        return [summary[PART] for _, summary in reversed(list(lineage)) if PART in summary]


def assert_lake_equals_oracle(pipeline: Any, expected: Path, out: Path) -> None:
    """Every table of the pipeline, exported to ``out``, equals the generator's expected table in ``expected``."""
    from cdc_lake.core.jsonl import read_jsonl
    from cdc_lake.ops.export import export_tables

    export_tables(pipeline.context, out)
    for table in pipeline.config.tables:
        actual, wanted = read_jsonl(out / f"{table.name}.jsonl"), read_jsonl(expected / f"{table.name}.jsonl")
        assert len(actual) == len(wanted), f"{table.name}: {len(actual)} rows in the lake, {len(wanted)} expected"
        assert actual == wanted, f"{table.name}: lake differs from the oracle"
