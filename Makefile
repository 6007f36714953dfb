PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 9092
DATA   ?= ./data

.PHONY: run test lint venv test-venv bench clean

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

test: test-venv
	$(BIN)/ruff check coterie tests benchmarks scripts
	$(BIN)/python -m pytest -q -ra

lint: test-venv
	$(BIN)/ruff check coterie tests benchmarks scripts

clean:
	rm -rf $(VENV) data .pytest_cache
