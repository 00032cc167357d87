"""A worker request's ``sys_path``: what a worker in another environment may import from this one.

Its own module, below both the worker and the instruction pass that builds its requests, so neither
imports the other for it (a circle through a deferred import is still a circle).
"""

from __future__ import annotations

import os
import site
import sys
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["within", "worker_sys_path"]


def within(path: str, roots: Sequence[str]) -> bool:
    """Whether ``path`` (symlinks resolved) is one of ``roots`` or below one."""
    real = os.path.realpath(path)
    return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def worker_sys_path(code: Mapping[str, Any] | None) -> list[str]:
    """The ``sys_path`` of a worker request: the running ``sys.path``; for a variant with its own environment,
    without the running environment's standard library and site-packages (put first, they would shadow what
    the variant's environment installed, such as another version of a dependency)."""
    entries = [p for p in sys.path if p]
    if not (code or {}).get("python"):
        return entries
    own = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *site.getsitepackages()}
    if site.ENABLE_USER_SITE and site.getusersitepackages():
        own.add(site.getusersitepackages())
    roots = [os.path.realpath(r) for r in own if r]
    return [p for p in entries if not within(p, roots)]
