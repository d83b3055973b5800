"""The jars a local Spark session needs to run what a Glue version runs, taken from Maven Central and checked.

``GLUE_RUNTIMES`` is the one place that maps a Glue version to its local runtime: the PyPI ``pyspark`` it pairs
with, and the jars, each pinned by version and SHA-256. Glue itself loads Iceberg with ``--datalake-formats
iceberg``; locally the same Iceberg Spark runtime and AWS bundle come from Maven Central, plus what Glue has
and plain Spark lacks: a Hadoop file system for ``s3://`` (Glue's EMRFS; locally ``hadoop-aws``'s S3A, at the
Hadoop version of pyspark's own client jars, with the AWS SDK bundle that version declares).

``make setup`` runs ``python -m cdc_lake.local.jars --install``: Maven (the ordinary client, with strict
checksums) copies each missing jar, then its SHA-256 is checked against the pin here; then the lake's own FileIO
(``jvm/``, ``infra.packaging.build_lake_io_jar``) is compiled against the runtime's Iceberg, as the stack ships it.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from cdc_lake.core.exceptions import CdcLakeError
from cdc_lake.core.names import GLUE_VERSION
from infra.packaging import LAKE_IO_JAR, build_lake_io_jar

JAR_DIR_ENV = "CDC_LAKE_JAR_DIR"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
_VERIFIED = ".verified"


@dataclass(frozen=True)
class GlueRuntime:
    """What one Glue version runs, as a local session reproduces it."""

    glue_version: str
    spark_version: str
    iceberg_version: str
    jars: tuple[MavenJar, ...]


@dataclass(frozen=True)
class MavenJar:
    """An artifact on Maven Central (a jar unless ``packaging`` says otherwise), pinned by its SHA-256."""

    group: str
    artifact: str
    version: str
    sha256: str

    packaging: str = "jar"

    @property
    def coordinate(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}:{self.packaging}"

    @property
    def file_name(self) -> str:
        return f"{self.artifact}-{self.version}.{self.packaging}"


GLUE_RUNTIMES: dict[str, GlueRuntime] = {
    "5.1": GlueRuntime(
        glue_version="5.1",
        spark_version="3.5.6",
        iceberg_version="1.10.0",
        jars=(
            MavenJar(
                "org.apache.iceberg",
                "iceberg-spark-runtime-3.5_2.12",
                "1.10.0",
                "70f9471870b2d456167d703c829f098a446b86bb1379eee338c0efa03a341026",
            ),
            MavenJar(
                "org.apache.iceberg",
                "iceberg-aws-bundle",
                "1.10.0",
                "172370cfc32a5f1ae5399b210e86fc04a366dc29a112d97ac8ffc74df7525596",
            ),
            # pyspark 3.5.6 ships Hadoop 3.3.4's client; S3A must match it.
            MavenJar(
                "org.apache.hadoop",
                "hadoop-aws",
                "3.3.4",
                "53f9ae03c681a30a50aa17524bd9790ab596b28481858e54efd989a826ed3a4a",
            ),
            MavenJar(
                "com.amazonaws",
                "aws-java-sdk-bundle",
                "1.12.262",
                "873fe7cf495126619997bec21c44de5d992544aea7e632fdc77adb1a0915bae5",
            ),
        ),
    ),
    "6.0": GlueRuntime(
        glue_version="6.0",
        spark_version="4.1.1",
        iceberg_version="1.11.0",
        jars=(
            MavenJar(
                "org.apache.iceberg",
                "iceberg-spark-runtime-4.1_2.13",
                "1.11.0",
                "d6ea6c5d099288daeb7d5a92061bd3d7d8f296492632b42378e5f2f0e3066242",
            ),
            MavenJar(
                "org.apache.iceberg",
                "iceberg-aws-bundle",
                "1.11.0",
                "38f01da7e96850cdd05e6616d758b77b43314b712a8808e3f9a824d56976162f",
            ),
            # pyspark 4.1.1 ships Hadoop 3.4.2's client, whose S3A runs on the AWS SDK v2: the Iceberg AWS bundle
            # carries that SDK (2.44.4) but for its transfer manager, which S3A needs too, at the bundle's version.
            MavenJar(
                "org.apache.hadoop",
                "hadoop-aws",
                "3.4.2",
                "d2d24e6b715b5656b9d238bf13b6682a07e2004dd36aad74a73aeb854319f4d9",
            ),
            MavenJar(
                "software.amazon.awssdk",
                "s3-transfer-manager",
                "2.44.4",
                "dbcad736b19f6eb8471f9edf027d9fffe994228f25f415894efd01fd80cb6c02",
            ),
        ),
    ),
}


def installed_glue_version() -> str:
    """The Glue version whose Spark this environment's ``pyspark`` is (``make setup GLUE_VERSION=…`` chose it)."""
    spark_version = importlib.metadata.version("pyspark")
    for glue_runtime in GLUE_RUNTIMES.values():
        if glue_runtime.spark_version == spark_version:
            return glue_runtime.glue_version
    known = ", ".join(f"Glue {r.glue_version}: pyspark {r.spark_version}" for r in GLUE_RUNTIMES.values())
    raise CdcLakeError(f"pyspark {spark_version} matches no Glue runtime ({known}); run `make setup`")


def runtime(glue_version: str = GLUE_VERSION) -> GlueRuntime:
    try:
        return GLUE_RUNTIMES[glue_version]
    except KeyError:
        known = ", ".join(sorted(GLUE_RUNTIMES))
        raise CdcLakeError(f"Glue version {glue_version!r} has no local runtime; use one of {known}") from None


def default_jar_dir() -> Path:
    return Path(os.environ.get(JAR_DIR_ENV) or Path(sys.prefix) / "share" / "cdc-lake" / "jars")


def runtime_dir(glue_version: str = GLUE_VERSION, jar_dir: Path | None = None) -> Path:
    return (jar_dir or default_jar_dir()) / f"glue-{glue_version}"


def spark_jars(glue_version: str = GLUE_VERSION, jar_dir: Path | None = None) -> list[Path]:
    """Jars to put on the local Spark session's classpath, in order; refused when ``make setup`` has not run."""
    folder = runtime_dir(glue_version, jar_dir)
    jars = [folder / jar.file_name for jar in runtime(glue_version).jars]
    missing = [jar.name for jar in jars if not jar.is_file()]
    if missing:
        raise CdcLakeError(f"jars for Glue {glue_version} missing in {folder}: {', '.join(missing)}; run `make setup`")
    if not LAKE_IO_JAR.is_file():
        raise CdcLakeError(f"{LAKE_IO_JAR} is not built; run `make setup`")
    return [*jars, LAKE_IO_JAR]


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _pins(glue_runtime: GlueRuntime) -> str:
    return "".join(f"{jar.sha256}  {jar.file_name}\n" for jar in glue_runtime.jars)


def install(glue_version: str = GLUE_VERSION, jar_dir: Path | None = None, *, mvn: str = "mvn") -> list[Path]:
    """Copy the runtime's jars from Maven Central into its folder and check each against its pin.

    Done once: the folder then records the pins it was checked against, and a later call with the same pins
    only looks at the files' presence.
    """
    glue_runtime = runtime(glue_version)
    folder = runtime_dir(glue_version, jar_dir)
    marker = folder / _VERIFIED
    pins = _pins(glue_runtime)
    jars = [folder / jar.file_name for jar in glue_runtime.jars]
    if not (marker.is_file() and marker.read_text() == pins and all(j.is_file() for j in jars)):
        if shutil.which(mvn) is None:
            raise CdcLakeError("Maven (mvn) is not installed; install it (Debian: apt-get install maven)")
        folder.mkdir(parents=True, exist_ok=True)
        marker.unlink(missing_ok=True)
        for jar, path in zip(glue_runtime.jars, jars, strict=True):
            if not path.is_file() or sha256(path) != jar.sha256:
                path.unlink(missing_ok=True)
                copy_checked(jar, folder, mvn)
        marker.write_text(pins)
    return [*jars, build_lake_io_jar(iceberg_runtime(jars))]


def iceberg_runtime(jars: list[Path]) -> list[Path]:
    """What the lake's Java compiles against: the Iceberg Spark runtime's jar, which holds Iceberg's API and core."""
    return [jar for jar in jars if jar.name.startswith("iceberg-spark-runtime-")]


def copy_checked(artifact: MavenJar, folder: Path, mvn: str = "mvn") -> Path:
    """Copy one artifact from Maven Central into ``folder`` with Maven, then check it against its pin (removed
    when it does not match)."""
    command = [mvn, "-B", "-q", "-C", "-Dstyle.color=never", f"{DEPENDENCY_PLUGIN}:copy"]
    command += [f"-Dartifact={artifact.coordinate}", f"-DoutputDirectory={folder}"]
    print(f"setup: {artifact.coordinate} from Maven Central", file=sys.stderr)
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    if done.returncode != 0:
        raise CdcLakeError(f"mvn could not copy {artifact.coordinate}:\n{(done.stdout + done.stderr)[-2000:]}")
    path = folder / artifact.file_name
    actual = sha256(path)
    if actual != artifact.sha256:
        path.unlink()
        raise CdcLakeError(f"{artifact.coordinate}: SHA-256 {actual} is not the pinned {artifact.sha256}; removed it")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--install", action="store_true", help="copy and check the jars (idempotent)")
    parser.add_argument("--glue-version", default=GLUE_VERSION, choices=sorted(GLUE_RUNTIMES))
    parser.add_argument("--jar-dir", type=Path, default=None, help=f"default: ${JAR_DIR_ENV} or <venv>/share/…")
    args = parser.parse_args(argv)
    jars = install(args.glue_version, args.jar_dir) if args.install else spark_jars(args.glue_version, args.jar_dir)
    print("\n".join(str(j) for j in jars))
    return 0


if __name__ == "__main__":
    sys.exit(main())
