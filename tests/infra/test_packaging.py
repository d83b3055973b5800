"""Synth-time artifacts: the Glue library zip, the Lambda folder and the JSON configuration."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest

from cdc_lake.core.catalogs import LAKE_IO
from cdc_lake.core.config import load_config, parse_config_text
from cdc_lake.core.exceptions import PackagingError
from cdc_lake.local.jars import iceberg_runtime, spark_jars
from infra.packaging import (
    JVM_SOURCES,
    LAKE_IO_JAR,
    SOURCE_CA_ARCNAME,
    SourceLayout,
    build_assets,
    build_lake_io_jar,
)
from tests.infra.conftest import DEMO_CONFIG


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("packaging")
    sources = SourceLayout()
    config = load_config(DEMO_CONFIG)
    return config, sources, build_assets(config, tmp / "assets", sources=sources)


def test_library_zip_has_the_package_at_its_root(built) -> None:
    _config, sources, assets = built
    with zipfile.ZipFile(assets.library_zip) as archive:
        names = archive.namelist()
    assert names == sorted(names)
    assert all(name.startswith("cdc_lake/") for name in names)
    assert "cdc_lake/__init__.py" in names
    assert "cdc_lake/core/config.py" in names
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]
    expected = sorted(
        [f"cdc_lake/{path.relative_to(sources.library_dir).as_posix()}" for path in sources.glue_library_files()]
        + [SOURCE_CA_ARCNAME]  # the CAs the jobs check the source with (tests/infra/test_source_tls.py)
    )
    assert names == expected
    # Glue runs the jobs; the laptop tools (cdc_lake.local: CLI, demo, generator) stay home.
    jobs = {f"cdc_lake/jobs/{name}.py" for name in ("entry", "replay", "maintenance", "drift", "source_check")}
    assert {*jobs, "cdc_lake/engine/replay.py", "cdc_lake/engine/maintenance.py"} <= set(names)
    assert not [name for name in names if name.startswith("cdc_lake/local/")]


def test_library_zip_is_byte_for_byte_reproducible(built, tmp_path: Path) -> None:
    config, sources, assets = built
    again = build_assets(config, tmp_path / "again", sources=sources)
    assert again.library_zip.read_bytes() == assets.library_zip.read_bytes()


def test_lambda_folder_holds_handler_pure_library_modules_and_json_config(built) -> None:
    config, _layout, assets = built
    root = assets.lambda_dir
    assert (root / "dms_trigger" / "handler.py").is_file()
    shipped_modules = sorted(p.relative_to(root / "cdc_lake") for p in (root / "cdc_lake").rglob("*.py"))
    assert shipped_modules == sorted(p.relative_to(_layout.library_dir) for p in _layout.lambda_library_files())
    assert {Path("core/config.py"), Path("core/dms_files.py")} <= set(shipped_modules)
    # The Lambda ships the core room alone: nothing of the engine, the operator tools or the laptop.
    assert {p.parts[0] for p in shipped_modules} == {"__init__.py", "core"}
    assert not list(root.rglob("__pycache__"))
    shipped = parse_config_text((root / "tables.json").read_text(encoding="utf-8"), "tables.json")
    assert shipped == config
    assert assets.config_json.read_text(encoding="utf-8") == (root / "tables.json").read_text(encoding="utf-8")


def test_missing_sources_are_named(tmp_path: Path) -> None:
    (tmp_path / "glue_jobs" / "cdc_lake").mkdir(parents=True)
    with pytest.raises(PackagingError) as error:
        build_assets(load_config(DEMO_CONFIG), tmp_path / "out", sources=SourceLayout(tmp_path))
    assert "full_load.py" in str(error.value)
    assert "maintenance.py" in str(error.value)
    assert "handler.py" in str(error.value)


def test_the_lake_io_jar_is_built_again_only_when_a_source_changed_and_alike_each_time(tmp_path: Path) -> None:
    """The jar make setup builds and the stack ships: the same bytes from the same sources, and refused to a synth
    where it was never built."""
    runtime = iceberg_runtime(spark_jars())
    sources = tmp_path / "java"
    shutil.copytree(JVM_SOURCES, sources)
    first = build_lake_io_jar(runtime, tmp_path / "a" / "io.jar", sources)
    again = build_lake_io_jar(runtime, tmp_path / "b" / "io.jar", sources)
    assert first.read_bytes() == again.read_bytes() == LAKE_IO_JAR.read_bytes()
    with zipfile.ZipFile(first) as archive:
        assert f"{LAKE_IO.replace('.', '/')}.class" in archive.namelist()

    built_at = first.stat().st_mtime_ns
    assert build_lake_io_jar(runtime, first, sources).stat().st_mtime_ns == built_at  # unchanged: not built again
    (source,) = sources.rglob("*.java")
    source.write_text(source.read_text() + "\n// changed\n")
    assert build_lake_io_jar(runtime, first, sources).stat().st_mtime_ns != built_at

    source.write_text(source.read_text() + "\nnot java\n")
    with pytest.raises(PackagingError, match="javac could not compile"):
        build_lake_io_jar(runtime, first, sources)
    with pytest.raises(PackagingError, match="is not built: run `make setup`"):
        build_assets(load_config(DEMO_CONFIG), tmp_path / "out", lake_io_jar=tmp_path / "none.jar")
