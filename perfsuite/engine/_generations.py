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
import socket
import uuid
from collections.abc import Iterable

from perfsuite.engine._adoption import recover_lost_head
from perfsuite.engine._confined import CONTROL_BYTES, DOCUMENT_BYTES, STATE_BYTES, TooLarge
from perfsuite.engine._damage import DAMAGE, describe, one_line
from perfsuite.engine._fs import O_EXCL_CREATE, FileSystem
from perfsuite.engine._layout import (
    FORMAT,
    FORMAT_VERSION,
    HEAD,
    LEASE,
    LOGS,
    MANIFEST_PATH_RE,
    MANIFEST_PREFIX,
    OBJECTS,
    STAGING,
    FormatTooNew,
    HeadRef,
    Lease,
    Manifest,
    NotAFile,
    OwnerConflict,
    OwnerProbe,
    SessionError,
    StaleHead,
    format_version,
    manifest_epoch,
    manifest_seq,
    manifest_tag,
    read_control,
)
from perfsuite.engine._objects import ArtifactEntry, ChunkRef, digest_bytes


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host. ``pid <= 0`` names no process: ``os.kill(0, 0)``
    probes our own process group and always succeeds, so a torn LEASE read as pid 0 used to block every
    later open for good."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OSError, OverflowError):
        return False  # not a pid this system can have (a damaged lock file)
    return True


def owner_alive(pid: int) -> bool:
    """The default owner probe of open: the real :func:`pid_alive` (looked up at call time, so a crash
    model or a seeded bug that replaces it is the probe every open uses)."""
    return pid_alive(pid)


class GenerationStore:
    """Reads and writes one portable session directory through the E1 layer."""

    def __init__(self, root: str, fs: FileSystem) -> None:
        self.root = os.path.abspath(root)
        self.fs = fs
        self._lease_path = os.path.join(self.root, LEASE)  # read twice per publication (E3): joined once
        self._lease_seen: tuple[bytes, Lease] | None = None  # the last LEASE bytes parsed, and what they said
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

    def acquire_lease(self, epoch_floor: int, alive: OwnerProbe = owner_alive) -> tuple[Lease, str | None]:
        """Create LEASE exclusively with a new epoch above every epoch seen. A lease whose owner process
        is dead on this host is broken (renamed aside, then re-created exclusively); a live owner is
        refused. A torn lease (empty, garbage, pid 0: a crash between the exclusive create and its write)
        names no owner and is broken the same way: its would-be owner, if it is somehow still running,
        is fenced at adoption, which checks the lease's token and epoch (E3 fencing). Returns the
        lease and, when one was broken, a line saying so."""
        broke: str | None = None
        torn_owned = self.fs.fault_hooks is not None and self.fs.fault_hooks.torn_lease_owned  # a seeded bug
        for _attempt in range(5):
            existing = self.read_lease()
            if existing is not None:
                if (existing.pid > 0 and (existing.host != socket.gethostname() or alive(existing.pid))) or (
                        existing.pid <= 0 and torn_owned):
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
                broke = (f"{self.path(LEASE)}: broke a torn lease (it names no owner)" if existing.pid <= 0
                         else f"{self.path(LEASE)}: broke a stale lease left by dead pid {existing.pid}")
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
        """The lease, or None when there is none. A torn LEASE (empty, garbage, a dangling symbolic link:
        a crash during acquisition, or damage) reads as pid 0, which names no owner. A LEASE that is a
        directory is refused with a one-line :class:`NotAFile` (``perfsuite session repair`` moves it).
        Read before every log write and every acknowledgement (E3 fencing), so the usual case is one read
        of a regular file whose bytes are the ones parsed last time; anything else takes the careful path."""
        path = self._lease_path
        try:
            data: bytes | None = self.fs.read_regular(path, CONTROL_BYTES)  # never through a link or a FIFO
        except TooLarge:
            data = b""  # garbage no engine wrote: names no owner (read no further)
        except OSError:  # absent, a directory, a link, a FIFO, unreadable: classified below
            data = self._read_lease_carefully(path)
        if data is None:
            return None
        seen = self._lease_seen
        if seen is not None and seen[0] == data:
            return seen[1]
        try:
            record = json.loads(data)
            lease = Lease(int(record["epoch"]), str(record["token"]), int(record["pid"]), str(record["host"]))
        except (ValueError, KeyError, TypeError, OverflowError):
            # A torn lease from a crash during acquisition: nobody can hold it.
            return Lease(0, "", 0, socket.gethostname())
        self._lease_seen = (data, lease)
        return lease

    def _read_lease_carefully(self, path: str) -> bytes | None:
        try:
            return read_control(self.fs, path)
        except NotAFile:
            facts = self.fs.lstat(path)
            if facts is not None and facts.kind == "directory":
                raise NotAFile(f"{path}: is a directory, not a lease; run `perfsuite session repair "
                               f"{self.root}`") from None
            return b""  # a symbolic link, a FIFO, a device: nobody can hold it (never followed)

    def release_lease(self, lease: Lease) -> None:
        try:
            current = self.read_lease()
        except SessionError:
            return  # damaged since we took it: not ours to remove
        if current is not None and current.token == lease.token:
            self.fs.remove(self.path(LEASE))
            self.fs.sync_dir(self.root)

    def bump_epoch(self, lease: Lease) -> Lease:
        """Restore and intentional replacement seed a new owner epoch (E3)."""
        new = Lease(lease.epoch + 1, lease.token, lease.pid, lease.host)
        body = json.dumps({"epoch": new.epoch, "token": new.token, "pid": new.pid, "host": new.host}).encode()
        self.fs.atomic_replace(self.path(LEASE), body, follow=False)
        return new

    def check_format(self) -> int:
        """The format version HEAD names (this engine's when there is no readable HEAD): refuses a newer
        format with one line before open or repair writes anything."""
        try:
            data = read_control(self.fs, self.path(HEAD))
            record = json.loads(data) if data is not None else None
        except (SessionError, *DAMAGE):
            return FORMAT_VERSION  # damage: open's recovery (or repair) diagnoses it
        if not isinstance(record, dict):
            return FORMAT_VERSION
        try:
            return format_version(record.get("format"), self.path(HEAD))
        except ValueError:
            return FORMAT_VERSION

    # -- HEAD -----------------------------------------------------------------------------------------
    def read_head(self) -> HeadRef | None:
        """The current HEAD, or None when there is none. Raises ValueError when its bytes are not a head
        record (any shape: ``[1, 2]`` included) and :class:`NotAFile` when it is not a regular file."""
        path = self.path(HEAD)  # built once: HEAD is read twice per publication (M3 allocation)
        data = read_control(self.fs, path)
        if data is None:
            return None
        try:
            record = json.loads(data)
            if not isinstance(record, dict):
                raise ValueError("not a perfsuite HEAD")
            format_version(record.get("format"), path)  # a newer format: FormatTooNew, untouched
            head = HeadRef.from_json(record)
        except (KeyError, TypeError, OverflowError) as exc:
            raise ValueError(f"not a head record ({type(exc).__name__})") from None
        if not MANIFEST_PATH_RE.fullmatch(head.manifest):
            raise ValueError(f"names {head.manifest!r}, which is not a manifest of this session")
        return head

    def adopt(self, new: HeadRef, *, expected: HeadRef | None, lease: Lease) -> None:
        """E4 phase 6, the commit point: replace HEAD only if it still names ``expected`` and the lease
        still names the caller's epoch; then fsync its directory (atomic replace does)."""
        current_lease = self.read_lease()
        unfenced = self.fs.fault_hooks is not None and self.fs.fault_hooks.skip_lease_check  # a seeded bug
        if not unfenced and (current_lease is None or current_lease.token != lease.token
                             or current_lease.epoch != new.epoch):
            raise StaleHead(f"{self.path(LEASE)}: epoch {new.epoch} is no longer the owner's epoch")
        try:
            current = self.read_head()
        except ValueError:
            current = None if expected is None else expected  # corrupt HEAD was already diagnosed at open
        if current != expected:
            raise StaleHead(f"{self.path(HEAD)}: names {current} instead of the expected {expected}")
        self.fs.atomic_replace(self.path(HEAD), json.dumps(new.to_json(), sort_keys=True).encode(), follow=False)

    def rewrite_head(self, head: HeadRef | None) -> None:
        """Make HEAD name ``head`` again, durably (an abandon's rollback of an adoption whose directory
        fsync failed): a new file renamed over HEAD and its directory fsynced, or, for a session
        that never adopted anything, HEAD removed and its directory fsynced."""
        if head is None:
            self.fs.remove(self.path(HEAD))
            self.fs.sync_dir(self.root)
            return
        self.fs.atomic_replace(self.path(HEAD), json.dumps(head.to_json(), sort_keys=True).encode(), follow=False)

    # -- manifests and objects ----------------------------------------------------------------------
    def read_manifest(self, name: str, digest: str | None = None) -> Manifest:
        data = self.fs.read_regular(self.path(name), DOCUMENT_BYTES)  # an own file: bounded, no link followed
        if digest is not None and digest_bytes(data) != digest:
            raise ValueError("digest mismatch")
        return Manifest.decode(data, self.path(name))

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
        data = self.fs.read_regular(self.object_path(chunk.digest), min(chunk.size, STATE_BYTES))
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
        """A manifest and every artifact's bytes, each chunk verified against its digest. Any damage is a
        one-line :class:`SessionError` naming the file."""
        path = self.path(name)
        try:
            manifest = self.read_manifest(name, digest)
        except FileNotFoundError:
            what = "is a dangling symbolic link" if self.fs.exists(path) else "is missing"
            raise SessionError(f"{path}: manifest {what}") from None
        except OSError as exc:
            raise SessionError(f"{path}: unreadable manifest ({describe(exc)})") from None
        except DAMAGE as exc:
            raise SessionError(one_line(f"{path}: corrupt manifest ({describe(exc)})")) from None
        contents: dict[str, bytes] = {}
        total = sum(c.size for entry in manifest.artifacts.values() for c in entry.chunks)
        if total > STATE_BYTES:  # bounded before anything is assembled (the same chunk may be named many times)
            raise SessionError(f"{path}: names {total} bytes of artifacts, more than the {STATE_BYTES} a session "
                               "holds: damage")
        for artifact, entry in manifest.artifacts.items():
            parts: list[bytes] = []
            for chunk in entry.chunks:
                where = self.object_path(chunk.digest)
                try:
                    parts.append(self.read_object(chunk))
                except FileNotFoundError:
                    raise SessionError(f"{where}: chunk of {artifact} is missing") from None
                except OSError as exc:
                    raise SessionError(f"{where}: chunk of {artifact} is unreadable ({describe(exc)})") from None
                except ValueError:
                    raise SessionError(f"{where}: chunk of {artifact} is corrupt") from None
            contents[artifact] = b"".join(parts)
        return manifest, contents

    def open_newest_intact(self) -> tuple[HeadRef | None, Manifest | None, dict[str, bytes], list[str]]:
        """HEAD's generation if it verifies (E3: readers verify digests and never fall back to a mutable
        copy). When HEAD is missing, unreadable or names something that does not verify, the newest
        generation that can be *proven* adopted is recovered, unless a newer adopted generation exists
        but is damaged: then open refuses with one line naming it and the repair command, because
        falling back would silently drop acknowledged state (proofs in ``_adoption``).
        Problems are one-line messages; a non-empty list means HEAD must be rewritten."""
        problems: list[str] = []
        try:
            head = self.read_head()
        except NotAFile as exc:
            raise NotAFile(f"{exc}; run `perfsuite session repair {self.root}`") from None
        except ValueError as exc:
            problems.append(one_line(f"{self.path(HEAD)}: corrupt HEAD ({exc})"))
            return self._recover_head(None, problems)
        if head is None:
            return self._recover_head(None, problems)
        try:
            manifest, contents = self.load_verified(head.manifest, head.digest)
        except SessionError as exc:
            problems.append(str(exc))
            return self._recover_head(head, problems)
        verified = HeadRef(manifest.seq, head.manifest, head.digest, manifest.epoch, manifest.parent)
        if verified != head and not (head.parent is None and verified == HeadRef(head.seq, head.manifest, head.digest,
                                                                                  head.epoch, manifest.parent)):
            # The manifest verifies by HEAD's digest, so it is what HEAD named; HEAD's other fields are damaged.
            problems.append(f"{self.path(HEAD)}: its fields disagree with {head.manifest}, which verifies by "
                            "digest; HEAD rewritten from the manifest")
            return verified, manifest, contents, problems
        return head, manifest, contents, problems

    def _recover_head(self, hint: HeadRef | None, problems: list[str]
                      ) -> tuple[HeadRef | None, Manifest | None, dict[str, bytes], list[str]]:
        hooks = self.fs.fault_hooks
        if hooks is not None and hooks.recover_head is not None:  # a seeded bug (FaultHooks)
            return hooks.recover_head(self, hint, problems)
        return recover_lost_head(self, hint, problems)

    def staged_publications(self) -> set[str]:
        """Publication ids with a staging directory holding a readable batch record (a publication that was
        never adopted keeps one). A staging directory without one is a cleanup after adoption that a crash
        interrupted (the record is unsynced recovery metadata: power loss can empty it, and the removal of
        an adopted batch's staging is not synced either), so it proves nothing against adoption (with HEAD
        also lost, such a generation was dropped and an older one loaded)."""
        staging = self.path(STAGING)
        if not self.fs.isdir(staging):
            return set()
        staged = set()
        for pub in self.fs.listdir(staging):
            try:
                record = json.loads(self.fs.read_regular(os.path.join(staging, pub, "batch.json"), DOCUMENT_BYTES))
            except (*DAMAGE, SessionError):
                continue
            if isinstance(record, dict):
                staged.add(pub)
        return staged

    def scan_objects(self) -> set[str]:
        """Chunk digests present in the object store (manifests and temp files excluded)."""
        return {n for n in self.fs.listdir(self.path(OBJECTS)) if ".tmp-" not in n and not n.startswith(MANIFEST_PREFIX)
                and not n.startswith(".")}

    def adopted_chain(self, head: HeadRef | None, limit: int) -> list[str]:
        """HEAD's manifest and its adopted ancestors (through parent links), newest first. A manifest
        that is not on this chain was never adopted (an orphan of a failed or crashed commit)."""
        chain: list[str] = []
        name = head.manifest if head is not None else None
        while name is not None and len(chain) < limit and name not in chain:
            chain.append(name)
            try:
                name = self.read_manifest(name).parent
            except DAMAGE:
                break
        return chain

    # -- retirement (idle slices) -------------------------------------------------------------------
    def retire(self, *, keep: int, pinned: Iterable[str] = (), head: HeadRef | None, max_deletions: int = 64,
               problems: list[str] | None = None) -> tuple[int, bool]:
        """Keep HEAD's generation and its ``keep - 1`` adopted ancestors plus pinned ones, and every
        generation *newer* than HEAD's (never adopted by this session, but possibly by another: a lost or
        rolled-back HEAD must not cost it); delete every other manifest (older ones and
        orphans of failed commits), then chunks no retained manifest references. At most
        ``max_deletions`` removals per call (an idle slice); returns (removed, more_work_left). Manifests
        go first so a crash never leaves a retained manifest without chunks. An entry that cannot be
        removed (damage: a directory where a chunk was) is left alone and reported in ``problems``."""
        floor = head.seq if head is not None else 0
        manifests = self.list_manifests()
        retained = set(pinned) | set(self.adopted_chain(head, keep))
        if self.fs.fault_hooks is not None and self.fs.fault_hooks.retire_newer:  # a seeded bug (FaultHooks)
            retained |= set(manifests[:keep]) if head is None else set()
        else:
            retained |= {m for m in manifests if manifest_seq(m) > floor}
        removed = 0
        doomed = [m for m in manifests if m not in retained]
        for name in doomed[:max_deletions]:
            removed += self._remove_quietly(self.path(name), problems)
        if len(doomed) > max_deletions:
            return removed, True
        referenced: set[str] = set()
        for name in retained:
            try:
                referenced |= self.read_manifest(name).digests()
            except DAMAGE:
                continue
        garbage = sorted(self.scan_objects() - referenced - self._staging_references())
        victims = garbage[: max(0, max_deletions - removed)]
        for digest in victims:
            removed += self._remove_quietly(self.object_path(digest), problems)
            self.known_objects.discard(digest)
        if removed:
            self.fs.sync_dir(self.path(OBJECTS))
        return removed, len(garbage) > len(victims)

    def _remove_quietly(self, path: str, problems: list[str] | None) -> int:
        try:
            self.fs.remove(path)
        except FileNotFoundError:
            return 0
        except OSError as exc:
            if problems is not None:
                problems.append(f"{path}: left in place by retirement ({describe(exc)})")
            return 0
        return 1

    def _staging_references(self) -> set[str]:
        """Chunks a pending publication may still need (its base generation's chunks are in manifests)."""
        refs: set[str] = set()
        staging = self.path(STAGING)
        if not self.fs.isdir(staging):
            return refs
        for pub in self.fs.listdir(staging):
            batch = os.path.join(staging, pub, "batch.json")
            if self.fs.exists(batch):
                try:
                    record = json.loads(self.fs.read_regular(batch, DOCUMENT_BYTES))
                    refs.update(str(d) for d in record.get("digests", []))
                except DAMAGE:
                    continue
        return refs


# The layout's names are re-exported: the store's users name them here.
__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "HEAD",
    "LEASE",
    "LOGS",
    "OBJECTS",
    "STAGING",
    "FormatTooNew",
    "GenerationStore",
    "HeadRef",
    "Lease",
    "Manifest",
    "NotAFile",
    "OwnerConflict",
    "OwnerProbe",
    "SessionError",
    "StaleHead",
    "manifest_epoch",
    "manifest_seq",
    "manifest_tag",
    "owner_alive",
    "pid_alive",
    "read_control",
]
