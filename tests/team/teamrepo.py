"""A team's own repository outside perfsuite (U): its package, operation, recipe, pytest benchmark and a
real session directory of its runtime, in a scratch git repository (:func:`build`). Used by the tests of
tests/team/ and by ``scripts/acceptance/pytest_gate_acceptance.py`` (the measured version, on a quiet machine).

``myruntime`` is a JSONL transcript store whose commit fsyncs in a thread. Its module-level knobs are what a
test plants regressions in (deterministic costs only, house rule 1): ``EXTRA_FSYNCS`` (fsyncs per commit
beyond the first) and ``PADDING`` (bytes allocated per commit); ``BLOCK_MS`` (a loop-thread block) exists
for ``scripts/acceptance/pytest_gate_acceptance.py``, which the lead runs on a quiet machine, never for the tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2]
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid"}
#: CI variables that would name another commit than the scratch repository's (the lead's CI sets some)
CI_NAMES = ("GITHUB_SHA", "GITHUB_REF_NAME", "GITHUB_HEAD_REF", "CI_COMMIT_SHA", "BUILDKITE_COMMIT", "CIRCLE_SHA1",
            "GIT_COMMIT", "BUILD_SOURCEVERSION", "BITBUCKET_COMMIT", "TRAVIS_COMMIT", "DRONE_COMMIT_SHA",
            "PERFSUITE_COMMIT", "PERFSUITE_BRANCH")

STORE = textwrap.dedent('''
    """A JSONL transcript store: append a record, fsync it in a worker thread, acknowledge."""
    import asyncio
    import json
    import os
    import time
    from concurrent.futures import ThreadPoolExecutor

    EXTRA_FSYNCS = 0
    PADDING = 0
    BLOCK_MS = 0


    class TranscriptStore:
        def __init__(self, directory):
            self.path = os.path.join(str(directory), "transcript.jsonl")
            self.fsyncs = 0
            # one writer thread of its own: asyncio's default pool starts threads as load comes and goes, which
            # would make the allocations per commit depend on timing
            self.writer = ThreadPoolExecutor(max_workers=1)

        def _write(self, line):
            with open(self.path, "ab") as fh:
                fh.write(line)
                fh.flush()
                for _ in range(1 + EXTRA_FSYNCS):
                    os.fsync(fh.fileno())
                    self.fsyncs += 1

        async def commit(self, record):
            line = (json.dumps(record) + "\\n").encode()
            scratch = bytearray(PADDING)  # what a careless encoder allocates per commit
            if BLOCK_MS:
                time.sleep(BLOCK_MS / 1000)  # a block on the loop thread
            before = self.fsyncs
            await asyncio.get_running_loop().run_in_executor(self.writer, self._write, line)
            del scratch
            return {"fsyncs": self.fsyncs - before, "bytes_written": len(line)}
''')

OPERATION = textwrap.dedent('''
    """The team's operation for `perfsuite run`: one transcript commit, acknowledged when it is durable."""
    import asyncio
    import os

    from myruntime.store import TranscriptStore


    class Commit:
        def __init__(self, ctx):
            self.store = TranscriptStore(ctx.workdir or ctx.scratch)
            self.workdir = ctx.workdir
            self.result = {}

        def submit(self, ack):
            task = asyncio.ensure_future(self.store.commit({"role": "tool", "text": "x" * 512}))
            task.add_done_callback(lambda t: self._done(t, ack))

        def _done(self, task, ack):
            if task.exception() is not None:
                ack(task.exception())
                return
            self.result = task.result()
            ack(None)

        def metrics(self):
            out = dict(self.result)
            if self.workdir is not None:  # what the sample got: a private copy, its symlink kept
                out["link_kept"] = int(os.path.islink(os.path.join(self.workdir, "latest")))
            return out
''')

RECIPE = textwrap.dedent('''
    name = "commit"
    description = "one durable transcript commit of myruntime"
    samples = 2
    warmup = 0
    isolation = "inline"
    settle_ms = 5
    sync_after_copy = false

    [modes.commit]
    operation = "benchops:Commit"
''')

BENCH_TEST = textwrap.dedent('''
    from myruntime.store import TranscriptStore


    def test_commit(perfsuite_bench, tmp_path):
        store = TranscriptStore(tmp_path)

        async def commit():
            return await store.commit({"role": "tool", "text": "x" * 512})

        perfsuite_bench(commit, allocation=True)
''')


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True,
                          env={**os.environ, **GIT_ENV})
    return proc.stdout.strip()


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def plant(repo: Path, knob: str, value: str) -> None:
    """Set one of ``myruntime/store.py``'s knobs (``EXTRA_FSYNCS``, ``PADDING``, ``BLOCK_MS``)."""
    path = repo / "myruntime" / "store.py"
    text = path.read_text()
    old = f"{knob} = 0\n"
    assert text.count(old) == 1
    path.write_text(text.replace(old, f"{knob} = {value}\n"))


def env_for(repo: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """perfsuite from this checkout (as an installed perfsuite would be), no CI variable, the team's code."""
    env = {k: v for k, v in os.environ.items() if k not in CI_NAMES}
    env.pop("PYTHONPATH", None)
    return {**env, **GIT_ENV, "PYTHONPATH": str(SOURCE), **dict(extra or {})}


def perfsuite(repo: Path, *args: str, env: Mapping[str, str] | None = None,
              timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m perfsuite ARGS`` in the team's repository."""
    return subprocess.run([sys.executable, "-m", "perfsuite", *args], cwd=repo, env=env_for(repo, env),
                          capture_output=True, text=True, timeout=timeout, check=False)


def build(repo: Path) -> Path:
    """The team's repository at ``repo``, committed once on branch ``main``, with a session directory of its
    runtime (``data/session``: a transcript, a nested file and a symlink) that its recipe ``commit-session``
    names."""
    (repo / "myruntime").mkdir(parents=True)
    (repo / "myruntime" / "__init__.py").write_text("")
    (repo / "myruntime" / "store.py").write_text(STORE)
    (repo / "benchops.py").write_text(OPERATION)
    (repo / "recipes").mkdir()
    (repo / "recipes" / "commit.toml").write_text(RECIPE)
    (repo / "recipes" / "commit-session.toml").write_text(
        RECIPE.replace('name = "commit"', 'name = "commit-session"\nsession = "../data/session"'))
    (repo / "tests").mkdir()
    (repo / "tests" / "test_bench.py").write_text(BENCH_TEST)
    session = repo / "data" / "session"
    (session / "agents").mkdir(parents=True)
    (session / "transcript.jsonl").write_text('{"role": "user", "text": "hello"}\n' * 20)
    (session / "agents" / "a1.jsonl").write_text('{"role": "agent"}\n' * 5)
    os.symlink("transcript.jsonl", session / "latest")
    (repo / ".gitignore").write_text("results/\n__pycache__/\n.pytest_cache/\n")
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "the team's runtime, its operation and recipe")
    return repo
