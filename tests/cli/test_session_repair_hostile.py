"""`perfsuite session repair` of a copied, hostile session (untrusted input): a HEAD that is a symbolic link
is moved under ``recovery/`` as it is, never written through; a ``log/`` that is a link is refused in one
line, exit 2, nothing changed inside or outside the session."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from perfsuite.engine import Message, Session


def _session(tmp_path: Path) -> Path:
    root = tmp_path / "s"
    session = Session.open(root, create=True)
    session.add_message("root", Message("user", "kept", 1.0))
    session.checkpoint()
    session.close()
    return root


def test_repair_of_a_head_linked_outside_keeps_the_link_and_never_writes_through_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: exit 0, "repaired", and the outside file held HEAD's JSON (its own bytes gone)."""
    from perfsuite.cli import main

    root = _session(tmp_path)
    outside = tmp_path / "notes.txt"
    outside.write_bytes(b"someone else's file\n")
    (root / "HEAD").unlink()
    (root / "HEAD").symlink_to(outside)
    status = main(["session", "repair", str(root)])
    out = capsys.readouterr().out
    assert outside.read_bytes() == b"someone else's file\n"
    assert status == 0 and "symbolic link" in out and "recovery" in out
    [kept] = [p for p in (root / "recovery").iterdir() if p.name.startswith("HEAD.")]
    assert kept.is_symlink() and Path(os.readlink(kept)) == outside
    session = Session.open(root)
    assert [m.content for m in session.buffers["root"].messages()] == ["kept"]
    session.close()


def test_repair_of_a_log_directory_linked_outside_is_one_line_and_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: repair went on through the link (and open deleted a temporary-named file there)."""
    from perfsuite.cli import main

    root = _session(tmp_path)
    outside = tmp_path / "elsewhere"
    shutil.move(root / "log", outside)
    (root / "log").symlink_to(outside)
    (outside / ".00000007.log.tmp-1-x").write_bytes(b"not the session's")
    before = sorted(os.listdir(outside)), sorted(os.listdir(root))
    status = main(["session", "repair", str(root)])
    err = capsys.readouterr().err.strip()
    assert status == 2 and "\n" not in err and "symbolic link" in err and "Traceback" not in err
    assert (sorted(os.listdir(outside)), sorted(os.listdir(root))) == before
