"""`perfsuite cache info|clear`: what perfsuite keeps between runs, where, and how much (one line each).

The cache is ``$PERFSUITE_CACHE``, else ``${XDG_CACHE_HOME:-~/.cache}/perfsuite`` (the platform's cache
directory; never in git), one directory per kind, each rebuilt on demand: ``envs`` (the per-revision
environments of ``ab``/``bisect``, :mod:`perfsuite.ab._envs`), ``fixtures`` (generated fixtures),
``valgrind`` (the callgrind client library) and ``whatif`` (measured what-if costs). ``clear`` removes the
entries and keeps the directory; it refuses, removing nothing, a path that does not look like perfsuite's
cache (a symlink, not a directory, or holding anything else: ``PERFSUITE_CACHE=~`` must never empty a home).
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

from perfsuite.cli._common import CliServices, Subparsers
from perfsuite.cli._console import console
from perfsuite.errors import PerfsuiteError

__all__ = ["KINDS", "cache_root", "register"]

#: what perfsuite writes at the top of its cache, one directory per kind
KINDS = ("envs", "fixtures", "valgrind", "whatif")
_LOCK = ".lock"  # an environment's build lock beside it: not an entry


def cache_root() -> Path:
    """``$PERFSUITE_CACHE``, else ``${XDG_CACHE_HOME:-~/.cache}/perfsuite``: the kinds' parent directory."""
    env = os.environ.get("PERFSUITE_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "perfsuite"


def _size(path: Path) -> int:
    """Bytes under ``path``, symlinks counted as themselves (never followed)."""
    if path.is_symlink() or not path.is_dir():
        return path.lstat().st_size
    total = 0
    for directory, _, files in os.walk(path):  # os.walk never descends into a symlinked directory
        for name in files:
            try:
                total += os.lstat(os.path.join(directory, name)).st_size
            except OSError:
                continue
    return total


def _human(size: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def _checked(root: Path, done: str = "") -> list[Path]:
    """The kinds' directories present under ``root``; one-line refusal (ending in ``done``) when ``root`` is not
    perfsuite's cache."""
    if root.is_symlink():
        raise PerfsuiteError(f"{root}: a symlink, not perfsuite's cache{done}")
    if not root.exists():
        return []
    if not root.is_dir():
        raise PerfsuiteError(f"{root}: not a directory, not perfsuite's cache{done}")
    foreign = sorted(p.name for p in root.iterdir() if p.name not in KINDS or p.is_symlink() or not p.is_dir())
    if foreign:
        raise PerfsuiteError(f"{root}: holds {', '.join(foreign[:3])}{' ...' if len(foreign) > 3 else ''}, which "
                             f"perfsuite's cache never does (only {', '.join(KINDS)}): not perfsuite's cache{done}")
    return [root / kind for kind in KINDS if (root / kind).is_dir()]


def _entries(kind: Path) -> list[Path]:
    return sorted(p for p in kind.iterdir() if not p.name.endswith(_LOCK))


def _summary(kinds: list[Path]) -> tuple[int, int, str]:
    counts = [(k.name, len(_entries(k))) for k in kinds]
    total = sum(n for _, n in counts)
    size = sum(_size(k) for k in kinds)
    return total, size, ", ".join(f"{name} {n}" for name, n in counts if n)


def _cmd_info(args: argparse.Namespace, services: CliServices) -> int:
    root = cache_root()
    kinds = _checked(root)
    total, size, parts = _summary(kinds)
    if not total:
        console().verdict(f"perfsuite cache: {root}: empty (nothing cached yet)")
    else:
        console().verdict(f"perfsuite cache: {root}: {total} entr{'y' if total == 1 else 'ies'}, {_human(size)} "
                          f"({parts})")
    return 0


def _cmd_clear(args: argparse.Namespace, services: CliServices) -> int:
    root = cache_root()
    kinds = _checked(root, "; nothing removed")  # before anything is removed
    total, size, _ = _summary(kinds)
    for kind in kinds:
        for entry in sorted(kind.iterdir()):
            if entry.is_symlink() or not entry.is_dir():
                entry.unlink()
            else:
                shutil.rmtree(entry)
        kind.rmdir()
    console().verdict(f"perfsuite cache: cleared {root}: {total} entr{'y' if total == 1 else 'ies'}, {_human(size)}")
    return 0


def register(sub: Subparsers) -> None:
    """`cache info`, `cache clear`."""
    cache = sub.add_parser(
        "cache", help="perfsuite's cache (per-revision environments, fixtures): where, how much; clear it",
        description="The cache is $PERFSUITE_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/perfsuite: envs (the "
        "per-revision environments of ab and bisect), fixtures, valgrind, whatif; each rebuilt on demand.")
    actions = cache.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    info = actions.add_parser("info", help="one line: the path, its entries per kind and their size")
    info.set_defaults(func=_cmd_info)
    clear = actions.add_parser("clear", help="remove every entry (one line); refuses, removing nothing, a "
                               "directory that does not look like perfsuite's cache")
    clear.set_defaults(func=_cmd_clear)
