"""Git revisions for ``perfsuite ab``: resolve them, and materialise each one in a detached worktree.

Every git failure is a one-line :class:`PerfsuiteError` (unknown revision, not a repository, no git).
Worktrees live in a temporary directory and are removed (``git worktree remove --force``) when the
comparison ends, whatever happens; a SIGKILLed run leaves a stale entry that ``git worktree prune``
clears (not run here: it would touch every worktree of the repository).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from perfsuite._paths import project_root
from perfsuite.errors import PerfsuiteError

__all__ = ["Revision", "git", "materialise", "project_in", "repo_root", "resolve_revision", "working_tree"]


@dataclass(frozen=True, slots=True)
class Revision:
    """A revision as measured: what the user named, its commit, whether the tree had uncommitted changes,
    and the directory its code is imported from."""

    name: str
    commit: str
    dirty: bool
    tree: Path
    worktree: bool  # True: a temporary detached worktree; False: the working tree itself

    def git_state(self) -> dict[str, object]:
        """``environment.git`` of the documents measured from this revision."""
        return {"commit": self.commit, "dirty": self.dirty}

    def describe(self) -> str:
        """``main (1a2b3c4)`` or ``the working tree (1a2b3c4 + uncommitted changes)``."""
        short = self.commit[:7]
        if not self.worktree:
            return f"the working tree ({short}{' + uncommitted changes' if self.dirty else ''})"
        return f"{self.name} ({short})"


def git(args: Sequence[str], cwd: Path, *, what: str) -> str:
    """Run ``git -C cwd args``; its stdout, stripped, or a one-line error saying ``what`` failed."""
    try:
        proc = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, timeout=120,
                              check=False)
    except FileNotFoundError:
        raise PerfsuiteError("perfsuite ab needs git on PATH") from None
    except subprocess.TimeoutExpired:
        raise PerfsuiteError(f"{what}: git did not answer within 120 s") from None
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        raise PerfsuiteError(f"{what}: {lines[-1] if lines else f'git exited {proc.returncode}'}")
    return proc.stdout.strip()


def repo_root(cwd: Path) -> Path:
    """The top of the git working tree holding ``cwd``."""
    return Path(git(["rev-parse", "--show-toplevel"], cwd, what=f"{cwd}: not in a git repository"))


def project_in(cwd: Path) -> tuple[Path, str]:
    """The git top holding ``cwd`` and the project's directory within it (``""``: the top itself): the
    nearest pyproject.toml declaring ``[tool.perfsuite]`` between them (:func:`perfsuite._paths.project_root`)."""
    top = repo_root(cwd).resolve()
    project = project_root(cwd)
    if project is None or not project.resolve().is_relative_to(top):
        return top, ""
    within = project.resolve().relative_to(top).as_posix()
    return top, "" if within == "." else within


def resolve_revision(root: Path, name: str) -> str:
    """The full commit id of ``name`` (a branch, tag, commit or expression such as ``HEAD~1``)."""
    if not name or name.startswith("-"):
        raise PerfsuiteError(f"unknown revision {name!r}")
    return git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{name}^{{commit}}"], root,
               what=f"unknown revision {name!r}")


def working_tree(root: Path, within: str = "") -> Revision:
    """The working tree as it is, uncommitted changes included (HEAD omitted); ``within``: the project's
    directory in the repository (a project inside a larger one), whose tree the revision is."""
    commit = resolve_revision(root, "HEAD")
    status = git(["status", "--porcelain", "--untracked-files=no"], root, what="git status")
    return Revision("working tree", commit, bool(status), root / within if within else root, worktree=False)


@contextmanager
def materialise(root: Path, names: Sequence[str], within: str = "") -> Iterator[list[Revision]]:
    """Each named revision checked out in a detached worktree under one temporary directory (removed after);
    each revision's tree is its ``within`` directory (as :func:`working_tree`)."""
    commits = [resolve_revision(root, n) for n in names]
    parent = Path(tempfile.mkdtemp(prefix="perfsuite-ab-"))
    made: list[Path] = []
    try:
        revisions = []
        for i, (name, commit) in enumerate(zip(names, commits)):
            path = parent / f"rev{i}-{commit[:12]}"
            git(["worktree", "add", "--detach", "--quiet", str(path), commit], root,
                what=f"git worktree add {name}")
            made.append(path)
            revisions.append(Revision(name, commit, False, path / within if within else path, worktree=True))
        yield revisions
    finally:
        for path in made:
            try:
                git(["worktree", "remove", "--force", str(path)], root, what="git worktree remove")
            except PerfsuiteError:
                pass
        shutil.rmtree(parent, ignore_errors=True)
