# The two commands of the README. Each creates .venv when it is missing (or stale) and needs only python3.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint clean-venv

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,notebooks]'
	touch $(STAMP)

run: $(STAMP)
	@echo 'perfsuite run does not exist yet: running the engine demo instead (perfsuite demo)'
	$(BIN)/perfsuite demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

clean-venv:
	rm -rf $(VENV)
