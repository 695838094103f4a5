# The README's two commands: `make demo` and `make test`. Both create/reuse .venv first.
VENV ?= .venv
BIN := $(VENV)/bin
# the oldest DuckDB supported (1.5.5, with the DuckLake, httpfs and postgres extension wheels):
# the store and lake tests run there too, with the PostgreSQL servers of $(VENV)
VENV_OLDEST ?= .venv-oldest
OLDEST_TESTS := tests/test_store.py tests/test_store_compat.py tests/test_lake.py tests/test_lake_layouts.py

.PHONY: demo test lint bootstrap bootstrap-test bench readme

bootstrap:
	@VENV=$(VENV) bash scripts/bootstrap.sh

bootstrap-test:
	@VENV=$(VENV) VENV_OLDEST=$(VENV_OLDEST) bash scripts/bootstrap.sh --test

demo: bootstrap
	$(BIN)/planshift demo

lint: bootstrap-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/pytest -q
	PLANSHIFT_PG_HOME=$(abspath $(VENV))/share/planshift/postgresql $(VENV_OLDEST)/bin/pytest -q $(OLDEST_TESTS)

# Rewrite the README's output blocks from what the code prints, and the store's schema.sql
# and README table from the migrations (make test checks them).
readme: bootstrap
	$(BIN)/python scripts/store_schema.py
	$(BIN)/python scripts/readme_outputs.py

# Speed and false-alarm figures (printed, never asserted); bench_ingest.py writes a 500 MB log.
bench: bootstrap
	$(BIN)/python bench/bench_stats.py
	$(BIN)/python bench/bench_compare.py
	$(BIN)/python bench/bench_false_alarms.py
	$(BIN)/python bench/bench_detection.py
	$(BIN)/python bench/bench_overhead.py
	$(BIN)/python bench/bench_census.py
	$(BIN)/python bench/bench_ingest.py
	$(BIN)/python bench/bench_fleet.py
	$(BIN)/python bench/bench_capture.py
