"""Proving adoption without HEAD (E3: never less than was adopted): what open recovers when HEAD is lost.

HEAD is the only commit point, so when it is missing, unreadable, or names a generation that does not
verify, the adoption of a generation must be proven from what the session already records. No new
field is needed; two facts on disk prove it:

1. *Named as parent.* A publication is frozen against the HEAD of its moment and its manifest records
   that HEAD's manifest as its parent, so a manifest that another manifest names as its parent was
   adopted.
2. *Staging gone.* A publication's staging directory (``staging/<publication>``, the tag in its
   manifest's name) is removed only after its adoption (``adopt_head``), or after its manifest when an
   unadopted attempt is retried, abandoned or dropped by recovery. So an intact manifest whose staging
   directory is gone was adopted, and one whose staging directory is still there was not (a crash
   between commit and adoption: it is recovered as a pending publication instead, never adopted
   silently). This proof is the weaker one: a crash before a commit's directory fsync can lose both the
   staging directory's entry and some chunks' entries, so a *damaged* manifest proven this way only is
   skipped (and reported), never a reason to refuse; an intact one is safe to adopt either way.

A staging directory still there is weaker evidence than its absence: the cleanup after an adoption is
not synced, so a crash can bring an adopted publication's staging back. So when HEAD is lost and an
intact manifest newer than the newest proven one still has its staging, open refuses (it may have been
adopted) instead of loading the older generation; and a staging directory whose batch
record is gone (unsynced recovery metadata) proves nothing against adoption.

Epochs and the lease add nothing a parent link does not say (and the lease is released at close).
Open recovers the newest intact proven generation, and rewrites HEAD, only when nothing newer can have
been adopted: a newer proven generation that is damaged, a HEAD that names a newer generation than the
one that survives, or two candidates for the tip, make open refuse with one line naming what it found
and ``perfsuite session repair PATH``, since falling back would silently drop acknowledged state.

A crash, as opposed to damage, leaves HEAD absent only before the first adoption. There the orphan
manifest is unreadable (torn: never proven) or still has its staging directory, unless the crash also
lost that directory's unsynced entry: then the committed generation is adopted at recovery, which loses
nothing (its acknowledgement never ran, its bytes are intact).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from perfsuite.engine._confined import DOCUMENT_BYTES
from perfsuite.engine._damage import DAMAGE, describe
from perfsuite.engine._fs import FileSystem
from perfsuite.engine._layout import HEAD, HeadRef, Manifest, SessionError, manifest_epoch, manifest_seq, manifest_tag
from perfsuite.engine._objects import digest_bytes


class GenerationStore(Protocol):
    """What the proofs read of a store (``_generations.GenerationStore``, which calls them from open)."""

    root: str
    fs: FileSystem

    def path(self, *parts: str) -> str: ...
    def list_manifests(self) -> list[str]: ...
    def read_manifest(self, name: str, digest: str | None = None) -> Manifest: ...
    def load_verified(self, name: str, digest: str | None) -> tuple[Manifest, dict[str, bytes]]: ...
    def staged_publications(self) -> set[str]: ...


@dataclass(frozen=True, slots=True)
class Candidate:
    """One manifest of the session: where it sits, and why it was adopted (``proof``; None: unproven)."""

    name: str
    seq: int
    epoch: int
    proof: str | None
    unreadable: str | None = None  # why the manifest itself does not decode
    strong: bool = False  # proven by a child naming it (adoption certain even if it is damaged now)


def survey(store: GenerationStore) -> list[Candidate]:
    """Every manifest, newest first (sequence, then epoch), with its proof of adoption if it has one."""
    names = store.list_manifests()
    manifests: dict[str, Manifest] = {}
    unreadable: dict[str, str] = {}
    for name in names:
        try:
            manifests[name] = store.read_manifest(name)
        except DAMAGE as exc:
            unreadable[name] = describe(exc)
    children: dict[str, str] = {}
    for name, manifest in manifests.items():
        if manifest.parent and manifest.parent not in children:
            children[manifest.parent] = name
    staged = store.staged_publications()
    out: list[Candidate] = []
    for name in names:
        found = manifests.get(name)
        publication = str(found.meta.get("publication", manifest_tag(name))) if found else manifest_tag(name)
        strong = name in children
        if strong:
            proof: str | None = f"{children[name]} names it as its parent"
        elif found is not None and publication not in staged:
            proof = f"its publication {publication} left no staging directory"
        else:
            proof = None
        out.append(Candidate(name, manifest_seq(name), manifest_epoch(name), proof, unreadable.get(name), strong))
    out.sort(key=lambda c: (c.seq, c.epoch, c.name), reverse=True)
    return out


@dataclass(frozen=True, slots=True)
class Choice:
    """The newest intact proven generation and what stands in the way of adopting it silently."""

    head: HeadRef | None
    manifest: Manifest | None
    contents: dict[str, bytes]
    proof: str | None
    damaged: tuple[str, ...]  # generations newer than ``head``, certainly adopted, that do not verify
    rivals: tuple[str, ...]  # other intact proven generations with the same sequence and epoch
    skipped: tuple[str, ...] = ()  # newer ones proven only by their staging being gone, that do not verify


def choose(store: GenerationStore, *, only: str | None = None) -> Choice:
    """The newest intact proven generation (or the manifest named ``only``, proven or not, if intact)."""
    damaged: list[str] = []
    skipped: list[str] = []
    candidates = survey(store)
    for candidate in candidates:
        if only is not None and candidate.name != only:
            continue
        if only is None and candidate.proof is None:
            continue
        try:
            manifest, contents = store.load_verified(candidate.name, None)
        except SessionError as exc:
            (damaged if candidate.strong or only is not None else skipped).append(str(exc))
            continue
        digest = digest_bytes(store.fs.read_regular(store.path(candidate.name), DOCUMENT_BYTES))
        head = HeadRef(manifest.seq, candidate.name, digest, manifest.epoch, manifest.parent)
        rivals = tuple(c.name for c in candidates if c.proof and c.name != candidate.name
                       and (c.seq, c.epoch) == (candidate.seq, candidate.epoch) and _intact(store, c.name))
        return Choice(head, manifest, contents, candidate.proof, tuple(damaged), rivals, tuple(skipped))
    return Choice(None, None, {}, None, tuple(damaged), (), tuple(skipped))


def _newer_unproven(store: GenerationStore, head: HeadRef) -> str | None:
    """An intact manifest newer than ``head`` whose adoption is unproven (its staging is still there)."""
    for candidate in survey(store):
        if (candidate.seq, candidate.epoch) <= (head.seq, head.epoch):
            break
        if candidate.proof is None and candidate.unreadable is None and _intact(store, candidate.name):
            return candidate.name
    return None


def _intact(store: GenerationStore, name: str) -> bool:
    try:
        store.load_verified(name, None)
    except SessionError:
        return False
    return True


def recover_lost_head(store: GenerationStore, hint: HeadRef | None, problems: list[str]
                      ) -> tuple[HeadRef | None, Manifest | None, dict[str, bytes], list[str]]:
    """What open loads when HEAD is missing (``problems`` empty), corrupt, or names a generation that does
    not verify (``hint``: HEAD as read). Refuses (one-line :class:`SessionError`) rather than fall back
    past a generation that may have been adopted; see the module docstring."""
    choice = choose(store)
    head_path = store.path(HEAD)
    what = problems[0] if problems else f"{head_path}: missing"
    repair = f"`perfsuite session repair {store.root}`"
    if choice.head is None:
        if choice.damaged:
            raise SessionError(f"{what}; and no adopted generation is intact ({choice.damaged[0]}); restore the "
                               "session from a backup")
        if hint is not None or problems:
            raise SessionError(f"{what}; and no generation can be proven adopted; {repair} lists what is left")
        # Never committed (a crash before the first adoption leaves orphans only).
        return None, None, {}, [f"{s}; not adopted (its staging is gone, but so may be its chunks after a crash)"
                                for s in choice.skipped]
    target = f"generation {choice.head.seq} ({choice.head.manifest})"
    if choice.damaged:
        raise SessionError(f"{what}; a newer adopted generation is damaged ({choice.damaged[0]}); {repair} "
                           f"adopts {target}, losing what was committed after it")
    if hint is not None and (hint.seq, hint.epoch) > (choice.head.seq, choice.head.epoch):
        raise SessionError(f"{what}; HEAD names generation {hint.seq}, the newest intact adopted one is "
                           f"{choice.head.seq}; {repair} adopts {target}, losing what was committed after it")
    if choice.rivals:
        raise SessionError(f"{what}; two intact generations could be the newest ({choice.head.manifest}, "
                           f"{choice.rivals[0]}); choose one with {repair} --generation NAME")
    newer = _newer_unproven(store, choice.head)
    if newer is not None:
        # Its staging directory is still there, but the cleanup after an adoption is not synced, so a crash
        # can bring it back: with HEAD lost, nothing says it was not adopted.
        raise SessionError(f"{what}; {newer} is intact and newer than {target}, the newest proven adopted, and may "
                           f"have been adopted too; {repair} --generation NAME adopts the one you choose")
    problems = [*problems, f"{head_path}: {'lost' if problems else 'missing'}; recovered {target}, proven adopted: "
                f"{choice.proof}", *(f"{s}; skipped: adoption unproven" for s in choice.skipped)]
    assert choice.manifest is not None
    return choice.head, choice.manifest, choice.contents, problems
