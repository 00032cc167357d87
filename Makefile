# The two commands of the README. Each creates .venv when it is missing and needs only python3.
# `make run` installs the core only (what `perfsuite run` needs); `make test` adds the test extra, which
# pulls every other extra (report, profile, notebooks, peers) because the tests exercise them all.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# pip arguments of each target (scripts/dev/measure_install.sh reads RUN_SPEC to measure what `make run` installs)
RUN_SPEC  := -e .
TEST_SPEC := -e '.[test]'

.PHONY: run test lint clean-venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# one stamp per target: installing the test extra does not make `make run` reinstall, and vice versa
$(VENV)/.run-installed: pyproject.toml setup.py | $(BIN)/python
	$(BIN)/python -m pip install --quiet $(RUN_SPEC)
	touch $@

$(VENV)/.test-installed: pyproject.toml setup.py | $(BIN)/python
	$(BIN)/python -m pip install --quiet $(TEST_SPEC)
	touch $@

run: $(VENV)/.run-installed
	$(BIN)/perfsuite run

test: $(VENV)/.test-installed
	@# The dashboard test opens pages in headless Chromium (Debian's package); elsewhere it is skipped.
	@if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && apt-get install -y -qq chromium >/dev/null \
		|| echo "chromium not installed: the browser test is skipped"; fi
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/pylint --rcfile pyproject.toml perfsuite
	@# every core (pytest-xdist), tests split evenly and stolen by an idle worker (worksteal): a file is not one
	@# worker's whole share (loadfile sent files by test count, so the few-test slow ones, tests/ab, came last
	@# and ran alone); a module fixture is built again only on a worker that stole some of its file's tests
	@# every extra is installed here, so a recipe that cannot run (tests/workloads/test_every_mode.py) fails
	@# --durations: where the suite's time goes, printed by every run (the 8-minute budget on 2 quiet cores)
	PERFSUITE_REQUIRE_EXTRAS=1 $(BIN)/python -m pytest -q -n auto --dist worksteal --durations=25
	@# the reference site (docs/, mkdocs.yml): a broken link or anchor fails the build
	$(BIN)/python -m mkdocs build --strict --quiet --site-dir $(VENV)/site
	PERFSUITE_CACHE=$(VENV)/cache $(BIN)/perfsuite run idle-control --samples 2 --output-dir $(VENV)/smoke
	PERFSUITE_CACHE=$(VENV)/cache $(BIN)/perfsuite run mailbox-delivery --samples 2 --warmup 0 --output-dir $(VENV)/smoke

lint: $(VENV)/.test-installed
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/pylint --rcfile pyproject.toml perfsuite

clean-venv:
	rm -rf $(VENV)
