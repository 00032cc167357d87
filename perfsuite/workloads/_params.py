"""What the operations of :mod:`perfsuite.workloads` accept: their declared parameters.

Every factory here carries a ``parameters`` declaration (:class:`perfsuite.harness.Param`), so a recipe's
misspelled key (``windw_ms``, ``ofload``) or out-of-range value is one line before anything runs, and
reads its values through :func:`value` so the declared default is the only default. The shared pieces:

* :data:`SESSION`: the engine settings every operation that opens a session applies (``SessionSettings``);
* :data:`LABELS`: ``system`` and ``durability``, strings a peer comparison records with every sample of a
  mode (what the mode is, what it guarantees): descriptive, never read by the operation;
* :data:`FREEZE`: ``freeze_loaded`` for the operations that open no session (`--gc-freeze` passes it to
  every mode; there is nothing loaded for them to freeze, so it holds trivially, as storage does for idle).

Run conditions (``storage``) are not declared here: a factory that declares the ``storage`` condition
accepts it (:func:`perfsuite.harness.declared_parameters`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from perfsuite._limits import LIMITS
from perfsuite.harness import OperationContext, Param, param_value

__all__ = ["FREEZE", "LABELS", "SESSION", "count", "ms", "value"]


def count(limit: str, default: int | None, doc: str, *, minimum: int | None = None) -> Param:
    """An integer parameter bounded by ``LIMITS[limit]`` (its low end raised to ``minimum``)."""
    bound = LIMITS[limit]
    low = bound.low if minimum is None else max(bound.low, minimum)
    return Param(int, default, doc, minimum=low, maximum=bound.high)


def ms(default: float, doc: str, *, limit: str = "window_ms") -> Param:
    """A finite number of milliseconds (or seconds, with another ``limit``) inside ``LIMITS[limit]``."""
    bound = LIMITS[limit]
    return Param(float, default, doc, minimum=bound.low, maximum=bound.high)


FREEZE: Mapping[str, Param] = {
    "freeze_loaded": Param(bool, False, "accepted for --gc-freeze: this operation opens no session, so there is "
                           "nothing loaded to freeze"),
}

LABELS: Mapping[str, Param] = {
    "system": Param(str, None, "what this mode measures, recorded with the results (peer comparisons)"),
    "durability": Param(str, None, "what this mode's acknowledgement guarantees, recorded with the results"),
}

SESSION: Mapping[str, Param] = {
    "chunk_size": count("bytes", 64 * 1024, "SessionSettings.chunk_size: bytes per chunk (0: whole artifact)"),
    "offload": Param(str, "thread", "SessionSettings.offload: where the asynchronous job's blocking steps run",
                     choices=("thread", "process", "inline")),
    "asynchronous": Param(bool, True, "SessionSettings.asynchronous"),
    "drain_limit_s": ms(30.0, "SessionSettings.drain_limit_s: seconds a synchronous drain may wait",
                        limit="ack_timeout_s"),
    "freeze_loaded": Param(bool, False, "SessionSettings.freeze_loaded: gc.freeze() once the session is open"),
    **LABELS,
}


def value(ctx: OperationContext, declared: Mapping[str, Param], name: str) -> Any:
    """The mode's ``name`` (checked against ``declared``), or its declared default."""
    return param_value(ctx, declared, name)
