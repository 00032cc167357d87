"""A code variant with its own environment (U: `perfsuite ab` builds one per revision when their
dependencies differ): its workers run that interpreter, and the running environment's own directories stay off
their path (put first, they would shadow what the variant's environment installed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from perfsuite.harness import CodeVariant
from perfsuite.harness._syspath import worker_sys_path
from perfsuite.harness._worker import worker_command


def test_the_running_environments_directories_stay_off_a_variant_environments_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout = str(tmp_path)
    inside = str(Path(sys.prefix) / "lib" / "somewhere")
    monkeypatch.setattr(sys, "path", [checkout, "", inside, *sys.path])
    assert worker_sys_path(None)[:2] == [checkout, inside]  # the running interpreter's workers: all of it
    own = worker_sys_path({"python": "/elsewhere/bin/python"})
    assert own[0] == checkout and inside not in own
    assert not any(p.startswith((sys.prefix, sys.base_prefix)) for p in own)


def test_a_variant_with_an_environment_runs_its_interpreter() -> None:
    variant = CodeVariant("base", Path("/tree"), ("pkg",), python="/envs/x/bin/python")
    assert variant.request() == {"root": "/tree", "packages": ["pkg"], "python": "/envs/x/bin/python"}
    assert worker_command(variant.request())[0] == "/envs/x/bin/python"
    assert worker_command(None)[0] == sys.executable
    assert "python" not in CodeVariant("head", Path("/t"), ("pkg",)).request()
