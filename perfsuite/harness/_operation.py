"""The operation protocol: how the harness measures any code, ours or not (SPEC M4, M5, issue 5).

A recipe mode names an operation as ``"module:function"``. The harness imports ``module``, calls
``function(ctx)`` with an :class:`OperationContext` (plain or ``async def``) and gets back an
object with:

``submit(ack) -> None`` (required)
    Starts the operation. The time the call takes to return is the **submission time**. The
    operation calls ``ack(None)`` exactly once when the work is acknowledged (possibly before
    ``submit`` returns, for synchronous operations), or ``ack(exc)`` on failure. The time from the
    call to ``ack`` is the **acknowledgement time**. ``ack`` may be called from another thread.
``async wait_idle() -> None`` (optional)
    Awaited before each sample, outside the window: returns when the system under test is idle
    (no pending job, timer or notification).
``metrics() -> Mapping[str, object]`` (optional)
    Read after the acknowledgement and the window tail. ``"phases_ms": {name: ms}`` and
    ``"drain_ms"`` are reported as such (M5); any other numeric entry (``"bytes_written"``...)
    goes to the sample's metrics.
``close() -> None`` (optional, may be ``async``)
    Called last, always, even when the sample failed.

A factory may carry an ``unavailable() -> str | None`` attribute: a reason this operation cannot run
on this machine (e.g. an optional package missing). ``perfsuite run`` then skips the recipe with that
reason in one line instead of failing.

Example, ten lines (``mybench.py``; a recipe mode then says ``operation = "mybench:Append"``)::

    import asyncio
    from perfsuite.harness import OperationContext

    class Append:  # the factory: any callable that takes the context
        def __init__(self, ctx: OperationContext) -> None:
            self.path = (ctx.workdir or ctx.scratch) / "log.txt"  # the fixture's private copy, or scratch
        def submit(self, ack) -> None:  # returns: submission time
            job = asyncio.get_running_loop().run_in_executor(None, self.path.write_text, "x")
            job.add_done_callback(lambda f: ack(f.exception()))  # acknowledgement time
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from perfsuite.errors import PerfsuiteError

__all__ = [
    "AckCallback",
    "Operation",
    "OperationContext",
    "OperationFactory",
    "SampleKind",
    "check_operation_spec",
    "control_operation",
    "resolve_operation",
]

AckCallback = Callable[[BaseException | None], None]
SampleKind = Literal["sample", "warmup", "control", "allocation", "instructions"]


@dataclass(frozen=True, slots=True)
class OperationContext:
    """What the harness hands an operation factory for one sample.

    ``workdir`` is the sample's private copy of the fixture directory (never the original; ``None``
    when the recipe has no fixture); ``scratch`` is an empty private directory on the same
    filesystem, removed after the sample. ``kind`` says whether this is a latency sample, a
    discarded warm-up, an idle-control window, the allocation pass (M3) or the instruction pass (issue
    22: under valgrind; every pass gets ``sample`` 0, so the same work is counted each time).
    """

    workdir: Path | None
    params: Mapping[str, object]
    mode: str
    sample: int
    scratch: Path | None = None
    kind: SampleKind = "sample"


class Operation(ABC):
    """Convenience base class for the protocol above: only :meth:`submit` is required."""

    @abstractmethod
    def submit(self, ack: AckCallback) -> None:
        """Start the operation; call ``ack(None)`` once when acknowledged, ``ack(exc)`` on failure."""

    async def wait_idle(self) -> None:  # noqa: B027 - optional hook with a no-op default
        """Return when the system under test is idle (default: at once)."""

    def metrics(self) -> Mapping[str, object]:
        """Numbers read after the acknowledgement (default: none)."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook with a no-op default
        """Release resources (default: nothing)."""


OperationFactory = Callable[[OperationContext], "Any | Awaitable[Any]"]


def check_operation_spec(spec: object) -> str | None:
    """Why ``spec`` is not a ``"module:function"`` string, or ``None`` when its syntax is right."""
    if not isinstance(spec, str):
        return f'expected "module:function", got {spec!r}'
    module, sep, attr = spec.partition(":")
    dotted_ok = all(part.isidentifier() for part in module.split("."))
    attr_ok = all(part.isidentifier() for part in attr.split("."))
    if not sep or not module or not attr or not dotted_ok or not attr_ok:
        return f'expected "module:function", got "{spec}"'
    return None


def resolve_operation(spec: str) -> OperationFactory:
    """Import ``"module:function"`` and return the factory; one-line :class:`PerfsuiteError` otherwise."""
    problem = check_operation_spec(spec)
    if problem:
        raise PerfsuiteError(f"operation {problem}")
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise PerfsuiteError(f"unknown operation {spec}: no module named {module_name!r}") from None
        raise PerfsuiteError(f"operation {spec}: importing {module_name!r} failed: {exc}") from None
    except Exception as exc:  # an import-time error in the user's module, reported on one line
        raise PerfsuiteError(
            f"operation {spec}: importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from None
    target: object = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise PerfsuiteError(
                f"unknown operation {spec}: module {module_name!r} has no attribute {attr!r}"
            ) from None
    if not callable(target):
        raise PerfsuiteError(f"operation {spec}: {attr!r} is not callable")
    return target  # type: ignore[return-value]


async def create_operation(factory: OperationFactory, ctx: OperationContext) -> Any:
    """Call the factory (plain or coroutine function) and check the result has ``submit``."""
    op = factory(ctx)
    if inspect.isawaitable(op):
        op = await op
    if not callable(getattr(op, "submit", None)):
        raise PerfsuiteError(
            f"mode {ctx.mode}: the operation factory returned {type(op).__name__}, which has no submit(ack) method"
        )
    return op


async def call_optional(op: Any, name: str) -> Any:
    """Call the optional hook ``name`` if the operation has it, awaiting it when it is async."""
    hook = getattr(op, name, None)
    if hook is None:
        return None
    result = hook()
    if inspect.isawaitable(result):
        result = await result
    return result


class _IdleControl:
    """M1 idle control: submit returns at once and acknowledges ``window_ms`` later; no workload."""

    __slots__ = ("_delay_s", "_handle")

    def __init__(self, window_ms: float) -> None:
        self._delay_s = max(0.0, window_ms) / 1e3
        self._handle: asyncio.TimerHandle | None = None

    def submit(self, ack: AckCallback) -> None:
        self._handle = asyncio.get_running_loop().call_later(self._delay_s, ack, None)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()


def control_operation(ctx: OperationContext) -> _IdleControl:
    """The harness's own idle-control operation (M1): nothing but waiting ``params["window_ms"]``."""
    window_ms = ctx.params.get("window_ms", 50.0)
    if not isinstance(window_ms, int | float) or isinstance(window_ms, bool):
        raise PerfsuiteError(f"control: window_ms: expected a number, got {window_ms!r}")
    return _IdleControl(float(window_ms))


#: the spec the runner uses for idle-control windows
CONTROL_OPERATION = "perfsuite.harness._operation:control_operation"
