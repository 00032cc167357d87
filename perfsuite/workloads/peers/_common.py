"""What the peer adapters share: the pins of the ``peers`` extra, the missing-package check and the
``unavailable()`` hook a runner reads to skip a peer recipe with a one-line reason."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from perfsuite._extras import install_hint
from perfsuite.errors import PerfsuiteError

__all__ = ["INSTALL_HINT", "PEER_PINS", "PeerFactory", "missing_reason", "peer_version", "require", "requires"]

#: how to get the peers (the optional extra of pyproject.toml; see :mod:`perfsuite._extras`)
INSTALL_HINT = install_hint("peers")

#: the versions the peer recipes were written and measured against (the ``peers`` extra pins them)
PEER_PINS: dict[str, str] = {
    "gptme": "0.35.1",
    "langgraph-checkpoint-sqlite": "3.1.2",
    "aiosqlite": "0.22.1",
}

#: (distribution name, importable module) pairs
Requirement = tuple[str, str]


class PeerFactory(Protocol):
    """An operation factory that also says why it cannot run here (``None``: it can)."""

    def __call__(self, ctx: Any) -> Any: ...

    def unavailable(self) -> str | None: ...


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a missing parent package, or a broken one
        return False


def missing_reason(*requirements: Requirement) -> str | None:
    """One line naming the first required package that cannot be imported, with the install command."""
    for distribution, module in requirements:
        if not _importable(module):
            return f"{distribution} is not installed (optional peers extra): {INSTALL_HINT}"
    return None


def require(*requirements: Requirement) -> None:
    """Raise the one-line :class:`PerfsuiteError` of :func:`missing_reason` when a peer package is missing."""
    reason = missing_reason(*requirements)
    if reason:
        raise PerfsuiteError(reason)


def peer_version(distribution: str) -> str:
    """The installed version of ``distribution`` (what the results record), or ``"unknown"``."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


F = TypeVar("F", bound=Callable[..., Any])


def requires(*requirements: Requirement) -> Callable[[F], F]:
    """Mark an operation factory as needing peer packages: sets its ``unavailable()`` hook."""

    def mark(factory: F) -> F:
        factory.unavailable = lambda: missing_reason(*requirements)  # type: ignore[attr-defined]
        return factory

    return mark
