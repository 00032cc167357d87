"""A Dask task's own process: each Dask worker process keeps one persistent child (``python -m
perfsuite.cluster._child``) and runs every task in it, so a task runs where a local-pool task runs: in the
main thread of a fresh spawned interpreter that shares no memory with the campaign's client.

Why not in the Dask worker's thread: the corruption campaign's per-case deadline and the harness's
interrupt handling need ``signal`` (main thread only), the crash checker keeps per-process globals (the
pids a crash killed), and a task that kills its process must cost one task, not the worker. Dask worker
processes are daemonic, so ``multiprocessing`` cannot start children there; a plain subprocess can.

The protocol is length-prefixed pickles over the child's stdin and a private copy of its stdout (what the
task itself prints goes to stderr): ``(fn, args)`` in, ``("ok", value)`` or ``("error", exception)`` out.
A child whose worker died sees end-of-file and exits.
"""

from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from perfsuite.cluster._runner import WorkerLost

_HEADER = struct.Struct("!Q")


def _write_frame(stream: IO[bytes], payload: bytes) -> None:
    stream.write(_HEADER.pack(len(payload)) + payload)
    stream.flush()


def _read_frame(stream: IO[bytes]) -> bytes | None:
    """One frame, or None at end-of-file (the other side is gone)."""
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return None
    size = _HEADER.unpack(head)[0]
    data = stream.read(size)
    return data if len(data) == size else None


def _pickle_outcome(status: str, value: Any) -> bytes:
    try:
        return pickle.dumps((status, value), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # an unpicklable result or exception still reaches the client as one line
        return pickle.dumps(("error", RuntimeError(f"{type(value).__name__}: {value} (not picklable: {exc})")))


class Child:
    """One persistent child interpreter; :meth:`call` runs ``fn(*args)`` in it (one call at a time)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def _start(self) -> subprocess.Popen[bytes]:
        root = str(Path(__file__).resolve().parents[2])  # the directory perfsuite was imported from
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        return subprocess.Popen([sys.executable, "-m", "perfsuite.cluster._child"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, env=env)

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._proc = self._start()
            proc = self._proc
            assert proc.stdin is not None and proc.stdout is not None
            try:
                _write_frame(proc.stdin, pickle.dumps((fn, args), protocol=pickle.HIGHEST_PROTOCOL))
                answer = _read_frame(proc.stdout)
            except (BrokenPipeError, OSError):
                answer = None
            if answer is None:
                code = proc.wait()
                self._proc = None
                raise WorkerLost(f"the task's process died (exit status {code})")
        status, value = pickle.loads(answer)
        if status == "error":
            raise value
        return value

    def close(self) -> None:
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                assert self._proc.stdin is not None
                self._proc.stdin.close()
                try:
                    self._proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
            self._proc = None


_CHILD = Child()


def call_in_child(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """The Dask task: ``fn(*args)`` in this worker process's child (started on first use)."""
    return _CHILD.call(fn, args)


def serve() -> int:
    """The child's loop: one call per frame until end-of-file."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # what tasks print must not corrupt the protocol
    sys.stdout = sys.stderr
    source = sys.stdin.buffer
    while True:
        frame = _read_frame(source)
        if frame is None:
            return 0
        try:
            fn, args = pickle.loads(frame)
            outcome = _pickle_outcome("ok", fn(*args))
        except BaseException as exc:  # the task's own failure goes back to the client
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            outcome = _pickle_outcome("error", exc)
        try:
            _write_frame(out, outcome)
        except BrokenPipeError:
            return 0


if __name__ == "__main__":
    sys.exit(serve())
