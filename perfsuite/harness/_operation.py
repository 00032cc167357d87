"""The operation protocol: how the harness measures any code, ours or not (SPEC M4, M5).

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

A factory may declare the parameters a recipe mode may set: ``parameters = {"name": Param(int, 10, ...)}``
(:mod:`perfsuite.harness._params`); they are checked before anything runs. A factory that
declares nothing gets whatever the mode table holds, unchecked.

Where ``module`` is looked up: on ``sys.path`` (``perfsuite`` puts the working directory first, as
``python -m`` does), then in the recipe's own directories (:func:`import_roots`: the recipe file's
directory, then the root of the git repository that holds it), which are appended to ``sys.path`` so that
process-isolated workers import the same module.

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
import os
import sys
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from perfsuite.errors import PerfsuiteError
from perfsuite.harness._params import Param, check_params

__all__ = [
    "AckCallback",
    "Operation",
    "OperationContext",
    "OperationFactory",
    "SampleKind",
    "check_operation_spec",
    "control_operation",
    "import_roots",
    "operation_spec",
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
    """Convenience base class for the protocol above: only :meth:`submit` is required. A subclass used as
    the factory may declare ``parameters`` (``None``: declares nothing, the mode's parameters unchecked)."""

    parameters: ClassVar[Mapping[str, Param] | None] = None

    @abstractmethod
    def submit(self, ack: AckCallback) -> None:
        """Start the operation; call ``ack(None)`` once when acknowledged, ``ack(exc)`` on failure."""

    async def wait_idle(self) -> None:  # noqa: B027 - optional hook with a no-op default
        """Return when the system under test is idle (default: at once)."""

    def metrics(self) -> Mapping[str, object]:
        """Numbers read after the acknowledgement (default: none)."""
        return {}

    def close(self) -> Awaitable[None] | None:  # noqa: B027 - optional hook with a no-op default
        """Release resources (default: nothing); may be ``async def`` (the harness awaits it then)."""


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


def import_roots(recipe_file: str | os.PathLike[str]) -> tuple[str, ...]:
    """Where a recipe's operation modules are looked up after ``sys.path``: the recipe file's directory, then
    the root of the git repository holding it (the nearest parent with a ``.git``), as absolute paths."""
    here = Path(recipe_file).absolute().parent
    roots = [str(here)]
    for directory in (here, *here.parents):
        if (directory / ".git").exists():
            if str(directory) not in roots:
                roots.append(str(directory))
            break
    return tuple(roots)


def _extend_path(roots: Sequence[str]) -> None:
    """Append ``roots`` to ``sys.path`` (after everything already there: they never shadow an installed
    module); workers inherit the parent's ``sys.path``, so they import from the same places."""
    for root in roots:
        if root not in sys.path:
            sys.path.append(root)


def _looked_in(roots: Sequence[str]) -> str:
    cwd = os.getcwd()
    places = ["sys.path"]
    if "" in sys.path or cwd in sys.path:
        places.insert(0, f"the working directory {cwd}")
    places += [r for r in roots if r != cwd]
    return "looked in " + ", ".join(places)


def resolve_operation(spec: str, roots: Sequence[str] = ()) -> OperationFactory:
    """Import ``"module:function"`` and return the factory; one-line :class:`PerfsuiteError` otherwise.
    ``roots`` (a recipe's :func:`import_roots`) are searched after ``sys.path``."""
    problem = check_operation_spec(spec)
    if problem:
        raise PerfsuiteError(f"operation {problem}")
    module_name, _, attr = spec.partition(":")
    _extend_path(roots)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise PerfsuiteError(f"unknown operation {spec}: no module named {module_name!r} "
                                 f"({_looked_in(roots)})") from None
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
    return target


def operation_spec(factory: object) -> str:
    """``module:qualname`` of a factory (how messages name an operation given as a callable)."""
    module = getattr(factory, "__module__", None) or "?"
    return f"{module}:{getattr(factory, '__qualname__', type(factory).__name__)}"


async def create_operation(factory: OperationFactory, ctx: OperationContext) -> Any:
    """Check ``ctx.params`` against the factory's declared parameters (when it declares them; the runner has
    already, before the run: this is the backstop for every other caller), call the factory (plain or
    coroutine function) and check the result has ``submit``."""
    try:
        check_params(factory, ctx.params, operation_spec(factory))
    except PerfsuiteError as exc:
        raise PerfsuiteError(f"mode {ctx.mode}: {exc}") from None
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
