"""``--record-trace``: record the trace of a real run (SPEC section 6) through engine events.

:func:`recording` installs a :class:`~perfsuite.workloads.tracing.TraceRecorder` (an engine listener: no
Session method is patched) in this process and names the file in the environment, where the
engine-facing workload code of worker processes (``--isolation process``, ``profile``) picks it up
(:func:`~perfsuite.workloads.tracing.record_from_environment`). Nothing is put on ``PYTHONPATH``: a
user's own ``sitecustomize`` keeps working in the workers. On exit the file is sorted and given a header.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from perfsuite.errors import PerfsuiteError
from perfsuite.workloads.traces import Trace, make_trace, parse_lines, write_trace
from perfsuite.workloads.tracing import ENV_PATH, ENV_T0, TraceRecorder, emit, record_from_environment

__all__ = [
    "ENV_PATH",
    "ENV_T0",
    "TraceRecorder",
    "emit",
    "finish_recording",
    "record_from_environment",
    "recording",
]


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
    saved = {k: os.environ.get(k) for k in (ENV_PATH, ENV_T0)}
    if workers:
        os.environ[ENV_PATH] = str(target)
        os.environ[ENV_T0] = repr(recorder.t0)
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
        recorder.trace = finish_recording(target, meta)
