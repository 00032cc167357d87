"""M6: a fixture's content digest (publication id suffixes masked, so two builds compare byte for byte) and the
description of a session directory recorded in its info (``fixtures`` uses both).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from perfsuite.errors import PerfsuiteError
from perfsuite.workloads._fixture_gen import tree_stats

# -- digests and descriptions -------------------------------------------------------------------------------

_PUBLICATION_ID = re.compile(rb"(p\d+-\d+-[A-Za-z0-9_:.]+)-[0-9a-f]{6}(?![0-9a-f])")


def _normalized(rel: str, data: bytes) -> tuple[str, bytes]:
    """Mask what differs between two builds of the same spec: the random suffix of publication ids
    (manifest names, their ``publication`` and ``parent`` fields) and HEAD's digest of the manifest."""
    rel = _PUBLICATION_ID.sub(rb"\1-xxxxxx", rel.encode()).decode()
    base = os.path.basename(rel)
    if base == "HEAD" or (base.startswith("manifest-") and base.endswith(".json")):
        data = _PUBLICATION_ID.sub(rb"\1-xxxxxx", data)
        if base == "HEAD":
            with contextlib.suppress(ValueError, AttributeError):
                record = json.loads(data)
                record["digest"] = "masked"
                data = json.dumps(record, sort_keys=True).encode()
    return rel, data


def content_digest(path: str | os.PathLike[str], *, normalize: bool = True) -> str:
    """``sha256:<hex>`` over relative paths, symlink targets and file contents under ``path``.

    With ``normalize`` the random parts of publication ids and HEAD's manifest digest are masked, so
    two builds of one spec give the same digest; without it the digest is of the exact bytes.
    """
    root = os.fspath(path)
    entries: list[tuple[str, str]] = []
    for directory, dirs, names in os.walk(root):
        dirs.sort()
        for name in names:
            full = os.path.join(directory, name)
            entries.append((os.path.relpath(full, root), full))
    records: list[tuple[str, bytes, bytes]] = []
    for rel, full in entries:
        st = os.lstat(full)
        if stat.S_ISLNK(st.st_mode):
            records.append((rel, b"L", os.fsencode(os.readlink(full))))
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        with open(full, "rb") as fh:
            data = fh.read()
        if normalize:
            rel, data = _normalized(rel, data)
        records.append((rel, b"F", data))
    h = hashlib.sha256()
    for rel, kind, data in sorted(records):
        h.update(kind + os.fsencode(rel) + b"\0" + str(len(data)).encode() + b"\0")
        h.update(data)
    return "sha256:" + h.hexdigest()


def _session_kind(path: Path) -> str | None:
    if (path / "HEAD").is_file() or (path / "objects").is_dir():
        return "portable"
    if (path / "sidecar.json").is_file() or (path / "session.pid").is_file() or (path / "conversations").is_dir():
        return "file-backed"
    if (path / "conversation.jsonl").is_file():
        return "transcript-log"
    return None


def describe_session(path: str | os.PathLike[str], *, what: str = "--session") -> dict[str, Any]:
    """Fixture info for a user's session directory (``--session PATH``, or a recipe's ``session`` key): its
    kind, file count, bytes and exact content digest. Any non-empty directory is accepted (a
    team's own runtime has its own layout; ``kind`` is ``directory`` when it is none of the engine's). A
    missing path, a file or an empty directory is a one-line error naming ``what``."""
    given = os.fspath(path)
    p = Path(given).expanduser()
    if not p.exists():
        raise PerfsuiteError(f"{what}: no such session directory: {given}")
    if not p.is_dir():
        raise PerfsuiteError(f"{what}: {given} is not a directory")
    files, nbytes = tree_stats(p)
    if files == 0:
        raise PerfsuiteError(f"{what}: {given} holds no files: nothing to measure on (give the directory of a "
                             "real session)")
    info: dict[str, Any] = {
        "name": f"session:{p.resolve().name}",
        "source": "session",
        "session": str(p.resolve()),
        "kind": _session_kind(p) or "directory",
        "digest": content_digest(p, normalize=False),
        "digest_kind": "content",
        "files": files,
        "bytes": nbytes,
    }
    if (p / "LEASE").exists():
        info["lease"] = "present"  # an open (or uncleanly closed) portable session: copies carry it
    return info
