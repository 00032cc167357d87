"""Finding the results the notebooks analyse (imported by the notebooks in this directory).

Which results directory or file, first match wins:

1. ``$PERFSUITE_NOTEBOOK_RESULTS``: a results file, or a directory of them (an explicit choice; the
   tests point it at a small real run when no baseline is committed);
2. ``results/baseline/`` of the repository (the committed baseline);
3. the newest results under ``results/local/`` (your own ``perfsuite run``).

Within a directory the newest complete result of the first recipe of ``prefer`` that is present is
chosen (recipes with a sync and an async mode, what the exploration notebook compares), else the newest
result with two modes or more, else the newest result.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

ENV = "PERFSUITE_NOTEBOOK_RESULTS"
#: JSON written beside results that is not a results document (exports, profiles)
_NOT_RESULTS = (".pyperf.json", ".profile.json", ".speedscope.json", ".scalene.json")
PREFER = ("root-checkpoint", "mailbox-delivery", "agent-checkpoint", "drain-after-submit", "offload")


def repo_root(start: Path | None = None) -> Path:
    """The repository root: the first parent holding ``pyproject.toml`` and ``perfsuite/``."""
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / "pyproject.toml").is_file() and (candidate / "perfsuite").is_dir():
            return candidate
    import perfsuite

    return Path(perfsuite.__file__).resolve().parent.parent


def _results(directory: Path) -> list:
    """Every complete, valid results document under ``directory`` (others, and foreign JSON, skipped)."""
    from perfsuite.errors import PerfsuiteError
    from perfsuite.report import read_result

    found = []
    for path in sorted(directory.rglob("*.json")):
        if path.name.startswith(".") or path.name.endswith(_NOT_RESULTS):
            continue
        try:
            result = read_result(path)
        except (PerfsuiteError, OSError, ValueError, KeyError, TypeError):
            continue
        if result.data.get("status") == "complete":
            found.append(result)
    return found


def _newest(results: list) -> object:
    return max(results, key=lambda r: (r.created_epoch or 0.0, r.date, str(r.path)))


def pick(results: list, prefer: Sequence[str] = PREFER) -> object | None:
    """The result the notebooks analyse among ``results`` (see the module docstring)."""
    if not results:
        return None
    for recipe in prefer:
        chosen = [r for r in results if r.recipe == recipe]
        if chosen:
            return _newest(chosen)
    several = [r for r in results if len(r.modes) >= 2]
    return _newest(several or results)


def source(root: Path | None = None) -> tuple[Path, str]:
    """(file or directory to read, why it was chosen)."""
    env = os.environ.get(ENV)
    if env:
        path = Path(env).expanduser()
        if not path.exists():
            raise FileNotFoundError(f"${ENV} names {path}, which does not exist")
        return path, f"${ENV}"
    root = root or repo_root()
    baseline = root / "results" / "baseline"
    if baseline.is_dir() and _results(baseline):
        return baseline, "the committed baseline"
    local = root / "results" / "local"
    if local.is_dir() and _results(local):
        return local, "the newest local run"
    raise FileNotFoundError(
        f"no results: commit a baseline under {baseline}, run `perfsuite run` (results/local), "
        f"or set ${ENV} to a results file or directory"
    )


def find_result(prefer: Sequence[str] = PREFER, root: Path | None = None) -> tuple[object, list, str]:
    """(the chosen :class:`perfsuite.report.Result`, every complete result beside it, why)."""
    from perfsuite.report import read_result

    path, why = source(root)
    if path.is_file():
        chosen = read_result(path)
        return chosen, [chosen, *[r for r in _results(path.parent) if r.path != chosen.path]], why
    results = _results(path)
    if not results:
        raise FileNotFoundError(f"{path}: no complete perfsuite results files")
    return pick(results, prefer), results, why


def shown(path: Path | str | None) -> str:
    """``path`` relative to the repository root when inside it: committed outputs name no machine's paths."""
    if path is None:
        return "?"
    try:
        return Path(path).resolve().relative_to(repo_root()).as_posix()
    except ValueError:
        return str(path)


def off_loop(fn, *args, **kwargs):
    """Call ``fn`` in a worker thread: code that runs its own event loop (``asyncio.run``) cannot run in a
    Jupyter kernel's thread, where the kernel's loop is already running."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(fn, *args, **kwargs).result()
