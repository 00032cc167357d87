"""Recording what-if traces from engine events (SPEC section 6): no patching, no sitecustomize.

A :class:`TraceRecorder` listens to every session of its process (``perfsuite.engine.events.listen``) and
appends one JSON line per caller input and per finished publication (``O_APPEND``, one write per line,
so several processes may share the file). ``perfsuite ... --record-trace`` installs one in the CLI's
process and names the file in ``PERFSUITE_RECORD_TRACE`` (with the shared time origin in
``PERFSUITE_RECORD_TRACE_T0``); the engine-facing workload code (:mod:`perfsuite.workloads.engine`)
calls :func:`record_from_environment` when a worker process (``--isolation process``, ``profile``)
opens its session, so worker sessions are recorded too. Sessions a user's own code opens in its own
processes are recorded when that code calls :func:`record_from_environment` as well.

Code that is not perfsuite's engine (a team's own runtime) says what happened with
:func:`emit`: one trace event, written when a recording is on in this process or named in the
environment (a worker process), nothing otherwise.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from perfsuite.engine.events import Event, PublicationAcknowledged, PublicationFailed, SessionInput, listen
from perfsuite.errors import PerfsuiteError
from perfsuite.workloads.traces import parse_event

ENV_PATH = "PERFSUITE_RECORD_TRACE"
ENV_T0 = "PERFSUITE_RECORD_TRACE_T0"

Line = tuple[str, str, int, dict[str, Any]]  # kind, conversation, size, extra


def _same(kind: str) -> Callable[[SessionInput], Line]:
    return lambda e: (kind, e.conversation, e.size, {})


#: engine input (the Session method) -> trace event (SPEC section 6 kinds)
_INPUTS: Mapping[str, Callable[[SessionInput], Line]] = {
    "set_activity": lambda e: ("activity", e.conversation, 0, {"flavour": e.detail.get("flavour")}),
    "discard_mail": lambda e: ("discard", e.conversation, 0, {}),
    "deliver_background": _same("mail"),
    "append_mail": lambda e: ("mail", e.conversation, e.size, {"path": "sync"}),
    "add_message": _same("message"),
    "request_started": lambda e: ("request-start", e.conversation, 0, {}),
    "request_finished": lambda e: ("request-end", e.conversation, 0, {}),
    "notify": lambda e: ("notify", "root", 0, {}),
    "spawn_agent": lambda e: ("spawn", e.conversation, 0, {}),
    "settle": lambda e: ("settle", e.conversation, e.size, {"status": e.detail.get("status", "done")}),
    "request_checkpoint": lambda e: ("checkpoint", e.conversation, 0, {}),
    "checkpoint": lambda e: ("save", e.conversation, 0, {}),
    "save_registry": lambda e: ("save", "root", 0, {"what": "registry"}),
    "full_save": lambda e: ("save", "root", 0, {"what": "full"}),
}

_active: TraceRecorder | None = None


class TraceRecorder:
    """Appends the trace events of every session of this process to ``path``; times are wall-clock
    seconds since ``t0`` (shared by worker processes through the environment)."""

    def __init__(self, path: str | os.PathLike[str], *, t0: float | None = None) -> None:
        self.path = os.path.abspath(os.fspath(path))
        self.t0 = time.time() if t0 is None else t0
        self._fd: int | None = None
        self._labels: dict[str, str] = {}
        self._lock = threading.Lock()
        self._unsubscribe: Callable[[], None] | None = None
        self.events = 0  # lines this process wrote
        self.trace: Any = None  # the finished file (a Trace), set by ``perfsuite.whatif.recording``

    def label(self, root: str) -> str:
        """``<session directory name>@<pid>.<n>``: unique per session and process."""
        with self._lock:
            name = self._labels.get(root)
            if name is None:
                name = f"{os.path.basename(root) or 'session'}@{os.getpid()}.{len(self._labels) + 1}"
                self._labels[root] = name
            return name

    def __call__(self, event: Event) -> None:
        """The engine listener: inputs and finished publications become trace lines."""
        if isinstance(event, SessionInput):
            make = _INPUTS.get(event.operation)
            if make is not None:
                self.note(event.session, make(event))
        elif isinstance(event, PublicationAcknowledged | PublicationFailed):
            outcome = event.outcome if isinstance(event, PublicationAcknowledged) else "failed"
            self.note(event.session, ("publication", "root", 0, {"publication": event.kind, "outcome": outcome}))

    def note(self, session: str, line: Line) -> None:
        """One engine event of the session rooted at ``session`` (labelled per process, :meth:`label`)."""
        kind, conversation, size, extra = line
        self.write({"session": self.label(session), "conversation": conversation, "kind": kind, "size": size,
                    **extra})

    def write(self, record: Mapping[str, Any]) -> None:
        """Append ``record`` (every field but ``time``) as one line, stamped with the time since ``t0``."""
        stamped = {**record, "time": round(max(0.0, time.time() - self.t0), 6)}
        data = (json.dumps(stamped, sort_keys=True) + "\n").encode()
        with self._lock:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.write(self._fd, data)
            self.events += 1

    def install(self) -> TraceRecorder:
        """Listen to every session of this process (one recorder per process)."""
        global _active
        if _active is not None and _active is not self:
            raise PerfsuiteError("a trace recorder is already installed in this process")
        if _active is None:
            _active = self
            self._unsubscribe = listen(self)
        return self

    def uninstall(self) -> None:
        global _active
        if _active is self:
            _active = None
            if self._unsubscribe is not None:
                self._unsubscribe()
                self._unsubscribe = None
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> TraceRecorder:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.uninstall()


def active_recorder() -> TraceRecorder | None:
    return _active


_installing = threading.Lock()


def record_from_environment() -> TraceRecorder | None:
    """In a worker process: install a recorder when ``PERFSUITE_RECORD_TRACE`` names a file and none is
    installed yet (idempotent; the process's exit closes the file)."""
    path = os.environ.get(ENV_PATH)
    if not path or _active is not None:
        return None
    with _installing:  # emit() may be called from several threads at once
        if _active is not None:
            return None
        try:
            t0 = float(os.environ.get(ENV_T0, ""))
        except ValueError:
            t0 = time.time()
        return TraceRecorder(path, t0=t0).install()


_RESERVED = ("time", "session", "conversation", "kind", "size")


def emit(kind: str, *, session: str = "main", conversation: str = "root", size: int = 0, **extra: Any) -> bool:
    """Record one trace event of your own code: ``kind`` is a trace kind (``KINDS``) or one of
    your own, ``x-NAME``; ``extra`` are further JSON fields (``flavour=`` for ``activity``). Written when a
    recording is on (``--record-trace``, :func:`perfsuite.whatif.recording`, or named in the environment
    of a worker process), with the time since the recording started; returns whether it was. A malformed
    event raises :class:`PerfsuiteError` whether or not a recording is on, so a mistake shows in every run."""
    clash = [k for k in extra if k in _RESERVED]
    if clash:
        raise PerfsuiteError(f"emit: {clash[0]!r} is set by emit itself; pass it as its own argument")
    record = {"session": session, "conversation": conversation, "kind": kind, "size": size, **extra}
    parse_event({**record, "time": 0.0}, "emit", 0)  # the reader's own checks: what is written can be read
    try:
        json.dumps(record)
    except (TypeError, ValueError) as exc:  # a value JSON cannot hold
        raise PerfsuiteError(f"emit: {kind}: an extra field is not JSON: {exc}") from None
    recorder = _active or record_from_environment()
    if recorder is None:
        return False
    recorder.write(record)
    return True


__all__ = ["ENV_PATH", "ENV_T0", "TraceRecorder", "active_recorder", "emit", "record_from_environment"]
