# cdc-lake: `make demo` runs the local pipeline end to end, `make test` runs every test CI guards.
# Both install what they need on first use through `make setup` (idempotent, fast when nothing changed).
SHELL := /bin/bash
# GLUE_VERSION=6.0 runs a target on Glue 6.0's runtime (default 5.1): each has its own environment, made by
# make setup, and the setting overrides the configuration's lake.glue_version.
RUNTIME := $(or $(GLUE_VERSION),5.1)
VENV := $(if $(filter 5.1,$(RUNTIME)),.venv,.venv-glue$(RUNTIME))
ifneq ($(GLUE_VERSION),)
export GLUE_VERSION
endif
# A supported Node.js LTS that make setup installed when the machine's is past its end of life (scripts/setup.sh).
export PATH := $(CURDIR)/.node/node_modules/.bin:$(PATH)
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
# pytest-xdist workers for `make test`: each holds one warm Spark session; 2 fits this project's 2-core machines.
TEST_WORKERS ?= 2
# The CDK templates are made from the configuration alone, never from the runtime (tests/infra/conftest.py), so
# only Glue 5.1's run checks them; every other module runs on both runtimes.
TEST_SCOPE := $(if $(filter 5.1,$(RUNTIME)),,--ignore=tests/infra)
# Rows of the table make bench-drift verifies.
DRIFT_ROWS ?= 10000000

.DEFAULT_GOAL := help
.PHONY: help setup demo demo-aws docs check test test-unit test-functional test-infra soak lint format typecheck bench bench-large bench-aging bench-warm bench-soak bench-config bench-drift synth clean

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-16s %s\n", $$1, $$2}'

setup: ## create .venv, install packages, the jars Glue runs and Trino (Maven Central, checked), the CDK CLI
	@bash scripts/setup.sh

demo: setup ## generate a shop database, replicate it through the local pipeline, check the lake
	$(BIN)/cdc-lake demo --workdir demo-output

demo-aws: setup ## the demo through the deployed path: cdc-lake aws-replay on a local AWS endpoint (Glue catalog, S3, Lambda, glue-run), read back by pyiceberg and Trino
	$(BIN)/cdc-lake demo-aws --workdir demo-output-aws

docs: setup ## rewrite docs/architecture.md (rooms, imports, bundles, every module) and the README's layout block from the code
	$(PY) scripts/architecture.py

test: setup ## run the whole suite: unit, functional (real Spark + Iceberg, moto) and infra (CDK; on Glue 5.1's run only), on TEST_WORKERS workers
ifneq ($(RUNTIME),5.1)
	@# the upgrade test starts the lake on Glue 5.1, in its environment
	@GLUE_VERSION=5.1 bash scripts/setup.sh
endif
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup --durations=20 $(TEST_SCOPE)

# The loop before each commit: what breaks most often, in about a minute. `make test` before a push.
CHECK_CASES := tests/unit tests/functional/test_replay_semantics.py::test_later_trigger_applies_earlier_files_and_repeats_change_nothing
# make soak's cases: the modules written for both lake paths (their twins: CDC_LAKE_BOTH_PATHS=1 keeps them; make
# test runs their Glue-path case), among them those whose sizes grow there, and the others whose sizes do.
SOAK_CASES := tests/pg tests/functional/test_kills.py tests/functional/test_bad_input.py \
	$(shell grep -l on_both_paths tests/functional/*.py)
check: setup ## before each commit (about a minute): lint and types, unit and property tests, one functional case on each lake path
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	CDC_LAKE_BOTH_PATHS=1 $(BIN)/pytest -n $(TEST_WORKERS) -q $(CHECK_CASES)

test-unit: setup ## pure tests only (no Spark, no CDK)
	$(BIN)/pytest tests/unit

test-functional: setup ## real Spark + Iceberg and moto tests
	$(BIN)/pytest tests/functional

test-infra: setup ## CDK template, cdk-nag and cfn-lint tests
	$(BIN)/pytest tests/infra

soak: setup ## the sizes where growth shows (docs/testing.md): both lake paths of every twin, 100,000-file catch-ups, 20 killed runs on each path, the damaged-input corpus whole, both deployed samples, real PostgreSQL over SOAK_TRANSACTIONS (30000)
	CDC_LAKE_BOTH_PATHS=1 CDC_LAKE_CASE_SECONDS=0 \
	CDC_LAKE_CATCH_UP_FILES=100000 CDC_LAKE_LOAD_FILES=10000 \
	CDC_LAKE_PG_TRANSACTIONS=$${SOAK_TRANSACTIONS:-30000} CDC_LAKE_PG_BATCHES=$${SOAK_BATCHES:-10} \
	CDC_LAKE_KILLS=$${SOAK_KILLS:-20} CDC_LAKE_KILL_PATHS=hadoop,glue \
	CDC_LAKE_CORPUS=whole CDC_LAKE_CORPUS_GLUE=csv-gzip,parquet CDC_LAKE_DEPLOYED_SAMPLES=all \
	CDC_LAKE_QUARANTINE_EXAMPLES=50 CDC_LAKE_WRITE_PATH_EXAMPLES=40 \
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup --durations=30 --timeout 3600 $(SOAK_CASES)

lint: setup ## ruff lint and format check (also as Python 3.13, Glue 6.0's), mypy on the library and the Lambda
	$(BIN)/ruff check .
	$(BIN)/ruff check --target-version py313 --select E,F,PLE --quiet glue_jobs lambda
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: setup ## apply ruff's formatting and safe fixes
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: setup ## one 10M-row table: full load vs plain Spark (and its phases), a 1M-change batch, 10k changes into 10k..10M rows vs a rebuild, small runs, memory; 50 tables drained; a simulated day on AWS; Hadoop against Glue catalog paths; verify against export + reconcile
	$(PY) -m bench.run

bench-large: setup ## part 1 of make bench up to a 100M-row table (10k..100M rows: growth of a CDC run; 31 GiB of disk at its peak, about 70 minutes), into bench/results-large
	$(PY) -m bench.run --perf-only --rows 100000000 --out bench/results-large

bench-aging: setup ## day 30 of a busy table: 2,000 batches of 40 changes into one 50k-row table through the Lambda's handler (about 45 minutes), a full read every 100, then maintenance and 50 more; into bench/results/aging.*
	$(PY) -m bench.aging

bench-warm: setup ## 100 busy tables (a CDC file a minute each) for 20 minutes through the Lambda's handler and a warm run on the deployed path, with AWS's in-Region round trips and without (about 50 minutes); into bench/results/warm.*
	$(PY) -m bench.warm

bench-soak: setup ## a day of a busy shard (50,000 batches of 100 tables) through one warm run with a batch stand-in: the heap it holds at 10 % and at the end (at most 1.10 times), peak RSS, every file applied once (about a minute); into bench/results/soak.json
	$(PY) -m bench.soak

bench-config: setup ## config-from-source and config-check-source for 200 tables in a throwaway PostgreSQL and MariaDB, timed
	$(PY) -m bench.catalog

bench-drift: setup ## only the drift part of make bench: verify against export + reconcile on a DRIFT_ROWS-row table (10000000) with 10 drifted keys
	$(PY) -m bench.drift --rows $(DRIFT_ROWS)

synth: setup ## synthesize offline into cdk.out; required values not in cdk.json get placeholders (check only)
	npx cdk synth --quiet -c exampleValues=true

clean: ## remove generated data and caches (keeps .venv)
	rm -rf demo-output demo-output-aws cdk.out bench/results bench/results-large .pytest_cache .ruff_cache .mypy_cache
