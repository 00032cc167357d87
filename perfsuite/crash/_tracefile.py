"""A campaign's recorded trace on disk (``FILE.traces/<workload>.json``), read back by ``--resume``.

The file may come from another machine or a pull request, so it is data, never code: JSON with tagged
bytes and tuples, rebuilt into an allowlist of value classes (no pickle: loading one runs whatever it
names). The recording directory it names is only used when it is a campaign's own recording directory
beside this run's (``perfsuite-*-record-*/<workload>`` in the same temporary directory), and every operation
must stay inside it: a crafted file cannot make the resume delete or write anywhere else.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from perfsuite.crash.model._model import CrashCheckError, FsState
from perfsuite.crash.model._trace import Ack, Note, OpTrace, Oracle
from perfsuite.engine.testing import FsOp

__all__ = ["read_trace", "write_trace"]

#: the classes a trace file may rebuild, by tag; anything else is refused
_CLASSES: dict[str, type] = {"OpTrace": OpTrace, "FsOp": FsOp, "Oracle": Oracle, "Ack": Ack, "Note": Note,
                             "FsState": FsState}
_TAGS = {cls: tag for tag, cls in _CLASSES.items()}
#: a trace file larger than this is not a trace (the largest recorded here are a few MB)
MAX_TRACE_BYTES = 1 << 30
RECORD_PREFIXES = ("perfsuite-crash-record-", "perfsuite-corrupt-record-")


def _encode(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        tag = _TAGS.get(type(value))
        if tag is None:
            raise TypeError(f"{type(value).__name__} is not a trace value")
        return {"__class__": tag, **{f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if isinstance(value, bytes):
        return {"__bytes__": base64.b64encode(value).decode("ascii")}
    if isinstance(value, tuple):
        return {"__tuple__": [_encode(v) for v in value]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError("a trace mapping has non-string keys")
        return {"__dict__": {k: _encode(v) for k, v in value.items()}}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"{type(value).__name__} is not a trace value")


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "__bytes__" in value:
        return base64.b64decode(value["__bytes__"], validate=True)
    if "__tuple__" in value:
        return tuple(_decode(v) for v in value["__tuple__"])
    if "__dict__" in value:
        return {str(k): _decode(v) for k, v in value["__dict__"].items()}
    cls = _CLASSES.get(str(value.get("__class__")))
    if cls is None:
        raise ValueError(f"unknown value class {value.get('__class__')!r}")
    names = {f.name for f in dataclasses.fields(cls)}
    fields = {k: _decode(v) for k, v in value.items() if k != "__class__"}
    if not set(fields) <= names:
        raise ValueError(f"{cls.__name__}: unknown fields {sorted(set(fields) - names)}")
    return cls(**fields)


def write_trace(path: Path, trace: OpTrace, tree: FsState) -> None:
    """Write the trace and the tree it left, atomically (temp file, fsync, replace)."""
    data = json.dumps({"trace": _encode(trace), "tree": _encode(tree)}, separators=(",", ":")).encode()
    temp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(temp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)


def _inside(path: str, root: str) -> bool:
    return os.path.isabs(path) and os.path.normpath(path) == path and (path == root or path.startswith(root + os.sep))


def read_trace(path: Path, workload: str, bug: str | None, root: str) -> tuple[OpTrace, FsState]:
    """The recorded trace of ``workload`` (with ``bug``) in ``path``, checked before anything uses it: its
    recording directory is a campaign's own, beside ``root`` (this run's), and holds all its operations."""
    refuse = f"{path}: not a recorded trace this perfsuite can read"
    try:
        if not path.is_file() or path.stat().st_size > MAX_TRACE_BYTES:  # a FIFO or /dev/zero would never end
            raise ValueError("not a regular file of a trace's size")
        with open(path, "rb") as handle:
            document = json.loads(handle.read(MAX_TRACE_BYTES + 1))
        trace, tree = _decode(document["trace"]), _decode(document["tree"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CrashCheckError(f"{refuse} ({type(exc).__name__}: {exc}); run the campaign afresh without "
                              "--resume") from None
    if not isinstance(trace, OpTrace) or not isinstance(tree, FsState) or trace.workload != workload \
            or trace.seeded_bug != bug:
        raise CrashCheckError(f"{path}: not the recorded trace of {workload}; run the campaign afresh without --resume")
    recording = os.path.dirname(trace.root)
    ours = os.path.dirname(os.path.dirname(root))
    if not (_inside(trace.root, recording) and os.path.basename(trace.root) == workload
            and os.path.dirname(recording) == ours and os.path.basename(recording).startswith(RECORD_PREFIXES)
            and not os.path.islink(recording) and not os.path.islink(trace.root)
            and all(_inside(op.path, trace.root) and (not op.dst or _inside(op.dst, trace.root)) for op in trace.ops)
            and all(".." not in name.split("/") and not name.startswith("/") for name, _ in tree.files)):
        raise CrashCheckError(f"{path}: its recording directory is not a campaign's own beside this run's, or "
                              "its operations leave it; run the campaign afresh without --resume")
    return trace, tree
