"""Test isolation (house rule 7): HOME, MPLCONFIGDIR, IPYTHONDIR and JUPYTER_* point at temporary dirs."""

from __future__ import annotations

import os
import signal
import tempfile
from pathlib import Path

import pytest

_SANDBOX = Path(tempfile.mkdtemp(prefix="perfsuite-tests-home-"))
for _name in ("HOME", "MPLCONFIGDIR", "IPYTHONDIR", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR",
              "JUPYTER_RUNTIME_DIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
              "PERFSUITE_CACHE"):
    _path = _SANDBOX / _name.lower()
    _path.mkdir(parents=True, exist_ok=True)
    os.environ[_name] = str(_path)
os.environ.setdefault("MPLBACKEND", "Agg")
# A suite started in the background (`make test &`, a CI step's shell) inherits SIGINT ignored, and so does
# every child it spawns: the tests that interrupt a run or a watch with SIGINT would wait out its deadline.
# Handled here (not ignored), the children start with the default disposition, as under a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# The console's width comes from $COLUMNS first: a developer's terminal, or pytest-xdist's workers (which set
# 80x24), must not change what the CLI tests read; a test that needs a width sets it itself.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)


@pytest.fixture
def sandbox_home() -> Path:
    """The temporary HOME every test runs under."""
    return Path(os.environ["HOME"])
