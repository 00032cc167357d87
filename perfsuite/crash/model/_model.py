"""The page-cache crash-state model (SPEC section 7), after ALICE (Pillai et al., OSDI 2014).

A recorded trace (E1 ``FsOp`` list) is replayed into *micro-ops*, the units that reach the disk
independently: a directory-entry change (create, link, unlink, rename) or a data change of one inode
(write, truncate). The replay also computes, for each micro-op, the persistence point that forced it:

- data of an inode is durable once an ``fsync`` (or ``fdatasync``) of that inode returned; a write at an
  offset (``pwrite``) is a data change like an append, at its offset; a failed fsync *poisons* the
  inode's pending data (fsyncgate: the kernel may drop the dirty pages and mark them clean, so a later
  fsync that succeeds does not force them; they stay "may be lost or torn" forever);
- a directory entry (a newly created file's entry included: fsync of the file does not make its name
  durable) is durable once an ``fsync`` of its parent directory returned;
- ``atomic-rename``: ``replace(src, dst)`` is one directory micro-op (the old or the new binding is seen
  after a crash, never a mix), durable once the destination's directory is synced;
- ``split-rename``: it is two independent micro-ops, link(dst -> inode) and unlink(src), each durable
  when its own directory is synced. A crash may then show *both names* (the link persisted, the unlink
  did not; the shape of the btrfs rename bugs CrashMonkey found) or *neither new name* (the source
  unlink persisted without the link: dst keeps its old inode, the new one is orphaned). ALICE's default
  file system additionally splits off the unlink of the *old destination*, leaving dst absent; POSIX
  guarantees dst is never absent and no atomic-replace protocol can survive that, so it is not modelled.

Everything not forced at a crash point is *pending*: any subset of pending micro-ops may have reached the
disk (ALICE's default persistence model has no other ordering between them), a pending write may be torn
(see :data:`BLOCK` and ``model._states.tear_points``), and a write beyond the persisted size leaves a hole of
zeros (ALICE's "zero written" state). Symlinks and hard links other than rename's are not modelled.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from perfsuite.engine import FsOp
from perfsuite.errors import PerfsuiteError

RenameModel = Literal["atomic-rename", "split-rename"]
MODELS: tuple[RenameModel, ...] = ("atomic-rename", "split-rename")
BLOCK = 4096  # torn writes split at block boundaries (ALICE "aligned" mode) and at sub-block points
ROOT_INODE = 0

MicroKind = Literal["create", "link", "unlink", "rename", "write", "truncate"]
TearMode = Literal["prefix", "zeros"]


class CrashCheckError(PerfsuiteError):
    """The crash checker cannot interpret its input (unknown model, workload, or an unmodellable trace)."""


@dataclass(frozen=True, slots=True)
class FsState:
    """A file-system tree under the workload root: sorted ``(relative path, bytes)``; ``None`` is a directory."""

    files: tuple[tuple[str, bytes | None], ...]

    @property
    def digest(self) -> str:
        """Content digest: identical crash states are explored once."""
        h = hashlib.sha256()
        for path, data in self.files:
            h.update(path.encode() + (b"\0d\0" if data is None else b"\0f%d\0" % len(data)))
            if data is not None:
                h.update(data)
        return h.hexdigest()

    def as_dict(self) -> dict[str, bytes | None]:
        return dict(self.files)

    def get(self, path: str) -> bytes | None:
        """A file's bytes, or ``None`` when it is missing or a directory."""
        for name, data in self.files:
            if name == path:
                return data
        return None


@dataclass(frozen=True, slots=True)
class MicroOp:
    """One independently persistable unit produced from trace operation ``op`` (see the module docstring)."""

    index: int
    op: int
    kind: MicroKind
    inode: int
    parent: int = -1
    name: str = ""
    src_parent: int = -1
    src_name: str = ""
    offset: int = 0
    data: bytes = b""
    length: int = 0
    path: str = ""
    src_path: str = ""

    def describe(self) -> str:
        """A one-line human description, e.g. ``#12 write conv/conversation.jsonl @120 +87B``."""
        where = f"#{self.op} {self.kind}"
        if self.kind == "write":
            return f"{where} {self.path} @{self.offset} +{len(self.data)}B"
        if self.kind == "truncate":
            return f"{where} {self.path} to {self.length}B"
        if self.kind in ("rename", "unlink") and self.src_path:
            return f"{where} {self.src_path} -> {self.path}" if self.kind == "rename" else f"{where} {self.src_path}"
        return f"{where} {self.path}"


@dataclass(frozen=True, slots=True)
class Binding:
    """In the live (page-cache) history, ``path`` named ``inode`` from trace index ``at`` on (-1: unbound);
    ``content`` is what the inode held at that moment (a renamed-in temp file is complete there)."""

    at: int
    path: str
    inode: int
    content: bytes


@dataclass(frozen=True, slots=True)
class Timeline:
    """A trace replayed under one rename model: micro-ops, what forced each, and the live history."""

    root: str
    model: RenameModel
    ops: tuple[FsOp, ...]
    micro: tuple[MicroOp, ...]
    forced_at: tuple[int | None, ...]  # trace index of the persistence point that forced micro-op i
    poisoned: frozenset[int]  # micro-ops whose inode later saw a failed fsync while they were pending
    persistence_points: tuple[int, ...]  # trace indices of fsyncs / directory fsyncs that returned
    kinds: Mapping[int, str]  # inode -> "file" | "dir"
    op_inode: tuple[int, ...]  # inode each trace op acted on (-1 when none)
    initial: FsState
    bindings: Mapping[str, tuple[Binding, ...]]
    versions: Mapping[int, tuple[bytes, ...]]  # inode -> every maximal content it had (appends extend one)
    live: Mapping[int, FsState]  # requested trace index -> live (page-cache) tree before op at that index
    # A cache, not a value: disks with micro-ops [0, i) applied, filled on demand by ``_checkpoint``.
    _checkpoints: list[Disk] = field(default_factory=list, repr=False, compare=False)

    def pending(self, at: int) -> list[int]:
        """Micro-ops issued before trace index ``at`` that no completed persistence point forced."""
        out = []
        for m in self.micro:
            if m.op >= at:
                break
            forced = self.forced_at[m.index]
            if forced is None or forced >= at:
                out.append(m.index)
        return out

    def micro_end(self, at: int) -> int:
        """Number of micro-ops issued by the first ``at`` trace operations."""
        n = 0
        for m in self.micro:
            if m.op >= at:
                break
            n += 1
        return n

    def state(self, at: int, kept: Iterable[int] = (), torn: tuple[tuple[int, TearMode, int], ...] = ()) -> FsState:
        """The durable tree after a crash following trace op ``at - 1``: every micro-op forced by then,
        plus the pending ones in ``kept``; ``torn`` micro-ops persist only partially."""
        kept_set = set(kept)
        tears = {index: (mode, cut) for index, mode, cut in torn}
        pending = set(self.pending(at))
        end = self.micro_end(at)
        skipped = (pending - kept_set) | set(tears)
        start = min(skipped) if skipped else end
        disk = self._checkpoint(start).copy()
        for m in self.micro[start:end]:
            if m.index in pending and m.index not in kept_set and m.index not in tears:
                continue
            disk.apply(m, tears.get(m.index), self.kinds)
        return disk.tree()

    def _checkpoint(self, index: int) -> Disk:
        """The disk with micro-ops ``[0, index)`` all applied (cached prefix states make enumeration cheap)."""
        cps = self._checkpoints
        if not cps:
            cps.append(Disk.from_state(self.initial, self.kinds))
        while len(cps) <= index:
            disk = cps[-1].copy()
            disk.apply(self.micro[len(cps) - 1], None, self.kinds)
            cps.append(disk)
        return cps[index]


class Disk:
    """Mutable directory entries and contents while a crash state is being built."""

    __slots__ = ("content", "dirs")

    def __init__(self, dirs: dict[int, dict[str, int]], content: dict[int, bytes]) -> None:
        self.dirs = dirs
        self.content = content

    @classmethod
    def from_state(cls, state: FsState, kinds: Mapping[int, str]) -> Disk:
        """The disk holding ``state``, with the inode numbers :func:`initial_inodes` gives the replay."""
        disk = cls({ROOT_INODE: {}}, {})
        inodes = initial_inodes(state)
        for path, data in state.files:
            parent_path, name = split_path(path)
            disk.dirs.setdefault(inodes[parent_path], {})[name] = inodes[path]
            if data is None:
                disk.dirs.setdefault(inodes[path], {})
            else:
                disk.content[inodes[path]] = data
        return disk

    def copy(self) -> Disk:
        """An independent copy (entry tables copied; contents are immutable bytes, shared)."""
        return Disk({d: dict(e) for d, e in self.dirs.items()}, dict(self.content))

    def apply(self, m: MicroOp, tear: tuple[TearMode, int] | None, kinds: Mapping[int, str]) -> None:
        """Persist ``m`` (partially, for a torn write). An unlink only removes the entry if it still names
        the same inode, so any subset of micro-ops applied in order gives a well-defined tree."""
        if m.kind in ("create", "link"):
            self.dirs.setdefault(m.parent, {})[m.name] = m.inode
            if kinds[m.inode] == "dir":
                self.dirs.setdefault(m.inode, {})
        elif m.kind == "unlink":
            entries = self.dirs.setdefault(m.src_parent, {})
            if entries.get(m.src_name) == m.inode:
                del entries[m.src_name]
        elif m.kind == "rename":
            entries = self.dirs.setdefault(m.src_parent, {})
            if entries.get(m.src_name) == m.inode:
                del entries[m.src_name]
            self.dirs.setdefault(m.parent, {})[m.name] = m.inode
        elif m.kind == "write":
            data = m.data
            if tear is not None:
                mode, cut = tear
                data = data[:cut] if mode == "prefix" else data[:cut] + b"\0" * (len(data) - cut)
            self.content[m.inode] = write_at(self.content.get(m.inode, b""), m.offset, data)
        elif m.kind == "truncate":
            old = self.content.get(m.inode, b"")
            self.content[m.inode] = old[: m.length] + b"\0" * max(0, m.length - len(old))

    def tree(self) -> FsState:
        """What a reader sees: every entry reachable from the root (orphaned inodes are invisible)."""
        out: list[tuple[str, bytes | None]] = []
        stack: list[tuple[int, str]] = [(ROOT_INODE, "")]
        while stack:
            inode, prefix = stack.pop()
            for name, child in sorted(self.dirs.get(inode, {}).items()):
                path = f"{prefix}{name}"
                if child in self.dirs:
                    out.append((path, None))
                    stack.append((child, path + "/"))
                else:
                    out.append((path, self.content.get(child, b"")))
        return FsState(tuple(sorted(out)))


def write_at(old: bytes, offset: int, data: bytes) -> bytes:
    """``old`` with ``data`` written at ``offset``; a gap past the end reads as zeros (a hole)."""
    if offset > len(old):
        old = old + b"\0" * (offset - len(old))
    return old[:offset] + data + old[offset + len(data):]


def split_path(path: str) -> tuple[str, str]:
    """``"a/b/c"`` -> ``("a/b", "c")``; a top-level name has the root ``""`` as parent."""
    parent, _, name = path.rpartition("/")
    return parent, name


def initial_inodes(state: FsState) -> dict[str, int]:
    """Inode numbers for an initial tree: root is 0, then 1.. in path order (shared by model and disk)."""
    inodes = {"": ROOT_INODE}
    for number, (path, _) in enumerate(state.files, start=1):
        inodes[path] = number
    return inodes


def materialize(state: FsState, root: str) -> None:
    """Write ``state`` under ``root`` (created; paths remapped from the workload's original root)."""
    os.makedirs(root, exist_ok=True)
    for path, data in state.files:
        target = os.path.join(root, *path.split("/"))
        if data is None:
            os.makedirs(target, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as handle:
                handle.write(data)


def snapshot(root: str) -> FsState:
    """The tree under ``root`` as an :class:`FsState` (what recovery left)."""
    out: list[tuple[str, bytes | None]] = []
    for directory, subdirs, files in os.walk(root):
        rel = os.path.relpath(directory, root)
        prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
        out.extend((prefix + d, None) for d in subdirs)
        for name in files:
            with open(os.path.join(directory, name), "rb") as handle:
                out.append((prefix + name, handle.read()))
    return FsState(tuple(sorted(out)))
