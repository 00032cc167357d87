"""The I/O layer a kill child and its recovery run on: the real one, or a seeded bug's. Below the child and
the LangGraph child, so the dispatch from one to the other stays one-way."""

from __future__ import annotations

from typing import Any


def layer(bug: str | None) -> tuple[Any, Any]:
    """The I/O layer and fault hooks of the engine under test: the real ones, or a seeded bug's (its layer
    also wraps the parent's recovery: a broken engine recovers brokenly too)."""
    from perfsuite.crash.bugs._seeded import seeded_bug
    from perfsuite.engine import OsFileSystem

    if bug is None:
        return OsFileSystem(), None
    broken = seeded_bug(bug)
    return broken.wrap(OsFileSystem()), broken.faults
