# One entry point: `make check` is exactly what CI runs (.ci/run calls it).
VENV := .venv/bin
PY_SOURCES := daemon tests bench
# Test lanes (pytest-xdist workers, each with its own stacks and ports: tests/conftest.py).
# 4 on 2 cores: the suite mostly waits (stacks starting, timeouts waited out): tests/README.md.
OFFSETD_TEST_WORKERS ?= 4
# The compiled owner path's crate (native/): rustup's toolchain, cargo's builds kept across clones.
CARGO := PATH="$(HOME)/.cargo/bin:$(PATH)" CARGO_TARGET_DIR="$(or $(CARGO_TARGET_DIR),$(HOME)/.cache/offsetd/native-target)" cargo

.PHONY: install install-demo lint types docs test check demo down

# Everything `make check` needs (the venv with all extras and the dev tools, the jars,
# Prometheus, the image tools; etcd, kube-apiserver and helm when first needed).
ifdef OFFSETD_INSTALLED
install: ;
else
install:
	@scripts/bootstrap
endif

# Only what the demo uses: the venv without the Spark extra and the Kafka jars.
install-demo:
	@scripts/bootstrap --demo

lint: install
	$(VENV)/ruff check $(PY_SOURCES)
	$(VENV)/ruff format --check $(PY_SOURCES)
	PYTHONPATH=daemon $(VENV)/lint-imports --no-cache
	@echo "cargo fmt --check; cargo clippy -D warnings (native/)"
	@cd native && $(CARGO) fmt --check && $(CARGO) clippy --locked --quiet -- -D warnings

types: install
	$(VENV)/mypy
	$(VENV)/mypy bench

# The reference (docs/, nav in mkdocs.yml) as a site in site/ (git-ignored), strict: a broken
# link or anchor, or a page left out of the nav, fails. Not --quiet: it drops the warnings
# before strict counts them, and the build passes whatever is broken.
docs: install
	$(VENV)/mkdocs build

# The slowest 30 tests and how busy the CPUs were end every run's output.
test: install
	scripts/cpu-busy $(VENV)/pytest -n $(OFFSETD_TEST_WORKERS) --dist load --durations=30

# Lint, types and the docs beside the tests, each target's output kept together.
check: install
	@$(MAKE) --no-print-directory -j4 --output-sync=target OFFSETD_INSTALLED=1 lint types docs test

# The main job on the embedded local stack: the stack, the daemon (enforce mode, rules/examples),
# a sink connector fed a poison record, healed by the daemon (quarantine, skip, verify).
demo: install-demo
	$(VENV)/offsetd dev demo

down:
	$(VENV)/offsetd dev down
