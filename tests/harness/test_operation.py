"""The operation protocol: resolution errors, acknowledgement rules, private fixture copies (M4)."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest

from perfsuite.errors import PerfsuiteError
from perfsuite.harness import Operation, OperationContext, SampleFailed, SampleRecord, resolve_operation

BASIC = "perfsuite.workloads.basic"


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("no_such_module_xyz:run", "no module named 'no_such_module_xyz'"),
        (f"{BASIC}:no_such_function", "has no attribute 'no_such_function'"),
        ("perfsuite.workloads.basic", 'expected "module:function"'),
        ("a b:c", 'expected "module:function"'),
        (f"{BASIC}:__doc__", "is not callable"),
    ],
)
def test_resolve_errors_are_one_line(spec: str, fragment: str) -> None:
    with pytest.raises(PerfsuiteError) as info:
        resolve_operation(spec)
    message = str(info.value)
    assert fragment in message
    assert "\n" not in message


def test_resolve_finds_the_factory() -> None:
    from perfsuite.workloads import basic

    assert resolve_operation(f"{BASIC}:busy") is basic.busy


class _Recorder(Operation):
    seen: ClassVar[list[OperationContext]] = []

    def __init__(self, ctx: OperationContext, how: str) -> None:
        self.ctx = ctx
        self.how = how
        self.closed = False
        self.idle_waited = False
        _Recorder.seen.append(ctx)

    async def wait_idle(self) -> None:
        self.idle_waited = True

    def submit(self, ack: Any) -> None:
        if self.how == "sync":
            ack(None)
        elif self.how == "thread":
            threading.Thread(target=lambda: ack(None)).start()
        elif self.how == "twice":
            ack(None)
            ack(None)
        elif self.how == "raise":
            raise ValueError("bad submit\nsecond line")

    def metrics(self) -> dict[str, object]:
        assert self.idle_waited
        if self.ctx.workdir is not None:
            return {
                "files": len(list(self.ctx.workdir.iterdir())),
                "label": "x",
                "phases_ms": {"one": 1.5},
                "drain_ms": 2.0,
            }
        return {}


def _factory(how: str) -> Callable[[OperationContext], _Recorder]:
    return lambda ctx: _Recorder(ctx, how)


def test_synchronous_ack_inside_submit(sample: Callable[..., SampleRecord]) -> None:
    rec = sample("x:y", factory=_factory("sync"))
    assert rec.ack_ms <= rec.submission_ms  # acknowledged before submit returned
    assert rec.kind == "sample"


def test_ack_from_another_thread(sample: Callable[..., SampleRecord]) -> None:
    rec = sample("x:y", factory=_factory("thread"))
    assert rec.ack_ms >= 0


def test_double_ack_fails_the_sample(sample: Callable[..., SampleRecord]) -> None:
    with pytest.raises(SampleFailed, match="acknowledged 2 times"):
        sample("x:y", factory=_factory("twice"))


def test_submit_exception_is_one_line(sample: Callable[..., SampleRecord]) -> None:
    with pytest.raises(SampleFailed) as info:
        sample("x:y", factory=_factory("raise"))
    assert "submit() raised ValueError: bad submit" in str(info.value)
    assert "\n" not in str(info.value)


def test_ack_timeout_fails_clearly(sample: Callable[..., SampleRecord]) -> None:
    with pytest.raises(SampleFailed, match=r"test: m sample 0: no acknowledgement within 0.2 s"):
        sample(f"{BASIC}:never_ack", ack_timeout_s=0.2)


def test_acknowledged_failure_fails_the_sample(sample: Callable[..., SampleRecord]) -> None:
    with pytest.raises(SampleFailed, match=r"acknowledged failure.*simulated I/O error"):
        sample(f"{BASIC}:fail")


def test_async_factory_is_awaited(sample: Callable[..., SampleRecord]) -> None:
    async def factory(ctx: OperationContext) -> _Recorder:
        await asyncio.sleep(0)
        return _Recorder(ctx, "sync")

    assert sample("x:y", factory=factory).ack_ms >= 0


def test_factory_must_return_something_with_submit(sample: Callable[..., SampleRecord]) -> None:
    with pytest.raises(PerfsuiteError, match="no submit"):
        sample("x:y", factory=lambda ctx: object())


def _make_fixture(root: Path) -> Path:
    fixture = root / "fixture-original"
    (fixture / "sub").mkdir(parents=True)
    (fixture / "a.txt").write_text("alpha")
    (fixture / "sub" / "b.txt").write_text("beta")
    os.symlink("a.txt", fixture / "link")
    os.utime(fixture / "a.txt", (1_000_000_000, 1_000_000_000))
    return fixture


def test_each_sample_gets_a_private_copy_never_the_original(
    tmp_path: Path, sample: Callable[..., SampleRecord]
) -> None:
    fixture = _make_fixture(tmp_path)
    _Recorder.seen.clear()
    rec = sample("x:y", fixture=fixture, factory=_factory("sync"))
    rec2 = sample("x:y", fixture=fixture, factory=_factory("sync"), index=1)
    first, second = (ctx.workdir for ctx in _Recorder.seen)
    assert first is not None and second is not None
    assert first.resolve() != fixture.resolve() and second.resolve() != fixture.resolve()
    assert first != second
    assert fixture.resolve() not in first.resolve().parents
    assert rec.metrics["files"] == 3 and rec2.metrics["files"] == 3
    assert rec.labels == {"label": "x"}
    assert rec.phases_ms == {"one": 1.5} and rec.drain_ms == 2.0
    assert not first.exists()  # removed after the sample; the original is untouched
    assert sorted(p.name for p in fixture.iterdir()) == ["a.txt", "link", "sub"]


def test_copy_preserves_symlinks_and_metadata(tmp_path: Path) -> None:
    from perfsuite.harness._sample import prepare_workdir

    fixture = _make_fixture(tmp_path)
    root = tmp_path / "sample-root"
    root.mkdir()
    workdir, scratch = prepare_workdir(fixture, root, sync=False)
    assert workdir is not None and workdir != fixture
    assert os.path.islink(workdir / "link") and os.readlink(workdir / "link") == "a.txt"
    assert (workdir / "a.txt").stat().st_mtime == (fixture / "a.txt").stat().st_mtime
    assert (workdir / "sub" / "b.txt").read_text() == "beta"
    assert scratch.is_dir() and not any(scratch.iterdir())
    (workdir / "a.txt").write_text("changed")
    assert (fixture / "a.txt").read_text() == "alpha"
