"""A copied session directory is untrusted input (E1, E3; SPEC section 1): the engine opens its own files
(HEAD, LEASE, ``log/*.log``, temporaries, recovery files) without following a symbolic link, regular files
only, a log with a second hard link refused (repair copies it), every size bounded before a byte is read,
and extents bounded before they are assembled. Nothing outside the session is read through a link,
created, changed or deleted, and every refusal is one line.

The memory cases run in a child process under ``RLIMIT_AS`` (and report tracemalloc's peak); the FIFO
cases run in a child whose deadline only turns a hang into a failure (no timing is asserted)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from perfsuite.engine import Message, NotAFile, Session, SessionError, SessionSettings, repair_session

#: address space of a child process: the engine opens a session in well under this, and a read of 8 GiB
#: (or an assembly of 32 GB) cannot happen inside it
ADDRESS_SPACE = 1 << 30
#: turns a hang into a failure; an answer takes about a second
HANG_GUARD_S = 120


def turn(i: int) -> Message:
    return Message("user" if i % 2 == 0 else "assistant", f"turn {i} " + "t" * 100, float(i))


def closed_session(tmp_path: Path, generations: int = 2) -> Path:
    root = tmp_path / "s"
    session = Session.open(root, create=True, settings=SessionSettings(chunk_size=256))
    for g in range(generations):
        session.add_message("root", turn(g))
        session.checkpoint()
    session.close()
    return root


def messages(root: Path) -> list[str]:
    session = Session.open(root)
    try:
        return [m.content for m in session.buffers["root"].messages()]
    finally:
        session.close()


def head_log(root: Path) -> Path:
    return root / json.loads((root / "HEAD").read_bytes())["log"]


def tree(directory: Path) -> dict[str, bytes | str]:
    """Every entry under ``directory`` (links as their target, files as their bytes), never followed."""
    out: dict[str, bytes | str] = {}
    for path in sorted(directory.rglob("*")):
        key = str(path.relative_to(directory))
        if path.is_symlink():
            out[key] = f"-> {os.readlink(path)}"
        elif path.is_file():
            out[key] = path.read_bytes()
        else:
            out[key] = "dir"
    return out


def one_line(text: str) -> None:
    assert text and "\n" not in text.strip(), text


# -- a symbolic link in place of HEAD ---------------------------------------------------------------------
def test_repair_moves_a_symlinked_head_aside_and_never_writes_through_it(tmp_path):
    """Before: ``session repair`` wrote HEAD's JSON into the file the link named (exit 0, "repaired"). Now
    the link is moved under ``recovery/`` as it is, HEAD is rebuilt inside the session, and the outside
    file is untouched."""
    root = closed_session(tmp_path)
    before = messages(root)
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"precious\n")
    (root / "HEAD").unlink()
    (root / "HEAD").symlink_to(outside)
    with pytest.raises(NotAFile) as refused:
        Session.open(root)
    one_line(str(refused.value))
    assert "symbolic link" in str(refused.value) and "session repair" in str(refused.value)
    report = repair_session(root)
    assert outside.read_bytes() == b"precious\n"
    [kept] = [p for p in (root / "recovery").iterdir() if p.name.startswith("HEAD.damaged-")]
    assert kept.is_symlink() and os.readlink(kept) == str(outside)  # kept as it was, not followed
    assert not (root / "HEAD").is_symlink() and report.changed
    assert messages(root) == before


def test_repair_keeps_the_head_it_replaces(tmp_path):
    """Before: a corrupt HEAD was replaced and its bytes were gone. Now they are kept under ``recovery/``."""
    root = closed_session(tmp_path)
    (root / "HEAD").write_bytes(b'{"format": "perfsuite-session/2", "damaged')
    report = repair_session(root)
    [kept] = [p for p in (root / "recovery").iterdir() if p.name.startswith("HEAD.replaced-")]
    assert kept.read_bytes() == b'{"format": "perfsuite-session/2", "damaged'
    assert any(str(kept) in line for line in report.lines)
    assert len(messages(root)) == 2


def test_open_refuses_a_head_linked_to_a_valid_head_outside(tmp_path):
    """Before: the session opened through the link, and its next roll-over rewrote the outside file."""
    root = closed_session(tmp_path)
    outside = tmp_path / "elsewhere" / "HEAD"
    outside.parent.mkdir()
    shutil.move(root / "HEAD", outside)
    (root / "HEAD").symlink_to(outside)
    original = outside.read_bytes()
    with pytest.raises(NotAFile) as refused:
        Session.open(root)
    one_line(str(refused.value))
    assert outside.read_bytes() == original


def test_compaction_replaces_a_head_swapped_for_a_link_never_its_target(tmp_path):
    """HEAD made a link to an outside copy while the session is open: compact() replaces the link itself
    (atomic replace of an own file does not follow it); the outside file keeps its bytes."""
    root = closed_session(tmp_path)
    session = Session.open(root)
    try:
        outside = tmp_path / "copy-of-HEAD"
        shutil.copyfile(root / "HEAD", outside)
        original = outside.read_bytes()
        (root / "HEAD").unlink()
        (root / "HEAD").symlink_to(outside)
        session.add_message("root", turn(9))
        session.checkpoint()
        session.compact()
    finally:
        session.close()
    assert outside.read_bytes() == original
    assert not (root / "HEAD").is_symlink()
    assert len(messages(root)) == 3


# -- a symbolic link in place of log/ ---------------------------------------------------------------------
def test_open_refuses_a_log_directory_linked_outside(tmp_path):
    """Before: open deleted an outside file named like a temporary (and went on writing logs there)."""
    root = closed_session(tmp_path)
    outside = tmp_path / "outside-logs"
    shutil.move(root / "log", outside)
    (root / "log").symlink_to(outside)
    (outside / ".00000009.log.tmp-1-victim").write_bytes(b"not the session's")
    before = tree(outside)
    for attempt in (lambda: Session.open(root), lambda: repair_session(root)):
        with pytest.raises(SessionError) as refused:
            attempt()
        one_line(str(refused.value))
        assert "symbolic link" in str(refused.value)
    assert tree(outside) == before


def test_compaction_and_retirement_never_reach_outside_through_a_swapped_log_directory(tmp_path):
    """``log/`` made a link while the session is open: roll-over, compaction and retirement refuse in one
    line; nothing is created or deleted in the directory it names."""
    root = closed_session(tmp_path, generations=3)
    session = Session.open(root, settings=SessionSettings(chunk_size=256, keep_generations=1))
    outside = tmp_path / "outside-logs"
    try:
        shutil.copytree(root / "log", outside)
        shutil.rmtree(root / "log")
        (root / "log").symlink_to(outside)
        (outside / ".00000009.log.tmp-1-victim").write_bytes(b"not the session's")
        before = tree(outside)
        for step in (session.compact, session.retire):
            with pytest.raises(SessionError) as refused:
                step()
            one_line(str(refused.value))
        assert tree(outside) == before
    finally:
        session.store.close()  # the log's descriptor; the lease is left as a crash would leave it


# -- a second hard link to the log ------------------------------------------------------------------------
def test_a_hard_linked_log_is_refused_then_copied_by_repair(tmp_path):
    """Before: the session wrote its records in place, through to the other name. Now open refuses in one
    line; repair copies the log's generations into a new log and moves the linked one aside."""
    root = closed_session(tmp_path)
    other = tmp_path / "other-name.log"
    os.link(head_log(root), other)
    original = other.read_bytes()
    with pytest.raises(SessionError) as refused:
        Session.open(root)
    one_line(str(refused.value))
    assert "hard links" in str(refused.value) and "session repair" in str(refused.value)
    assert other.read_bytes() == original
    report = repair_session(root)
    assert any("hard links" in line for line in report.lines)
    session = Session.open(root)
    session.add_message("root", turn(7))
    session.checkpoint()
    session.close()
    assert other.read_bytes() == original
    assert len(messages(root)) == 3


# -- devices and FIFOs in place of own files ---------------------------------------------------------------
_CHILD = textwrap.dedent("""
    import json, os, resource, sys, tracemalloc
    resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
    tracemalloc.start()
    from perfsuite.engine import Session, repair_session
    action, root = sys.argv[1], sys.argv[2]
    try:
        if action == "open":
            session = Session.open(root)
            got = [m.content for m in session.buffers["root"].messages()]
            session.close()
            outcome = {{"error": None, "messages": len(got)}}
        else:
            report = repair_session(root)
            outcome = {{"error": None, "lines": list(report.lines)}}
    except BaseException as exc:
        outcome = {{"error": type(exc).__name__, "message": str(exc)}}
    outcome["peak"] = tracemalloc.get_traced_memory()[1]
    print(json.dumps(outcome))
""")


def child(action: str, root: Path) -> dict:
    """``action`` (open or repair) of ``root`` in a child under ``RLIMIT_AS``: its outcome and peak memory."""
    proc = subprocess.run([sys.executable, "-c", _CHILD.format(limit=ADDRESS_SPACE), action, str(root)],
                          capture_output=True, text=True, timeout=HANG_GUARD_S, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _place(root: Path, which: str, make) -> Path:
    target = {"HEAD": root / "HEAD", "LEASE": root / "LEASE"}.get(which) or head_log(root)
    if target.exists() or target.is_symlink():
        target.unlink()
    make(target)
    return target


@pytest.mark.parametrize("which", ["HEAD", "LEASE", "log"])
def test_an_own_file_linked_to_dev_zero_is_refused_in_bounded_memory(tmp_path, which):
    """Before: MemoryError (a traceback from Session.open) after reading /dev/zero up to the memory cap."""
    root = closed_session(tmp_path)
    _place(root, which, lambda p: p.symlink_to("/dev/zero"))
    outcome = child("open", root)
    assert outcome["peak"] < 64 << 20, outcome
    if which == "LEASE":  # a lease no engine wrote names no owner: broken like a torn one, never read through
        assert outcome["error"] is None and outcome["messages"] == 2
        assert not (root / "LEASE").is_symlink()
        return
    assert outcome["error"] in ("NotAFile", "SessionError"), outcome
    one_line(outcome["message"])
    assert "symbolic link" in outcome["message"]


@pytest.mark.parametrize("which", ["HEAD", "LEASE", "log"])
def test_an_own_file_that_is_a_fifo_is_refused_without_blocking(tmp_path, which):
    """Before: open blocked for good on the FIFO (no writer ever comes). Now it is opened non-blocking and
    refused after fstat; repair moves a FIFO HEAD aside and rebuilds HEAD, and refuses in one line when the
    only log is one."""
    root = closed_session(tmp_path)
    _place(root, which, lambda p: os.mkfifo(p))
    opened = child("open", root)
    if which == "LEASE":
        assert opened["error"] is None and opened["messages"] == 2
        return
    assert opened["error"] in ("NotAFile", "SessionError"), opened
    one_line(opened["message"])
    assert "FIFO" in opened["message"]
    repaired = child("repair", root)
    if which == "HEAD":
        assert repaired["error"] is None, repaired
        assert any("fifo" in line.lower() for line in repaired["lines"])
        assert len(messages(root)) == 2
    else:
        assert repaired["error"] == "SessionError", repaired
        one_line(repaired["message"])


def test_a_lease_swapped_for_a_fifo_fences_the_owner_without_blocking(tmp_path):
    """The lease is read before every log write (E3 fencing): a FIFO there is no lease of this owner's, so
    the checkpoint fails (nothing acknowledged) instead of blocking on the FIFO."""
    root = closed_session(tmp_path)
    script = textwrap.dedent("""
        import os, sys
        from perfsuite.engine import Message, Session, SaveFailed, SessionError
        session = Session.open(sys.argv[1])
        os.remove(os.path.join(sys.argv[1], "LEASE"))
        os.mkfifo(os.path.join(sys.argv[1], "LEASE"))
        session.add_message("root", Message("user", "after", 9.0))
        try:
            session.checkpoint()
            print("acknowledged")
        except (SaveFailed, SessionError) as exc:
            print(type(exc).__name__, str(exc).count(chr(10)))
    """)
    proc = subprocess.run([sys.executable, "-c", script, str(root)], capture_output=True, text=True,
                          timeout=HANG_GUARD_S, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    kind, lines = proc.stdout.split()
    assert kind in ("SaveFailed", "SessionError", "OwnerConflictFenced") and lines == "0", proc.stdout


# -- sizes and extents bounded before reading ---------------------------------------------------------------
def test_a_sparse_8_gib_log_whose_header_and_head_agree_is_refused_before_it_is_read(tmp_path):
    """Before: the whole 8 GiB was read (MemoryError under the child's cap). Now a log larger than any the
    engine writes is refused before a byte of it is read."""
    from perfsuite.engine._logformat import LOG_HEADER_SIZE, LogHeader
    from perfsuite.engine._logvalues import HeadV2

    root = closed_session(tmp_path)
    log = head_log(root)
    data = log.read_bytes()
    header = replace(LogHeader.decode(data), capacity=8 << 30)
    with open(log, "r+b") as handle:
        handle.write(header.encode()[:LOG_HEADER_SIZE])
        handle.truncate(8 << 30)
    head = HeadV2.decode((root / "HEAD").read_bytes(), "HEAD")
    (root / "HEAD").write_bytes(replace(head, capacity=8 << 30).encode())
    outcome = child("open", root)
    assert outcome["error"] == "SessionError", outcome
    one_line(outcome["message"])
    assert "more than" in outcome["message"]
    assert outcome["peak"] < 64 << 20, outcome


def test_a_base_of_overlapping_extents_is_refused_before_assembly(tmp_path):
    """A 40 KB BASE naming 2000 overlapping 16 MiB extents of one log: before, 32 GB were assembled before
    the chunk's digest was checked (MemoryError under the child's cap). Now the state's size is bounded
    before any byte is assembled."""
    from perfsuite.engine._logstate import ArtifactState, Extent, Piece

    root = closed_session(tmp_path)
    session = Session.open(root)
    try:
        log = session.store.current.number
        span = 16 << 20
        piece = Piece("0" * 64, 2000 * span, tuple(Extent(log, 0, span) for _ in range(2000)))
        artifacts = {"conversations/root.jsonl": ArtifactState(piece.size, (piece,))}
        forged = replace(session.store.state, artifacts=artifacts)
        session.store.roll_over((), state=forged, epoch=session.epoch, compact=False)
    finally:
        session.store.close()
        session.store.release_lease(session.lease)
    assert (head_log(root).stat().st_size - (16 << 20)) < 1 << 20  # the BASE that names 32 GB is small
    outcome = child("open", root)
    assert outcome["error"] == "SessionError", outcome
    one_line(outcome["message"])
    assert outcome["peak"] < 128 << 20, outcome


# -- the primitives on every I/O layer -------------------------------------------------------------------
def test_every_layer_reads_own_files_bounded_and_opens_the_log_without_following_links(tmp_path):
    """The in-memory layer bounds ``read_regular`` like the real one; through the recording layer, the open
    of the log for writing is an ordinary recorded ``open`` carrying ``O_NOFOLLOW`` (the crash checker
    replays it like any other)."""
    from perfsuite.engine import OsFileSystem
    from perfsuite.engine._confined import TooLarge
    from perfsuite.engine._memfs import MemoryFileSystem
    from perfsuite.engine.testing import RecordingFileSystem

    memory = MemoryFileSystem()
    memory.write_new("/f", b"x" * 10)
    assert memory.read_regular("/f", 10) == b"x" * 10
    with pytest.raises(TooLarge):
        memory.read_regular("/f", 9)
    assert memory.lstat("/f").kind == "file" and memory.lstat("/").kind == "directory" and memory.lstat("/g") is None
    session = Session.open("/s", create=True, fs=memory)
    session.add_message("root", turn(0))
    session.checkpoint()
    session.close()
    assert [m.content for m in Session.open("/s", fs=memory).buffers["root"].messages()] == [turn(0).content]

    root = closed_session(tmp_path)
    recorder = RecordingFileSystem(OsFileSystem())
    Session.open(root, fs=recorder).close()
    [opened] = [op for op in recorder.ops if op.kind == "open" and op.path == str(head_log(root))]
    assert opened.flags & os.O_NOFOLLOW and opened.flags & os.O_RDWR
    big = tmp_path / "big"
    big.write_bytes(b"y" * 100)
    with pytest.raises(TooLarge):
        recorder.read_regular(str(big), 99)
