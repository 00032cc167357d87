"""M8, U: which code was measured. The **measured repository** (the git root holding the working directory,
or what the command line or the CI says) is recorded apart from perfsuite's own version and checkout:
a team that installs perfsuite from a wheel measures *its* code, and its commit is what
``evidence``, ``history``, the store and the dashboard must name.

Where the commit comes from, first match wins (``source`` in the record says which):

1. ``--commit`` / ``--branch`` (``run``; ``--perfsuite-commit`` / ``--perfsuite-branch`` in pytest), else
   ``$PERFSUITE_COMMIT`` / ``$PERFSUITE_BRANCH`` (``option`` / ``environment``);
2. the git repository holding the working directory: its root, HEAD, whether tracked files changed, its
   branch (``git``);
3. the CI's own variables, for a checkout without ``.git`` (a source archive, a container):
   :data:`CI_VARIABLES` (``ci:<provider>``).

A CI variable is also recorded beside a git answer (``ci``), and a detached HEAD (how CI systems check out)
takes its branch name from the CI. Nothing known at all is ``None``: "unknown", never perfsuite's own commit.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from perfsuite._paths import portable_path
from perfsuite.errors import PerfsuiteError

__all__ = [
    "BRANCH_ENV",
    "CI_VARIABLES",
    "COMMIT_ENV",
    "check_commit",
    "compat_git",
    "measured_repository",
    "perfsuite_checkout",
]

#: explicit overrides for any wrapper (a CI step, a Makefile) that knows better than the working directory
COMMIT_ENV = "PERFSUITE_COMMIT"
BRANCH_ENV = "PERFSUITE_BRANCH"

#: (provider, the variable holding the commit built, the variables naming its branch, first non-empty wins)
CI_VARIABLES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("github", "GITHUB_SHA", ("GITHUB_HEAD_REF", "GITHUB_REF_NAME")),  # HEAD_REF: a pull request's branch
    ("gitlab", "CI_COMMIT_SHA", ("CI_MERGE_REQUEST_SOURCE_BRANCH_NAME", "CI_COMMIT_BRANCH", "CI_COMMIT_REF_NAME")),
    ("buildkite", "BUILDKITE_COMMIT", ("BUILDKITE_BRANCH",)),
    ("circleci", "CIRCLE_SHA1", ("CIRCLE_BRANCH",)),
    ("azure", "BUILD_SOURCEVERSION", ("SYSTEM_PULLREQUEST_SOURCEBRANCH", "BUILD_SOURCEBRANCHNAME")),
    ("bitbucket", "BITBUCKET_COMMIT", ("BITBUCKET_BRANCH",)),
    ("travis", "TRAVIS_COMMIT", ("TRAVIS_PULL_REQUEST_BRANCH", "TRAVIS_BRANCH")),
    ("drone", "DRONE_COMMIT_SHA", ("DRONE_SOURCE_BRANCH", "DRONE_BRANCH")),
    ("jenkins", "GIT_COMMIT", ("CHANGE_BRANCH", "BRANCH_NAME", "GIT_BRANCH")),  # the git plugin's variables
)

_COMMIT = re.compile(r"^[0-9a-f]{4,64}$")


def check_commit(text: str, what: str = "--commit") -> str:
    """A commit id as given on a command line: 4 to 64 hex digits (SHA-1 or SHA-256, full or abbreviated),
    lowercased; anything else is a one-line :class:`PerfsuiteError`."""
    value = str(text).strip().lower()
    if not _COMMIT.match(value):
        raise PerfsuiteError(f"{what}: expected a commit id (4 to 64 hex digits), got {text!r}")
    return value


def _git(args: Sequence[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, timeout=10,
                             check=False, env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"})
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _branch_name(text: str | None) -> str | None:
    if not text:
        return None
    text = text.strip()
    for prefix in ("refs/heads/",):
        if text.startswith(prefix):
            text = text[len(prefix):]
    return text or None


def _ci(environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The first CI system whose commit variable is set: provider, variable, commit and branch."""
    for provider, variable, branches in CI_VARIABLES:
        commit = (environ.get(variable) or "").strip().lower()
        if commit and _COMMIT.match(commit):
            branch = next((_branch_name(environ.get(b)) for b in branches if (environ.get(b) or "").strip()), None)
            return {"provider": provider, "variable": variable, "commit": commit, "branch": branch}
    return None


def _repository(directory: Path) -> dict[str, Any] | None:
    """The git repository holding ``directory``: root, HEAD, dirty (tracked files), branch (None if detached)."""
    root = _git(["rev-parse", "--show-toplevel"], directory)
    if not root:
        return None
    commit = _git(["rev-parse", "--verify", "--quiet", "HEAD"], Path(root))
    if not commit:
        return None  # a repository without commits measures nothing we could name
    status = _git(["status", "--porcelain", "--untracked-files=no"], Path(root))
    branch = _git(["symbolic-ref", "--quiet", "--short", "HEAD"], Path(root))
    return {"root": Path(root), "commit": commit.lower(), "dirty": None if status is None else bool(status),
            "branch": branch or None}


def measured_repository(
    directory: Path | str | None = None,
    *,
    commit: str | None = None,
    branch: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any] | None:
    """``environment.measured``: ``{"commit", "dirty", "branch", "root", "source"}`` (and ``ci`` when a CI
    variable is set), or ``None`` when nothing names the code measured. ``directory`` defaults to the
    working directory; ``commit``/``branch`` are the command line's overrides (see the module docstring)."""
    env = os.environ if environ is None else environ
    source = None
    if commit is not None:
        commit, source = check_commit(commit), "option"
    elif (env.get(COMMIT_ENV) or "").strip():
        commit, source = check_commit(env[COMMIT_ENV], f"${COMMIT_ENV}"), "environment"
    if branch is None and (env.get(BRANCH_ENV) or "").strip():
        branch = env[BRANCH_ENV].strip()
    repo = _repository(Path(directory) if directory is not None else Path.cwd())
    ci = _ci(env)
    record: dict[str, Any] = {"commit": None, "dirty": None, "branch": None, "root": None, "source": None}
    if repo is not None:
        record["root"] = portable_path(repo["root"])
    if commit is not None:
        record.update(commit=commit, source=source)
        if repo is not None and repo["commit"].startswith(commit):  # the option names the checkout: keep its state
            record.update(commit=repo["commit"], dirty=repo["dirty"], branch=repo["branch"])
    elif repo is not None:
        record.update(commit=repo["commit"], dirty=repo["dirty"], branch=repo["branch"], source="git")
    elif ci is not None:
        record.update(commit=ci["commit"], branch=ci["branch"], source=f"ci:{ci['provider']}")
    if record["commit"] is None and branch is None:
        return None
    if record["branch"] is None and ci is not None and ci["commit"] == record["commit"]:
        record["branch"] = ci["branch"]  # a detached CI checkout: the CI knows the branch it built
    if branch is not None:
        record["branch"] = branch.strip() or None
    if ci is not None:
        record["ci"] = ci
    return record


def compat_git(measured: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``environment.git`` as older readers read it (before ``measured`` was recorded): the measured commit and
    dirty flag."""
    if not measured or not measured.get("commit"):
        return None
    return {"commit": measured["commit"], "dirty": measured.get("dirty")}


@cache
def perfsuite_checkout() -> dict[str, Any] | None:
    """perfsuite's own source checkout (``environment.perfsuite_git``): commit and dirty, ``None`` when
    perfsuite is installed from a wheel or an archive (not a git checkout with commits)."""
    source = Path(__file__).resolve().parent.parent.parent
    if not (source / ".git").exists():
        return None  # site-packages inside someone else's repository is not perfsuite's checkout
    commit = _git(["rev-parse", "HEAD"], source)
    if not commit:
        return None
    status = _git(["status", "--porcelain", "--untracked-files=no"], source)
    return {"commit": commit, "dirty": bool(status)}
