"""The pylint checks `make test` runs ([tool.pylint] in pyproject.toml) catch what ruff and mypy let through."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SHADOWED = '''
import asyncio
from collections.abc import Callable


async def many(ack: Callable[[BaseException | None], None], count: int) -> None:
    for _ in range(count):
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def ack(error: BaseException | None, d: asyncio.Future[None] = done) -> None:
            d.set_result(None)

        await done
    ack(None)
'''


def test_a_callback_that_shadows_the_argument_it_should_call_is_flagged(tmp_path: Path) -> None:
    pytest.importorskip("pylint", reason="the test extra installs pylint")
    (tmp_path / "shadow.py").write_text(textwrap.dedent(SHADOWED))
    (tmp_path / "clean.py").write_text(textwrap.dedent(SHADOWED).replace("def ack(", "def durable("))
    run = [sys.executable, "-m", "pylint", "--rcfile", str(ROOT / "pyproject.toml")]
    flagged = subprocess.run([*run, "shadow.py"], cwd=tmp_path, capture_output=True, text=True)
    assert flagged.returncode != 0 and "function-redefined" in flagged.stdout
    clean = subprocess.run([*run, "clean.py"], cwd=tmp_path, capture_output=True, text=True)
    assert clean.returncode == 0, clean.stdout
