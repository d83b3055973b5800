"""The layout holds: rooms named for where code runs, imports only downward between them, no import cycles,
a Glue bundle without laptop tools, a Lambda without Spark.

The bundles are the ones the stack deploys (``infra.packaging.build_assets``); each is imported in a fresh
interpreter that can reach nothing else of the repository, so a stray import fails here, not on AWS.
"""

from __future__ import annotations

import graphlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from cdc_lake.core.config import load_config
from infra.packaging import (
    GLUE_SCRIPTS,
    REPO_ROOT,
    SourceLayout,
    build_assets,
    first_party_modules,
    import_graph,
    imported_modules,
)

# The laptop tools: CLI, demo, generator, local runtime and session.
LAPTOP_TOOLS = "cdc_lake/local/"
DEMO_CONFIG = REPO_ROOT / "glue_jobs" / "cdc_lake" / "demo.yaml"

# Runs in a fresh interpreter: forgets the repository (the editable install's finders and any path into
# it), blocks the named top-level packages, puts one bundle first on the path, imports the given modules
# and prints where each came from.
IMPORT_PROBE = """
import importlib, importlib.abc, json, sys
root, blocked, modules, repo = sys.argv[1], set(sys.argv[2].split(",")), sys.argv[3].split(","), sys.argv[4]
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in getattr(f, "__name__", type(f).__name__).lower()]
sys.path[:] = [p for p in sys.path if p and (p.startswith(sys.prefix) or not p.startswith(repo))]

class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ImportError(f"{name} is not available in this bundle")
        return None

sys.meta_path.insert(0, Blocker())
sys.path.insert(0, root)
print(json.dumps({name: importlib.import_module(name).__file__ for name in modules}))
"""


def run_probe(root: Path, blocked: tuple[str, ...], modules: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE, str(root), ",".join(blocked), ",".join(modules), str(REPO_ROOT)],
        capture_output=True,
        text=True,
        check=False,
        cwd=root.parent if root.is_file() else root,
    )


def probe(root: Path, blocked: tuple[str, ...], modules: list[str]) -> dict[str, str]:
    result = run_probe(root, blocked, modules)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def assets(tmp_path_factory: pytest.TempPathFactory):
    return build_assets(load_config(DEMO_CONFIG), tmp_path_factory.mktemp("bundles"), sources=SourceLayout())


def test_graph_sees_known_edges() -> None:
    graph = import_graph()
    assert "cdc_lake.core.config" in graph["cdc_lake.engine.replay"]
    assert "cdc_lake.core.config" in graph["dms_trigger.routing"]
    assert "cdc_lake.local.jars" in graph["cdc_lake.local.session"]


# Each room of the library, and the first-party packages beside it, with the rooms each may import. The
# order is the contract: core runs everywhere, the engine in Glue, ops on the engine, the Glue jobs on ops,
# local on a laptop.
ROOMS = {
    "cdc_lake.core": {"cdc_lake.core"},
    "cdc_lake.engine": {"cdc_lake.core", "cdc_lake.engine"},
    "cdc_lake.ops": {"cdc_lake.core", "cdc_lake.engine", "cdc_lake.ops"},
    "cdc_lake.jobs": {"cdc_lake.core", "cdc_lake.engine", "cdc_lake.ops", "cdc_lake.jobs"},
    "cdc_lake.local": {"cdc_lake", "dms_trigger", "infra"},
    "dms_trigger": {"cdc_lake.core", "dms_trigger"},
    "infra": {"cdc_lake.core", "infra"},
}


def room_of(module: str) -> str | None:
    return next((room for room in ROOMS if module == room or module.startswith(room + ".")), None)


def test_every_library_module_lives_in_a_room() -> None:
    homeless = sorted(name for name in first_party_modules() if name != "cdc_lake" and room_of(name) is None)
    assert not homeless, f"modules outside core/, engine/, ops/, jobs/ and local/: {homeless}"


def test_imports_only_go_down_between_rooms() -> None:
    upward = sorted(
        f"{name} -> {target}"
        for name, targets in import_graph().items()
        if (room := room_of(name)) is not None
        for target in targets
        if target != "cdc_lake"
        and not any(target == allowed or target.startswith(allowed + ".") for allowed in ROOMS[room])
    )
    assert not upward, "imports against the rooms' order:\n  " + "\n  ".join(upward)


def test_no_job_module_imports_another() -> None:
    """A job's module (the one its Glue script takes the job from) imports no other job's: what jobs share lives in
    the modules beside them that no script names (``jobs.entry``, ``jobs.arguments``)."""
    layout, modules = SourceLayout(), first_party_modules()
    named = {name for job in GLUE_SCRIPTS for name in imported_modules(layout.glue_script(job)) if name in modules}
    jobs = {name for name in named if name.startswith("cdc_lake.jobs.")} - {"cdc_lake.jobs.entry"}
    assert "cdc_lake.jobs.warm" in jobs
    graph = import_graph()
    sideways = sorted(f"{name} -> {target}" for name in jobs for target in graph[name] if target in jobs)
    assert not sideways, "job modules importing each other:\n  " + "\n  ".join(sideways)


def test_no_import_cycles() -> None:
    sorter = graphlib.TopologicalSorter(import_graph())
    try:
        sorter.prepare()
    except graphlib.CycleError as error:
        pytest.fail(f"import cycle: {' -> '.join(error.args[1])}")


def test_glue_library_depends_on_neither_the_lambda_nor_the_laptop_tools() -> None:
    graph = import_graph()
    module_of = {path: name for name, path in first_party_modules().items()}
    glue = {module_of[path] for path in SourceLayout().glue_library_files()}
    assert "cdc_lake.engine.replay" in glue
    reaching_out = {
        (name, target)
        for name in glue
        for target in graph[name]
        if target.startswith(("dms_trigger", "infra", "cdc_lake.local"))
    }
    assert not reaching_out


def test_glue_bundle_holds_only_what_glue_imports_and_imports_alone(assets) -> None:
    with zipfile.ZipFile(assets.library_zip) as archive:
        names = archive.namelist()
    assert "cdc_lake/jobs/entry.py" in names
    assert "cdc_lake/engine/replay.py" in names
    assert not [name for name in names if name.startswith(LAPTOP_TOOLS)]
    modules = [
        name.removesuffix(".py").replace("/", ".").removesuffix(".__init__") for name in names if name.endswith(".py")
    ]
    origins = probe(assets.library_zip, ("dms_trigger", "infra", "tests", "bench"), modules)
    assert all(str(assets.library_zip) in origin for origin in origins.values()), origins


def test_glue_bundle_cannot_reach_the_laptop_tools(assets) -> None:
    result = run_probe(assets.library_zip, ("dms_trigger",), ["cdc_lake.jobs.entry", "cdc_lake.local.cli"])
    assert result.returncode != 0
    assert "No module named 'cdc_lake.local'" in result.stderr


def test_lambda_bundle_imports_without_spark(assets) -> None:
    modules = ["dms_trigger.handler", "dms_trigger.routing", "cdc_lake.core.config", "cdc_lake.core.dms_files"]
    origins = probe(assets.lambda_dir, ("pyspark", "py4j", "infra", "tests", "bench"), modules)
    assert all(origin.startswith(str(assets.lambda_dir)) for origin in origins.values()), origins


def test_the_architecture_page_is_made_from_todays_code() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "architecture.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stderr


def test_the_installed_project_holds_every_package() -> None:
    """A package left out of pyproject's list is still found through the editable install's folders, so only a
    regular install (a wheel) would lose it: every folder with an ``__init__.py`` is listed."""
    import tomllib

    setuptools = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    on_disk = {
        ".".join((top, *init.parent.relative_to(REPO_ROOT / folder).parts))
        for top, folder in setuptools["package-dir"].items()
        for init in (REPO_ROOT / folder).rglob("__init__.py")
        if "node_modules" not in init.parts and "cdk.out" not in init.parts
    }
    assert set(setuptools["packages"]) == on_disk
