"""E4: the unit a driver runs (:class:`Step`) and what every driver does around one: run the steps in the
order a fault hook may rewrite, acknowledge early when a fault hook asks, and mark a failure (before adoption
the publication failed; after it, the failure is only logged)."""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any


@dataclass
class Step:
    """One unit a driver runs. ``blocking`` steps may run off the loop thread; ``func(*args)``'s result
    is handed to ``accept`` on the loop thread. ``local``: a blocking step that needs this process's open
    log (commit, adopt), so a process offload runs it on its thread instead of in the worker."""

    phase: str
    func: Callable[..., Any]
    args: tuple[Any, ...]
    accept: Callable[[Any], None]
    blocking: bool
    local: bool = False


def driven_steps(publication: Any) -> Generator[Step, None, None]:
    """The steps a driver runs: the publication's own, in the order a fault hook may rewrite."""
    steps = publication.steps()
    return publication.reorder(steps) if publication.reorder is not None else steps


def step_done(publication: Any, phase: str) -> None:
    """After a step succeeded: a fault hook's early acknowledgement, when it is due after this phase."""
    early = publication.early_ack
    if early is not None and early[0] == phase:
        publication.early_ack = None
        early[1]()


def mark_failed(publication: Any, phase: str, exc: BaseException) -> None:
    if publication.adopted:
        # Failure after adoption is durable and only logged (E4).
        publication.error = exc
        return
    publication.outcome = "failed"
    publication.error = exc
    publication.failed_phase = phase


__all__ = ["Step", "driven_steps", "mark_failed", "step_done"]
