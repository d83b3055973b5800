"""The jars a local Spark session needs for Iceberg, found or built once per virtual environment.

Glue ships Iceberg itself (``--datalake-formats iceberg``); locally the runtime jar comes from the PyPI
package ``snowpark-connect-deps-iceberg``, whose jar lacks the relocated Jackson classes it refers to.
We relocate Spark's own Jackson jars to ``org.apache.iceberg.shaded.com.fasterxml.jackson`` with jarjar.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from cdc_lake.exceptions import CdcLakeError

ICEBERG_RUNTIME = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
SHADED_JACKSON = "iceberg-shaded-jackson.jar"
JACKSON_JARS = ("jackson-core", "jackson-databind", "jackson-annotations")
RELOCATION_RULE = "rule com.fasterxml.jackson.** org.apache.iceberg.shaded.com.fasterxml.jackson.@1\n"
JAR_DIR_ENV = "CDC_LAKE_JAR_DIR"


def default_jar_dir() -> Path:
    return Path(os.environ.get(JAR_DIR_ENV) or Path(sys.prefix) / "share" / "cdc-lake" / "jars")


def iceberg_runtime_jar() -> Path:
    import snowpark_connect_deps_iceberg

    jar = Path(snowpark_connect_deps_iceberg.__file__).parent / "jars" / ICEBERG_RUNTIME
    if not jar.is_file():
        raise CdcLakeError(f"Iceberg runtime jar not found at {jar}; run `make setup`")
    return jar


def spark_jars(jar_dir: Path | None = None) -> list[Path]:
    """Jars to put on the local Spark session's classpath, in order."""
    shaded = (jar_dir or default_jar_dir()) / SHADED_JACKSON
    if not shaded.is_file():
        raise CdcLakeError(f"relocated Jackson jar missing at {shaded}; run `make setup`")
    return [iceberg_runtime_jar(), shaded]


def build_shaded_jackson(jar_dir: Path, jarjar: Path) -> Path:
    """Merge Spark's Jackson jars and relocate them under Iceberg's shaded package."""
    import pyspark

    spark_jar_dir = Path(pyspark.__file__).parent / "jars"
    sources = []
    for name in JACKSON_JARS:
        found = sorted(spark_jar_dir.glob(f"{name}-2.*.jar"))
        if not found:
            raise CdcLakeError(f"{name} jar not found in {spark_jar_dir}")
        sources.append(found[-1])
    jar_dir.mkdir(parents=True, exist_ok=True)
    target = jar_dir / SHADED_JACKSON
    with tempfile.TemporaryDirectory() as work:
        merged = Path(work) / "jackson-merged.jar"
        seen: set[str] = set()
        with zipfile.ZipFile(merged, "w", zipfile.ZIP_DEFLATED) as out:
            for source in sources:
                with zipfile.ZipFile(source) as jar:
                    for entry in jar.infolist():
                        if entry.filename.startswith("META-INF/") or entry.filename in seen:
                            continue
                        seen.add(entry.filename)
                        out.writestr(entry, jar.read(entry))
        rules = Path(work) / "rules.txt"
        rules.write_text(RELOCATION_RULE)
        partial = Path(work) / SHADED_JACKSON
        subprocess.run(
            [
                "java",
                "-cp",
                str(jarjar),
                "com.tonicsystems.jarjar.Main",
                "process",
                str(rules),
                str(merged),
                str(partial),
            ],
            check=True,
        )
        os.replace(partial, target)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", type=Path, required=True, help="folder to write the relocated jar into")
    parser.add_argument("--jarjar", type=Path, default=Path("/usr/share/java/jarjar.jar"))
    args = parser.parse_args(argv)
    print(build_shaded_jackson(args.build, args.jarjar))
    return 0


if __name__ == "__main__":
    sys.exit(main())
