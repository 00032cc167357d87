"""Helpers for the harness tests: measure one sample inline on a fresh heartbeat and GC recorder."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from perfsuite.harness import GcRecorder, Heartbeat, SampleRecord, SampleSpec, measure_sample

BASIC = "perfsuite.workloads.basic"


def make_spec(
    operation: str,
    params: Mapping[str, Any] | None = None,
    *,
    work_root: Path,
    fixture: Path | None = None,
    **overrides: Any,
) -> SampleSpec:
    """A sample spec with test-friendly defaults (inline, short settle)."""
    values: dict[str, Any] = {
        "recipe": "test",
        "mode": "m",
        "index": 0,
        "kind": "sample",
        "operation": operation,
        "params": dict(params or {}),
        "fixture": str(fixture) if fixture else None,
        "work_root": str(work_root),
        "settle_ms": 20.0,
        "ack_timeout_s": 120.0,  # bounds a failure only: a loaded machine may take seconds to acknowledge
        "sync_after_copy": False,
    }
    values.update(overrides)
    return SampleSpec(**values)


def measure(spec: SampleSpec, factory: Callable[..., Any] | None = None) -> SampleRecord:
    """Run one sample in a fresh event loop with the heartbeat already ticking."""

    async def main() -> SampleRecord:
        with GcRecorder() as recorder:
            async with Heartbeat(spec.heartbeat_ms) as heartbeat:
                await asyncio.sleep(0.03)
                return await measure_sample(spec, heartbeat, recorder, factory)

    return asyncio.run(main())


@pytest.fixture
def sample(tmp_path: Path) -> Callable[..., SampleRecord]:
    """``sample("perfsuite.workloads.basic:busy", {"ms": 60})`` -> the measured SampleRecord."""

    def run(operation: str, params: Mapping[str, Any] | None = None, **kw: Any) -> SampleRecord:
        factory = kw.pop("factory", None)
        return measure(make_spec(operation, params, work_root=tmp_path, **kw), factory)

    return run
