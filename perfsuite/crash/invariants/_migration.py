"""Invariant M (E3, format 1 -> 2 migration): every crash state is one whole session in one format or the other.

A crash at any point of a format-1 session's migration leaves either the format-1 session whole (HEAD
format 1, the manifest it names and every chunk that manifest lists under ``objects/``: the next open
migrates it again) or HEAD format 2 naming a log that exists (the format-1 files are leftovers then, set
aside or removed in idle slices); never HEAD format 1 with its manifest or chunks already moved or removed.
After recovery HEAD is format 2. The check reads the trees alone (no engine); invariants 0 and 1 check
that the recovered session holds every acknowledged byte.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping

from perfsuite.crash.invariants._checks import CheckContext, Invariant
from perfsuite.crash.invariants._sessions import SESSION

FORMAT_1 = "perfsuite-session/1"
FORMAT_2 = "perfsuite-session/2"


def _json(data: bytes | None) -> dict[str, object] | None:
    try:
        record = json.loads(data) if data is not None else None
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def format_problems(files: Mapping[str, bytes | None], when: str, prefix: str = f"{SESSION}/") -> Iterator[str]:
    """What keeps the tree from being one whole session in one format (see the module doc)."""
    head = _json(files.get(f"{prefix}HEAD"))
    if head is None:
        yield f"{when}: HEAD is missing or does not decode"
        return
    if head.get("format") == FORMAT_2:
        if f"{prefix}{head.get('log')}" not in files:
            yield f"{when}: HEAD (format 2) names {head.get('log')}, which does not exist"
        return
    if head.get("format") != FORMAT_1:
        yield f"{when}: HEAD names format {head.get('format')!r}"
        return
    manifest = _json(files.get(f"{prefix}{head.get('manifest')}"))
    if manifest is None:
        yield f"{when}: HEAD (format 1) names {head.get('manifest')}, which is gone or does not decode"
        return
    artifacts = manifest.get("artifacts")
    for name, entry in sorted(artifacts.items() if isinstance(artifacts, dict) else ()):
        chunks = entry.get("chunks", []) if isinstance(entry, dict) else []
        missing = [c[0] for c in chunks if f"{prefix}objects/{c[0]}" not in files]
        if missing:
            yield f"{when}: HEAD (format 1) names a manifest whose {name} lost {len(missing)} chunk(s)"


def check_one_format(ctx: CheckContext) -> Iterator[str]:
    assert ctx.outcome is not None
    yield from format_problems(dict(ctx.outcome.pre.files), "the crash state")
    if ctx.outcome.post is not None and ctx.outcome.error is None:
        post = dict(ctx.outcome.post.files)
        head = _json(post.get(f"{SESSION}/HEAD"))
        if head is None or head.get("format") != FORMAT_2:
            yield "after recovery: HEAD is not format 2 (the open did not migrate the session)"


ONE_FORMAT = Invariant("M", "a migration's crash state is one whole session in one format", check_one_format)
