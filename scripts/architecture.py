"""Write docs/architecture.md from the code (the rooms and their imports, what each bundle ships, every module with
the first sentence of its docstring) and the README's layout block (the folders, with the rooms' module counts).

python scripts/architecture.py          # rewrite both
python scripts/architecture.py --check  # exit 1 if either is out of date (tests/unit/test_architecture.py)
"""

from __future__ import annotations

import argparse
import ast
import collections
import re
import sys
from pathlib import Path

from infra.packaging import GLUE_SCRIPTS, REPO_ROOT, SourceLayout, first_party_modules, import_graph

DOC = REPO_ROOT / "docs" / "architecture.md"
README = REPO_ROOT / "README.md"
LAYOUT_START = "<!-- layout: made by scripts/architecture.py (make docs) -->"
LAYOUT_END = "<!-- /layout -->"
# The repository's folders beside the library, as the README's layout shows them.
FOLDERS = {
    "lambda/dms_trigger/": "the S3-triggered Lambda (no Spark): event -> job-run requests -> glue:StartJobRun",
    "infra/": "the CDK v2 app; packaging.py builds the Glue zip and the Lambda folder, wheels.py the jobs' packages",
    "jvm/": "the lake's Iceberg FileIO (Java: S3FileIO keeping the metadata a run wrote), jarred by make setup",
    "tests/": "unit/ (pure), functional/ (real Spark + Iceberg, moto), pg/ and mariadb/ (real servers), infra/ (CDK)",
    "bench/": "the benchmark harness (make bench and its bench-* targets: make help lists them)",
    "scripts/": "setup.sh (make setup) and architecture.py (docs/architecture.md and this block)",
    "docs/": "deployment, drift, performance, source types, cost; architecture.md is made from the code",
}
LIBRARY = REPO_ROOT / "glue_jobs" / "cdc_lake"
# The units drawn, in the order imports may point (each may import those after it), with where they run.
ROOMS = {
    "local": "laptop only: CLI, demo, generator, local Spark and AWS",
    "jobs": "the Glue jobs of core.glue_jobs: options, run, and the one entry their scripts call",
    "ops": "operator tools on the engine: the CLI's, verify and repair, the source check",
    "infra": "the CDK app",
    "engine": "Spark + Iceberg: replay, maintenance, reload, metrics",
    "dms_trigger": "the Lambda",
    "core": "no Spark: shared by all",
}


def room_of(path: Path) -> str:
    if path.is_relative_to(LIBRARY):
        return path.relative_to(LIBRARY).parts[0]
    return "dms_trigger" if path.is_relative_to(REPO_ROOT / "lambda") else "infra"


def sources() -> dict[Path, str]:
    found = {path: room_of(path) for path in first_party_modules().values()}
    return {path: room for path, room in sorted(found.items()) if room in ROOMS}


def room_imports() -> collections.Counter[tuple[str, str]]:
    """(importer room, imported room) -> how many module-to-module imports cross between them."""
    modules, rooms = first_party_modules(), sources()
    edges: collections.Counter[tuple[str, str]] = collections.Counter()
    for name, targets in import_graph().items():
        room = rooms.get(modules[name])
        for target in map(modules.get, targets):
            if room and target in rooms and rooms[target] != room and target.name != "__init__.py":
                edges[room, rooms[target]] += 1
    return edges


def module_names(paths: list[Path], root: Path) -> str:
    names = [p.relative_to(root).with_suffix("").as_posix() for p in paths if p.name != "__init__.py"]
    return ", ".join(f"`{name}`" for name in sorted(names))


def summary(path: Path) -> str:
    """The first sentence of a module's docstring, on one line."""
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    paragraph = " ".join(docstring.split("\n\n", 1)[0].split())
    sentence = re.split(r"(?<=[.!?])\s", paragraph, maxsplit=1)[0]
    return sentence.replace("|", "\\|")


def scripts_entry() -> str:
    return "`glue_jobs/{" + ",".join(Path(name).stem for name in GLUE_SCRIPTS.values()) + "}.py`"


def render_layout() -> str:
    """The README's layout block: the library's rooms (what runs where, how many modules) and the other folders."""
    rooms = sources()
    counts = collections.Counter(room for path, room in rooms.items() if path.name != "__init__.py")
    width = max(len(name) for name in [*FOLDERS, "glue_jobs/"]) + 4
    lines = [LAYOUT_START, "```"]
    lines.append(f"{'glue_jobs/':<{width}}the Glue entry scripts ({', '.join(sorted(GLUE_SCRIPTS))}) and the library")
    lines.append(f"  {'cdc_lake/':<{width - 2}}")
    for room in ("core", "engine", "ops", "jobs", "local"):
        lines.append(f"    {room + '/':<{width - 4}}{counts[room]} modules: {ROOMS[room]}")
    lines += [f"{folder:<{width}}{what}" for folder, what in FOLDERS.items()]
    lines += ["```", LAYOUT_END]
    return "\n".join(line.rstrip() for line in lines)


def readme_text() -> str:
    text = README.read_text(encoding="utf-8")
    start, end = text.find(LAYOUT_START), text.find(LAYOUT_END)
    if start < 0 or end < start:
        raise SystemExit(f"README.md lacks the layout markers {LAYOUT_START} ... {LAYOUT_END}")
    return text[:start] + render_layout() + text[end + len(LAYOUT_END) :]


def render() -> str:
    rooms = sources()
    counts = collections.Counter(room for path, room in rooms.items() if path.name != "__init__.py")
    lines = [
        "# Architecture",
        "",
        "Made by `scripts/architecture.py` from the code (`make docs`); a test fails when it is out of date.",
        "",
        "## Rooms: where code runs, and who imports whom",
        "",
        "Arrows are imports, labelled with how many module imports cross. They only point down the list",
        "`local → jobs → ops → engine → core` (and the Lambda and the CDK app to core);",
        "`tests/unit/test_architecture.py` enforces it.",
        "",
        "```mermaid",
        "flowchart TD",
    ]
    for room, runs in ROOMS.items():
        lines.append(f'    {room}["{room}/ · {counts[room]} modules<br/>{runs}"]')
    order = list(ROOMS)
    for (source, target), n in sorted(
        room_imports().items(), key=lambda i: (order.index(i[0][0]), order.index(i[0][1]))
    ):
        lines.append(f"    {source} -->|{n}| {target}")
    lines += ["```", ""]
    layout = SourceLayout()
    glue = layout.glue_library_files()
    lambda_ = layout.lambda_library_files()
    lines += [
        "## Bundles: what each deployed artifact ships",
        "",
        "Built by `infra/packaging.py` from the imports of the entry points, so a module ships only where it runs.",
        "",
        "| bundle | entry | `cdc_lake` modules it ships |",
        "|---|---|---|",
        f"| Glue library zip | {scripts_entry()} | {module_names(glue, LIBRARY)} |",
        f"| Lambda folder | `lambda/dms_trigger/handler.py` | {module_names(lambda_, LIBRARY)} |",
        "",
        "## Modules",
        "",
        "Each module with the first sentence of its docstring, room by room.",
        "",
    ]
    for room, runs in ROOMS.items():
        lines += [f"### {room}/ · {runs}", "", "| module | what it is |", "|---|---|"]
        for path, found in rooms.items():
            if found == room and path.name != "__init__.py":
                lines.append(f"| `{path.relative_to(REPO_ROOT).as_posix()}` | {summary(path)} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if docs/architecture.md is out of date")
    args = parser.parse_args(argv)
    made = {DOC: render(), README: readme_text()}
    if args.check:
        stale = [path for path, text in made.items() if not path.is_file() or path.read_text(encoding="utf-8") != text]
        for path in stale:
            print(f"{path.relative_to(REPO_ROOT)} is out of date: run `make docs`", file=sys.stderr)
        return 1 if stale else 0
    for path, text in made.items():
        path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
