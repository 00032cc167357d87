"""The crash campaigns' execution layer (issue 32) on its own: what a worker does with the client's choices."""

from __future__ import annotations

import os
from pathlib import Path

from perfsuite.crash._execution import with_local_scratch


def test_a_worker_without_the_clients_scratch_directory_uses_its_own(tmp_path: Path) -> None:
    """The client picks ``/dev/shm`` (or a directory of its own); a worker on another machine may lack it."""
    assert with_local_scratch(lambda a, s: (a, s), 1, "x", str(tmp_path)) == ("x", str(tmp_path))
    _, used = with_local_scratch(lambda a, s: (a, s), 1, "x", str(tmp_path / "not-here"))
    assert used != str(tmp_path / "not-here") and (used is None or os.path.isdir(used))
