"""Replaying a trace into micro-ops under a rename model (see :mod:`perfsuite.crash.model._model` for the rules).

The replay walks the operations in page-cache order, keeping the live tree (what a process would read),
emitting the micro-ops that may independently reach the disk, and noting which persistence point
forced each one; it also keeps the live history the invariants need (bindings, versions, snapshots).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from perfsuite.crash.model._model import (
    MODELS,
    ROOT_INODE,
    Binding,
    CrashCheckError,
    Disk,
    FsState,
    MicroKind,
    MicroOp,
    RenameModel,
    Timeline,
    initial_inodes,
    split_path,
    write_at,
)
from perfsuite.engine.testing import FsOp


class _Replayer:
    """Replays a trace in page-cache order, emitting micro-ops and forcing information."""

    def __init__(self, root: str, model: RenameModel, initial: FsState, capture: set[int]) -> None:
        self.root = os.path.abspath(root)
        self.model = model
        self.capture = capture
        self.dirs: dict[int, dict[str, int]] = {ROOT_INODE: {}}
        self.content: dict[int, bytes] = {}
        self.kinds: dict[int, str] = {ROOT_INODE: "dir"}
        inodes = initial_inodes(initial)
        for path, data in initial.files:
            parent, name = split_path(path)
            self.dirs.setdefault(inodes[parent], {})[name] = inodes[path]
            self.kinds[inodes[path]] = "dir" if data is None else "file"
            if data is None:
                self.dirs.setdefault(inodes[path], {})
            else:
                self.content[inodes[path]] = data
        self.next_inode = len(initial.files) + 1
        self.handles: dict[str, list[list[int]]] = {}  # abs path -> stack of [inode, append, position]
        self.micro: list[MicroOp] = []
        self.forced: dict[int, int] = {}
        self.poisoned: set[int] = set()
        self.unforced_data: dict[int, list[int]] = {}
        self.unforced_dir: dict[int, list[int]] = {}
        self.points: list[int] = []
        self.op_inode: list[int] = []
        self.bindings: dict[str, list[Binding]] = {}
        self.versions: dict[int, list[bytes]] = {}
        self.live: dict[int, FsState] = {}
        for path, data in initial.files:
            self.bindings[path] = [Binding(-1, path, inodes[path], data or b"")]

    # -- helpers ----------------------------------------------------------------------------------
    def rel(self, path: str) -> str:
        rel = os.path.relpath(os.path.abspath(path), self.root)
        if rel == ".":
            return ""
        if rel.startswith(".."):
            raise CrashCheckError(f"trace touches {path}, outside the workload root {self.root}")
        return rel.replace(os.sep, "/")

    def resolve(self, rel: str) -> int | None:
        inode = ROOT_INODE
        for part in rel.split("/") if rel else []:
            child = self.dirs.get(inode, {}).get(part)
            if child is None:
                return None
            inode = child
        return inode

    def parent_of(self, rel: str) -> tuple[int, str]:
        parent_rel, name = split_path(rel)
        parent = self.resolve(parent_rel)
        if parent is None or self.kinds.get(parent) != "dir":
            raise CrashCheckError(f"trace creates {rel!r} in a directory the model has not seen")
        return parent, name

    def new_inode(self, kind: str) -> int:
        inode = self.next_inode
        self.next_inode += 1
        self.kinds[inode] = kind
        if kind == "dir":
            self.dirs[inode] = {}
        else:
            self.content[inode] = b""
        return inode

    def emit(self, op: int, kind: MicroKind, inode: int, **fields: object) -> None:
        m = MicroOp(len(self.micro), op, kind, inode, **fields)  # type: ignore[arg-type]
        self.micro.append(m)
        if kind in ("write", "truncate"):
            self.unforced_data.setdefault(inode, []).append(m.index)
        elif kind == "unlink":
            self.unforced_dir.setdefault(m.src_parent, []).append(m.index)
        else:
            self.unforced_dir.setdefault(m.parent, []).append(m.index)

    def bind(self, at: int, rel: str, inode: int) -> None:
        content = self.content.get(inode, b"") if inode >= 0 else b""
        self.bindings.setdefault(rel, []).append(Binding(at, rel, inode, content))

    def set_content(self, inode: int, new: bytes) -> None:
        old = self.content.get(inode, b"")
        if not new.startswith(old):  # not a pure extension: the old content was a maximal version
            self.versions.setdefault(inode, []).append(old)
        self.content[inode] = new

    def handle(self, op: FsOp) -> list[int]:
        stack = self.handles.get(op.path)
        if stack:
            return stack[-1]
        inode = self.resolve(self.rel(op.path))
        if inode is None:
            raise CrashCheckError(f"#{op.seq} {op.kind} on {op.path}, which is not open")
        return [inode, 0, 0]

    def live_tree(self) -> FsState:
        return Disk(self.dirs, self.content).tree()

    # -- replay -----------------------------------------------------------------------------------
    def run(self, ops: Iterable[FsOp]) -> None:
        i = -1
        for i, op in enumerate(ops):
            if i in self.capture:
                self.live[i] = self.live_tree()
            self.op_inode.append(self.step(i, op))
        for index in self.capture:
            if index > i:
                self.live[index] = self.live_tree()

    def step(self, i: int, op: FsOp) -> int:
        kind = op.kind
        if kind == "open":
            rel = self.rel(op.path)
            parent, name = self.parent_of(rel)
            inode = self.dirs[parent].get(name)
            if inode is None:
                inode = self.new_inode("file")
                self.emit(i, "create", inode, parent=parent, name=name, path=rel)
                self.dirs[parent][name] = inode
                self.bind(i, rel, inode)
            elif op.flags & os.O_TRUNC and self.content.get(inode):
                self.emit(i, "truncate", inode, length=0, path=rel)
                self.set_content(inode, b"")
            self.handles.setdefault(op.path, []).append([inode, int(bool(op.flags & os.O_APPEND)), 0])
            return inode
        if kind == "write":
            h = self.handle(op)
            if op.length and len(op.data) != op.length:
                raise CrashCheckError("the trace was recorded without data (keep_data=False)")
            inode = h[0]
            offset = len(self.content.get(inode, b"")) if h[1] else h[2]
            self.emit(i, "write", inode, offset=offset, data=op.data, path=self.rel(op.path))
            self.set_content(inode, write_at(self.content.get(inode, b""), offset, op.data))
            h[2] = offset + len(op.data)
            return inode
        if kind == "pwrite":  # at an offset: the handle's position does not move (format 2's session log)
            h = self.handle(op)
            if op.length and len(op.data) != op.length:
                raise CrashCheckError("the trace was recorded without data (keep_data=False)")
            inode = h[0]
            self.emit(i, "write", inode, offset=op.offset, data=op.data, path=self.rel(op.path))
            self.set_content(inode, write_at(self.content.get(inode, b""), op.offset, op.data))
            return inode
        if kind == "truncate":
            inode = self.handle(op)[0]
            self.emit(i, "truncate", inode, length=op.length, path=self.rel(op.path))
            old = self.content.get(inode, b"")
            self.set_content(inode, old[: op.length] + b"\0" * max(0, op.length - len(old)))
            return inode
        if kind in ("fsync", "fsync_failed", "fdatasync", "fdatasync_failed"):
            # fdatasync forces an inode's data like fsync: the size too when it changed (it is needed to read
            # the data back); only timestamps are left, which the model does not track
            inode = self.handle(op)[0]
            self.sync(i, self.unforced_data.pop(inode, []), failed=kind.endswith("_failed"))
            return inode
        if kind in ("fsync_dir", "fsync_dir_failed", "fsync_dir_rejected"):
            # A rejected directory fsync (EINVAL, ENOTSUP: E1 warns once and continues) is modelled as a file system
            # that makes the directory's entries durable by itself, by the time the call returns: the only
            # assumption under which E1's "warn once and continue" can keep an acknowledgement.
            inode = self.resolve(self.rel(op.path))
            if inode is None:
                raise CrashCheckError(f"#{op.seq} directory fsync of {op.path}, which the model has not seen")
            self.sync(i, self.unforced_dir.pop(inode, []), failed=kind == "fsync_dir_failed")
            return inode
        if kind == "close":
            stack = self.handles.get(op.path)
            return stack.pop()[0] if stack else -1
        if kind == "replace":
            return self.rename(i, self.rel(op.path), self.rel(op.dst))
        if kind == "mkdir":
            rel = self.rel(op.path)
            parent, name = self.parent_of(rel)
            inode = self.new_inode("dir")
            self.emit(i, "create", inode, parent=parent, name=name, path=rel)
            self.dirs[parent][name] = inode
            self.bind(i, rel, inode)
            return inode
        if kind in ("remove", "rmdir"):
            rel = self.rel(op.path)
            parent, name = self.parent_of(rel)
            inode = self.dirs[parent].pop(name, -1)
            self.emit(i, "unlink", inode, src_parent=parent, src_name=name, src_path=rel, path=rel)
            self.bind(i, rel, -1)
            return inode
        raise CrashCheckError(f"#{op.seq}: the crash model does not know operation kind {kind!r}")

    def sync(self, i: int, pending: list[int], *, failed: bool) -> None:
        if failed:  # fsyncgate: pending pages may be dropped and marked clean; no later fsync forces them
            self.poisoned.update(pending)
            return
        self.points.append(i)
        for index in pending:
            self.forced[index] = i

    def rename(self, i: int, src: str, dst: str) -> int:
        src_parent, src_name = self.parent_of(src)
        dst_parent, dst_name = self.parent_of(dst)
        inode = self.dirs[src_parent].get(src_name)
        if inode is None:
            raise CrashCheckError(f"#{i} replace of {src!r}, which the model has not seen")
        if self.model == "atomic-rename":
            self.emit(i, "rename", inode, parent=dst_parent, name=dst_name, src_parent=src_parent,
                      src_name=src_name, path=dst, src_path=src)
        else:
            self.emit(i, "link", inode, parent=dst_parent, name=dst_name, path=dst)
            self.emit(i, "unlink", inode, src_parent=src_parent, src_name=src_name, src_path=src, path=src)
        del self.dirs[src_parent][src_name]
        self.dirs[dst_parent][dst_name] = inode
        self.bind(i, src, -1)
        self.bind(i, dst, inode)
        return inode


def build_timeline(ops: Iterable[FsOp], root: str, model: str, *, initial: FsState | None = None,
                   capture: Iterable[int] = ()) -> Timeline:
    """Replay ``ops`` (absolute paths under ``root``) under ``model``; ``initial`` is the durable tree the
    trace started from (empty by default); ``capture`` lists trace indices whose live tree is kept."""
    if model not in MODELS:
        raise CrashCheckError(f"unknown crash model {model!r} (choose from {', '.join(MODELS)})")
    ops = tuple(ops)
    initial = initial or FsState(())
    replay = _Replayer(root, model, initial, set(capture))
    replay.run(ops)
    versions = {inode: (*replay.versions.get(inode, []), content) for inode, content in replay.content.items()}
    return Timeline(
        root=replay.root,
        model=model,
        ops=ops,
        micro=tuple(replay.micro),
        forced_at=tuple(replay.forced.get(m.index) for m in replay.micro),
        poisoned=frozenset(replay.poisoned),
        persistence_points=tuple(replay.points),
        kinds=dict(replay.kinds),
        op_inode=tuple(replay.op_inode),
        initial=initial,
        bindings={path: tuple(b) for path, b in replay.bindings.items()},
        versions=versions,
        live=dict(replay.live),
    )
