"""The team's repository (:mod:`tests.team.teamrepo`) as a fixture."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.team.teamrepo import SOURCE, build, commit_all, env_for, git, perfsuite, plant

__all__ = ["SOURCE", "commit_all", "env_for", "git", "perfsuite", "plant", "team_repo"]


@pytest.fixture
def team_repo(tmp_path: Path) -> Path:
    """The team's repository under the test's temporary directory (outside perfsuite)."""
    return build(tmp_path / "myteam")
