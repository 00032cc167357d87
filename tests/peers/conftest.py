"""Helpers for the peer tests: drive one operation of the harness protocol by hand (factory, submit, ack,
metrics, close) keeping its files, so a test can reload what the peer wrote with the peer's own loader."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from perfsuite.harness import OperationContext


async def drive(
    factory: Any, params: Mapping[str, Any], *, scratch: Path, workdir: Path | None = None, sample: int = 0
) -> tuple[Any, dict[str, Any]]:
    """Run one sample of ``factory`` on the running loop; returns (operation, metrics). Raises the ack error."""
    scratch.mkdir(parents=True, exist_ok=True)
    ctx = OperationContext(workdir=workdir, params=dict(params), mode="test", sample=sample, scratch=scratch)
    op = factory(ctx)
    if inspect.isawaitable(op):
        op = await op
    try:
        hook = getattr(op, "wait_idle", None)
        if hook is not None:
            await hook()
        done: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
        op.submit(lambda error: done.done() or done.set_result(error))
        error = await asyncio.wait_for(done, 120)
        if error is not None:
            raise error
        metrics = dict(op.metrics())
    finally:
        closing = op.close()
        if inspect.isawaitable(closing):
            await closing
    return op, metrics


def _run(factory: Any, params: Mapping[str, Any], **kwargs: Any) -> tuple[Any, dict[str, Any]]:
    return asyncio.run(drive(factory, params, **kwargs))


@pytest.fixture
def run_operation() -> Any:
    """``run_operation(factory, params, scratch=..., workdir=None, sample=0) -> (operation, metrics)``."""
    return _run
