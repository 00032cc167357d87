"""The publication floor (SPEC section 8): one generation's durable operations as raw ``os`` calls.

The fsync floor (``perfsuite.workloads.basic:fsync_floor``) does one write, two fsyncs and a rename; a real
publication does five or six fsyncs. A like-for-like floor must do what the engine does, so it is derived
from the engine: the factory (setup, outside the window) runs one real publication of the modelled
operation on the sample's private copy, on the recording I/O layer (E1), and keeps the operations logged
from submission to acknowledgement: opens, writes (their sizes), file fsyncs, renames, directory creations
and fsyncs, removals, in the engine's order. The measured ``submit`` replays exactly that sequence with
``os`` calls in a scratch tree that mirrors the session's layout, with no engine code: the smallest
acknowledgement that publication can have on this machine. Reads (the engine checks ``HEAD`` before
replacing it) are not durable operations and are not replayed. A process offload's worker relays its
operations to the recording layer, so they are part of the sequence too.

Params: ``publication`` names the operation of :mod:`perfsuite.workloads.engine` whose publication is
modelled (``mailbox_delivery``, ``checkpoint``, ``registry_save``); every other param goes to it
(``path = "async"``, ``conversation = "agent"``...). Recipes declare the mode a reference (no verdict).
``storage`` (M10): the replay's raw calls pay the storage profile's delays through the same delay model as
the engine's latency layer (exclusive create, file fsync, replace, directory fsync), so the floor and the
engine's acknowledgement stand on the same simulated device.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.engine.testing import DelayModel
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import (
    AckCallback,
    Operation,
    OperationContext,
    Param,
    accepts,
    check_params,
    declared_parameters,
)
from perfsuite.workloads import engine
from perfsuite.workloads.storage import storage_metrics, storage_model

__all__ = ["MODELLED", "FloorStep", "publication_floor", "record_publication"]

#: operations of :mod:`perfsuite.workloads.engine` whose publication a floor can model
MODELLED = ("mailbox_delivery", "checkpoint", "registry_save")
#: ``publication`` and what any modelled publication accepts (checked again against the one
#: named, when the floor records it)
FLOOR: dict[str, Param] = {
    "publication": Param(str, None, "the engine operation whose publication is replayed", choices=MODELLED),
    **{k: p for name in MODELLED for k, p in (declared_parameters(getattr(engine, name)) or {}).items()
       if k != "storage"},
}
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_fdatasync = getattr(os, "fdatasync", os.fsync)  # the engine's data sync (a full fsync where there is none)
_DIR_FSYNC_REJECTED = {errno.EINVAL, getattr(errno, "ENOTSUP", -1), getattr(errno, "EOPNOTSUPP", -1),
                       getattr(errno, "ENOSYS", -1)}
#: what the floor's ``phases_ms`` and counts call each recorded kind
_COUNTS = {"open": "opens", "write": "writes", "pwrite": "pwrites", "fsync": "fsyncs", "fdatasync": "fdatasyncs",
           "fsync_dir": "dir_fsyncs", "replace": "replaces", "mkdir": "mkdirs", "remove": "removes", "rmdir": "rmdirs",
           "truncate": "truncates", "close": "closes"}


@dataclass(frozen=True, slots=True)
class FloorStep:
    """One recorded durable operation, paths relative to the session's root."""

    kind: str
    path: str
    length: int = 0
    flags: int = 0
    dst: str = ""
    offset: int = -1  # where a pwrite wrote (format 2's session log)


def _relative(roots: tuple[str, ...], path: str) -> str:
    """``path`` relative to the session root (as given, or resolved: the recording layer logs absolute paths)."""
    for root in roots:
        rel = os.path.relpath(os.path.abspath(path), root)
        if not rel.startswith(".."):
            return rel
    raise PerfsuiteError(f"publication floor: the publication wrote outside its session ({path})")


def _files(root: str) -> dict[str, int]:
    out = {}
    for directory, _dirs, names in os.walk(root):
        for name in names:
            full = os.path.join(directory, name)
            out[os.path.relpath(full, root)] = os.lstat(full).st_size
    return out


async def record_publication(ctx: OperationContext, name: str, params: Mapping[str, Any]
                             ) -> tuple[list[FloorStep], dict[str, int]]:
    """Run one real publication of ``name`` on ``ctx.workdir``; its durable operations from submission to
    acknowledgement (paths relative to the workdir) and the files that existed before it, with sizes."""
    if name not in MODELLED:
        raise PerfsuiteError(f"mode {ctx.mode}: publication: expected one of {', '.join(MODELLED)}, got {name!r}")
    if ctx.workdir is None:
        raise PerfsuiteError(f"mode {ctx.mode}: the publication floor needs a session fixture")
    try:  # the union FLOOR declares was checked before the run; now the parameters of this publication
        check_params(getattr(engine, name), params, f"perfsuite.workloads.engine:{name}")
    except PerfsuiteError as exc:
        raise PerfsuiteError(f"mode {ctx.mode}: {exc}") from None
    roots = (os.path.abspath(ctx.workdir), os.path.realpath(ctx.workdir))
    root = roots[1]
    inner = OperationContext(ctx.workdir, dict(params), ctx.mode, ctx.sample, ctx.scratch, ctx.kind)
    op = getattr(engine, name)(inner)
    try:
        await op.wait_idle()
        before = _files(root)
        mark = op.fs.mark()
        done: asyncio.Future[tuple[BaseException | None, int]] = asyncio.get_running_loop().create_future()

        def ack(error: BaseException | None = None) -> None:
            if not done.done():
                done.set_result((error, op.fs.mark()))  # the log's position at the acknowledgement

        op.submit(ack)
        failure, end = await asyncio.wait_for(done, 120)
        if failure is not None:
            raise PerfsuiteError(f"mode {ctx.mode}: the modelled {name} publication failed: {failure}")
        ops = op.fs.ops[mark:end]
    finally:
        op.close()
    steps = [FloorStep(o.kind, _relative(roots, o.path), o.length, o.flags, _relative(roots, o.dst) if o.dst else "",
                       o.offset) for o in ops]
    return steps, before


class _PublicationFloor(Operation):
    """Replays :class:`FloorStep` s with raw ``os`` calls under ``base`` (see the module docstring)."""

    def __init__(self, steps: list[FloorStep], before: Mapping[str, int], base: Path, label: str,
                 model: DelayModel | None = None) -> None:
        self.steps = steps
        self.model = model
        self.base = str(base)
        self.label = label
        self.payload = os.urandom(max((s.length for s in steps if s.kind in ("write", "pwrite")), default=0))
        self.fds: dict[str, list[int]] = collections.defaultdict(list)
        self.phases_ns: dict[str, int] = collections.defaultdict(int)
        self.dir_fsync = "ok"
        self._prepare(before)
        self.before = model.stats() if model is not None else None

    def _path(self, rel: str) -> str:
        return os.path.join(self.base, rel)

    def _prepare(self, before: Mapping[str, int]) -> None:
        """Outside the window: the session's directories, the files the sequence replaces, removes or writes
        without opening them first (pre-opened), so the replay does exactly the recorded calls."""
        created = {s.path for s in self.steps if s.kind == "mkdir"}  # made by the sequence, in order
        opened: set[str] = set()
        os.makedirs(self.base, exist_ok=True)
        for step in self.steps:
            for rel in (step.path, step.dst):
                parent = os.path.dirname(rel)
                while parent in created:  # its first ancestor the sequence does not create must exist
                    parent = os.path.dirname(parent)
                if rel and parent:
                    os.makedirs(self._path(parent), exist_ok=True)
            if step.kind == "open":
                opened.add(step.path)
            elif step.kind in ("pwrite", "fdatasync") and step.path not in opened:
                # a file written in place at offsets (a preallocated log): its size as before, no O_APPEND
                # (Linux appends a pwrite on an O_APPEND descriptor)
                self._create(step.path, before.get(step.path, 0))
                self.fds[step.path].append(os.open(self._path(step.path), os.O_WRONLY | _O_CLOEXEC))
                opened.add(step.path)
            elif step.kind in ("write", "fsync", "close", "truncate") and step.path not in opened:
                self._create(step.path, before.get(step.path, 0))
                self.fds[step.path].append(os.open(self._path(step.path), os.O_WRONLY | os.O_APPEND | _O_CLOEXEC))
                opened.add(step.path)
            elif step.kind == "replace" and step.dst in before:
                self._create(step.dst, before[step.dst])
            elif step.kind == "remove" and step.path not in opened and step.path in before:
                self._create(step.path, before[step.path])
            elif step.kind == "rmdir" and step.path not in created:
                os.makedirs(self._path(step.path), exist_ok=True)
        if hasattr(os, "sync"):
            # like the harness after copying a fixture (M4): the replay must not pay for writing back the tree
            # prepared here (a journal commit in its first fsync would flush it), as the engine does not
            os.sync()

    def _create(self, rel: str, size: int) -> None:
        path = self._path(rel)
        if not os.path.exists(path):
            with open(path, "wb") as fh:
                fh.write(os.urandom(size))

    def submit(self, ack: AckCallback) -> None:
        clock = time.perf_counter_ns
        fds, path = self.fds, self._path
        model = self.model
        try:
            for step in self.steps:
                t0 = clock()
                started = model.start() if model is not None else 0.0
                kind = step.kind
                if kind == "open":
                    fds[step.path].append(os.open(path(step.path), step.flags | _O_CLOEXEC, 0o644))
                elif kind == "write":
                    view, fd = memoryview(self.payload)[: step.length], fds[step.path][-1]
                    while view:
                        view = view[os.write(fd, view):]
                elif kind == "pwrite":
                    view, fd, at = memoryview(self.payload)[: step.length], fds[step.path][-1], step.offset
                    while view:
                        n = os.pwrite(fd, view, at)
                        view, at = view[n:], at + n
                elif kind == "fsync":
                    os.fsync(fds[step.path][-1])
                elif kind == "fdatasync":
                    _fdatasync(fds[step.path][-1])
                elif kind == "close":
                    os.close(fds[step.path].pop())
                elif kind == "fsync_dir" and not self._fsync_dir(path(step.path)):
                    kind = "fsync_dir-rejected"  # failed at once, like the latency layer: no simulated delay
                elif kind == "replace":
                    os.replace(path(step.path), path(step.dst))
                elif kind == "mkdir":
                    os.mkdir(path(step.path))
                elif kind == "remove":
                    os.remove(path(step.path))
                elif kind == "rmdir":
                    os.rmdir(path(step.path))
                elif kind == "truncate":
                    os.ftruncate(fds[step.path][-1], step.length)
                if model is not None:  # M10: the same delays the latency layer adds at these calls
                    delayed = "create" if kind == "open" and step.flags & os.O_CREAT and step.flags & os.O_EXCL \
                        else kind
                    if delayed == "fdatasync":
                        delayed = "fsync"  # the latency layer draws a data sync from the fsync distribution
                    if delayed in ("create", "fsync", "fsync_dir", "replace"):
                        model.settle(delayed, started)
                self.phases_ns[kind.removesuffix("-rejected")] += clock() - t0
        except OSError as exc:
            ack(exc)
            return
        ack(None)

    def _fsync_dir(self, directory: str) -> bool:
        """fsync a directory; False when the filesystem rejects it (noted, not fatal, like the engine, E1)."""
        fd = os.open(directory, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
        try:
            os.fsync(fd)
        except OSError as exc:
            if exc.errno not in _DIR_FSYNC_REJECTED:
                raise
            self.dir_fsync = errno.errorcode.get(exc.errno or 0, "rejected")
            return False
        finally:
            os.close(fd)
        return True

    def metrics(self) -> Mapping[str, object]:
        counts = collections.Counter(s.kind for s in self.steps)
        out: dict[str, object] = {_COUNTS[k]: n for k, n in sorted(counts.items()) if k in _COUNTS}
        out.update({
            # time per kind of call; not ``phases_ms``: those are the engine's publication phases (E4, M5)
            "op_ms": {k: ns / 1e6 for k, ns in self.phases_ns.items()},
            "bytes_written": sum(s.length for s in self.steps if s.kind in ("write", "pwrite")),
            "operations": len(self.steps),
            "models": self.label,
            "dir_fsync": self.dir_fsync,
        })
        out.update(storage_metrics(self.model, self.before))
        return out

    def close(self) -> None:
        for stack in self.fds.values():
            for fd in stack:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.fds.clear()


@accepts(**FLOOR)
async def publication_floor(ctx: OperationContext) -> Operation:
    """The publication floor of ``params["publication"]`` (see the module docstring); works in the sample's
    scratch directory after recording one real publication on its private fixture copy."""
    params = dict(ctx.params)
    name = params.pop("publication", None)
    if not isinstance(name, str):
        raise PerfsuiteError(f"mode {ctx.mode}: publication: expected one of {', '.join(MODELLED)}, got {name!r}")
    if ctx.scratch is None:
        raise PerfsuiteError(f"mode {ctx.mode}: the publication floor needs a scratch directory")
    storage = params.pop("storage", None)  # recorded without it: delays change no operation, only setup time
    steps, before = await record_publication(ctx, name, params)
    if not any(s.kind in ("fsync", "fdatasync", "fsync_dir") for s in steps):
        raise PerfsuiteError(f"mode {ctx.mode}: the modelled {name} publication made nothing durable")
    label = name + "(" + ", ".join(f"{k}={v}" for k, v in sorted(params.items())) + ")"
    model = storage_model({"storage": storage}, seed=ctx.sample)
    return _PublicationFloor(steps, before, ctx.scratch / "floor", label, model)


# M10: the replay applies storage profiles (see the module docstring)
publication_floor.conditions = frozenset({"storage"})  # type: ignore[attr-defined]
