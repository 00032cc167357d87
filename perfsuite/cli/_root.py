"""The project's recipes: where a command started anywhere in a repository finds them (the project root is
:func:`perfsuite._paths.project_root`, which ``ab`` uses too)."""

from __future__ import annotations

from pathlib import Path

from perfsuite._paths import project_root

__all__ = ["project_recipes", "project_root"]


def project_recipes(cwd: Path, given: str | None, env: str | None) -> str | None:
    """The user's recipe folder for a command started in ``cwd``: ``given`` (``--recipes``), else none when
    ``$PERFSUITE_RECIPES`` (``env``) or ``./recipes`` says it (the harness's own rule), else the project
    root's ``recipes/`` when it has one."""
    if given is not None or env or (Path(cwd) / "recipes").is_dir():
        return given
    root = project_root(cwd)
    if root is not None and (root / "recipes").is_dir():
        return str(root / "recipes")
    return None
