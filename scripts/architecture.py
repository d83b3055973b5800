"""Write docs/architecture.md from the code: the rooms and their imports, and what each bundle ships.

python scripts/architecture.py          # rewrite docs/architecture.md
python scripts/architecture.py --check  # exit 1 if it is out of date (tests/unit/test_architecture.py)
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

from infra.packaging import REPO_ROOT, SourceLayout, first_party_modules, import_graph

DOC = REPO_ROOT / "docs" / "architecture.md"
LIBRARY = REPO_ROOT / "glue_jobs" / "cdc_lake"
# The units drawn, in the order imports may point (each may import those after it), with where they run.
ROOMS = {
    "local": "laptop only: CLI, demo, generator, local Spark and AWS",
    "ops": "operator tools, run from the CLI",
    "infra": "the CDK app",
    "engine": "Spark + Iceberg: the Glue jobs",
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
        "`local → ops → engine → core` (and the Lambda and the CDK app to core); `tests/unit/test_architecture.py`",
        "enforces it.",
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
        f"| Glue library zip | `glue_jobs/{{full_load,cdc_replay,maintenance}}.py` | {module_names(glue, LIBRARY)} |",
        f"| Lambda folder | `lambda/dms_trigger/handler.py` | {module_names(lambda_, LIBRARY)} |",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if docs/architecture.md is out of date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not DOC.is_file() or DOC.read_text(encoding="utf-8") != text:
            print(f"{DOC.relative_to(REPO_ROOT)} is out of date: run `make docs`", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
