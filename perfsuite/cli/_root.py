"""The project root: where a command started anywhere in a repository finds its recipes and ``[tool.perfsuite]``.

``perfsuite ab``, ``bisect`` and ``run`` started in a subdirectory (``myruntime/``, ``tests/``) measure what
they measure from the top: the root is the nearest directory, from the working directory up, whose
``pyproject.toml`` declares ``[tool.perfsuite]`` (a project inside a larger repository), else the top of the
git working tree. Outside git only a declaring pyproject.toml makes a root.
"""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

__all__ = ["project_recipes", "project_root"]


def _declares(pyproject: Path) -> bool:
    """Whether ``pyproject`` has a ``[tool.perfsuite]`` table (an unreadable one is read, and said, later)."""
    try:
        with open(pyproject, "rb") as fh:
            return isinstance((tomllib.load(fh).get("tool") or {}).get("perfsuite"), dict)
    except (OSError, tomllib.TOMLDecodeError):
        return False


def _git_top(directory: Path) -> Path | None:
    """The top of the git working tree holding ``directory`` (``None`` outside one, or without git). Here and
    not through :mod:`perfsuite.ab`, so ``run`` does not import the A/B machinery to find its recipes."""
    try:
        proc = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=directory, capture_output=True,
                              text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(proc.stdout.strip()).resolve() if proc.returncode == 0 and proc.stdout.strip() else None


def project_root(cwd: Path) -> Path | None:
    """The project root of ``cwd`` (the module docstring); ``None`` outside git without a declaring pyproject."""
    here = Path(cwd).resolve()
    top = _git_top(here)
    for directory in (here, *here.parents):
        if (directory / "pyproject.toml").is_file() and _declares(directory / "pyproject.toml"):
            return directory
        if directory == top:
            break
    return top


def project_recipes(cwd: Path, given: str | None, env: str | None) -> str | None:
    """The user's recipe folder for a command started in ``cwd``: ``given`` (``--recipes``), else none when
    ``$PERFSUITE_RECIPES`` (``env``) or ``./recipes`` says it (the harness's own rule), else the project
    root's ``recipes/`` when it has one."""
    if given is not None or env or (Path(cwd) / "recipes").is_dir():
        return given
    root = project_root(cwd)
    if root is not None and (root / "recipes").is_dir():
        return str(root / "recipes")
    return None
