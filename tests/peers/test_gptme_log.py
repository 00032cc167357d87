"""The gptme adapter really drives gptme's LogManager (a peer's own code, measured as is): the files it leaves reload
with
``LogManager.load``, the barrier really fsyncs, and the metrics line up with our transcript operation."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest

from perfsuite.errors import PerfsuiteError
from perfsuite.workloads import engine
from perfsuite.workloads.peers import gptme_log

pytestmark = pytest.mark.skipif(
    gptme_log.transcript_barrier.unavailable() is not None,  # type: ignore[attr-defined]
    reason=f"peer not installed: {gptme_log.transcript_barrier.unavailable()}",  # type: ignore[attr-defined]
)

MESSAGES = 200


def _logdir(scratch: Path, name: str = "perfsuite-transcript") -> Path:
    return scratch / "gptme" / "logs" / name


def _load(logdir: Path) -> list[Any]:
    from gptme.logmanager import LogManager

    with LogManager.load(logdir, lock=False) as manager:
        return list(manager.log.messages)


def _sizes(sample: int, n: int) -> list[int]:
    rng = random.Random(sample)  # the seed both transcript operations use
    return [rng.randint(1024, 4096) for _ in range(n)]


@pytest.mark.parametrize("kind", ["append", "append+barrier"])
def test_the_conversation_reloads_with_gptme_own_loader(tmp_path: Path, run_operation: Any, kind: str) -> None:
    _, metrics = run_operation(gptme_log.transcript_barrier, {"operation_kind": kind, "messages": MESSAGES},
                               scratch=tmp_path, sample=3)
    messages = _load(_logdir(tmp_path))
    assert [len(m.content) for m in messages] == _sizes(3, MESSAGES)
    assert [m.role for m in messages[:2]] == ["assistant", "user"]
    assert (_logdir(tmp_path) / "events.jsonl").is_file()  # gptme's recovery event log is written too
    assert metrics["messages_written"] == MESSAGES
    assert metrics["transcript_bytes"] == os.path.getsize(_logdir(tmp_path) / "conversation.jsonl")
    assert metrics["peer"] == "gptme"
    assert metrics["peer_version"] == "0.35.1"
    assert "write(sync=True)" in metrics["durability"]


def test_metric_names_match_our_transcript_operation(tmp_path: Path, run_operation: Any) -> None:
    params = {"operation_kind": "append", "messages": MESSAGES}
    _, ours = run_operation(engine.transcript_barrier, params, scratch=tmp_path / "ours")
    _, theirs = run_operation(gptme_log.transcript_barrier, params, scratch=tmp_path / "gptme")
    shared = {"p50_us_at_100", "p99_us_at_100", f"p50_us_at_{MESSAGES}", f"p99_us_at_{MESSAGES}",
              "p99_ratio_last_to_first", "barrier_p50_us"}
    assert shared <= set(ours)
    assert set(ours) <= set(theirs)


def test_the_barrier_fsyncs_every_append(tmp_path: Path, run_operation: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real_fsync = os.fsync

    def counting(fd: int) -> None:
        calls.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting)
    run_operation(gptme_log.transcript_barrier, {"operation_kind": "append+barrier", "messages": 20},
                  scratch=tmp_path)
    # write(sync=True) fsyncs conversation.jsonl and events.jsonl, then the log directory and its parent
    assert len(calls) >= 4 * 20


def test_edit_rewrites_through_gptme(tmp_path: Path, run_operation: Any) -> None:
    _, metrics = run_operation(gptme_log.transcript_barrier, {"operation_kind": "rewrite", "messages": MESSAGES},
                               scratch=tmp_path)
    messages = _load(_logdir(tmp_path))
    assert len(messages) == MESSAGES
    assert messages[99 // 2].content == "edited"  # the same edit as ours: message i // 2 at i + 1 = 100
    assert metrics["rewrite_ms_at_100"] > 0
    assert metrics["rewrite_call"] == "LogManager.edit"
    assert list((_logdir(tmp_path) / "branches").glob("main-edit-*.jsonl"))  # gptme's backup branch


@pytest.mark.parametrize("rewrite", ["undo", "fork"])
def test_undo_and_fork_are_gptme_calls(tmp_path: Path, run_operation: Any, rewrite: str) -> None:
    _, metrics = run_operation(gptme_log.transcript_barrier,
                               {"operation_kind": "rewrite", "messages": 120, "rewrite": rewrite}, scratch=tmp_path)
    assert metrics[f"{rewrite}_ms_at_100"] > 0
    if rewrite == "fork":  # the manager continues in the copy, which gptme's loader reads back
        assert len(_load(_logdir(tmp_path, "perfsuite-fork-100"))) == 120
        assert len(_load(_logdir(tmp_path))) == 100
    else:
        assert len(_load(_logdir(tmp_path))) == 120


def test_the_environment_is_headless_and_restored(tmp_path: Path, run_operation: Any) -> None:
    before = {k: os.environ.get(k) for k in ("GPTME_LOGS_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME")}
    run_operation(gptme_log.transcript_barrier, {"operation_kind": "append", "messages": 5}, scratch=tmp_path)
    assert {k: os.environ.get(k) for k in before} == before
    assert (tmp_path / "gptme" / "xdg" / "state").is_dir()
    home = Path(os.environ["HOME"])
    assert not (home / ".local" / "share" / "gptme" / "logs" / "perfsuite-transcript").exists()


def test_bad_rewrite_is_one_line(tmp_path: Path, run_operation: Any) -> None:
    with pytest.raises(PerfsuiteError, match="rewrite: expected one of \"edit\", \"undo\", \"fork\", got \"squash\""):
        run_operation(gptme_log.transcript_barrier, {"operation_kind": "rewrite", "rewrite": "squash"},
                      scratch=tmp_path)
