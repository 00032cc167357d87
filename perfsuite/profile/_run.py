"""``perfsuite profile``: a recipe's operation under py-spy or scalene, in a worker process.

For every mode, a worker (:mod:`perfsuite.profile._driver`, run with this interpreter) prepares
``repeat`` private copies of the fixture and the operations on them (exactly as a harness sample does),
then runs the operations back to back while the profiler is on:

* **py-spy**: a flame graph SVG per thread, speedscope JSON and a text summary;
* **scalene**: its JSON and a text summary (top lines by CPU and by allocation);

each run as :mod:`perfsuite.profile._modes` says.

A profile with too few samples is repeated with :data:`GROWTH` times more iterations, at most
:data:`MAX_ATTEMPTS` runs, never beyond :data:`MAX_REPEAT` operations or :data:`COPY_BUDGET` bytes of
fixture copies prepared at once; a profile that still has no samples is a one-line error. Missing profiler
binaries and profiler failures are one-line :class:`PerfsuiteError` (exit 2 on the command line).

Every iteration also records what the operation's ``metrics()`` said (``phases_ms`` and, for
asynchronous jobs, ``main_thread_ms``), its acknowledgement and max heartbeat gap *under the
profiler* (distorted by it: use ``perfsuite run`` for numbers). They are kept in the profile record
``<recipe>-<stamp>.<profiler>.profile.json`` and feed ``--phase``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import perfsuite
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import Recipe
from perfsuite.profile._modes import (
    GROWTH,
    MAX_ATTEMPTS,
    MAX_REPEAT,
    PYSPY_RATE,
    ModeProfile,
    OnEvent,
    _Context,
    _profile_pyspy,
    _profile_scalene,
)
from perfsuite.profile._process import PROFILERS, artifact_prefix, profiler_command
from perfsuite.report import PhaseBreakdown, breakdown_from_samples

__all__ = [
    "DEFAULT_REPEAT",
    "GROWTH",
    "MAX_ATTEMPTS",
    "PROFILERS",
    "ModeProfile",
    "ProfileRun",
    "profile_recipe",
    "profiler_command",
]

#: operations per profiled batch when ``repeat`` is not given
DEFAULT_REPEAT = 10
#: retries never prepare more than MAX_REPEAT operations at once, nor more than this many bytes of fixture copies
COPY_BUDGET = 2_000_000_000


@dataclass(frozen=True, slots=True)
class ProfileRun:
    """A finished ``perfsuite profile``: per mode its artifacts, and the profile record's path."""

    recipe: str
    profiler: str
    modes: tuple[ModeProfile, ...]
    record: Path
    phases_png: Path | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def artifacts(self) -> list[Path]:
        """Every file written (record first)."""
        out = [self.record]
        for m in self.modes:
            out.extend(m.artifacts.values())
        if self.phases_png is not None:
            out.append(self.phases_png)
        return out

    def breakdown(self) -> PhaseBreakdown:
        """The phase breakdown of the profiled iterations (``main_thread_ms`` for asynchronous jobs)."""
        return breakdown_from_samples(
            self.recipe,
            {m.mode: m.iterations for m in self.modes},
            title=f"{self.recipe} under {self.profiler} (times distorted by the profiler)",
        )


# -- the whole recipe -------------------------------------------------------------------------------------------


def _fixture_bytes(fixture: Path | None, info: Mapping[str, Any] | None) -> int:
    """The fixture's size (from its resolver's info, else walked): what every prepared operation copies."""
    known = (info or {}).get("bytes")
    if isinstance(known, int) and not isinstance(known, bool) and known > 0:
        return known
    if fixture is None:
        return 0
    total = 0
    for folder, _dirs, files in os.walk(fixture):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total


def _profile_with_callgrind(recipe: Recipe, modes: Sequence[str], output: Path, fixture: Path | None,
                            fixture_info: Mapping[str, Any] | None, work_root: Path | None, valgrind: str,
                            on_event: OnEvent) -> ProfileRun:
    """``--profiler callgrind``: see :mod:`perfsuite.profile._callgrind`."""
    from perfsuite.profile._callgrind import profile_callgrind

    record, results = profile_callgrind(recipe, modes=modes, output_dir=output, fixture=fixture,
                                        fixture_info=fixture_info, work_root=work_root, valgrind_path=valgrind,
                                        on_event=on_event)
    profiles = tuple(ModeProfile(r["mode"], r["artifacts"], (), int(r["body"]["total"]), 1, 1, r["summary"])
                     for r in results)
    return ProfileRun(recipe.name, "callgrind", profiles, record)


def profile_recipe(
    recipe: Recipe,
    profiler: str,
    *,
    modes: Sequence[str] | None = None,
    output_dir: Path | str = Path("results/local"),
    repeat: int | None = None,
    native: bool = False,
    rate: int | None = None,
    fixture: Path | None = None,
    fixture_info: Mapping[str, Any] | None = None,
    work_root: Path | None = None,
    profiler_path: str | None = None,
    phase: bool = False,
    on_event: OnEvent | None = None,
    timeout_s: float = 900.0,
) -> ProfileRun:
    """Profile ``recipe``'s modes (all, or ``modes``) under ``profiler``; artifacts go to ``output_dir``.

    ``fixture`` is the directory the recipe's fixture resolved to (copied privately per iteration, as
    in ``perfsuite run``). ``repeat`` is the first run's iteration count (default
    :data:`DEFAULT_REPEAT`); too-short profiles are retried with more. ``phase`` also writes the phase
    breakdown plot of the profiled iterations. Raises :class:`PerfsuiteError` (one line) on bad input,
    a missing profiler, a profiler failure or a profile without samples.
    """
    if profiler not in PROFILERS:
        raise PerfsuiteError(f"unknown profiler {profiler!r} (choose {' or '.join(PROFILERS)})")
    if native and profiler != "py-spy":
        raise PerfsuiteError("--native is a py-spy option (scalene always profiles native code as 'c' time)")
    if profiler == "callgrind" and (repeat is not None or rate is not None or phase):
        raise PerfsuiteError("--repeat, --rate and --phase do not apply to callgrind: it counts one operation's "
                             "instructions exactly (use `perfsuite run --instructions` for repeated passes)")
    if repeat is not None and (isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1):
        raise PerfsuiteError(f"--repeat: expected a positive integer, got {repeat!r}")
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int) or rate < 1):
        raise PerfsuiteError(f"--rate: expected a positive integer, got {rate!r}")
    names = [m.name for m in recipe.modes]
    chosen = list(modes) if modes else names
    for name in chosen:
        if name not in names:
            raise PerfsuiteError(f"{recipe.name}: no mode {name!r} (modes: {', '.join(names)})")
    if recipe.fixture and fixture is None:
        raise PerfsuiteError(f"{recipe.name}: the recipe needs fixture {recipe.fixture!r}, none was given")
    command = profiler_command(profiler, profiler_path)
    output = Path(output_dir)
    if profiler == "callgrind":
        return _profile_with_callgrind(recipe, chosen, output, fixture, fixture_info, work_root, command[0],
                                       on_event or (lambda _msg: None))
    output.mkdir(parents=True, exist_ok=True)
    prefix = artifact_prefix(output, recipe.name, profiler)
    root = Path(work_root) if work_root is not None else Path(tempfile.gettempdir())
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="perfsuite-profile-", dir=root))
    size = _fixture_bytes(Path(fixture) if fixture else None, fixture_info)
    max_repeat = max(repeat or DEFAULT_REPEAT, min(MAX_REPEAT, COPY_BUDGET // size if size else MAX_REPEAT))
    ctx = _Context(
        recipe,
        profiler,
        command,
        prefix,
        scratch,
        Path(fixture) if fixture else None,
        native,
        rate or PYSPY_RATE,
        repeat or DEFAULT_REPEAT,
        on_event or (lambda _msg: None),
        timeout_s,
        max_repeat,
    )
    try:
        run = _profile_pyspy if profiler == "py-spy" else _profile_scalene
        profiles = tuple(run(ctx, mode) for mode in chosen)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    record = Path(f"{prefix}.{profiler}.profile.json")
    result = ProfileRun(recipe.name, profiler, profiles, record)
    png = None
    if phase:
        from perfsuite.report import write_phase_plot

        png = write_phase_plot(result.breakdown(), Path(f"{prefix}.{profiler}.phases.png"))
    document = {
        "kind": "perfsuite-profile",
        "profile_format": 1,
        "perfsuite": perfsuite.__version__,
        "profiler": profiler,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "recipe": recipe.to_dict(),
        "fixture": dict(fixture_info or {}),
        "note": "times under the profiler are distorted by it; use `perfsuite run` for measurements",
        "phases_png": str(png) if png else None,
        "modes": {p.mode: p.to_dict() for p in profiles},
    }
    record.write_text(json.dumps(document, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    return ProfileRun(recipe.name, profiler, profiles, record, png)
