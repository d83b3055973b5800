"""The README stays short, keeps its two commands, and every relative link in it and in docs/ resolves: the
file exists, and a ``#anchor`` names a heading of the target as GitHub slugifies it (or an explicit
``<a id=…>``). So does every ``docs/<page>.md#<anchor>`` the code names in a message or a comment."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from infra.packaging import REPO_ROOT

README = REPO_ROOT / "README.md"
MAX_README_LINES = 150
DOCUMENTS = [README, *sorted((REPO_ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^(```|~~~)")
INLINE_CODE = re.compile(r"`[^`\n]*`")
# An inline link or image: [text](target) or ![alt](target), the target without spaces, an optional title.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
EXPLICIT_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
EXTERNAL = ("http://", "https://", "mailto:")
# A page of docs/ named with its anchor in prose, a message or a comment, e.g. docs/deploy.md#reload.
DOC_MENTION = re.compile(r"\bdocs/([\w-]+\.md)#([\w-]+)")
MENTIONING = [
    *DOCUMENTS,
    *(
        path
        for folder in ("glue_jobs", "lambda", "infra", "bench", "scripts", "tests")
        for path in (REPO_ROOT / folder).rglob("*.py")
    ),
]


def prose_lines(path: Path) -> list[str]:
    """The file's lines outside fenced code blocks (a ``#`` there is a shell comment, not a heading)."""
    lines, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def github_slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: link text kept, lower case, every character but letters,
    digits, ``_``, ``-`` and spaces removed, spaces made ``-``."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    """Every anchor a reader may link to in the file: its headings' slugs (a repeated one numbered ``-1``,
    ``-2``, … as GitHub numbers them) and its explicit ``<a id=…>`` anchors."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in prose_lines(path):
        found.update(EXPLICIT_ANCHOR.findall(line))
        heading = HEADING.match(line)
        if not heading:
            continue
        slug = github_slug(heading.group(1))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return frozenset(found)


def relative_links(path: Path) -> list[str]:
    """The file's relative link targets, outside code blocks and inline code."""
    targets = []
    for line in prose_lines(path):
        for target in LINK.findall(INLINE_CODE.sub("", line)):
            if not target.startswith(EXTERNAL):
                targets.append(target)
    return targets


def shown(path: Path) -> str:
    """The path as a message names it: from the repository's root when it is inside it."""
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def broken(path: Path, target: str) -> str | None:
    """Why the link ``target`` in ``path`` does not resolve, or None when it does."""
    file_part, _, anchor = target.partition("#")
    linked = (path.parent / file_part).resolve() if file_part else path
    if not linked.exists():
        return f"{target}: no such file {shown(linked)}"
    if anchor and linked.suffix == ".md" and anchor not in anchors(linked):
        return f"{target}: {shown(linked)} has no heading whose anchor is #{anchor}"
    return None


def test_the_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, (
        f"README.md has {len(lines)} lines, more than {MAX_README_LINES}: move the detail to docs/ and link it"
    )


def test_the_readme_gives_the_two_commands() -> None:
    assert "## Two commands" in prose_lines(README)
    text = README.read_text(encoding="utf-8")
    block = text.split("## Two commands", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    assert commands == ["make demo", "make test"]


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda path: str(path.relative_to(REPO_ROOT)))
def test_relative_links_resolve(path: Path) -> None:
    problems = [problem for target in relative_links(path) if (problem := broken(path, target))]
    assert not problems, f"{shown(path)}:\n" + "\n".join(problems)


def test_doc_mentions_resolve() -> None:
    problems = [
        f"{shown(path)}: docs/{page}#{anchor}: {reason}"
        for path in MENTIONING
        for page, anchor in DOC_MENTION.findall(path.read_text(encoding="utf-8"))
        if (reason := broken(REPO_ROOT / "docs" / page, f"#{anchor}"))
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("Reproduce a Glue run on a laptop: `cdc-lake glue-run`", "reproduce-a-glue-run-on-a-laptop-cdc-lake-glue-run"),
        ("Warm runs (`runs.mode: warm`)", "warm-runs-runsmode-warm"),
        ("Measured: verify against export + reconcile", "measured-verify-against-export--reconcile"),
        ("local/ · laptop only: CLI", "local--laptop-only-cli"),
        ("Glue 5.1 or Glue 6.0", "glue-51-or-glue-60"),
    ],
)
def test_github_slug(heading: str, slug: str) -> None:
    assert github_slug(heading) == slug
