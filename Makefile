# sbroker: `make run` sets up and runs the main job; `make test` sets up and runs every test.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | cksum | cut -d' ' -f1)
# pytest-xdist workers of `make test`: two by default (the tests of the shared Spark session
# stay in one worker: --dist loadgroup); `make test WORKERS=0` runs the suite in one process
WORKERS ?= 2
comma := ,

.PHONY: setup chromium postgresql run demo stream test test-lowest lint bench bench-quick clean

# pyproject.toml gives ranges; constraints.txt the exact versions installed here and in CI
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev,spark,dashboard,postgres]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

setup: $(STAMP)

# The dashboard's browser tests drive Debian's chromium (no browser download is possible).
chromium:
	command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)

# The PostgreSQL backend's tests start a throwaway server from Debian's packages (initdb and
# pg_ctl on a free loopback port; the package's own service is not used).
postgresql:
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || (apt-get update && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql)

run: setup
	@start=$$(date +%s); \
	PYSPARK_PYTHON=$(abspath $(BIN)/python) $(BIN)/sbroker --db out/sbroker.db run examples/orders_pipeline.toml; \
	code=$$?; echo "make run: $$(( $$(date +%s) - start )) s (starting Spark and the pipeline; exit code $$code)"; exit $$code

demo: setup
	$(BIN)/sbroker --db out/demo.db demo

stream: setup
	PYSPARK_PYTHON=$(abspath $(BIN)/python) $(BIN)/python examples/stream_pipeline.py

test: setup chromium postgresql
	$(BIN)/ruff check src tests bench tools
	$(BIN)/mypy
	$(BIN)/python -m tools.archcheck -q
	PYSPARK_PYTHON=$(abspath $(BIN)/python) $(BIN)/python -m pytest -q -n $(WORKERS) --dist loadgroup

# The lowest versions pyproject.toml allows (tools/lowest.py), in a venv of their own: the unit
# tier, the CLI, the dashboard, TLS and the conformance suite on PostgreSQL. CI runs it once
# after `make test`. Spark's lower bounds are the versions `make test` runs on.
LOWEST := .venv-lowest
LOWEST_EXTRAS := dev,postgres,dashboard,otel
test-lowest: postgresql
	rm -rf $(LOWEST) && $(PY) -m venv $(LOWEST)
	$(PY) -m tools.lowest $(subst $(comma), ,$(LOWEST_EXTRAS)) > $(LOWEST)/constraints.txt
	$(LOWEST)/bin/python -m pip install -q --upgrade pip
	$(LOWEST)/bin/python -m pip install -q -c $(LOWEST)/constraints.txt -e '.[$(LOWEST_EXTRAS)]'
	$(LOWEST)/bin/python -m pytest -q -n $(WORKERS) --dist loadgroup -m "not spark and not browser" \
		tests/unit tests/integration/dashboard tests/acceptance/cli/test_cli.py \
		tests/acceptance/cli/test_admin_commands.py tests/integration/network/test_loopback.py \
		tests/integration/network/test_authentication_errors.py
	$(LOWEST)/bin/python -m pytest -q -n $(WORKERS) --dist loadgroup -k postgres tests/conformance

lint: setup
	$(BIN)/ruff check src tests bench tools
	$(BIN)/mypy
	$(BIN)/python -m tools.archcheck -q

bench: setup
	bash bench/setup.sh
	$(BIN)/python -m bench

bench-quick: setup
	bash bench/setup.sh
	$(BIN)/python -m bench --quick

clean:
	rm -rf $(VENV) $(LOWEST) out .pytest_cache .mypy_cache .hypothesis
