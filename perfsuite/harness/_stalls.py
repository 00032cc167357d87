"""M9: loop stalls, the heartbeat's companion: every event-loop callback inside a sample window, timed.

The heartbeat (M1) cannot see a block shorter than its period that ends before the next tick is due
(a 3 ms busy-wait between two 5 ms ticks leaves the max gap unchanged). The harness owns the event loop
its samples run on, so it runs them on :class:`InstrumentedLoop`: a ``SelectorEventLoop`` whose public
scheduling methods (``call_soon``, ``call_soon_threadsafe``, ``call_at`` and through it ``call_later``,
``add_reader``, ``add_writer``) wrap each callback in a timer. The engine is never touched and no asyncio
class is patched: only the loops the harness creates are instrumented, and a loop that is not one of
them simply reports no stalls (``None``: not measured, never 0).

The timer reads :attr:`StallMonitor.clock` (``time.perf_counter_ns`` unless a test injects another)
before and after the original callback, and records only while the monitor is armed (one sample window);
outside a window a wrapped callback costs one attribute test. Per window it reports the longest single
callback (microsecond resolution), the total loop-busy time (the sum of the timed callbacks) and the
top callbacks by duration with their qualified names (``Task.__step of module.Class.coroutine``).

What it cannot see, and why that is acceptable:

* reader and writer callbacks registered through asyncio's *private* ``_add_reader``/``_add_writer``:
  the selector transports of sockets, pipes and subprocesses, and the loop's own self-pipe that wakes it
  after ``call_soon_threadsafe``. The self-pipe reader only drains wake-up bytes (microseconds); the
  suite's workloads do their I/O in worker threads or processes, never through loop transports. A
  workload that did would have those reads missing from ``busy_ms``; the heartbeat still sees them when
  they are longer than a period.
* the loop's own bookkeeping between callbacks (``select``, the timer heap): not work any callback asked
  for. Callbacks that are wrapped but started before the monitor was armed are not recorded.
"""

from __future__ import annotations

import asyncio
import bisect
import contextvars
import functools
import heapq
import inspect
import sys
import time
from array import array
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, TypeVarTuple

if TYPE_CHECKING:
    from _typeshed import FileDescriptorLike

__all__ = [
    "TOP_CALLBACKS",
    "InstrumentedLoop",
    "StallEntry",
    "StallMonitor",
    "StallWindow",
    "callback_name",
    "run_instrumented",
    "stall_monitor_of",
]

#: how many of the longest callbacks a window keeps with their names
TOP_CALLBACKS = 5

T = TypeVar("T")
_Ts = TypeVarTuple("_Ts")


@dataclass(frozen=True, slots=True)
class StallEntry:
    """One timed callback: its qualified name, when it started and how long it ran (ns)."""

    name: str
    start_ns: int
    duration_ns: int


@dataclass(frozen=True, slots=True)
class StallWindow:
    """M9 for one window: callbacks that overlap it (counted whole, like the heartbeat's gaps)."""

    start_ns: int
    end_ns: int
    callbacks: int
    busy_ns: int
    longest_ns: int
    top: tuple[StallEntry, ...]

    @property
    def longest_ms(self) -> float:
        """The longest single callback, in ms with microsecond resolution."""
        return round(self.longest_ns / 1e6, 3)

    @property
    def busy_ms(self) -> float:
        """Total loop-busy time (sum of the callbacks), in ms with microsecond resolution."""
        return round(self.busy_ns / 1e6, 3)

    def to_dict(self) -> dict[str, Any]:
        """The ``stalls`` entry of a sample (times in ms, 3 decimals = 1 us; ``at_ms`` from the window start)."""
        return {
            "longest_ms": self.longest_ms,
            "busy_ms": self.busy_ms,
            "callbacks": self.callbacks,
            "top": [
                {
                    "name": e.name,
                    "ms": round(e.duration_ns / 1e6, 3),
                    "at_ms": round((e.start_ns - self.start_ns) / 1e6, 3),
                }
                for e in self.top
            ],
        }


class _Timed(Generic[*_Ts, T]):
    """The wrapper a callback runs in: times it while the monitor is armed (the M9 instrument)."""

    __slots__ = ("__wrapped__", "_monitor")

    def __init__(self, callback: Callable[[*_Ts], T], monitor: StallMonitor) -> None:
        self.__wrapped__ = callback
        self._monitor = monitor

    def __call__(self, *args: *_Ts) -> T:
        monitor = self._monitor
        if not monitor.armed:
            return self.__wrapped__(*args)
        clock = monitor.clock
        t0 = clock()
        try:
            return self.__wrapped__(*args)
        finally:
            monitor._record(t0, clock(), self.__wrapped__)

    def __repr__(self) -> str:
        return f"<timed {self.__wrapped__!r}>"


class StallMonitor:
    """Records every wrapped callback that runs while armed; :meth:`window` reduces them (M9).

    ``clock`` is the seam tests use to make the arithmetic deterministic; it must return integer ns.
    """

    def __init__(self, clock: Callable[[], int] = time.perf_counter_ns) -> None:
        self.clock = clock
        self.armed = False
        self.enabled = True  # False: wrap nothing (the allocation pass, M3: the wrapper would be counted)
        self._starts = array("q")
        self._ends = array("q")
        self._callbacks: list[Callable[..., Any]] = []

    def wrap(self, callback: Callable[[*_Ts], T]) -> Callable[[*_Ts], T]:
        """``callback`` wrapped in the timer (once: an already wrapped callback is returned as is; nothing is
        wrapped while the monitor is disabled)."""
        if isinstance(callback, _Timed) or not self.enabled:
            return callback
        return _Timed(callback, self)

    def _record(self, start_ns: int, end_ns: int, callback: Callable[..., Any]) -> None:
        self._starts.append(start_ns)
        self._ends.append(end_ns)
        self._callbacks.append(callback)

    def arm(self) -> None:
        """Start recording (just before a window opens); earlier records are dropped."""
        self._starts = array("q")
        self._ends = array("q")
        self._callbacks = []
        self.armed = True

    def disarm(self) -> None:
        """Stop recording (after the window's stats were read); drops the references to callbacks."""
        self.armed = False
        self._callbacks = []

    @property
    def recorded(self) -> int:
        """Callbacks recorded since the last :meth:`arm` (and not trimmed since)."""
        return len(self._starts)

    def trim(self, before_ns: int) -> None:
        """Drop the records of callbacks that ended before ``before_ns``, staying armed (M11: a live watch reads
        back-to-back windows, and a callback straddling a boundary must stay for the next window, as the
        heartbeat's straddling gap does). Records are appended when a callback ends, so their end times never
        decrease on one loop's thread: the dropped records are a prefix."""
        ends = self._ends
        keep = bisect.bisect_left(ends, before_ns)
        if keep:
            del self._starts[:keep]
            del self._ends[:keep]
            del self._callbacks[:keep]

    def since(self, start_ns: int, until_ns: int | None = None, top: int = TOP_CALLBACKS) -> tuple[StallEntry, ...]:
        """The ``top`` longest recorded callbacks that ended at or after ``start_ns`` (and started at or before
        ``until_ns``, when given), named, longest first.

        Walks back from the newest record only (records end in order), so asking about the last few milliseconds
        costs what they held, not the whole window: M12 attributes each slow key to the callbacks that ran
        between the key and its frame, inside the window, without a scan of everything recorded."""
        starts, ends = self._starts, self._ends
        i = len(ends) - 1
        picked = []
        while i >= 0 and ends[i] >= start_ns:
            if until_ns is None or starts[i] <= until_ns:
                picked.append(i)
            i -= 1
        longest = heapq.nsmallest(top, picked, key=lambda j: (starts[j] - ends[j], starts[j]))
        return tuple(StallEntry(callback_name(self._callbacks[j]), starts[j], ends[j] - starts[j]) for j in longest)

    def window(self, start_ns: int, end_ns: int, top: int = TOP_CALLBACKS) -> StallWindow:
        """Callbacks overlapping ``[start_ns, end_ns]``: count, busy time, longest, the ``top`` longest named."""
        if end_ns < start_ns:
            raise ValueError("window ends before it starts")
        starts, ends = self._starts, self._ends
        picked = [i for i in range(len(starts)) if ends[i] >= start_ns and starts[i] <= end_ns]
        busy = sum(ends[i] - starts[i] for i in picked)
        longest = heapq.nsmallest(top, picked, key=lambda i: (starts[i] - ends[i], starts[i]))
        entries = tuple(StallEntry(callback_name(self._callbacks[i]), starts[i], ends[i] - starts[i]) for i in longest)
        return StallWindow(
            start_ns=start_ns,
            end_ns=end_ns,
            callbacks=len(picked),
            busy_ns=busy,
            longest_ns=entries[0].duration_ns if entries else 0,
            top=entries,
        )


# -- names ----------------------------------------------------------------------------------------------


#: ``module.__file__`` -> module name, filled from ``sys.modules`` on a miss (see :func:`_module_of_file`)
_MODULES_BY_FILE: dict[str, str] = {}
_MAPPED_MODULES: dict[str, object] = {}


def _module_of_file(filename: str) -> str | None:
    """The module whose ``__file__`` is ``filename`` (a code object's ``co_filename``), by string compare.

    ``inspect.getmodule`` resolves every module's real path on a miss (a syscall per path component, tens of ms
    in a program that imported a thousand modules); naming runs in the measured loop of a live watch (M11), so
    the map here only reads ``__file__`` strings, and only of modules it has not seen."""
    name = _MODULES_BY_FILE.get(filename)
    if name is None:
        for modname, module in list(sys.modules.items()):
            if _MAPPED_MODULES.get(modname) is not module:
                _MAPPED_MODULES[modname] = module
                file = getattr(module, "__file__", None)
                if isinstance(file, str):
                    _MODULES_BY_FILE.setdefault(file, getattr(module, "__name__", modname))
        name = _MODULES_BY_FILE.get(filename)
    return name


def _module_of(obj: Any) -> str | None:
    module = getattr(obj, "__module__", None)
    if isinstance(module, str):
        return module
    frame = getattr(obj, "cr_frame", None) or getattr(obj, "gi_frame", None)  # a live coroutine: its globals
    if frame is not None and isinstance(frame.f_globals.get("__name__"), str):
        return frame.f_globals["__name__"]
    code = getattr(obj, "cr_code", None) or getattr(obj, "gi_code", None) or getattr(obj, "__code__", None)
    if code is None:
        return None
    name = _module_of_file(code.co_filename)
    if name is not None:
        return name
    found = inspect.getmodule(code)
    return found.__name__ if found is not None else None


def _qualified(obj: Any) -> str:
    qual = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__qualname__
    module = _module_of(obj)
    return f"{module}.{qual}" if module and module != "builtins" else str(qual)


def _task_name(task: asyncio.Task[Any], step: str) -> str:
    coro = task.get_coro()
    return f"Task.{step} of {_qualified(coro) if coro is not None else task.get_name()}"


def callback_name(callback: Callable[..., Any]) -> str:
    """A readable qualified name for a loop callback: ``Task.__step of pkg.mod.Class.coro``,
    ``pkg.mod.Class.method``, ``pkg.mod.function`` (wrappers followed through ``__wrapped__``)."""
    seen = 0
    while seen < 8:  # unwrap our timer, functools.wraps chains and partials
        seen += 1
        if isinstance(callback, functools.partial):
            callback = callback.func
        elif (wrapped := getattr(callback, "__wrapped__", None)) is not None:
            callback = wrapped
        else:
            break
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, asyncio.Task):
        name = getattr(callback, "__name__", "") or ""
        return _task_name(owner, "__wakeup" if "wakeup" in name else "__step")
    if owner is not None and not inspect.ismodule(owner) and getattr(callback, "__name__", None):
        cls = type(owner)
        module = cls.__module__
        prefix = f"{module}." if module and module != "builtins" else ""
        return f"{prefix}{cls.__qualname__}.{callback.__name__}"
    return _qualified(callback)


# -- the loop -------------------------------------------------------------------------------------------


class InstrumentedLoop(asyncio.SelectorEventLoop):
    """A selector event loop whose public scheduling methods time every callback (see the module docs).

    ``call_later`` goes through ``call_at``; wrapping is idempotent, so a loop implementation that
    routes one public method through another never times a callback twice.
    """

    def __init__(self, monitor: StallMonitor | None = None) -> None:
        super().__init__()
        self.stall_monitor = monitor if monitor is not None else StallMonitor()

    # The signatures are asyncio's own (typeshed), so the loop stays substitutable for the base loop.
    def call_soon(self, callback: Callable[[*_Ts], object], *args: *_Ts,
                  context: contextvars.Context | None = None) -> asyncio.Handle:
        return super().call_soon(self.stall_monitor.wrap(callback), *args, context=context)

    def call_soon_threadsafe(self, callback: Callable[[*_Ts], object], *args: *_Ts,
                             context: contextvars.Context | None = None) -> asyncio.Handle:
        return super().call_soon_threadsafe(self.stall_monitor.wrap(callback), *args, context=context)

    def call_at(
        self, when: float, callback: Callable[[*_Ts], object], *args: *_Ts,
        context: contextvars.Context | None = None
    ) -> asyncio.TimerHandle:
        return super().call_at(when, self.stall_monitor.wrap(callback), *args, context=context)

    def add_reader(self, fd: FileDescriptorLike, callback: Callable[[*_Ts], Any], *args: *_Ts) -> None:
        return super().add_reader(fd, self.stall_monitor.wrap(callback), *args)

    def add_writer(self, fd: FileDescriptorLike, callback: Callable[[*_Ts], Any], *args: *_Ts) -> None:
        return super().add_writer(fd, self.stall_monitor.wrap(callback), *args)


def stall_monitor_of(loop: asyncio.AbstractEventLoop) -> StallMonitor | None:
    """The monitor of a harness loop, or ``None`` for any other loop (stalls are then not measured)."""
    return loop.stall_monitor if isinstance(loop, InstrumentedLoop) else None


def run_instrumented(main: Coroutine[Any, Any, T], monitor: StallMonitor | None = None) -> T:
    """``asyncio.run(main)`` on a fresh :class:`InstrumentedLoop` (the harness's own loops, M9)."""
    with asyncio.Runner(loop_factory=lambda: InstrumentedLoop(monitor)) as runner:
        return runner.run(main)
