# The two commands of the README. Each creates .venv when it is missing (or stale) and needs only python3.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint clean-venv

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,notebooks,peers]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/perfsuite run

test: $(STAMP)
	@# The dashboard test opens pages in headless Chromium (Debian's package); elsewhere it is skipped.
	@if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && apt-get install -y -qq chromium >/dev/null \
		|| echo "chromium not installed: the browser test is skipped"; fi
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q
	PERFSUITE_CACHE=$(VENV)/cache $(BIN)/perfsuite run idle-control --samples 2 --output-dir $(VENV)/smoke
	PERFSUITE_CACHE=$(VENV)/cache $(BIN)/perfsuite run mailbox-delivery --samples 2 --warmup 0 --output-dir $(VENV)/smoke

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

clean-venv:
	rm -rf $(VENV)
