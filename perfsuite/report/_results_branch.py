"""Results that survive CI: results documents appended to a git branch, like asv's
results repository; the store and the dashboard are rebuilt from that branch, never committed.

:func:`push_results` adds documents to ``BRANCH`` on ``REMOTE`` with git plumbing only (a private index
file, ``hash-object``, ``commit-tree``, ``push``): the working tree, the index and the checked-out
branch of the repository are never touched, so a CI job can call it from its checkout. A push that
loses a race with another job (non-fast-forward) fetches again and retries. Documents already on the
branch with the same content are not committed again (pushing a run twice adds nothing).

Layout on the branch: ``<machine key>/<commit[:12]>/<results file name>`` (see
:func:`~perfsuite.report.machine_fingerprint`), and a README at the root. Only complete, non-synthetic
results documents (``*.json``, schema-valid) are pushed: pyperf and HDR exports are derived from them.

:func:`pull_results` materialises the branch's documents in a directory; :func:`rebuild_store` derives
a fresh store from a directory and replaces the old one atomically.
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from perfsuite.errors import PerfsuiteError
from perfsuite.report._load import Result, read_results
from perfsuite.report._machine import machine_of
from perfsuite.report._store import IngestReport, open_store

__all__ = [
    "DEFAULT_BRANCH",
    "PullReport",
    "PushReport",
    "branch_path",
    "pull_results",
    "push_results",
    "rebuild_store",
]

DEFAULT_BRANCH = "perfsuite-results"
#: used for the branch's commits when git has no identity configured (a fresh CI runner)
_IDENTITY = {"name": "perfsuite results", "email": "perfsuite-results@users.noreply.github.com"}
_README = """# perfsuite results

Results documents appended by `perfsuite store push` (one directory per machine fingerprint, then per
commit). They are the source of truth for history; the SQLite store and the dashboard are derived from
them (`perfsuite store pull --into DIR --store PATH`, then `perfsuite dashboard PATH -o site`).
Never edit or add files by hand: every document here is a measurement.
"""


@dataclass(frozen=True, slots=True)
class PushReport:
    """What a push did: the new tip (``None`` when nothing was new), the paths added, what was skipped."""

    branch: str
    remote: str
    commit: str | None
    added: tuple[str, ...]
    unchanged: int
    skipped: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PullReport:
    """What a pull wrote: the branch tip it came from and the documents now under ``directory``."""

    branch: str
    commit: str
    directory: Path
    files: int


def _git(repo: Path, *args: str, stdin: bytes | None = None, env: Mapping[str, str] | None = None,
         check: bool = True) -> subprocess.CompletedProcess[bytes]:
    try:
        proc = subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True, check=False,
                              env={**os.environ, **(env or {})})
    except FileNotFoundError:
        raise PerfsuiteError("git is not installed (needed for the results branch)") from None
    if check and proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.decode(errors="replace").splitlines() if ln.strip()]
        said = [ln for ln in lines if ln.startswith(("fatal:", "error:"))] or lines[-1:]
        raise PerfsuiteError(f"git {args[0]} in {repo} failed: {said[0] if said else f'exit {proc.returncode}'}")
    return proc


def _out(proc: subprocess.CompletedProcess[bytes]) -> str:
    return proc.stdout.decode().strip()


def check_remote(remote: str) -> str:
    """A remote or URL git can take as one: one that starts with ``-`` would reach git as an option (an
    ``--upload-pack=CMD`` runs CMD), so it is refused in one line before git runs."""
    if not remote or remote.startswith("-") or any(c in remote for c in "\0\n\r"):
        raise PerfsuiteError(f"--remote {remote!r}: not a git remote or URL (it must not start with '-')")
    return remote


def _remote_tip(repo: Path, remote: str, branch: str) -> str | None:
    """Fetch ``branch`` from ``remote`` and return its tip, or ``None`` when the branch does not exist yet."""
    check_remote(remote)
    listed = _out(_git(repo, "ls-remote", "--heads", remote, f"refs/heads/{branch}"))
    if not listed:
        return None
    _git(repo, "fetch", "--quiet", "--no-tags", remote, f"refs/heads/{branch}")
    return _out(_git(repo, "rev-parse", "FETCH_HEAD^{commit}"))


def branch_path(result: Result) -> str:
    """Where a document lives on the results branch: ``<machine key>/<commit[:12]>/<file name>``."""
    name = result.path.name if result.path is not None else f"{result.recipe}.json"
    return f"{machine_of(result).key}/{(result.commit or 'no-commit')[:12]}/{name}"


def _identity(repo: Path) -> dict[str, str]:
    env = {}
    for role in ("AUTHOR", "COMMITTER"):
        for part in ("name", "email"):
            key = f"GIT_{role}_{part.upper()}"
            configured = _git(repo, "config", f"user.{part}", check=False).returncode == 0
            if key not in os.environ and not configured:
                env[key] = _IDENTITY[part]
    return env


def _select(paths: Sequence[Path | str]) -> tuple[list[Result], list[str]]:
    chosen, skipped = [], []
    for result in (r for path in paths for r in read_results(path)):
        if result.data.get("synthetic"):
            raise PerfsuiteError(f"{result.path}: synthetic test data, not a measurement: never pushed")
        if result.data.get("status") != "complete":
            skipped.append(f"{result.name}: {result.data.get('status')} (only complete runs are pushed)")
            continue
        chosen.append(result)
    return chosen, skipped


def _commit_once(repo: Path, parent: str | None, results: Sequence[Result], message: str,
                 index: Path) -> tuple[str | None, list[str], int]:
    env = {"GIT_INDEX_FILE": str(index)}
    if parent is not None:
        _git(repo, "read-tree", parent, env=env)
    else:
        _git(repo, "read-tree", "--empty", env=env)
    entries = {}
    for line in _out(_git(repo, "ls-files", "-s", env=env)).splitlines():
        meta, path = line.split("\t", 1)
        entries[path] = meta.split()[1]
    added, unchanged = [], 0
    files = [(branch_path(r), Path(r.path).read_bytes() if r.path else b"") for r in results]
    if "README.md" not in entries:
        files.append(("README.md", _README.encode()))
    for path, content in files:
        blob = _out(_git(repo, "hash-object", "-w", "--stdin", stdin=content))
        if entries.get(path) == blob:
            unchanged += 1
            continue
        _git(repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
        entries[path] = blob
        if path != "README.md":
            added.append(path)
    if not added:
        return None, [], unchanged
    tree = _out(_git(repo, "write-tree", env=env))
    args = ["commit-tree", tree, "-m", message, *(["-p", parent] if parent else [])]
    return _out(_git(repo, *args, env=_identity(repo))), added, unchanged


def push_results(
    paths: Sequence[Path | str],
    *,
    branch: str = DEFAULT_BRANCH,
    remote: str = "origin",
    repo: Path | str = ".",
    message: str | None = None,
    attempts: int = 3,
) -> PushReport:
    """Append the results documents under ``paths`` to ``branch`` on ``remote`` (see the module docstring)."""
    repo = Path(repo)
    results, skipped = _select(paths)
    commits = sorted({(r.commit or "no commit")[:12] for r in results})
    text = message or f"perfsuite results: {len(results)} document(s) of {', '.join(commits) or 'nothing'}"
    for attempt in range(attempts):
        parent = _remote_tip(repo, remote, branch)
        with tempfile.TemporaryDirectory(prefix="perfsuite-push-") as tmp:
            tip, added, unchanged = _commit_once(repo, parent, results, text, Path(tmp) / "index")
        if tip is None:
            return PushReport(branch, remote, None, (), unchanged, tuple(skipped))
        pushed = _git(repo, "push", "--quiet", remote, f"{tip}:refs/heads/{branch}", check=False)
        if pushed.returncode == 0:
            return PushReport(branch, remote, tip, tuple(added), unchanged, tuple(skipped))
        if attempt == attempts - 1:
            lines = [ln.strip() for ln in pushed.stderr.decode(errors="replace").splitlines() if ln.strip()]
            said = [ln.removeprefix("remote:").strip() for ln in lines if ln.startswith(("remote:", "!"))]
            detail = "; ".join(said or lines[-1:]) or "rejected"
            raise PerfsuiteError(f"git push to {remote} {branch} failed: {detail}")
    raise AssertionError("unreachable")  # pragma: no cover


def _safe_members(archive: tarfile.TarFile) -> list[tarfile.TarInfo]:
    members = []
    for member in archive.getmembers():
        path = PurePosixPath(member.name)
        if member.isfile() and not path.is_absolute() and ".." not in path.parts:
            members.append(member)
    return members


def pull_results(
    into: Path | str, *, branch: str = DEFAULT_BRANCH, remote: str = "origin", repo: Path | str = "."
) -> PullReport:
    """Write every file of ``branch`` on ``remote`` under ``into`` (created); existing files are replaced."""
    repo, into = Path(repo), Path(into)
    tip = _remote_tip(repo, remote, branch)
    if tip is None:
        raise PerfsuiteError(f"no branch {branch!r} on {remote} yet (push results first: perfsuite store push)")
    data = _git(repo, "archive", "--format=tar", tip).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        members = _safe_members(archive)
        for member in members:
            target = into / member.name
            target.parent.mkdir(parents=True, exist_ok=True)
            source = archive.extractfile(member)
            if source is not None:
                tmp = target.with_name(f".{target.name}.tmp")
                tmp.write_bytes(source.read())
                os.replace(tmp, target)
    return PullReport(branch, tip, into, sum(1 for m in members if m.name.endswith(".json")))


def rebuild_store(directory: Path | str, store: Path | str) -> IngestReport:
    """A fresh store from every results document under ``directory``, replacing ``store`` atomically."""
    store = Path(store)
    results = read_results(directory)
    tmp = store.with_name(f".{store.name}.rebuild")
    tmp.unlink(missing_ok=True)
    try:
        with open_store(tmp, create=True) as db:
            report = db.ingest(results)
        os.replace(tmp, store)
    finally:
        tmp.unlink(missing_ok=True)
    return report
