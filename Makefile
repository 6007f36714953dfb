PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 9092
DATA   ?= ./data

.PHONY: run test lint venv test-venv bench clean postgresql

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

venv: $(BIN)/python
	$(BIN)/pip install --quiet -e .

test-venv: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'

run: venv
	@echo "coterie: starting a broker on $(HOST):$(PORT) with data in $(DATA)"
	@echo "coterie: connect with bootstrap.servers=$(HOST):$(PORT)"
	$(BIN)/coterie serve --host $(HOST) --port $(PORT) --data-dir $(DATA)

# The storage tests start a real PostgreSQL server, the TLS tests make certificates with
# openssl, the console's test opens its pages in Chromium; this installs them when missing.
postgresql:
	@scripts/ensure-postgresql
	@scripts/ensure-openssl
	@scripts/ensure-chromium

test: test-venv postgresql
	$(BIN)/ruff check coterie tests benchmarks scripts
	$(BIN)/lint-imports
	@# The reference Kafka jars, fetched once before the unit tests' two workers could both
	@# fetch them (tests that need them skip, naming the tool, without java or mvn).
	@if command -v java >/dev/null && command -v mvn >/dev/null; then \
		$(BIN)/python scripts/reference_kafka.py fetch >/dev/null; fi
	@# The pure unit tests on both cores; then everything that talks to real servers, on
	@# two workers too, a module at a time each (its module-scoped servers stay on one
	@# worker). Those tests mostly wait on clients and timeouts: one worker left the
	@# machine three-quarters idle (docs/benchmarks.md, "The suite's time").
	$(BIN)/python -m pytest -q -ra --durations=10 -n 2 tests/unit
	$(BIN)/python -m pytest -q -ra --durations=40 -n 2 --dist loadfile --ignore=tests/unit

lint: test-venv
	$(BIN)/ruff check coterie tests benchmarks scripts
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) data .pytest_cache

# The two Spark pipeline jobs (docs/spark-pipelines.md) against a running broker
# (`make run`); needs the spark extra and Java 17. MASTER=spark://... for a cluster.
BOOTSTRAP ?= $(HOST):$(PORT)
MASTER    ?= local[2]
OUT       ?= ./out
.PHONY: clickstream rebalance-analytics
clickstream:
	$(BIN)/python -m coterie.spark.jobs.clickstream run --bootstrap-servers $(BOOTSTRAP) \
		--master '$(MASTER)' --output $(OUT)/clicks
rebalance-analytics:
	$(BIN)/python -m coterie.spark.jobs.rebalance_analytics --bootstrap-servers $(BOOTSTRAP) \
		--master '$(MASTER)' --output $(OUT)/rebalances
