"""E3 portable profile: the names of a session directory and the records that describe it.

Constants of the layout (see ``_generations``), the session errors, HEAD, manifests and the lease: plain
values, no I/O beyond :func:`read_control`. Both the store (``_generations``) and the proofs of adoption
(``_adoption``) build on them, so neither has to import the other's module to name them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from perfsuite.engine._confined import CONTROL_BYTES, NotRegular
from perfsuite.engine._damage import describe
from perfsuite.engine._fs import FileSystem
from perfsuite.engine._objects import ArtifactEntry

HEAD = "HEAD"
LEASE = "LEASE"
OBJECTS = "objects"
MANIFEST_PREFIX = "manifest-"
STAGING = "staging"
LOGS = "logs"
FORMAT_NAME = "perfsuite-session"
#: The persisted format this engine writes. It is named in HEAD (and in every log header, and in
#: format 1's manifests); open reads every version in READABLE_VERSIONS and refuses a newer one with one line,
#: before it writes anything. Format 2 is the session log; format 1 (HEAD naming a manifest of
#: content-addressed chunks) is read, and migrated on open.
FORMAT_VERSION = 2
READABLE_VERSIONS = range(1, FORMAT_VERSION + 1)
FORMAT = f"{FORMAT_NAME}/{FORMAT_VERSION}"
FORMAT_1 = f"{FORMAT_NAME}/1"  # what format 1's HEAD and manifests say (repair of a format-1 session writes it)
LOG_DIR = "log"  # format 2: log/<n>.log


class SessionError(Exception):
    """A session cannot be opened or published; the message is one line naming the file."""


class OwnerConflict(SessionError):
    """Another live owner holds the session's lease."""


class StaleHead(SessionError):
    """HEAD no longer names the expected previous head, or the caller's epoch is stale (E3)."""


class NotAFile(SessionError):
    """A control file (HEAD, LEASE, a PID lock, a sidecar) is a directory or a dangling symbolic link:
    nothing the engine writes looks like that, so it is damage, never a state to guess from."""


class FormatTooNew(SessionError):
    """The session was written in a format newer than this engine reads: refused untouched."""


_CURRENT_FORMAT = f"{FORMAT_NAME}/{FORMAT_VERSION}"


def format_version(value: Any, path: str) -> int:
    """The version a ``format`` field names. :class:`FormatTooNew` (one line) for a version newer than
    this engine reads; ValueError for anything that is not a perfsuite session format (damage)."""
    if value == _CURRENT_FORMAT:  # the common case, read twice per publication: no parsing, no allocation
        return FORMAT_VERSION
    if not isinstance(value, str) or not value.startswith(f"{FORMAT_NAME}/"):
        raise ValueError(f"unknown format {value!r}")
    try:
        version = int(value[len(FORMAT_NAME) + 1 :])
    except ValueError:
        raise ValueError(f"unknown format {value!r}") from None
    if version > FORMAT_VERSION:
        raise FormatTooNew(f"{path}: written in session format {version} by a newer perfsuite; this one reads "
                           f"formats {READABLE_VERSIONS[0]} to {FORMAT_VERSION}; upgrade perfsuite "
                           "(nothing was changed)")
    if version not in READABLE_VERSIONS:
        raise ValueError(f"unknown format {value!r}")
    return version


OwnerProbe = Callable[[int], bool]  # is the process with this pid alive on this host?


def read_control(fs: FileSystem, path: str, limit: int = CONTROL_BYTES) -> bytes | None:
    """A small control file's bytes, or None when it is absent; :class:`NotAFile` for a directory, a
    symbolic link (never followed: a copied session is untrusted input), a FIFO or a device; one-line
    :class:`SessionError` when it is larger than ``limit`` (checked before it is read) or unreadable."""
    facts = fs.lstat(path)
    if facts is None:
        return None
    if facts.kind == "directory":
        raise NotAFile(f"{path}: is a directory, not a file")
    try:
        return fs.read_regular(path, limit)
    except NotRegular as exc:
        raise NotAFile(f"{path}: is {exc.strerror}") from None
    except FileNotFoundError:
        return None  # removed since it was seen
    except OSError as exc:
        raise SessionError(f"{path}: unreadable ({describe(exc)})") from None


@dataclass(frozen=True, slots=True)
class HeadRef:
    seq: int
    manifest: str  # relative path of the manifest
    digest: str  # digest of the manifest bytes
    epoch: int
    parent: str | None = None  # the previously adopted manifest: where a fallback starts

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT_1, "seq": self.seq, "manifest": self.manifest, "digest": self.digest,
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
            "format": FORMAT_1,
            "seq": self.seq,
            "epoch": self.epoch,
            "parent": self.parent,
            "created": self.created,
            "artifacts": {name: entry.to_json() for name, entry in sorted(self.artifacts.items())},
            "meta": dict(self.meta),
        }
        return json.dumps(record, separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes, path: str = "manifest") -> Manifest:
        record = json.loads(data)
        if not isinstance(record, dict):
            raise ValueError("not a manifest record")
        format_version(record.get("format"), path)
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


_MANIFEST_RE = re.compile(r"manifest-(\d+)-e(\d+)-(.*)\.json$")
MANIFEST_PATH_RE = re.compile(rf"{OBJECTS}/{MANIFEST_PREFIX}\d+-e\d+-[^/]+\.json")


def manifest_epoch(name: str) -> int:
    match = _MANIFEST_RE.search(name)
    return int(match.group(2)) if match else 0


def manifest_seq(name: str) -> int:
    match = _MANIFEST_RE.search(name)
    return int(match.group(1)) if match else 0


def manifest_tag(name: str) -> str:
    """The publication id a manifest's name carries (its staging directory's name)."""
    match = _MANIFEST_RE.search(name)
    return match.group(3) if match else ""


@dataclass(frozen=True, slots=True)
class Lease:
    epoch: int
    token: str
    pid: int
    host: str
