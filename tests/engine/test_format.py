"""The persisted format carries a version; an old format is read (and migrated by the next
commit), a newer one is refused with one line before anything is written (E3, SPEC section 7)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perfsuite.engine import (
    FORMAT,
    FORMAT_VERSION,
    FormatTooNew,
    Message,
    OsFileSystem,
    Session,
    SessionError,
    SessionSettings,
)
from perfsuite.engine.testing import RecordingFileSystem

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


# -- format 2, migration from format 1 ---------------------------------------------------------------------
def test_a_format1_session_migrates_to_format2_on_open(tmp_path):
    """The verified format-1 generation becomes log 1's BASE, HEAD v2 names it, the format-1 manifests are
    moved aside (a format-1 engine facing a lost HEAD finds none to "recover"), and the chunks and staging
    go in idle slices; the session then publishes on format 2's steady path."""
    root, expected = _format1_copy(tmp_path)
    session = Session.open(root, settings=SYNC)
    head = json.loads(Path(root, "HEAD").read_bytes())
    assert head["format"] == FORMAT == "perfsuite-session/2" and os.path.isfile(os.path.join(root, head["log"]))
    assert session.migrated and "migrated from format 1" in session.migrated
    assert not [n for n in os.listdir(os.path.join(root, "objects")) if n.startswith("manifest-")]
    assert session.head.seq == expected["head_seq"]  # the generation number carries on
    while session.retire()[1]:
        pass
    assert not os.path.exists(os.path.join(root, "objects")) and not os.path.exists(os.path.join(root, "staging"))
    session.add_message("root", Message("user", "after the migration", 2.0))
    session.checkpoint()
    session.close()
    with Session.open(root, settings=SYNC) as again:
        assert again.head.seq == expected["head_seq"] + 1 and not again.problems
        assert again.buffers["root"].messages()[-1].content == "after the migration"
        for conversation, digest in expected["transcripts"].items():
            if conversation != "root":
                assert _digest(again, conversation) == digest


def test_a_crash_before_head_v2_leaves_the_format1_session_to_migrate_again(tmp_path):
    from perfsuite.engine.testing import Fault, FaultyFileSystem, SimulatedCrash

    root, expected = _format1_copy(tmp_path)
    crashing = FaultyFileSystem(OsFileSystem(), [Fault("replace", path="HEAD", crash="before")])
    with pytest.raises(SimulatedCrash):
        Session.open(root, fs=crashing, settings=SYNC)
    head = json.loads(Path(root, "HEAD").read_bytes())
    assert head["format"] == "perfsuite-session/1"  # untouched: still a format-1 session
    os.remove(os.path.join(root, "LEASE"))  # the crashed process is gone (its lease names a dead owner)
    with Session.open(root, settings=SYNC) as session:
        assert session.head.seq == expected["head_seq"]
        assert _digest(session, "root") == expected["transcripts"]["root"]


def _format1_engine(tmp_path) -> str | None:
    """The committed format-1 engine (``git archive`` of main's last format-1 commit), or None without git."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        commit = subprocess.run(["git", "-C", repo, "rev-parse", "--verify", "-q", "bc3d404^{commit}"],
                                capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if commit.returncode != 0:
        return None
    target = tmp_path / "format1-engine"
    target.mkdir()
    archive = subprocess.run(["git", "-C", repo, "archive", commit.stdout.strip(), "perfsuite"], capture_output=True,
                             timeout=120)
    if archive.returncode != 0:
        return None
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True, timeout=120)
    return str(target)


def test_a_format1_engine_refuses_a_format2_session_with_format_too_new(tmp_path):
    """The committed format-1 code path reads HEAD["format"] and refuses, writing nothing."""
    engine = _format1_engine(tmp_path)
    if engine is None:
        pytest.skip("needs the repository's git history (main's last format-1 commit)")
    root = str(tmp_path / "s")
    with Session.open(root, create=True, settings=SYNC) as session:
        session.add_message("root", Message("user", "format 2", 1.0))
        session.checkpoint()
    before = _tree(root)
    code = ("import sys\nfrom perfsuite.engine import FormatTooNew, Session\n"
            "try:\n    Session.open(sys.argv[1])\nexcept FormatTooNew as exc:\n    print('REFUSED', exc)\n")
    env = {**os.environ, "PYTHONPATH": engine, "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code, root], capture_output=True, text=True, env=env, timeout=120,
                          cwd=str(tmp_path))  # not the checkout: ``-c`` puts the working directory first
    assert done.stdout.startswith("REFUSED") and "format 2" in done.stdout, done.stderr
    assert _tree(root) == before
