"""The profiler and the profiled process: where the profiler executable is (option, environment, PATH) and the
worker process that runs the profile driver, with its one-line errors (:class:`PerfsuiteError`, never a
traceback).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import perfsuite
from perfsuite._extras import install_hint
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import find_valgrind

PROFILERS: tuple[str, ...] = ("py-spy", "scalene", "callgrind")
#: environment variables naming a profiler executable (the ``--profiler-path`` option wins)
PROFILER_ENV = {"py-spy": "PERFSUITE_PY_SPY", "scalene": "PERFSUITE_SCALENE", "callgrind": "PERFSUITE_VALGRIND"}


# -- locating the profiler --------------------------------------------------------------------------------


def artifact_prefix(output_dir: Path, recipe: str, profiler: str) -> Path:
    """``<recipe>-<stamp>`` in ``output_dir`` (``-2``, ``-3``... when a profile record of that name exists):
    the stem every artifact of one ``perfsuite profile`` run shares."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    prefix = output_dir / f"{recipe}-{stamp}"
    n = 2
    while Path(f"{prefix}.{profiler}.profile.json").exists():
        prefix = output_dir / f"{recipe}-{stamp}-{n}"
        n += 1
    return prefix


def _executable(text: str, profiler: str, origin: str) -> str:
    found = text if os.sep in text else shutil.which(text)
    if not found or not os.path.isfile(found) or not os.access(found, os.X_OK):
        raise PerfsuiteError(f"{profiler} not found: {text} ({origin}) is not an executable file")
    return found


def profiler_command(profiler: str, path: str | None = None) -> list[str]:
    """The command that starts ``profiler``: ``path`` (``--profiler-path``), else ``$PERFSUITE_PY_SPY`` /
    ``$PERFSUITE_SCALENE``, else py-spy from PATH or beside this interpreter, scalene as
    ``<this interpreter> -m scalene``. One-line :class:`PerfsuiteError` when it is missing."""
    if profiler not in PROFILERS:
        raise PerfsuiteError(f"unknown profiler {profiler!r} (choose {' or '.join(PROFILERS)})")
    if profiler == "callgrind":  # valgrind: --profiler-path, else $PERFSUITE_VALGRIND, else PATH
        return [find_valgrind(path, "--profiler-path").path]
    if path:
        return [_executable(path, profiler, "--profiler-path")]
    env = os.environ.get(PROFILER_ENV[profiler])
    if env:
        return [_executable(env, profiler, f"${PROFILER_ENV[profiler]}")]
    if profiler == "scalene":
        try:
            found_scalene = importlib.util.find_spec("scalene") is not None
        except (ImportError, ValueError):  # hidden or broken: as good as missing
            found_scalene = False
        if not found_scalene:
            raise PerfsuiteError(
                f"scalene not found: it is not installed for {sys.executable}; it is in perfsuite's profile extra "
                f"({install_hint('profile')}), or set {PROFILER_ENV['scalene']}"
            )
        return [sys.executable, "-m", "scalene"]
    found = shutil.which("py-spy")
    beside = Path(sys.executable).parent / "py-spy"
    if found is None and beside.is_file() and os.access(beside, os.X_OK):
        found = str(beside)
    if found is None:
        raise PerfsuiteError(
            f"py-spy not found on PATH or beside {sys.executable}; it is in perfsuite's profile extra "
            f"({install_hint('profile')}), or set {PROFILER_ENV['py-spy']}"
        )
    return [found]


def _program_path(operation: str) -> tuple[str, bool]:
    """(directory whose files scalene profiles, profile-all?): perfsuite's package, widened to the
    operation's module when that lives elsewhere."""
    package = str(Path(perfsuite.__file__).resolve().parent)
    module = operation.partition(":")[0]
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    origin = spec.origin if spec is not None else None
    if not origin or not os.path.isfile(origin):
        return package, False
    where = str(Path(origin).resolve().parent)
    common = os.path.commonpath([package, where])
    if common == package or where.startswith(package + os.sep):
        return package, False
    if common in ("", os.sep) or str(Path(common)) == Path(common).anchor:
        return package, True
    return common, False


# -- the worker process -------------------------------------------------------------------------------------


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "no output"


class _Worker:
    """The driver process of one mode (py-spy: handshake over its stdin/stdout)."""

    def __init__(self, argv: list[str], stderr: IO[str]) -> None:
        self.stderr = stderr
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True, bufsize=1
        )

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # the worker ended; expect() reports why

    def expect(self, event: str) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=30)
            raise _WorkerEnded()
        message = json.loads(line)
        if message.get("event") != event:
            raise PerfsuiteError(f"profile worker: expected {event!r}, got {line.strip()!r}")
        return message

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


class _WorkerEnded(Exception):
    """The worker exited early; the caller reads its result file for the reason."""


def _driver_error(result_path: Path, stderr_path: Path, label: str) -> PerfsuiteError:
    try:
        result = json.loads(result_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        result = {}
    if isinstance(result, dict) and result.get("error"):
        return PerfsuiteError(f"{label}: {result['error']}")
    try:
        tail = _last_line(stderr_path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        tail = "no output"
    return PerfsuiteError(f"{label}: the profiled worker failed: {tail}")


def _driver_records(result_path: Path, stderr_path: Path, label: str) -> list[dict[str, Any]]:
    try:
        result = json.loads(result_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise _driver_error(result_path, stderr_path, label) from None
    if not isinstance(result, dict) or "error" in result or "iterations" not in result:
        raise _driver_error(result_path, stderr_path, label)
    return list(result["iterations"])
