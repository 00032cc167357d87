"""M11: the agent in the watched process, ``python -m perfsuite.watch._agent PROGRAM ARGS`` (or ``-m MODULE``).

``perfsuite watch`` starts the program's interpreter on this module instead of on the program. Before the
program's first line runs, the agent installs :class:`~perfsuite.watch._loop.WatchPolicy` (every asyncio loop the
program creates is instrumented, see :mod:`perfsuite.watch._loop`) and the M2 GC recorder; then it runs the program
unchanged with :mod:`runpy`, as ``python PROGRAM ARGS`` would: ``sys.argv``, ``sys.path[0]`` and ``__main__`` are
the program's. ``--idle`` runs an empty asyncio program instead: the idle control process (the same agent, so the
same instrument cost, measured alongside the program).

It reports to the parent as JSON lines on the file descriptor named by ``PERFSUITE_WATCH_FD`` (settings in
``PERFSUITE_WATCH``; both are removed from the environment before the program runs, and the descriptor is not
inherited by the program's children): ``hello``, ``loop`` (a loop started in a thread: its mode), ``startup``,
``window`` (one sample), ``allocation`` (a traced window's memray capture), ``note`` and ``bye`` (how the program
ended, its exit status). It never writes the results document: that is the parent's work, so a document write (a
JSON dump and fsyncs) never blocks the watched loop.

The stop instant: when perfsuite stops the program (``--duration``, or SIGINT to ``perfsuite watch``), the parent
writes it (``perf_counter_ns``) to a small file *before* signalling the program; windows end there, and the
program's shutdown is not recorded.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import math
import os
import runpy
import signal
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfsuite.harness import GcRecorder
from perfsuite.watch._loop import LoopWatch, WatchPolicy, mode_for_thread
from perfsuite.watch._protocol import ENV_CONFIG, ENV_FD

__all__ = ["Agent", "Channel", "main"]


class Channel:
    """JSON lines to the parent; a lost parent (EPIPE) silences it, never the program."""

    def __init__(self, fd: int | None) -> None:
        self.fd = fd
        self.lock = threading.Lock()

    def send(self, message: Mapping[str, Any]) -> None:
        if self.fd is None:
            return
        data = (json.dumps(message, separators=(",", ":"), allow_nan=False) + "\n").encode()
        with self.lock:
            try:
                view = memoryview(data)
                while view:
                    written = os.write(self.fd, view)
                    view = view[written:]
            except OSError:
                self.fd = None  # the parent is gone: keep the program running, measure nothing more

    def close(self) -> None:
        with self.lock:
            if self.fd is not None:
                try:
                    os.close(self.fd)
                except OSError:
                    pass
                self.fd = None


class Agent:
    """The process-wide part: the window clock, the GC recorder, the loops by thread, the stop instant and the
    optional allocation windows (M3: one window in ``alloc_every`` traced by memray, never a latency sample)."""

    def __init__(self, config: Mapping[str, Any], channel: Channel) -> None:
        self.pid = os.getpid()
        self.channel = channel
        self.origin_ns = int(config["origin_ns"])
        self.window_ns = round(float(config["window_s"]) * 1e9)
        self.delay_ns = round(float(config.get("delay_s", 0.0)) * 1e9)
        self.period_ms = float(config.get("period_ms", 5.0))
        self.tick_capacity = 1 << 16
        while self.tick_capacity * self.period_ms * 1e6 < 4 * (self.window_ns + self.delay_ns):
            self.tick_capacity <<= 1  # the heartbeat's ring must hold the startup stretch and two windows
        self.stop_file = config.get("stop_file")
        self.alloc_every = int(config.get("alloc_every") or 0)
        self.alloc_dir = config.get("alloc_dir")
        self.recorder = GcRecorder(capacity=1 << 14)
        self.watches: list[LoopWatch] = []
        self.primary: LoopWatch | None = None
        self.modes: dict[int, str] = {}
        self.traced: set[int] = set()
        self.dropped_ms: dict[str, float] = {}
        self._stop: int | None = None
        self._tracker: Any = None
        self._traced_index = -1
        self._traced_start = 0
        self._lock = threading.Lock()
        self.policy = WatchPolicy(self)

    # -- clock ----------------------------------------------------------------------------------------

    def owns_process(self) -> bool:
        return os.getpid() == self.pid

    def boundary(self, index: int) -> int:
        return self.origin_ns + index * self.window_ns

    def index_at(self, t_ns: int) -> int:
        """The first boundary at or after ``t_ns``."""
        return max(0, math.ceil((t_ns - self.origin_ns) / self.window_ns))

    def stop_ns(self) -> int | None:
        """The stop instant once the parent wrote it (read once found; a file replaced atomically)."""
        if self._stop is None and self.stop_file:
            try:
                self._stop = int(Path(self.stop_file).read_text(encoding="ascii").strip())
            except (OSError, ValueError):
                return None
        return self._stop

    def stopped_before(self, t_ns: int) -> bool:
        stop = self.stop_ns()
        return stop is not None and stop <= t_ns

    # -- loops ------------------------------------------------------------------------------------------

    def register(self, watch: LoopWatch, thread: threading.Thread) -> str:
        with self._lock:
            mode = self.modes.get(thread.ident or 0)
            if mode is None:
                mode = base = mode_for_thread(thread)
                n = 2
                while mode in self.modes.values():  # two threads of one name: two modes
                    mode, n = f"{base}-{n}", n + 1
                self.modes[thread.ident or 0] = mode
            self.watches.append(watch)
            if self.primary is None:
                self.primary = watch
        self.channel.send({"type": "loop", "mode": mode, "thread": thread.name, "thread_id": thread.ident,
                           "main_thread": thread is threading.main_thread(), "loop": len(self.watches),
                           "started_ns": time.perf_counter_ns()})
        return mode

    def send_window(self, watch: LoopWatch, index: int, raw: Mapping[str, Any]) -> None:
        self.channel.send({"type": "window", "mode": watch.mode, "index": index, "traced": index in self.traced,
                           "raw": raw})

    def send_startup(self, watch: LoopWatch, raw: Mapping[str, Any]) -> None:
        self.channel.send({"type": "startup", "mode": watch.mode, "raw": raw})

    def dropped(self, mode: str | None, ms: float) -> None:
        key = mode or "?"
        self.dropped_ms[key] = self.dropped_ms.get(key, 0.0) + ms

    def note(self, text: str) -> None:
        self.channel.send({"type": "note", "text": text})

    # -- allocation windows (M3) ----------------------------------------------------------------------

    def window_closed(self, watch: LoopWatch, index: int) -> None:
        """The primary loop opened window ``index``: end the traced window before it, trace this one if due."""
        if watch is not self.primary or not self.alloc_every:
            return
        if self._tracker is not None:
            self._stop_tracing()
        if index > 0 and index % self.alloc_every == 0 and self.stop_ns() is None:
            self._start_tracing(index)

    def _start_tracing(self, index: int) -> None:
        import memray

        path = Path(self.alloc_dir or ".") / f"window-{index}.memray"
        try:
            tracker = memray.Tracker(str(path), native_traces=False, trace_python_allocators=True,
                                     file_format=memray.FileFormat.ALL_ALLOCATIONS)
            tracker.__enter__()
        except Exception as exc:  # another tracker is active (the program's own memray), or no space
            self.note(f"allocation window {index} not traced: memray could not start ({exc})")
            self.alloc_every = 0
            return
        self.traced.add(index)
        self._tracker, self._traced_index, self._traced_start = tracker, index, time.perf_counter_ns()

    def _stop_tracing(self) -> None:
        tracker, self._tracker = self._tracker, None
        end = time.perf_counter_ns()
        try:
            tracker.__exit__(None, None, None)
        except Exception as exc:
            self.note(f"allocation window {self._traced_index}: memray failed ({exc})")
            return
        self.channel.send({"type": "allocation", "index": self._traced_index,
                           "capture": str(Path(self.alloc_dir or ".") / f"window-{self._traced_index}.memray"),
                           "window_ms": (end - self._traced_start) / 1e6})

    # -- the end ------------------------------------------------------------------------------------------

    def finish(self, outcome: str, exit_status: int) -> None:
        """Last act (atexit, after the program's own threads ended): flush every loop still recording, end a
        traced window, say how the program ended."""
        if not self.owns_process():
            return
        if outcome == "interrupted" and self.stop_ns() is None and self.stop_file:
            deadline = time.monotonic() + 0.3  # a Ctrl-C reaches perfsuite watch and the program at once
            while self.stop_ns() is None and time.monotonic() < deadline:
                time.sleep(0.01)
        now = time.perf_counter_ns()
        for watch in list(self.watches):
            watch.flush(now)
        if self._tracker is not None:
            self._stop_tracing()
        policy = asyncio.get_event_loop_policy()
        name = f"{type(policy).__module__}.{type(policy).__qualname__}"
        self.channel.send({"type": "bye", "outcome": outcome, "exit_status": exit_status, "loops": len(self.watches),
                           "policy": name, "policy_replaced": policy is not self.policy,
                           "short_runs_ms": {m: round(ms, 3) for m, ms in sorted(self.dropped_ms.items())}})
        self.recorder.uninstall()
        self.channel.close()


# -- running the program ------------------------------------------------------------------------------------


class _Outcome:
    def __init__(self) -> None:
        self.outcome = "exited"
        self.status = 0


def _finish_at_exit(agent: Any, result: _Outcome) -> None:
    """At interpreter exit (the program and its threads have ended): the agent's last message. A SIGINT
    arriving now (``perfsuite watch`` repeats one after a second, a terminal's second Ctrl-C) would cut that
    message short and print a KeyboardInterrupt traceback from the atexit hook, so SIGINT is ignored while it
    is sent (the watcher still escalates to SIGTERM and SIGKILL)."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        agent.finish(result.outcome, result.status)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _program_traceback(exc: BaseException) -> None:
    """The traceback Python would print for the program: our frames and runpy's left out."""
    here = {os.path.abspath(__file__), os.path.abspath(runpy.__file__)}
    tb = exc.__traceback__
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) in here:
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)


async def _idle() -> None:
    """The idle control: a loop with nothing to do but the instruments, until SIGINT."""
    await asyncio.Event().wait()


def _run(argv: list[str], result: _Outcome) -> None:
    if argv[0] == "--idle":
        sys.argv = ["perfsuite-idle-control"]
        asyncio.run(_idle())
        return
    if argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]  # runpy replaces argv[0] with the module's file
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return
    program = argv[0]
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.realpath(program))  # what `python PROGRAM` puts first
    runpy.run_path(program, run_name="__main__")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0] == "-m" and len(argv) < 2):
        print("perfsuite watch agent: expected PROGRAM ARGS, -m MODULE ARGS or --idle", file=sys.stderr)
        return 2
    raw_fd = os.environ.pop(ENV_FD, None)
    config = json.loads(os.environ.pop(ENV_CONFIG, "{}") or "{}")
    fd = int(raw_fd) if raw_fd else None
    if fd is not None:
        os.set_inheritable(fd, False)  # the program's own subprocesses never write to our channel
    config.setdefault("origin_ns", time.perf_counter_ns())
    config.setdefault("window_s", 1.0)
    channel = Channel(fd)
    agent = Agent(config, channel)
    result = _Outcome()
    atexit.register(_finish_at_exit, agent, result)  # after the program's threads ended
    agent.recorder.install()
    asyncio.set_event_loop_policy(agent.policy)
    try:
        # hello inside the try: once watch has heard it, its stop is a SIGINT, which must land where it is
        # handled (a KeyboardInterrupt raised between hello and the try printed a traceback from runpy)
        channel.send({"type": "hello", "pid": os.getpid(), "python": sys.version.split()[0],
                      "executable": sys.executable, "argv": argv, "idle": argv[0] == "--idle"})
        _run(argv, result)
    except SystemExit as exc:
        code = exc.code
        if code is None or isinstance(code, int):
            result.status = int(code or 0)
        else:
            print(code, file=sys.stderr)
            result.status = 1
        result.outcome = "exit"
    except KeyboardInterrupt:
        result.outcome, result.status = "interrupted", 130
    except BaseException as exc:
        _program_traceback(exc)
        result.outcome, result.status = "error", 1
    return result.status


if __name__ == "__main__":
    raise SystemExit(main())
