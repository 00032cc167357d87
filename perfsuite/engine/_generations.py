"""E3 portable profile: immutable generations of content-addressed chunks behind one HEAD.

Layout of a portable session directory::

    LEASE                     owner lease (O_EXCL), names the owner's epoch and token
    HEAD                      {"seq", "manifest", "digest", "epoch"}: replacing it is the only commit point
    objects/<sha256>          chunks, immutable, named by digest
    objects/manifest-<seq>-e<epoch>.json   manifests, written after their chunks, never modified

Manifests share the chunks' directory so one directory fsync makes a generation's new names durable
before HEAD is replaced: a publication costs one fsync per new chunk, one for the manifest, one for
that directory, and the HEAD replace (temp fsync, rename, directory fsync).
    staging/<publication>/    staged bytes of a publication not yet adopted (recovery bytes)
    logs/                     diagnostic logs (E8): observational, never published
"""

from __future__ import annotations

import json
import os
import re
import socket
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from perfsuite.engine._fs import O_EXCL_CREATE, FileSystem
from perfsuite.engine._objects import ArtifactEntry, ChunkRef, digest_bytes

HEAD = "HEAD"
LEASE = "LEASE"
OBJECTS = "objects"
MANIFEST_PREFIX = "manifest-"
STAGING = "staging"
LOGS = "logs"
FORMAT = "perfsuite-session/1"


class SessionError(Exception):
    """A session cannot be opened or published; the message is one line naming the file."""


class OwnerConflict(SessionError):
    """Another live owner holds the session's lease."""


class StaleHead(SessionError):
    """HEAD no longer names the expected previous head, or the caller's epoch is stale (E3)."""


@dataclass(frozen=True, slots=True)
class HeadRef:
    seq: int
    manifest: str  # relative path of the manifest
    digest: str  # digest of the manifest bytes
    epoch: int
    parent: str | None = None  # the previously adopted manifest: where a fallback starts

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "seq": self.seq, "manifest": self.manifest, "digest": self.digest,
                "epoch": self.epoch, "parent": self.parent}

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> HeadRef:
        parent = record.get("parent")
        return cls(int(record["seq"]), str(record["manifest"]), str(record["digest"]), int(record["epoch"]),
                   str(parent) if parent else None)


@dataclass(frozen=True, slots=True)
class Manifest:
    seq: int
    epoch: int
    parent: str | None  # the parent generation's manifest name (the adopted chain)
    created: float
    artifacts: Mapping[str, ArtifactEntry]
    meta: Mapping[str, Any] = field(default_factory=dict)

    def encode(self) -> bytes:
        record = {
            "format": FORMAT,
            "seq": self.seq,
            "epoch": self.epoch,
            "parent": self.parent,
            "created": self.created,
            "artifacts": {name: entry.to_json() for name, entry in sorted(self.artifacts.items())},
            "meta": dict(self.meta),
        }
        return json.dumps(record, separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes) -> Manifest:
        record = json.loads(data)
        if record.get("format") != FORMAT:
            raise ValueError(f"unknown format {record.get('format')!r}")
        return cls(
            seq=int(record["seq"]),
            epoch=int(record["epoch"]),
            parent=record.get("parent"),
            created=float(record["created"]),
            artifacts={n: ArtifactEntry.from_json(e) for n, e in record["artifacts"].items()},
            meta=record.get("meta", {}),
        )

    def digests(self) -> set[str]:
        return {c.digest for entry in self.artifacts.values() for c in entry.chunks}

    @property
    def filename(self) -> str:
        return manifest_name(self.seq, self.epoch, str(self.meta.get("publication", "x")))


def manifest_name(seq: int, epoch: int, tag: str) -> str:
    """Unique per publication attempt, so a failed commit's orphan never blocks the retry."""
    return f"{OBJECTS}/{MANIFEST_PREFIX}{seq:08d}-e{epoch}-{tag}.json"


_MANIFEST_RE = re.compile(r"manifest-(\d+)-e(\d+)-")


def manifest_epoch(name: str) -> int:
    match = _MANIFEST_RE.search(name)
    return int(match.group(2)) if match else 0


@dataclass(frozen=True, slots=True)
class Lease:
    epoch: int
    token: str
    pid: int
    host: str


@dataclass(frozen=True, slots=True)
class OpenReport:
    """What open found and did: one line per problem, naming the file (E3 fallback)."""

    head: HeadRef | None
    problems: tuple[str, ...]
    fell_back: bool
    broke_stale_lease: bool


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class GenerationStore:
    """Reads and writes one portable session directory through the E1 layer."""

    def __init__(self, root: str, fs: FileSystem) -> None:
        self.root = os.path.abspath(root)
        self.fs = fs
        self.known_objects: set[str] = set()

    def path(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    # -- creation and ownership ---------------------------------------------------------------------
    def initialise(self) -> list[str]:
        """Create the directory skeleton; return the directories created (for namespace syncing)."""
        created = self.fs.makedirs(self.root)
        for sub in (OBJECTS, STAGING, LOGS):
            created += self.fs.makedirs(self.path(sub))
        return created

    def acquire_lease(self, epoch_floor: int) -> tuple[Lease, bool]:
        """Create LEASE exclusively with a new epoch above every epoch seen. A lease whose owner process
        is dead on this host is broken (renamed aside, then re-created exclusively); a live owner is
        refused. Returns the lease and whether a stale one was broken."""
        broke = False
        for _attempt in range(5):
            existing = self.read_lease()
            if existing is not None:
                if existing.host != socket.gethostname() or _pid_alive(existing.pid):
                    raise OwnerConflict(
                        f"{self.path(LEASE)}: session is owned by pid {existing.pid} on {existing.host} "
                        f"(epoch {existing.epoch}); refusing a second owner"
                    )
                aside = self.path(f".{LEASE}.stale-{uuid.uuid4().hex[:8]}")
                try:
                    self.fs.replace(self.path(LEASE), aside)
                except FileNotFoundError:
                    continue
                self.fs.remove(aside)
                epoch_floor = max(epoch_floor, existing.epoch)
                broke = True
            lease = Lease(epoch_floor + 1, uuid.uuid4().hex, os.getpid(), socket.gethostname())
            body = json.dumps({"epoch": lease.epoch, "token": lease.token, "pid": lease.pid,
                               "host": lease.host}).encode()
            try:
                fd = self.fs.open(self.path(LEASE), O_EXCL_CREATE)
            except FileExistsError:
                continue
            try:
                self.fs.write_all(fd, body)
                self.fs.fsync_file(fd, self.path(LEASE))
            finally:
                self.fs.close(fd)
            self.fs.sync_dir(self.root)
            return lease, broke
        raise OwnerConflict(f"{self.path(LEASE)}: could not acquire the lease (contended)")

    def read_lease(self) -> Lease | None:
        try:
            record = json.loads(self.fs.read(self.path(LEASE)))
            return Lease(int(record["epoch"]), str(record["token"]), int(record["pid"]), str(record["host"]))
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError):
            # A torn lease from a crash during acquisition: nobody can hold it.
            return Lease(0, "", 0, socket.gethostname())

    def release_lease(self, lease: Lease) -> None:
        current = self.read_lease()
        if current is not None and current.token == lease.token:
            self.fs.remove(self.path(LEASE))
            self.fs.sync_dir(self.root)

    def bump_epoch(self, lease: Lease) -> Lease:
        """Restore and intentional replacement seed a new owner epoch (E3)."""
        new = Lease(lease.epoch + 1, lease.token, lease.pid, lease.host)
        body = json.dumps({"epoch": new.epoch, "token": new.token, "pid": new.pid, "host": new.host}).encode()
        self.fs.atomic_replace(self.path(LEASE), body)
        return new

    # -- HEAD -----------------------------------------------------------------------------------------
    def read_head(self) -> HeadRef | None:
        """The current HEAD, or None for a session that never committed. Raises ValueError if corrupt."""
        try:
            data = self.fs.read(self.path(HEAD))
        except FileNotFoundError:
            return None
        record = json.loads(data)
        if record.get("format") != FORMAT:
            raise ValueError("not a perfsuite HEAD")
        return HeadRef.from_json(record)

    def adopt(self, new: HeadRef, *, expected: HeadRef | None, lease: Lease) -> None:
        """E4 phase 6, the commit point: replace HEAD only if it still names ``expected`` and the lease
        still names the caller's epoch; then fsync its directory (atomic replace does)."""
        current_lease = self.read_lease()
        if current_lease is None or current_lease.token != lease.token or current_lease.epoch != new.epoch:
            raise StaleHead(f"{self.path(LEASE)}: epoch {new.epoch} is no longer the owner's epoch")
        try:
            current = self.read_head()
        except ValueError:
            current = None if expected is None else expected  # corrupt HEAD was already diagnosed at open
        if current != expected:
            raise StaleHead(f"{self.path(HEAD)}: names {current} instead of the expected {expected}")
        self.fs.atomic_replace(self.path(HEAD), json.dumps(new.to_json(), sort_keys=True).encode())

    # -- manifests and objects ----------------------------------------------------------------------
    def read_manifest(self, name: str, digest: str | None = None) -> Manifest:
        data = self.fs.read(self.path(name))
        if digest is not None and digest_bytes(data) != digest:
            raise ValueError("digest mismatch")
        return Manifest.decode(data)

    def write_manifest(self, manifest: Manifest, *, sync_dir: bool = True) -> HeadRef:
        """Written after its chunks, exclusively, fsynced; then the directory is fsynced (E3)."""
        data = manifest.encode()
        path = self.path(manifest.filename)
        self.fs.write_new(path, data, exclusive=True, sync=True)
        if sync_dir:
            self.fs.sync_dir(self.path(OBJECTS))
        return HeadRef(manifest.seq, manifest.filename, digest_bytes(data), manifest.epoch, manifest.parent)

    def object_path(self, digest: str) -> str:
        return self.path(OBJECTS, digest)

    def read_object(self, chunk: ChunkRef) -> bytes:
        data = self.fs.read(self.object_path(chunk.digest))
        if len(data) != chunk.size or digest_bytes(data) != chunk.digest:
            raise ValueError("chunk digest mismatch")
        return data

    def read_artifact(self, entry: ArtifactEntry) -> bytes:
        return b"".join(self.read_object(c) for c in entry.chunks)

    def list_manifests(self) -> list[str]:
        """Manifest paths (relative), newest first."""
        names = [n for n in self.fs.listdir(self.path(OBJECTS)) if n.startswith(MANIFEST_PREFIX)]
        return [f"{OBJECTS}/{n}" for n in sorted(names, reverse=True)]

    def load_verified(self, name: str, digest: str | None) -> tuple[Manifest, dict[str, bytes]]:
        """A manifest and every artifact's bytes, each chunk verified against its digest."""
        try:
            manifest = self.read_manifest(name, digest)
        except FileNotFoundError:
            raise SessionError(f"{self.path(name)}: manifest named by HEAD is missing") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise SessionError(f"{self.path(name)}: corrupt manifest ({exc})") from None
        contents: dict[str, bytes] = {}
        for artifact, entry in manifest.artifacts.items():
            for chunk in entry.chunks:
                try:
                    self.read_object(chunk)
                except FileNotFoundError:
                    raise SessionError(f"{self.object_path(chunk.digest)}: chunk of {artifact} is missing") from None
                except ValueError:
                    raise SessionError(f"{self.object_path(chunk.digest)}: chunk of {artifact} is corrupt") from None
            contents[artifact] = self.read_artifact(entry)
        return manifest, contents

    def open_newest_intact(self) -> tuple[HeadRef | None, Manifest | None, dict[str, bytes], list[str]]:
        """HEAD's generation if it verifies, else the newest *adopted* generation that does (E3: readers
        verify digests and never fall back to a mutable copy). Problems are one-line messages.

        Only generations known to have been adopted are fallback candidates: HEAD's recorded parent and
        every manifest another manifest names as its parent. A manifest nobody names was never adopted
        (an orphan of a commit that crashed or failed before HEAD moved) and is never resurrected; with
        no HEAD and no adopted generation, the session simply has not committed yet."""
        problems: list[str] = []
        head: HeadRef | None = None
        head_present = self.fs.exists(self.path(HEAD))
        if head_present:
            try:
                head = self.read_head()
            except (ValueError, KeyError, TypeError) as exc:
                problems.append(f"{self.path(HEAD)}: corrupt HEAD ({exc})")
        if head is not None:
            try:
                manifest, contents = self.load_verified(head.manifest, head.digest)
                return head, manifest, contents, problems
            except SessionError as exc:
                problems.append(str(exc))
        names = self.list_manifests()
        adopted = self._named_as_parent(names)
        if head is not None and head.parent:
            adopted.add(head.parent)
        if head_present and head is None:
            # HEAD itself is unreadable: its tip is named by nobody, so also admit every manifest whose
            # publication left no staged batch behind (an unadopted commit keeps its staging directory).
            unadopted = self._staged_publications()
            adopted.update(n for n in names if self._publication_of(n) not in unadopted)
        if not head_present and adopted:
            problems.append(f"{self.path(HEAD)}: missing although generations were adopted; falling back")
        for name in names:
            if name not in adopted or (head is not None and name == head.manifest):
                continue
            try:
                manifest, contents = self.load_verified(name, None)
            except SessionError as exc:
                problems.append(str(exc))
                continue
            data = self.fs.read(self.path(name))
            ref = HeadRef(manifest.seq, name, digest_bytes(data), manifest.epoch, manifest.parent)
            return ref, manifest, contents, problems
        if problems:
            raise SessionError(problems[0] + "; no intact adopted generation to fall back to")
        return None, None, {}, problems

    def _staged_publications(self) -> set[str]:
        staging = self.path(STAGING)
        return set(self.fs.listdir(staging)) if self.fs.isdir(staging) else set()

    def _publication_of(self, name: str) -> str | None:
        try:
            return str(self.read_manifest(name).meta.get("publication"))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _named_as_parent(self, names: list[str]) -> set[str]:
        parents: set[str] = set()
        for name in names:
            try:
                parent = self.read_manifest(name).parent
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if parent:
                parents.add(parent)
        return parents

    def scan_objects(self) -> set[str]:
        """Chunk digests present in the object store (manifests and temp files excluded)."""
        return {n for n in self.fs.listdir(self.path(OBJECTS)) if ".tmp-" not in n and not n.startswith(MANIFEST_PREFIX)
                and not n.startswith(".")}

    def adopted_chain(self, head: HeadRef | None, limit: int) -> list[str]:
        """HEAD's manifest and its adopted ancestors (through parent links), newest first. A manifest
        that is not on this chain was never adopted (an orphan of a failed or crashed commit)."""
        chain: list[str] = []
        name = head.manifest if head is not None else None
        while name is not None and len(chain) < limit:
            chain.append(name)
            try:
                name = self.read_manifest(name).parent
            except (OSError, ValueError, KeyError):
                break
        return chain

    # -- retirement (idle slices) -------------------------------------------------------------------
    def retire(self, *, keep: int, pinned: Iterable[str] = (), head: HeadRef | None, max_deletions: int = 64
               ) -> tuple[int, bool]:
        """Keep HEAD's generation and its ``keep - 1`` adopted ancestors plus pinned ones; delete every
        other manifest (older ones and orphans of failed commits), then chunks no retained manifest
        references. At most ``max_deletions`` removals per call (an idle slice); returns (removed,
        more_work_left). Manifests go first so a crash never leaves a retained manifest without chunks."""
        retained = set(pinned) | set(self.adopted_chain(head, keep))
        if head is None:
            retained.update(self.list_manifests()[:keep])
        removed = 0
        doomed = [m for m in self.list_manifests() if m not in retained]
        for name in doomed[:max_deletions]:
            self.fs.remove(self.path(name))
            removed += 1
        if len(doomed) > max_deletions:
            return removed, True
        referenced: set[str] = set()
        for name in retained:
            try:
                referenced |= self.read_manifest(name).digests()
            except (OSError, ValueError, KeyError):
                continue
        garbage = sorted(self.scan_objects() - referenced - self._staging_references())
        victims = garbage[: max(0, max_deletions - removed)]
        for digest in victims:
            self.fs.remove(self.object_path(digest))
            self.known_objects.discard(digest)
        if removed or victims:
            self.fs.sync_dir(self.path(OBJECTS))
        return removed + len(victims), len(garbage) > len(victims)

    def _staging_references(self) -> set[str]:
        """Chunks a pending publication may still need (its base generation's chunks are in manifests)."""
        refs: set[str] = set()
        staging = self.path(STAGING)
        if not self.fs.exists(staging):
            return refs
        for pub in self.fs.listdir(staging):
            batch = os.path.join(staging, pub, "batch.json")
            if self.fs.exists(batch):
                try:
                    record = json.loads(self.fs.read(batch))
                    refs.update(record.get("digests", []))
                except ValueError:
                    continue
        return refs
