"""``--record-trace``: record the trace of a real run (SPEC section 6) without touching the engine.

While a :class:`TraceRecorder` is installed, the Session entry points a trace replays (activity changes,
discards, mail, streamed messages, requests, notifications, explicit and automatic checkpoints) and its
publications are wrapped at class level, and every outermost call appends one JSON line (``O_APPEND``,
one write per line, so several processes may share the file). ``recording()`` also reaches worker
processes (``--isolation process``) through the environment and a ``sitecustomize`` shim on
``PYTHONPATH``; both go away when an engine observer hook and a harness instrument hook exist.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from perfsuite.engine import Session
from perfsuite.errors import PerfsuiteError
from perfsuite.workloads.traces import Trace, make_trace, parse_lines, write_trace

ENV_PATH = "PERFSUITE_RECORD_TRACE"
ENV_T0 = "PERFSUITE_RECORD_TRACE_T0"

Event = tuple[str, str, int, dict[str, Any]]  # kind, conversation, size, extra
_Maker = Callable[..., Event | None]


def _size(text: str) -> int:
    return len(text.encode("utf-8", "replace"))


# Session method -> how a call becomes an event (None: not recorded). Arguments as the method takes them.
_INPUTS: dict[str, _Maker] = {
    "set_activity": lambda ret, agent, flavour, **_: ("activity", agent, 0, {"flavour": flavour}),
    "discard_mail": lambda ret, conversation, mail_id, **_: ("discard", conversation, 0, {}) if ret else None,
    "deliver_background": lambda ret, to, body, **_: ("mail", to, _size(body), {}),
    "append_mail": lambda ret, to, body, **_: ("mail", to, _size(body), {"path": "sync"}),
    "add_message": lambda ret, conversation, message, **_: ("message", conversation, _size(message.content), {}),
    "request_started": lambda ret, conversation="root", **_: ("request-start", conversation, 0, {}),
    "request_finished": lambda ret, conversation="root", **_: ("request-end", conversation, 0, {}),
    "notify": lambda ret, callback, **_: ("notify", "root", 0, {}),
    "spawn_agent": lambda ret, agent, **_: ("spawn", agent, 0, {}),
    "settle": lambda ret, agent, status="done", result=None, **_: ("settle", agent, _size(result or ""),
                                                                    {"status": status}),
    "request_checkpoint": lambda ret, conversation="root", **_: ("checkpoint", conversation, 0, {}),
    "checkpoint": lambda ret, conversation="root", **_: ("save", conversation, 0, {}),
    "save_registry": lambda ret, **_: ("save", "root", 0, {"what": "registry"}),
    "full_save": lambda ret, **_: ("save", "root", 0, {"what": "full"}),
}
#: internal callers whose nested calls are the engine's own doing (the timer's checkpoints), not inputs
_INTERNAL = ("_checkpoint_tick", "shutdown")

_active: TraceRecorder | None = None
_originals: dict[str, Callable[..., Any]] = {}
_depth = threading.local()


class TraceRecorder:
    """Appends events of every Session in this process to ``path``; times are wall-clock seconds
    since ``t0`` (shared by worker processes through the environment)."""

    def __init__(self, path: str | os.PathLike[str], *, t0: float | None = None) -> None:
        self.path = os.path.abspath(os.fspath(path))
        self.t0 = time.time() if t0 is None else t0
        self._fd: int | None = None
        self._labels: weakref.WeakKeyDictionary[Session, str] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self.events = 0  # lines this process wrote
        self.trace: Trace | None = None  # the finished file, set when recording() ends

    def label(self, session: Session) -> str:
        with self._lock:
            name = self._labels.get(session)
            if name is None:
                name = f"{os.path.basename(session.root) or 'session'}@{os.getpid()}.{len(self._labels) + 1}"
                self._labels[session] = name
            return name

    def note(self, session: Session, event: Event) -> None:
        kind, conversation, size, extra = event
        record = {"time": round(max(0.0, time.time() - self.t0), 6), "session": self.label(session),
                  "conversation": conversation, "kind": kind, "size": size, **extra}
        line = (json.dumps(record, sort_keys=True) + "\n").encode()
        with self._lock:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.write(self._fd, line)
            self.events += 1

    def install(self) -> TraceRecorder:
        global _active
        if _active is not None and _active is not self:
            raise PerfsuiteError("a trace recorder is already installed in this process")
        _active = self
        _patch()
        return self

    def uninstall(self) -> None:
        global _active
        if _active is self:
            _active = None
            _unpatch()
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> TraceRecorder:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.uninstall()


def _enter() -> int:
    depth = getattr(_depth, "value", 0)
    _depth.value = depth + 1
    return depth


def _leave() -> None:
    _depth.value -= 1


def _input_wrapper(name: str, original: Callable[..., Any], make: _Maker) -> Callable[..., Any]:
    @functools.wraps(original)
    def wrapper(self: Session, *args: Any, **kwargs: Any) -> Any:
        outermost = _enter() == 0
        try:
            result = original(self, *args, **kwargs)
        finally:
            _leave()
        recorder = _active
        if outermost and recorder is not None:
            event = make(result, *args, **kwargs)
            if event is not None:
                recorder.note(self, event)
        return result

    return wrapper


def _internal_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def wrapper(self: Session, *args: Any, **kwargs: Any) -> Any:
        _enter()
        try:
            return original(self, *args, **kwargs)
        finally:
            _leave()

    return wrapper


def _publication_wrapper(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """Every publication, however nested: ``publish`` (synchronous writer) and ``_job_done`` (the job)."""

    @functools.wraps(original)
    def wrapper(self: Session, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        recorder = _active
        if recorder is not None:
            publication = args[0].publication if name == "_job_done" else None
            kind = publication.batch.kind if publication is not None else getattr(result, "kind", "?")
            outcome = publication.outcome if publication is not None else getattr(result, "outcome", "?")
            recorder.note(self, ("publication", "root", 0, {"publication": kind, "outcome": outcome}))
        return result

    return wrapper


def _patch() -> None:
    if _originals:
        return
    for name, make in _INPUTS.items():
        _originals[name] = getattr(Session, name)
        setattr(Session, name, _input_wrapper(name, _originals[name], make))
    for name in _INTERNAL:
        _originals[name] = getattr(Session, name)
        setattr(Session, name, _internal_wrapper(_originals[name]))
    for name in ("publish", "_job_done"):
        _originals[name] = getattr(Session, name)
        setattr(Session, name, _publication_wrapper(name, _originals[name]))


def _unpatch() -> None:
    for name, original in _originals.items():
        setattr(Session, name, original)
    _originals.clear()


def install_from_environment() -> TraceRecorder | None:
    """In a worker process: install a recorder when ``PERFSUITE_RECORD_TRACE`` names a file."""
    path = os.environ.get(ENV_PATH)
    if not path or _active is not None:
        return None
    try:
        t0 = float(os.environ.get(ENV_T0, ""))
    except ValueError:
        t0 = time.time()
    return TraceRecorder(path, t0=t0).install()


_SHIM = """# written by perfsuite --record-trace for the duration of one run; see perfsuite/whatif/_record.py
import os
if os.environ.get("{env}"):
    try:
        from perfsuite.whatif._record import install_from_environment
        install_from_environment()
    except Exception:
        pass
"""


def finish_recording(path: str | os.PathLike[str], meta: dict[str, Any] | None = None) -> Trace:
    """Sort the appended lines by time and rewrite them with a header (one-line error if malformed)."""
    target = Path(path)
    try:
        text = target.read_text(encoding="utf-8") if target.exists() else ""
    except OSError as exc:
        raise PerfsuiteError(f"{target}: cannot read the recorded trace: {exc.strerror or exc}") from None
    raw = parse_lines(text.splitlines(), str(target))
    trace = make_trace(raw.events, meta={"generator": "recorded", **(meta or {})}, source=str(target))
    write_trace(trace, target)
    return trace


@contextlib.contextmanager
def recording(path: str | os.PathLike[str], *, workers: bool = True,
              meta: dict[str, Any] | None = None) -> Iterator[TraceRecorder]:
    """Record this process (and, with ``workers``, the worker processes it starts) into ``path``; on exit
    the file is sorted by time and given a header. The file is truncated first."""
    target = Path(path).resolve()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("", encoding="utf-8")
    except OSError as exc:
        raise PerfsuiteError(f"{target}: cannot write the trace: {exc.strerror or exc}") from None
    recorder = TraceRecorder(target)
    saved = {k: os.environ.get(k) for k in (ENV_PATH, ENV_T0, "PYTHONPATH")}
    shim: str | None = None
    if workers:
        shim = tempfile.mkdtemp(prefix="perfsuite-record-")
        Path(shim, "sitecustomize.py").write_text(_SHIM.format(env=ENV_PATH), encoding="utf-8")
        os.environ[ENV_PATH] = str(target)
        os.environ[ENV_T0] = repr(recorder.t0)
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (shim, saved["PYTHONPATH"]) if p)
    recorder.install()
    try:
        yield recorder
    finally:
        recorder.uninstall()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if shim is not None:
            shutil.rmtree(shim, ignore_errors=True)
        recorder.trace = finish_recording(target, meta)
