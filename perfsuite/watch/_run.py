"""M11: ``perfsuite watch``: run a program under the agent beside an idle control process, and keep the document.

The parent (this module, in the ``perfsuite`` process) starts two interpreters: the program under the agent
(:mod:`perfsuite.watch._agent`) and, alongside, the same agent on an empty asyncio program (the idle control). It
reads their windows from two pipes and writes the results document atomically as windows arrive, so an
interrupted or killed watch keeps every window it received. Nothing is measured here, so the document's JSON dump
and fsyncs never run in a measured loop; they are rate-limited (at most about 2% of wall time) so a long watch
does not load the machine it measures.

**Why the idle control runs alongside, not before or after** (jHiccup's ``-c`` control process does the same):
the machine's noise floor moves with everything else on it (other jobs, CPU frequency, the program's own
threads on the other core), so a floor measured at another time answers another question. Window ``k`` of the
control covers the same instant as window ``k`` of the program (one origin for both), so a program window's
gap is read against the floor of that very second. It costs one process waking 200 times a second.

**Stopping.** ``--duration`` (from launch), the program's own exit, or SIGINT/SIGTERM to ``perfsuite watch``. On a
stop by perfsuite the stop instant is written first, then the program gets SIGINT (Python's KeyboardInterrupt:
``asyncio.run`` cancels its main task and shuts down); after ``grace_s`` SIGTERM, then SIGKILL. A Ctrl-C in a
terminal reaches the program too (same process group: interactive programs keep their terminal); the program
then gets no second SIGINT unless it is still running after one second. A second Ctrl-C kills the program.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite._paths import portable_path
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import ResultsLock, new_results_path, write_exports, write_json_atomic
from perfsuite.watch._command import AGENT_MODULE, ProgramCommand
from perfsuite.watch._document import LiveDocument
from perfsuite.watch._protocol import ENV_CONFIG, ENV_FD

__all__ = ["WatchEvent", "WatchOptions", "WatchRun", "watch_program"]

#: share of wall time the document writes may take (a long watch's document grows)
WRITE_DUTY = 0.02
#: the longest window: each is reduced in the watched loop (its ticks and callbacks), so its cost grows with it
MAX_WINDOW_S = 60.0


@dataclass(frozen=True, slots=True)
class WatchOptions:
    """How to watch. ``duration_s`` None: until the program exits or SIGINT. ``alloc_every``: trace one window
    in N with memray (M3; 0 = never). ``env``: extra environment variables for the program."""

    duration_s: float | None = None
    window_s: float = 1.0
    delay_s: float = 0.0
    period_ms: float = 5.0
    target_ms: float = 20.0
    control: bool = True
    alloc_every: int = 0
    name: str | None = None
    output_dir: Path = Path("results/local")
    output: Path | None = None
    grace_s: float = 5.0
    env: Mapping[str, str] = field(default_factory=dict)

    def check(self) -> None:
        """One-line errors for settings no watch can use."""
        if self.window_s < 2 * self.period_ms / 1e3:
            raise PerfsuiteError(f"watch: --window {self.window_s:g} s is shorter than two heartbeat periods")
        if self.window_s > MAX_WINDOW_S:  # a window's reduction runs in the watched loop, and grows with it
            raise PerfsuiteError(f"watch: --window {self.window_s:g} s is longer than {MAX_WINDOW_S:g} s (the "
                                 "instrument reduces each window in the program's loop: use more windows)")
        if self.duration_s is not None and self.duration_s <= 0:
            raise PerfsuiteError("watch: --duration must be > 0 s")
        if self.delay_s < 0:
            raise PerfsuiteError("watch: --delay must be >= 0 s")
        if self.name is not None and (not self.name or any(c in self.name for c in "/\\\0") or self.name[0] == "."):
            raise PerfsuiteError(f"watch: --name {self.name!r} is not a file-name-safe results name")


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """Progress after each window (the CLI prints a line from it)."""

    source: str  # "program" or "control"
    mode: str | None
    record: Mapping[str, Any]
    samples: int


@dataclass(frozen=True, slots=True)
class WatchRun:
    """A finished watch: its document, and how the watch and the program ended."""

    path: Path
    document: Mapping[str, Any]
    exports: tuple[Path, ...]
    stop: str  # "duration", "exited", "interrupted", "terminated"
    exit_status: int | None  # the program's

    @property
    def interrupted(self) -> bool:
        return self.stop in ("interrupted", "terminated")


class _Child:
    """One agent process and its pipe."""

    def __init__(self, kind: str, argv: list[str], env: Mapping[str, str], config: Mapping[str, Any],
                 cwd: Path | None = None) -> None:
        self.kind = kind
        read_fd, write_fd = os.pipe()
        child_env = dict(env)
        child_env[ENV_FD] = str(write_fd)
        child_env[ENV_CONFIG] = json.dumps(dict(config))
        try:
            self.proc = subprocess.Popen(argv, env=child_env, pass_fds=(write_fd,), cwd=cwd,
                                         stdin=None if kind == "program" else subprocess.DEVNULL,
                                         stdout=None if kind == "program" else subprocess.DEVNULL,
                                         stderr=None)
        except OSError as exc:
            os.close(read_fd)
            os.close(write_fd)
            raise PerfsuiteError(f"watch: cannot start {argv[0]}: {exc.strerror or exc}") from None
        os.close(write_fd)
        self.fd = read_fd
        self.buffer = b""
        self.open = True
        self.heard = False  # a first message arrived: the agent is past its imports and handles KeyboardInterrupt
        self.signalled: list[tuple[float, int]] = []

    def lines(self) -> list[dict[str, Any]]:
        """Read what is there; complete lines as messages (EOF closes)."""
        try:
            data = os.read(self.fd, 1 << 16)
        except OSError:
            data = b""
        if not data:
            self.open = False
            return []
        self.buffer += data
        *complete, self.buffer = self.buffer.split(b"\n")
        out = []
        for line in complete:
            if line.strip():
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue  # a torn line from a killed agent
        self.heard = self.heard or bool(out)
        return out

    def signal(self, signum: int) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signum)
                self.signalled.append((time.monotonic(), signum))
            except OSError:
                pass

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class _Signals:
    """While a watch runs, SIGINT and SIGTERM only count (and name the stop): the loop reacts between two reads,
    so a signal never lands in the middle of applying a message (a window half recorded). Main thread only;
    elsewhere the caller's handlers stay."""

    def __init__(self, on_signal: Callable[[str, int], None]) -> None:
        self.count = 0
        self.reason = "interrupted"
        self._on_signal = on_signal
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        # a Python-level handler runs in the main thread as soon as select() is interrupted: the stop instant
        # is written here, at once, because a Ctrl-C in a terminal reaches the program at the same moment
        self.count += 1
        self.reason = "terminated" if signum == signal.SIGTERM else "interrupted"
        self._on_signal(self.reason, self.count)

    def __enter__(self) -> _Signals:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


def _write_stop(path: Path, stop_ns: int) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(str(stop_ns), encoding="ascii")
    os.replace(tmp, path)


def _program_git(command: ProgramCommand, cwd: Path) -> dict[str, Any] | None:
    """U: the watched program's own repository commit, when it lives in a git checkout."""
    where = Path(command.path).resolve().parent if command.path is not None else cwd
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True,
                                timeout=10, check=False)
        if commit.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=where,
                               capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return {"commit": commit.stdout.strip(), "dirty": bool(dirty.stdout.strip()), "path": portable_path(where)}


class _Watch:
    def __init__(self, command: ProgramCommand, options: WatchOptions, on_event: Callable[[WatchEvent], None] | None,
                 path: Path) -> None:
        self.command, self.options, self.on_event, self.path = command, options, on_event, path
        self.cwd = Path.cwd()
        name = options.name or f"watch-{command.stem}"
        self.tmp = Path(tempfile.mkdtemp(prefix="perfsuite-watch-"))
        self.live = LiveDocument(name=name, command=command, window_s=options.window_s, delay_s=options.delay_s,
                                 period_ms=options.period_ms, target_ms=options.target_ms,
                                 duration_s=options.duration_s, control=options.control,
                                 alloc_every=options.alloc_every, cwd=self.cwd, capture_dir=self.tmp)
        self.live.live["program_git"] = _program_git(command, self.cwd)
        self.stop_file = self.tmp / "stop"
        self.stop: str | None = None
        self.stop_ns: int | None = None
        self.next_write = 0.0
        self.program: _Child | None = None
        self.control: _Child | None = None

    def write(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now < self.next_write:
            return
        self.live.touch()
        t0 = time.monotonic()
        write_json_atomic(self.path, self.live.doc)
        self.next_write = time.monotonic() + (time.monotonic() - t0) / WRITE_DUTY

    def start(self) -> None:
        options = self.options
        origin = time.perf_counter_ns()
        config = {"origin_ns": origin, "window_s": options.window_s, "delay_s": options.delay_s,
                  "period_ms": options.period_ms, "stop_file": str(self.stop_file),
                  "alloc_every": options.alloc_every, "alloc_dir": str(self.tmp)}
        env = {**os.environ, **options.env}
        self.launched = time.monotonic()
        self.program = _Child("program", self.command.agent_argv(), env, config)
        if options.control:
            control_argv = [sys.executable, "-m", AGENT_MODULE, "--idle"]
            self.control = _Child("control", control_argv, dict(os.environ),
                                  {**config, "alloc_every": 0, "delay_s": options.delay_s})

    def handle(self, child: _Child) -> None:
        for message in child.lines():
            if child.kind == "program":
                added = self.live.program(message)
            else:
                added = self.live.control(message)
            if added:
                if self.on_event is not None and message.get("type") == "window":
                    self.on_event(WatchEvent(child.kind, message.get("mode"), self.live.last, self.live.samples))
                self.write()

    def request_stop(self, reason: str, *, signal_program: bool) -> None:
        if self.stop is None:
            self.stop = reason
            self.stop_ns = time.perf_counter_ns()
            _write_stop(self.stop_file, self.stop_ns)  # first the instant, then the signal (the agent cuts there)
            self.stop_requested = time.monotonic()
        if signal_program and self.program is not None:
            self.program.signal(signal.SIGINT)

    def escalate(self) -> None:
        """SIGINT was sent (or came from the terminal): SIGINT after 1 s, SIGTERM after grace, SIGKILL after 2x."""
        program = self.program
        if program is None or program.proc.poll() is not None or self.stop is None:
            return
        waited = time.monotonic() - self.stop_requested
        sent = {s for _, s in program.signalled}
        if signal.SIGINT not in sent and waited >= 1.0:
            program.signal(signal.SIGINT)
        elif signal.SIGTERM not in sent and waited >= self.options.grace_s:
            program.signal(signal.SIGTERM)
            self.live.live["notes"].append(f"the program was still running {self.options.grace_s:g} s after SIGINT: "
                                           "sent SIGTERM")
        elif signal.SIGKILL not in sent and waited >= 2 * self.options.grace_s:
            program.signal(signal.SIGKILL)
            self.live.live["notes"].append("the program ignored SIGTERM: killed")

    def loop(self) -> None:
        selector = selectors.DefaultSelector()
        assert self.program is not None
        children = [c for c in (self.program, self.control) if c is not None]
        for child in children:
            selector.register(child.fd, selectors.EVENT_READ, child)
        deadline = None if self.options.duration_s is None else self.launched + self.options.duration_s
        control_stop_at: float | None = None
        while any(c.open for c in children):
            now = time.monotonic()
            if deadline is not None and self.stop is None and now >= deadline:
                self.request_stop("duration", signal_program=True)
            if not self.program.open and self.control is not None and self.control.open:
                if self.stop is None:  # the program ended by itself: the control's last window ends here too
                    self.request_stop("exited", signal_program=False)
                if control_stop_at is None:
                    control_stop_at = now
                    # a control still importing would print a KeyboardInterrupt traceback for a SIGINT: it has
                    # measured nothing yet, so it is terminated (silently, Python's default for SIGTERM)
                    self.control.signal(signal.SIGINT if self.control.heard else signal.SIGTERM)
                elif now - control_stop_at > 10 and self.control.proc.poll() is None:
                    self.control.signal(signal.SIGKILL)
            self.escalate()
            timeout = 0.25 if deadline is None or self.stop is not None else max(0.0, min(0.25, deadline - now))
            for key, _ in selector.select(timeout):
                child = key.data
                self.handle(child)
                if not child.open:
                    selector.unregister(child.fd)
        selector.close()

    def signalled(self, reason: str, count: int) -> None:
        """SIGINT/SIGTERM to perfsuite watch: stop (the program got a Ctrl-C too, or gets SIGINT in a second);
        a second signal kills the program instead of waiting for its shutdown."""
        self.request_stop(reason, signal_program=False)
        if count > 1:
            self.kill()

    def kill(self) -> None:
        for child in (self.program, self.control):
            if child is not None and child.proc.poll() is None:
                child.signal(signal.SIGKILL)

    def reap(self) -> int | None:
        status = None
        for child in (self.program, self.control):
            if child is None:
                continue
            try:
                code = child.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.proc.kill()
                code = child.proc.wait()
            if child is self.program:
                status = code
            child.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
        return status


def watch_program(command: ProgramCommand, options: WatchOptions = WatchOptions(),
                  on_event: Callable[[WatchEvent], None] | None = None) -> WatchRun:
    """M11: run ``command`` under the agent, beside the idle control, and write its results document.

    Returns when the program ended (``--duration``, its own exit, SIGINT/SIGTERM to this process: then
    ``stop`` says ``interrupted``/``terminated`` and the caller exits 130/143). Raises :class:`PerfsuiteError`
    (one line) when nothing could be measured: the program failed before its first window, or it ran no event
    loop perfsuite could instrument; the document is kept with status ``failed`` and the reason.
    """
    options.check()
    name = options.name or f"watch-{command.stem}"
    path = Path(options.output) if options.output is not None else new_results_path(options.output_dir, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    with ResultsLock.acquire(path):
        watch = _Watch(command, options, on_event, path)
        watch.write(force=True)
        watch.start()
        try:
            with _Signals(watch.signalled):
                watch.loop()
        except BaseException:
            watch.kill()  # never leave the program running behind a failed watch
            watch.reap()
            raise
        status = watch.reap()
        doc = watch.live
        stop = watch.stop or "exited"
        samples = doc.samples
        loops = len(doc.live["loops"])
        error = None
        if loops == 0:
            exit_hint = f" (it exited with status {status})" if status not in (None, 0) else ""
            error = ("the program ran no asyncio event loop perfsuite could instrument" + exit_hint + "; perfsuite "
                     "watch instruments the loops asyncio's event loop policy creates (asyncio.run, new_event_loop), "
                     "not uvloop or a loop built by hand")
            if any("replaced the event loop policy" in n for n in doc.live["notes"]):
                error = doc.live["notes"][-1] + "; " + error
        elif samples == 0:
            error = (f"the program's loop ran, but no window was measured before it ended (status {status}); "
                     f"a window is {options.window_s:g} s: give a shorter --window or a longer run")
        state = "failed" if error else ("interrupted" if stop in ("interrupted", "terminated") else "complete")
        doc.finish(state, stop, error)
        doc.live["exit_status"] = status if doc.live.get("exit_status") is None else doc.live["exit_status"]
        exports: list[Path] = []
        if not error:
            exports = write_exports(doc.doc, path)
        watch.write(force=True)
        if error:
            raise PerfsuiteError(f"watch: {error} (kept in {path})")
        return WatchRun(path, doc.doc, tuple(exports), stop, status)
