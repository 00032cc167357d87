"""What leaks into an instruction count, and how the instruction pass pins it.

Callgrind counts are exact, but the program's work is not fixed by its code alone. Measured on
mailbox-delivery, each of these moved a publication's count, and is pinned here for every pass:

* string hashes (``PYTHONHASHSEED``; random seeds: a quarter of a publication);
* the names the operation hashes and copies: one work directory for every pass (:func:`fixed_root`,
  serialised by a lock so concurrent runs take turns), and the code under test seen through fixed-length
  symlinks (:func:`code_links`): two revisions checked out at paths of different lengths otherwise
  differ by 0.5% (every module path a few characters longer);
* heap addresses before the window, because ``memcpy``'s instruction count depends on its buffers'
  alignment: the environment (a short fixed list, :func:`pinned_environment`; a 3 KB variable moved a
  publication by 0.6%), the request's size (:func:`padded_request`), and glibc's allocator
  (:data:`MALLOC_TUNABLES`);
* lazy symbol binding (``LD_BIND_NOW=1``): a first call through the PLT inside the window would count
  the dynamic linker, and callgrind's function skipping (the callgrind profile) aborts on it;
* a code variant (``perfsuite ab``: one revision's ``perfsuite.engine`` loaded from its own tree) is
  imported through one more link, the same for every revision (:func:`pinned_code`), so BASE in a
  temporary worktree and HEAD in the checkout load their engines from the same path strings;
* bytecode compilation before the window: a worker that compiles the code under test (a fresh checkout,
  an edited module) allocates differently from one that loads its ``.pyc`` (measured: the first pass
  in a fresh clone 0.3% off the next three), so the code under test is compiled first
  (:func:`precompile`).
"""

from __future__ import annotations

import compileall
import fcntl
import importlib.util
import json
import os
import py_compile
import shutil
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = [
    "FIXED_DIR",
    "HASH_SEED",
    "KEPT_ENVIRONMENT",
    "MALLOC_TUNABLES",
    "REQUEST_BLOCK",
    "code_links",
    "code_roots",
    "fixed_root",
    "padded_request",
    "pinned_code",
    "pinned_environment",
    "precompile",
]

#: PYTHONHASHSEED of every pass
HASH_SEED = "0"
#: the fixed directory name every pass works in (its parent: the run's work root)
FIXED_DIR = "perfsuite-instructions"
#: environment variables the worker keeps (the rest is dropped: see :func:`pinned_environment`)
KEPT_ENVIRONMENT = frozenset({"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV",
                              "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "MPLCONFIGDIR", "MPLBACKEND"})
KEPT_PREFIXES = ("PERFSUITE_",)
#: the link (under ``.perfsuite-code``) a code variant's tree is imported through, whichever revision it is
VARIANT_LINK = "v"
#: the request's size is padded to a multiple of this many bytes
REQUEST_BLOCK = 16384
#: glibc malloc: every block of 4 KiB or more comes from mmap (page-aligned, whatever the heap's history,
#: and the threshold no longer moves with the program's frees) and every thread allocates from the one main
#: arena. Buffers' alignment, hence ``memcpy``'s count, stops depending on what ran before the window
#: (measured with a 0-3000 byte variable in the environment: 1% spread without, 0.17% with the threshold;
#: 1 KiB and 8 KiB thresholds were worse; the single arena took the offloaded thread's spread from 0.3%
#: to 0.01% in four of five passes)
MALLOC_TUNABLES = "glibc.malloc.mmap_threshold=4096:glibc.malloc.arena_max=1"


def pinned_environment(environ: Mapping[str, str] | None = None,
                       paths: Mapping[str, str] | None = None) -> dict[str, str]:
    """The worker's environment: :data:`KEPT_ENVIRONMENT` from ``environ`` (default ``os.environ``), in
    sorted order, plus the hash seed, no user site-packages, eager binding and :data:`MALLOC_TUNABLES`.
    ``paths`` maps real directories to their fixed links (``PYTHONPATH`` entries are rewritten)."""
    source = os.environ if environ is None else environ
    kept = {k: v for k, v in source.items() if k in KEPT_ENVIRONMENT or k.startswith(KEPT_PREFIXES)}
    if paths and kept.get("PYTHONPATH"):
        kept["PYTHONPATH"] = os.pathsep.join(_mapped(p, paths) for p in kept["PYTHONPATH"].split(os.pathsep))
    kept.update(PYTHONHASHSEED=HASH_SEED, PYTHONNOUSERSITE="1", LD_BIND_NOW="1", GLIBC_TUNABLES=MALLOC_TUNABLES)
    return dict(sorted(kept.items()))


def padded_request(request: Mapping[str, Any]) -> str:
    """The request as JSON padded to a multiple of :data:`REQUEST_BLOCK` bytes: the worker reads it before
    the window, and a request whose size follows the paths in it would move later heap addresses."""
    text = json.dumps(request)
    pad = -(len(text) + len(', "pad": ""')) % REQUEST_BLOCK
    return json.dumps({**request, "pad": " " * pad})


def _mapped(path: str, paths: Mapping[str, str]) -> str:
    return paths.get(os.path.realpath(path), path) if path else path


def _locations(operation: str) -> list[str]:
    """Where the code under test lives: the operation's top-level package directory (or module file), and
    perfsuite's own package (the harness runs in the same process). Real paths."""
    out: list[str] = []
    for name in (operation.partition(":")[0].split(".")[0], "perfsuite"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is None:
            continue
        if spec.submodule_search_locations:
            location = next(iter(spec.submodule_search_locations))
        elif spec.origin and os.path.isfile(spec.origin):
            location = spec.origin
        else:
            continue
        real = os.path.realpath(location)
        if real not in out:
            out.append(real)
    return out


def code_roots(operation: str) -> list[str]:
    """The import roots (``sys.path`` directories, real paths) of the code under test (see :func:`_locations`)."""
    roots: list[str] = []
    for location in _locations(operation):
        root = os.path.dirname(location)
        if root not in roots:
            roots.append(root)
    return roots


def precompile(operation: str, code: Mapping[str, Any] | None = None) -> None:
    """Write the ``.pyc`` of every module of the code under test (and of a code variant's packages) that
    lacks a fresh one, so no pass compiles before its window. Best effort: a read-only tree is left as is."""
    locations = _locations(operation)
    if code is not None:
        root = Path(str(code["root"]))
        locations += [str(root.joinpath(*str(name).split("."))) for name in code.get("packages", [])]
    for location in locations:
        if os.path.isdir(location):
            compileall.compile_dir(location, quiet=2, workers=1)
        else:
            try:
                py_compile.compile(location, doraise=True)
            except (OSError, py_compile.PyCompileError):
                pass


def code_links(base: Path, roots: Sequence[str]) -> dict[str, str]:
    """Fixed-length symlinks ``<base>/.perfsuite-code/<n>`` to ``roots``: real path -> link. The worker
    imports the code under test through them, so its module paths are the same strings whatever
    directory each revision is checked out in. Call under :func:`fixed_root`'s lock."""
    directory = base / ".perfsuite-code"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    links = {}
    for n, root in enumerate(roots):
        link = directory / str(n)
        link.symlink_to(root, target_is_directory=True)
        links[root] = str(link)
    return links


def pinned_code(base: Path, code: Mapping[str, Any]) -> dict[str, Any]:
    """A code variant's request entry (``{"root": DIR, "packages": [...]}``) with its root seen through the
    fixed link ``<base>/.perfsuite-code/v``: every revision's packages load from the same path strings. Call
    after :func:`code_links` (which clears the directory), under :func:`fixed_root`'s lock."""
    link = base / ".perfsuite-code" / VARIANT_LINK
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.realpath(str(code["root"])), target_is_directory=True)
    return {**dict(code), "root": str(link)}


def mapped_sys_path(sys_path: Sequence[str], links: Mapping[str, str]) -> list[str]:
    """``sys_path`` with the entries of the code under test replaced by their links (empty entries dropped)."""
    return [_mapped(p, links) for p in sys_path if p]


@contextmanager
def fixed_root(base: Path) -> Iterator[Path]:
    """The one work directory every pass uses (same path, same hashed strings), held under a lock so
    concurrent runs on this machine take turns instead of sharing it."""
    base.mkdir(parents=True, exist_ok=True)
    lock_path = base / f".{FIXED_DIR}.lock"
    with open(lock_path, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        root = base / FIXED_DIR
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir()
        try:
            yield root
        finally:
            shutil.rmtree(root, ignore_errors=True)
            shutil.rmtree(base / ".perfsuite-code", ignore_errors=True)
            fcntl.flock(lock, fcntl.LOCK_UN)
