"""Issue 21: the persisted format carries a version; an old format is read (and migrated by the next
commit), a newer one is refused with one line before anything is written (E3, SPEC section 7)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest

from perfsuite.engine import (
    FORMAT,
    FORMAT_VERSION,
    FormatTooNew,
    Message,
    OsFileSystem,
    RecordingFileSystem,
    Session,
    SessionError,
    SessionSettings,
)

DATA = os.path.join(os.path.dirname(__file__), "data")
SYNC = SessionSettings(asynchronous=False)


def _tree(root: str) -> dict[str, bytes]:
    out = {}
    for directory, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            with open(path, "rb") as handle:
                out[os.path.relpath(path, root)] = handle.read()
    return out


def _newer(tmp_path) -> str:
    """A session whose HEAD and manifests name a format one version newer than this engine's."""
    root = str(tmp_path / "s")
    with Session.open(root, create=True, settings=SYNC) as session:
        session.add_message("root", Message("user", "hello", 1.0))
        session.checkpoint()
    newer = f"perfsuite-session/{FORMAT_VERSION + 1}"
    for directory, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            with open(path, "rb") as handle:
                data = handle.read()
            if FORMAT.encode() in data:
                with open(path, "wb") as handle:
                    handle.write(data.replace(FORMAT.encode(), newer.encode()))
    return root


def test_a_newer_format_is_refused_with_one_line_and_nothing_written(tmp_path):
    root = _newer(tmp_path)
    before = _tree(root)
    recorder = RecordingFileSystem(OsFileSystem())
    with pytest.raises(FormatTooNew) as caught:
        Session.open(root, fs=recorder)
    message = str(caught.value)
    assert "\n" not in message and "newer perfsuite" in message and f"format {FORMAT_VERSION + 1}" in message
    assert not [op for op in recorder.ops if op.kind not in ("close",)], "open wrote something"
    assert _tree(root) == before


def test_repair_refuses_a_newer_format_untouched(tmp_path):
    root = _newer(tmp_path)
    os.remove(os.path.join(root, "HEAD"))  # what an older repair would "fix" by falling back
    with open(os.path.join(root, "HEAD"), "w") as handle:
        json.dump({"format": f"perfsuite-session/{FORMAT_VERSION + 1}", "seq": 1, "manifest": "objects/x",
                   "digest": "0", "epoch": 1}, handle)
    before = _tree(root)
    with pytest.raises(SessionError, match="newer perfsuite"):
        Session.repair(root)
    assert _tree(root) == before


def test_cli_repair_of_a_newer_format_exits_2_with_one_line(tmp_path):
    root = _newer(tmp_path)
    env = {**os.environ, "HOME": str(tmp_path), "MPLCONFIGDIR": str(tmp_path / "mpl")}
    done = subprocess.run([sys.executable, "-m", "perfsuite", "session", "repair", root], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "newer perfsuite" in done.stderr


def _format1_copy(tmp_path) -> tuple[str, dict]:
    root = str(tmp_path / "old")
    shutil.copytree(os.path.join(DATA, "format1-session"), root)
    with open(os.path.join(DATA, "format1-session.expected.json")) as handle:
        return root, json.load(handle)


def _digest(session: Session, conversation: str) -> str:
    return hashlib.sha256(session.conversation(conversation).freeze().bytes_from(0)).hexdigest()


def test_a_format1_session_written_by_the_old_engine_opens_with_everything(tmp_path):
    root, expected = _format1_copy(tmp_path)
    with Session.open(root, settings=SYNC) as session:
        assert session.problems == []
        assert session.head.seq == expected["head_seq"]
        for conversation, digest in expected["transcripts"].items():
            assert _digest(session, conversation) == digest
        assert [r.id for r in session.mailbox("root")] == expected["mail"]
        assert session.sidecar.control["goal"] == expected["control_goal"]
