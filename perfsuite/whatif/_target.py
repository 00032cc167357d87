"""Replay a trace through a team's own scheduler: a *replay target*, in virtual or real time.

A replay target is your code behind a small adapter, named ``"module:Class"`` as a recipe names its
operation. perfsuite makes one per trace session, ``Class(ctx)`` (a plain or ``async`` factory) with a
:class:`ReplayContext`, and calls ``target.on_event(event)`` (a :class:`~perfsuite.whatif.TraceEvent`;
plain or ``async``) at each event's time. Your code schedules what it likes with ``loop.call_later``,
``asyncio.sleep``... and says each publication with ``ctx.publish(kind)`` (or ``ctx.begin(kind)`` and
``.done()`` around asynchronous work). perfsuite counts them and the changes each one captured.

Optional: ``changes`` (the kinds that change state a publication must capture; default
:data:`DEFAULT_CHANGES` and every ``x-`` kind), ``stop()`` (the trace has ended: stop periodic work, keep
pending saves), ``idle() -> bool`` (nothing pending), ``close()``; each may be ``async``.

The same adapter runs on a :class:`~perfsuite.whatif.VirtualTimeLoop` (the sweep) and on a real event
loop in real time (``--validate``), so the two replays run exactly the same code.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import inspect
import itertools
import re
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, TypeVar, runtime_checkable

from perfsuite.errors import PerfsuiteError
from perfsuite.whatif._loop import virtual_run
from perfsuite.whatif._simulate import Publication, Replay, Setting
from perfsuite.workloads.traces import OBSERVATIONAL, Trace, TraceEvent, is_user_kind

__all__ = [
    "DEFAULT_CHANGES",
    "Publishing",
    "ReplayContext",
    "ReplayTarget",
    "TargetFactory",
    "TargetRun",
    "replay_target",
    "resolve_target",
    "run_target",
]

#: the kinds that change state by default (a target's ``changes`` attribute overrides it); ``x-`` kinds too
DEFAULT_CHANGES = frozenset(OBSERVATIONAL | {"message", "mail", "spawn", "settle"})
#: how long after the trace's end a virtual replay lets pending work run out (as the engine's replay)
VIRTUAL_TAIL_S = 3600.0
_IDLE_POLL_S = 0.001
_IDLE_POLL_MAX_S = 0.05
T = TypeVar("T")


@runtime_checkable
class ReplayTarget(Protocol):
    """What ``Class(ctx)`` returns: only ``on_event`` is required (see the module's notes for the rest)."""

    def on_event(self, event: TraceEvent) -> Awaitable[None] | None: ...


TargetFactory = Callable[["ReplayContext"], Any]


class _Tally:
    """What one replay observed: changes per session, publications, notification waits (loop thread only)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.start = loop.time()
        self.changes: dict[str, list[float]] = {}
        self.published: dict[str, int] = {}  # per session: how many of its changes are published
        self.losses: list[float] = []
        self.publications: list[Publication] = []
        self.waits: list[float] = []
        self.in_flight = 0
        self.settled = asyncio.Event()
        self.settled.set()

    def now(self) -> float:
        return self.loop.time() - self.start

    def changed(self, session: str) -> None:
        self.changes.setdefault(session, []).append(self.now())
        self.settled.clear()

    def captured(self, session: str, upto: int) -> None:
        """A publication of ``session`` that began after ``upto`` changes finished: their losses end now."""
        done = self.published.get(session, 0)
        now = self.now()
        self.losses.extend(now - t for t in self.changes.get(session, [])[done:upto])
        self.published[session] = max(done, upto)

    def pending(self) -> int:
        return sum(len(c) - self.published.get(s, 0) for s, c in self.changes.items())

    def update(self) -> None:
        if self.in_flight == 0 and self.pending() == 0:
            self.settled.set()


class Publishing:
    """One publication in progress (:meth:`ReplayContext.begin`): it captures every change of its session
    delivered before it began. Finish it once with :meth:`done` or :meth:`failed`; as a context manager
    it is done on exit, failed when the block raises."""

    __slots__ = ("_captured", "_ctx", "_finished", "began_at", "kind")

    def __init__(self, ctx: ReplayContext, kind: str) -> None:
        self._ctx = ctx
        self.kind = kind
        self.began_at = ctx.now()
        self._captured = len(ctx._tally.changes.get(ctx.session, ()))
        self._finished = False
        ctx._tally.in_flight += 1

    def done(self, *, bytes_written: int | None = None, bytes_allocated: int | None = None,
             noop: bool = False) -> None:
        """Published (``noop``: nothing new needed writing); the bytes, when your code knows them, win over
        the ``--costs`` file's figures for this kind."""
        for name, value in (("bytes_written", bytes_written), ("bytes_allocated", bytes_allocated)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise PerfsuiteError(f"publication {self.kind}: {name} must be an integer >= 0, got {value!r}")
        tally = self._finish()
        tally.captured(self._ctx.session, self._captured)
        self._record(tally, "noop" if noop else "adopted", bytes_written, bytes_allocated)

    def failed(self) -> None:
        """The publication failed: it captured nothing."""
        self._record(self._finish(), "failed", None, None)

    def _finish(self) -> _Tally:
        if self._finished:
            raise PerfsuiteError(f"publication {self.kind}: finished twice (done/failed once per begin)")
        self._finished = True
        tally = self._ctx._tally
        tally.in_flight -= 1
        return tally

    def _record(self, tally: _Tally, outcome: str, written: int | None, allocated: int | None) -> None:
        tally.publications.append(Publication(self._ctx.session, self.kind, outcome, self.began_at, tally.now(),
                                              written, allocated))
        tally.update()

    def __enter__(self) -> Publishing:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if not self._finished:
            self.failed() if exc is not None else self.done()


_KIND = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_SPEC = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")  # as a recipe's operation


class ReplayContext:
    """What a replay target receives: its trace ``session``, the grid ``setting`` (``setting.debounce_s``,
    ``checkpoint_interval_s``, ``notify_max_s``), a private ``workdir`` (real files may be written there;
    removed afterwards) and the ways to say what it published."""

    def __init__(self, session: str, setting: Setting, workdir: Path, tally: _Tally) -> None:
        self.session = session
        self.setting = setting
        self.workdir = workdir
        self._tally = tally

    def now(self) -> float:
        """Seconds since the trace started, on the loop's clock (virtual or real)."""
        return self._tally.now()

    def begin(self, kind: str = "save") -> Publishing:
        """A publication starts now (it captures the changes delivered so far); finish it with ``done()``."""
        if not isinstance(kind, str) or not _KIND.fullmatch(kind):
            raise PerfsuiteError(f"publication kind: expected a short name (letters, digits, _ . -), got {kind!r}")
        return Publishing(self, kind)

    def publish(self, kind: str = "save", *, bytes_written: int | None = None, bytes_allocated: int | None = None,
                noop: bool = False) -> None:
        """A publication that began and finished now (synchronous work)."""
        self.begin(kind).done(bytes_written=bytes_written, bytes_allocated=bytes_allocated, noop=noop)

    def notified(self, event: TraceEvent) -> None:
        """The notification a ``notify`` event offered was delivered now (its delay: now - the event's time)."""
        self._tally.waits.append(max(0.0, self.now() - event.time))


def resolve_target(spec: str) -> TargetFactory:
    """Import ``"module:Class"`` (looked up like a recipe's operation); one-line :class:`PerfsuiteError`."""
    if not isinstance(spec, str) or not _SPEC.fullmatch(spec):
        raise PerfsuiteError(f'replay target: expected "module:Class", got {spec!r}')
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise PerfsuiteError(f"replay target {spec}: no module named {module_name!r} (modules are imported "
                                 "from the current directory and sys.path)") from None
        raise PerfsuiteError(f"replay target {spec}: importing {module_name!r} failed: {exc}") from None
    except Exception as exc:  # an import-time error in the user's module, on one line
        raise PerfsuiteError(f"replay target {spec}: importing {module_name!r} failed: "
                             f"{type(exc).__name__}: {exc}") from None
    target: object = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise PerfsuiteError(f"replay target {spec}: module {module_name!r} has no attribute {attr!r}")
        target = getattr(target, part)
    if not callable(target):
        raise PerfsuiteError(f"replay target {spec}: {attr!r} is not callable")
    return target


def target_name(target: str | TargetFactory) -> str:
    if isinstance(target, str):
        return target
    return f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', repr(target))}"


async def _maybe(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def _hook(target: Any, name: str) -> Any:
    hook = getattr(target, name, None)
    return None if hook is None else await _maybe(hook())


def _change_kinds(target: Any, name: str) -> Callable[[str], bool]:
    declared = getattr(target, "changes", None)
    if declared is None:
        return lambda kind: kind in DEFAULT_CHANGES or is_user_kind(kind)
    if isinstance(declared, str) or not isinstance(declared, Collection):
        raise PerfsuiteError(f"replay target {name}: changes must be a collection of kinds, got {declared!r}")
    kinds = frozenset(declared)
    return lambda kind: kind in kinds


@dataclass(frozen=True, slots=True)
class TargetRun:
    """One replay through a target: what it published and how long changes waited (trace seconds)."""

    setting: Setting
    duration_s: float
    publications: tuple[Publication, ...]
    losses: tuple[float, ...]  # change -> the end of the first publication that captured it
    notification_waits: tuple[float, ...]
    unpublished: int
    in_flight: int  # publications begun and never finished
    recorded_publications: int
    wall_s: float = 0.0  # the replay's duration on its loop's clock (virtual or real seconds)
    settled_after_s: float | None = None  # after the trace's end, until all was published and idle (None: never)

    def as_replay(self) -> Replay:
        """The engine replay's shape; the engine's scheduler counters are not measured (None)."""
        return Replay(self.setting, self.duration_s, self.publications, self.losses, (), self.notification_waits,
                      self.unpublished, None, None, None, None, None, self.recorded_publications)


async def run_target(trace: Trace, setting: Setting, target: str | TargetFactory, *, workdir: Path,
                     tail_s: float = VIRTUAL_TAIL_S) -> TargetRun:
    """Replay ``trace`` on the running loop (virtual or real) through one target per trace session. After
    the last event, ``stop()`` is called and pending work may run for up to ``tail_s`` until every change
    is published and every target is ``idle()``. An exception in the target's code (``on_event``, its
    timers) is a one-line :class:`PerfsuiteError` after the replay."""
    factory = resolve_target(target) if isinstance(target, str) else target
    name = target_name(target)
    loop = asyncio.get_running_loop()
    errors: list[str] = []
    previous = loop.get_exception_handler()

    def on_error(_loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        errors.append(f"{type(exc).__name__}: {exc}" if exc is not None else str(context.get("message")))

    loop.set_exception_handler(on_error)  # a failing timer callback of the target's is an error, not a log line
    started = loop.time()
    tally = _Tally(loop)
    events = [e for e in trace.events if e.kind != "publication"]
    targets: dict[str, Any] = {}
    try:
        for index, session in enumerate(dict.fromkeys(e.session for e in events)):
            directory = workdir / f"{index:03d}"
            directory.mkdir(parents=True, exist_ok=True)
            try:
                made = await _maybe(factory(ReplayContext(session, setting, directory, tally)))
            except PerfsuiteError:
                raise
            except Exception as exc:
                raise PerfsuiteError(f"replay target {name}: making it for session {session!r} failed: "
                                     f"{type(exc).__name__}: {exc}") from None
            if not callable(getattr(made, "on_event", None)):
                raise PerfsuiteError(f"replay target {name}: {type(made).__name__} has no on_event(event) method")
            targets[session] = made
        changes = {s: _change_kinds(t, name) for s, t in targets.items()}
        tasks: set[asyncio.Future[Any]] = set()

        def task_done(task: asyncio.Future[Any]) -> None:
            tasks.discard(task)
            if not task.cancelled() and task.exception() is not None:
                exc = task.exception()
                errors.append(f"{type(exc).__name__}: {exc}")

        def deliver(group: list[TraceEvent]) -> None:
            for event in group:
                if changes[event.session](event.kind):
                    tally.changed(event.session)  # before on_event: a publication it begins captures it
                try:
                    result = targets[event.session].on_event(event)
                except Exception as exc:
                    errors.append(f"on_event({event.kind} at {event.time:g} s): {type(exc).__name__}: {exc}")
                    continue
                if inspect.isawaitable(result):
                    task = asyncio.ensure_future(result)
                    tasks.add(task)
                    task.add_done_callback(task_done)

        tally.start = loop.time()
        for at, group in itertools.groupby(events, key=lambda e: e.time):  # one callback per instant: in order
            loop.call_at(tally.start + at, deliver, list(group))
        await asyncio.sleep(max(0.0, tally.start + trace.duration_s - loop.time()))
        await asyncio.sleep(0)  # the events at the very end are delivered
        for made in targets.values():
            try:
                await _hook(made, "stop")
            except Exception as exc:
                errors.append(f"stop(): {type(exc).__name__}: {exc}")
        ended = loop.time()
        deadline = ended + tail_s
        try:
            await asyncio.wait_for(tally.settled.wait(), timeout=tail_s)
        except TimeoutError:
            pass
        step = _IDLE_POLL_S
        while not (idle := all([await _idle(t) for t in targets.values()])) and loop.time() < deadline:
            await asyncio.sleep(step)
            step = min(2 * step, _IDLE_POLL_MAX_S)  # an idle() that never holds costs few iterations
        settled = idle and tally.pending() == 0 and tally.in_flight == 0
        tail_used = loop.time() - ended
        for task in list(tasks):
            task.cancel()
    finally:
        for made in targets.values():
            try:
                await _hook(made, "close")
            except Exception as exc:
                errors.append(f"close(): {type(exc).__name__}: {exc}")
        loop.set_exception_handler(previous)
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise PerfsuiteError(f"replay target {name} failed on {trace.source}: {errors[0]}{more}")
    return TargetRun(setting, trace.duration_s, tuple(sorted(tally.publications, key=lambda p: p.done_at)),
                     tuple(tally.losses), tuple(tally.waits), tally.pending(), tally.in_flight,
                     trace.count("publication"), loop.time() - started, tail_used if settled else None)


async def _idle(target: Any) -> bool:
    hook = getattr(target, "idle", None)
    return True if hook is None else bool(await _maybe(hook()))


def _outside_a_running_loop(call: Callable[[], T]) -> T:
    """Run ``call`` here, or in a worker thread when this thread already runs an event loop (a notebook)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return call()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(call).result()


def replay_target(trace: Trace, setting: Setting, target: str | TargetFactory, *,
                  work_root: Path | None = None) -> TargetRun:
    """Replay ``trace`` through the target in virtual time (a :class:`VirtualTimeLoop`): an hour of timers
    takes milliseconds, and the result does not depend on this machine's speed."""
    factory = resolve_target(target) if isinstance(target, str) else target
    directory = Path(tempfile.mkdtemp(prefix="perfsuite-whatif-target-", dir=work_root))
    try:
        return _outside_a_running_loop(lambda: virtual_run(run_target(trace, setting, factory, workdir=directory)))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def real_replay_target(trace: Trace, setting: Setting, target: str | TargetFactory, *, tail_s: float,
                       work_root: Path | None = None) -> TargetRun:
    """The same replay on a standard event loop in real time (``--validate``); takes the trace's duration."""
    factory = resolve_target(target) if isinstance(target, str) else target
    directory = Path(tempfile.mkdtemp(prefix="perfsuite-whatif-target-real-", dir=work_root))
    try:
        return _outside_a_running_loop(
            lambda: asyncio.run(run_target(trace, setting, factory, workdir=directory, tail_s=tail_s)))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def publication_kinds(runs: Iterable[TargetRun | Replay]) -> tuple[str, ...]:
    """Every publication kind the runs saw, in first-seen order."""
    return tuple(dict.fromkeys(p.kind for r in runs for p in r.publications))
