"""Where perfsuite finds its built-in recipes and fixture specs, and how results record paths.

**Built-in data.** The top-level ``recipes/`` and ``fixtures/`` of the repository are the editable source
of truth. A checkout (or an editable install) reads them in place; a wheel carries copies under
``perfsuite/_data/`` made by ``setup.py`` at build time. :func:`builtin_dir` prefers the wheel's copy and
falls back to the checkout, so both kinds of install find the same files.

**Portable paths.** Committed results must not carry the absolute paths of the machine that produced
them. :func:`portable_path` records a path relative to the working directory (the project) when it is
inside it, as ``<perfsuite>/recipes/...`` when it is built-in data (of a wheel, or of a checkout outside
the working directory), ``~/...`` under the home directory and ``<tmp>/...`` under the temp directory;
anything else stays as given.

**The project root.** ``perfsuite ab``, ``bisect`` and ``run`` started in a subdirectory (``myruntime/``,
``tests/``) measure what they measure from the top: the root is the nearest directory, from the working
directory up, whose ``pyproject.toml`` declares ``[tool.perfsuite]`` (a project inside a larger repository,
whose revisions are that directory of each revision's tree), else the top of the git working tree. Outside
git only a declaring pyproject.toml makes a root.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import tomllib
from pathlib import Path

__all__ = ["BUILTIN_KINDS", "builtin_dir", "portable_path", "project_root"]

#: the kinds of built-in data (top-level directories of the checkout, ``perfsuite/_data/<kind>`` in a wheel)
BUILTIN_KINDS: tuple[str, ...] = ("recipes", "fixtures")


def _package_dir() -> Path:
    import perfsuite

    return Path(perfsuite.__file__).resolve().parent


def builtin_dir(kind: str) -> Path:
    """The directory of built-in ``kind`` data: the wheel's ``perfsuite/_data/<kind>``, else the checkout's."""
    if kind not in BUILTIN_KINDS:
        raise ValueError(f"unknown kind of built-in data {kind!r}")
    shipped = _package_dir() / "_data" / kind
    if shipped.is_dir():
        return shipped
    return _package_dir().parent / kind


def _relative(path: Path, root: Path) -> str | None:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return None


def portable_path(
    path: str | os.PathLike[str] | None,
    *,
    project: str | os.PathLike[str] | None = None,
    home: str | os.PathLike[str] | None = None,
    tmp: str | os.PathLike[str] | None = None,
) -> str | None:
    """``path`` as results record it: project-relative, ``<perfsuite>/``, ``~/`` or ``<tmp>/`` (see above).

    ``project``, ``home`` and ``tmp`` default to the working directory, ``Path.home()`` and the temp dir
    (``scripts/dev/relativize_results.py`` passes those of the machine that wrote an old document).
    """
    if path is None:
        return None
    given = Path(path)
    if not given.is_absolute():
        return given.as_posix()
    # resolve directories, not the file itself: a venv's ``bin/python`` link stays a venv path
    resolved = Path(os.path.realpath(given.parent)) / given.name
    roots = (
        (Path(project if project is not None else os.getcwd()), ""),
        *((builtin_dir(kind), f"<perfsuite>/{kind}/") for kind in BUILTIN_KINDS),
        (Path(tmp if tmp is not None else tempfile.gettempdir()), "<tmp>/"),
        (Path(home if home is not None else Path.home()), "~/"),
    )
    for root, prefix in roots:
        if root == Path(root.anchor):  # a working directory of "/" says nothing about a project
            continue
        for base in (root, Path(os.path.realpath(root))):
            for candidate in (given, resolved):
                rel = _relative(candidate, base)
                if rel is not None:
                    return prefix + rel if rel != "." else (prefix.rstrip("/") or ".")
    return given.as_posix()


def _declares(pyproject: Path) -> bool:
    """Whether ``pyproject`` has a ``[tool.perfsuite]`` table (an unreadable one is read, and said, later)."""
    try:
        with open(pyproject, "rb") as fh:
            return isinstance((tomllib.load(fh).get("tool") or {}).get("perfsuite"), dict)
    except (OSError, tomllib.TOMLDecodeError):
        return False


def _git_top(directory: Path) -> Path | None:
    """The top of the git working tree holding ``directory`` (``None`` outside one, or without git)."""
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
