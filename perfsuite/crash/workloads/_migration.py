"""The format-1 migration crash workload (E3; format 2's migration, ``perfsuite.engine`` open path).

``session-migrate`` starts from a format-1 session (built by the setup, unrecorded, so durable: two adopted
generations of content-addressed chunks under ``objects/``, a manifest each, HEAD naming the second, a
staged publication that never committed under ``staging/``). The run opens it, which migrates it: the
lease, log 1 with a BASE holding the whole state, HEAD format 2, the format-1 manifests set aside, the
staged bytes kept under ``recovery/``; then a turn and a mail on format 2, retirement to the end (the
format-1 leftovers removed in idle slices), another turn, shutdown. Every crash state of every step must
open with all acknowledged data (the setup's generation is acknowledged from op #0), in one format or the
other (invariant M, :mod:`perfsuite.crash.invariants._migration`).
"""

from __future__ import annotations

import hashlib
import json
import os

from perfsuite.crash.invariants._migration import FORMAT_1, ONE_FORMAT
from perfsuite.crash.invariants._sessions import SESSION, session_invariants
from perfsuite.crash.model._trace import WorkloadEnv
from perfsuite.crash.workloads._driver import ROOT, SessionDriver, _ids, settings
from perfsuite.crash.workloads._registry import Workload, register_workload
from perfsuite.crash.workloads._sessions import recover_portable
from perfsuite.engine import HeadRef, Manifest, Message, OsFileSystem, Session
from perfsuite.engine.testing import VirtualClock

AGENT = "a1"
CHUNK = 512  # format 1's chunking here: the transcripts span several chunks
MAIL = {"body": "hello from a1", "created": 1.0, "id": "m1-1", "kind": "message", "sender": AGENT, "to": ROOT}
GOAL = {"text": "migrate the session"}


def _transcript(name: str, count: int) -> bytes:
    return b"".join(Message("user" if i % 2 == 0 else "assistant", f"{name} message {i} " + "klmnopqrst"[i % 10] * 90,
                            float(i)).encode() for i in range(count))


def _sidecar(root: bytes, agent: bytes | None) -> bytes:
    """A format-1 sidecar document (its shape as the format-1 engine wrote it)."""
    lines = root.splitlines(keepends=True)
    offsets = [sum(map(len, lines[:i])) for i in range(0, len(lines), 2)]
    conversations = {ROOT: {"messages": len(lines), "size": len(root)}}
    document: dict[str, object] = {
        "agents": {}, "control": {"goal": None, "plan": None, "provider": None}, "mailboxes": {}, "next_mail": 1,
        "root": {"bytes": len(root), "messages": len(lines), "prompt_index": offsets, "segment": 0,
                 "turn_count": len(offsets), "first_user_preview": "", "latest_user_preview": ""},
        "version": 1,
    }
    if agent is not None:
        document["agents"] = {AGENT: {"activity": "idle", "created": 1.0, "name": AGENT, "parent": ROOT,
                                      "status": "active"}}
        document["control"] = {"goal": GOAL, "plan": None, "provider": None}
        document["mailboxes"] = {ROOT: [MAIL]}
        document["next_mail"] = 2
        conversations[AGENT] = {"messages": len(agent.splitlines()), "size": len(agent)}
    document["checkpoint"] = {"conversations": conversations, "epoch": 1}
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def _generation(fs: OsFileSystem, objects: str, seq: int, parent: str | None, contents: dict[str, bytes]) -> HeadRef:
    """One format-1 generation: its chunks, then its manifest (the format-1 engine's order)."""
    artifacts = {}
    for name, data in sorted(contents.items()):
        chunks = []
        for start in range(0, len(data), CHUNK):
            piece = data[start : start + CHUNK]
            digest = hashlib.sha256(piece).hexdigest()
            path = os.path.join(objects, digest)
            if not fs.exists(path):
                fs.write_new(path, piece, exclusive=True)
            chunks.append([digest, len(piece)])
        artifacts[name] = {"chunks": chunks, "size": len(data)}
    record = {"format": FORMAT_1, "seq": seq, "epoch": 1, "parent": parent, "created": float(seq),
              "artifacts": artifacts, "meta": {"kind": "checkpoint", "publication": f"p1-{seq}-checkpoint"}}
    manifest = Manifest.decode(json.dumps(record).encode())
    data = manifest.encode()
    fs.write_new(os.path.join(os.path.dirname(objects), manifest.filename), data, exclusive=True)
    fs.sync_dir(objects)
    return HeadRef(seq, manifest.filename, hashlib.sha256(data).hexdigest(), 1, parent)


def format1_contents() -> dict[str, bytes]:
    """The artifacts of the setup's HEAD generation (generation 2): what the migration must carry over."""
    root, agent = _transcript(ROOT, 7), _transcript(AGENT, 4)
    return {f"conversations/{ROOT}.jsonl": root, f"conversations/{AGENT}.jsonl": agent,
            "sidecar.json": _sidecar(root, agent)}


def setup_format1(root: str) -> None:
    """The initial tree: a format-1 session of two generations and an unfinished staged publication."""
    fs = OsFileSystem()  # (through the I/O layer: tests/crash/test_audit.py audits every workload)
    session = os.path.join(root, SESSION)
    objects = os.path.join(session, "objects")
    fs.makedirs(objects)
    first = _transcript(ROOT, 3)
    one = _generation(fs, objects, 1, None, {f"conversations/{ROOT}.jsonl": first,
                                             "sidecar.json": _sidecar(first, None)})
    two = _generation(fs, objects, 2, one.manifest, format1_contents())
    staged = os.path.join(session, "staging", "p1-3-checkpoint")
    fs.makedirs(staged)
    fs.write_new(os.path.join(staged, "root.jsonl"), b'{"role":"user","content":"never committed"}\n')
    fs.atomic_replace(os.path.join(session, "HEAD"), json.dumps(two.to_json(), sort_keys=True).encode())


def run_migrate(env: WorkloadEnv) -> None:
    """The setup's generation acknowledged from op #0; the migrating open, format 2's first publications,
    retirement of the leftovers, shutdown (module doc)."""
    contents = format1_contents()
    at = env.mark()
    for conversation in (ROOT, AGENT):
        data = contents[f"conversations/{conversation}.jsonl"]
        env.ack(f"format-1 {conversation} transcript", scope=SESSION, kind="transcript", at=at, seq=2,
                depends=[f"{SESSION}/HEAD"], conversation=conversation, data=data)
    env.ack("format-1 mail", scope=SESSION, kind="mail", at=at, seq=2, depends=[f"{SESSION}/HEAD"], id=MAIL["id"],
            to=MAIL["to"], body=MAIL["body"])
    env.ack("format-1 goal", scope=SESSION, kind="value", at=at, seq=2, depends=[f"{SESSION}/HEAD"],
            key="control:goal", value=GOAL)
    session = Session.open(env.path(SESSION), fs=env.fs, clock=VirtualClock(), settings=settings(),
                           faults=env.faults, id_source=_ids("w"))
    if not session.migrated:
        env.note("the open did not migrate the format-1 session", kind="unexpected")
    d = SessionDriver(env, session)
    for conversation in (ROOT, AGENT):
        if session.buffers[conversation].data() != contents[f"conversations/{conversation}.jsonl"]:
            env.note(f"the migrated {conversation} transcript differs from format 1's", kind="unexpected")
    d.turn("turn after the migration", ROOT, "the session is format 2 now", "and goes on")
    d.mail("mail after the migration", AGENT, "a note for the agent")
    d.retire()  # the format-1 leftovers (objects/, staging/) removed in idle slices
    if env.fs.exists(env.path(SESSION, "objects")) or env.fs.exists(env.path(SESSION, "staging")):
        env.note("retirement left the format-1 leftovers", kind="unexpected")
    d.turn("turn after the cleanup", AGENT, "the agent reads its note")
    d.shutdown("shutdown")


register_workload(Workload(
    "session-migrate", "a format-1 session (two generations, a staged publication) opened and migrated to "
    "format 2, then published to, its leftovers retired, shut down",
    run_migrate, recover_portable, (*session_invariants("portable"), ONE_FORMAT), setup=setup_format1,
    max_states=1500,
))
