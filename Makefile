# Near-real-time lakehouse. `make demo` and `make test` install what they need.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
UV_VERSION := 0.13.8
STAMP := $(VENV)/.installed
LAKEHOUSE := $(BIN)/lakehouse
PYTEST_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help install debs artifacts demo test down-local status-local clean bench-ingest bench-load bench-cdc

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

install: debs $(STAMP) artifacts ## Venv, pinned Python deps, pinned jars/binaries, missing Debian packages (idempotent)

debs:
	@bash deploy/install_debs.sh

$(STAMP): requirements.lock pyproject.toml
	@echo "  python venv $(VENV) (locked deps, hashes checked)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -q --disable-pip-version-check uv==$(UV_VERSION)
	@$(BIN)/uv pip install -q --python $(BIN)/python --require-hashes -r requirements.lock
	@$(BIN)/uv pip install -q --python $(BIN)/python --no-deps -e .
	@touch $(STAMP)

artifacts: $(STAMP)
	@$(BIN)/python -m deploy.artifacts

demo: install ## The whole story on the local stack (KEEP=1 leaves the stack up afterwards)
	@$(LAKEHOUSE) demo $(if $(KEEP),--keep-running,)

test: install ## The test suite (starts its own stack on shifted ports)
	@$(BIN)/pytest $(PYTEST_ARGS)

status-local: ## Status of the local stack
	@$(LAKEHOUSE) stack status

down-local: ## Stop the local stack (data kept; PURGE=1 deletes it)
	@test ! -x $(LAKEHOUSE) || $(LAKEHOUSE) stack down $(if $(PURGE),--purge,)

clean: down-local ## Remove venv, tools and run dirs
	rm -rf $(VENV) .tools .run .run-test results

RATE ?= 10000
DURATION ?= 600
bench-ingest: install ## Ingest benchmark on the local stack (RATE=events/s DURATION=seconds)
	@$(LAKEHOUSE) stack up
	@$(LAKEHOUSE) bench ingest --rate $(RATE) --duration $(DURATION)

bench-load: install ## Load generator capacity: one Locust process vs workers
	@$(LAKEHOUSE) stack up
	@$(LAKEHOUSE) bench load

bench-cdc: install ## CDC benchmark: changes/s and apply freshness (CDC_RATE=changes/s CDC_DURATION=seconds)
	@$(LAKEHOUSE) stack up
	@$(LAKEHOUSE) bench cdc --rate $(or $(CDC_RATE),1000) --duration $(or $(CDC_DURATION),60)
