# One entry point: `make check` is exactly what CI runs (.ci/run calls it).
VENV := .venv/bin
PY_SOURCES := daemon tests bench

.PHONY: install lint types test check demo down

install:
	@scripts/bootstrap

lint: install
	$(VENV)/ruff check $(PY_SOURCES)
	$(VENV)/ruff format --check $(PY_SOURCES)
	PYTHONPATH=daemon $(VENV)/lint-imports --no-cache

types: install
	$(VENV)/mypy
	$(VENV)/mypy bench

test: install
	$(VENV)/pytest

check: lint types test

# The main job on the embedded local stack: the stack, the daemon (enforce mode, rules/examples),
# a sink connector fed a poison record, healed by the daemon (quarantine, skip, verify).
demo: install
	$(VENV)/offsetd dev demo

down:
	$(VENV)/offsetd dev down
