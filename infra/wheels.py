"""The Python packages the Glue jobs need beyond Glue's own, shipped as pinned wheels from the assets bucket.

Each Glue runtime has a lock file (``infra/job-wheels-glue<version>.txt``): every wheel of the jobs' packages
and their dependencies, for that Glue's Python on Linux x86_64, pinned with its SHA-256 and tagged with the job
groups that need it. ``make setup`` downloads them with pip's ``--require-hashes`` into ``.wheels/``; the stack
uploads each as an asset under its own wheel name and the jobs install them with ``--no-index``, so no job run
reaches PyPI. ``python -m infra.wheels --lock`` writes the lock files again after a pin in requirements.txt moved.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Literal

from cdc_lake.core.exceptions import PackagingError

REPO_ROOT = Path(__file__).resolve().parent.parent
WHEEL_DIR = REPO_ROOT / ".wheels"
GLUE_PYTHONS = {"5.1": "3.11", "6.0": "3.13"}
# Glue's workers run Amazon Linux 2023 on x86_64 (glibc 2.34).
PLATFORMS = ("manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_28_x86_64")
WheelGroup = Literal["lake", "postgres", "mysql"]
# What each kind of job imports beyond Glue: the configuration's models, and the source check's driver.
GROUPS: dict[WheelGroup, tuple[str, ...]] = {
    "lake": ("pydantic",),
    "postgres": ("pydantic", "psycopg[binary]"),
    "mysql": ("pydantic", "PyMySQL"),
}
_LOCK_LINE = re.compile(
    r"^(?P<name>[A-Za-z0-9_.-]+)==(?P<version>\S+) --hash=sha256:(?P<sha>[0-9a-f]{64})\s+# (?P<groups>.+)$"
)


def lock_file(glue_version: str) -> Path:
    return REPO_ROOT / "infra" / f"job-wheels-glue{glue_version}.txt"


def _pin(requirement: str) -> str:
    """``requirement`` at the version requirements.txt pins, so the jobs run what the tests ran."""
    name = requirement.split("[", 1)[0]
    text = (REPO_ROOT / "requirements.txt").read_text(encoding="utf-8")
    found = re.search(rf"^{re.escape(name)}(?:\[[^\]]*\])?==(\S+)", text, re.IGNORECASE | re.MULTILINE)
    if found is None:
        raise PackagingError(f"requirements.txt pins no {name}")
    return f"{requirement}=={found[1]}"


def _download(glue_version: str, requirements: list[str], target: Path, *extra: str) -> None:
    python = GLUE_PYTHONS[glue_version]
    command = [
        sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--only-binary=:all:",
        *(f"--platform={p}" for p in PLATFORMS), f"--python-version={python}", "--implementation=cp",
        f"--abi=cp{python.replace('.', '')}", "--dest", str(target), *extra, *requirements,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PackagingError(f"pip download for Glue {glue_version} failed:\n{done.stderr.strip()[-2000:]}")


def lock(glue_version: str) -> Path:
    """Write ``glue_version``'s lock file from the pins in requirements.txt: each wheel's name, version, SHA-256
    and the groups whose closure holds it."""
    groups_of: dict[str, set[str]] = {}
    with tempfile.TemporaryDirectory(prefix="cdc-lake-lock-") as scratch:
        for group, packages in GROUPS.items():
            folder = Path(scratch) / group
            _download(glue_version, [_pin(p) for p in packages], folder)
            for wheel in folder.glob("*.whl"):
                groups_of.setdefault(wheel.name, set()).add(group)
                (Path(scratch) / wheel.name).write_bytes(wheel.read_bytes())
        lines = []
        for name in sorted(groups_of):
            distribution, version = name.split("-")[:2]
            sha = hashlib.sha256((Path(scratch) / name).read_bytes()).hexdigest()
            groups = " ".join(g for g in GROUPS if g in groups_of[name])
            lines.append(f"{distribution}=={version} --hash=sha256:{sha}  # {groups}")
    path = lock_file(glue_version)
    header = (
        f"# The Glue {glue_version} jobs' wheels (Python {GLUE_PYTHONS[glue_version]}, Linux x86_64), written by "
        "`python -m infra.wheels --lock`\n# from requirements.txt's pins; each line ends with the job groups "
        "that install it (infra/wheels.py).\n"
    )
    path.write_text(header + "\n".join(lines) + "\n", encoding="utf-8")
    return path


def install(glue_version: str) -> Path:
    """Download ``glue_version``'s locked wheels into ``.wheels/glue<version>``, each checked against its hash."""
    target = WHEEL_DIR / f"glue{glue_version}"
    _download(glue_version, [], target, "--no-deps", "--require-hashes", "-r", str(lock_file(glue_version)))
    return target


def job_wheels(glue_version: str, group: WheelGroup) -> list[Path]:
    """The downloaded wheels ``group``'s jobs install on ``glue_version``, refused when one is missing."""
    folder = WHEEL_DIR / f"glue{glue_version}"
    wheels: list[Path] = []
    for line in lock_file(glue_version).read_text(encoding="utf-8").splitlines():
        found = _LOCK_LINE.match(line)
        if found is None or group not in found["groups"].split():
            continue
        prefix = f"{found['name']}-{found['version']}-"
        matches = sorted(folder.glob(f"{prefix}*.whl"))
        if len(matches) != 1 or hashlib.sha256(matches[0].read_bytes()).hexdigest() != found["sha"]:
            raise PackagingError(
                f"{folder}: no wheel {prefix}*.whl matching {lock_file(glue_version).name}; run `make setup`"
            )
        wheels.append(matches[0])
    return wheels


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--lock", action="store_true", help="write the lock files from requirements.txt's pins")
    parser.add_argument("--install", action="store_true", help="download the locked wheels into .wheels/")
    args = parser.parse_args(argv)
    for version in GLUE_PYTHONS:
        if args.lock:
            print(f"wrote {lock(version).relative_to(REPO_ROOT)}")
        if args.install:
            install(version)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
