"""A user's own git repository, outside perfsuite (U): a tiny JSONL transcript store whose commit fsyncs
in a thread, its own operation and recipe, and plants that change its costs deterministically.

Used by the tests of tests/ab/ (``perfsuite ab``, ``bisect``, ``init`` on a repository that is not perfsuite's)
and by ``scripts/acceptance/ab_user_acceptance.py`` (the measured version, on a quiet machine). perfsuite is the
installed tool: it runs with its own interpreter, the user's code is never on its path but the working directory.

Layout::

    pyproject.toml            [project] myruntime, [tool.perfsuite] code-under-test (or the default)
    myruntime/__init__.py     the code under test
    myruntime/store.py        TranscriptStore: append() buffers a JSON line, commit() writes and fsyncs it
    benchmarks/ops.py         the operation: append five records, commit in a thread, count the fsyncs
    recipes/commit.toml       the recipe (a name ``perfsuite ab -r commit`` finds in ./recipes)

Plants (each one commit): ``fsync`` (commit fsyncs twice: +1 fsync per sample, a cost), ``alloc`` (1 MB
allocated and dropped per commit: allocation.total_bytes), ``block`` (a 2 ms busy loop on the event loop's
thread at submission: a timing, the max gap; for the measured acceptance only, never asserted by a test;
``block3`` the same for 3 ms, the one the acceptance plants).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

GIT_ENV = {"GIT_AUTHOR_NAME": "user", "GIT_AUTHOR_EMAIL": "user@example.invalid", "GIT_COMMITTER_NAME": "user",
           "GIT_COMMITTER_EMAIL": "user@example.invalid"}

STORE = textwrap.dedent('''\
    """A JSONL transcript store: append() buffers one JSON line, commit() writes the buffer and fsyncs it."""

    import json
    import os


    class TranscriptStore:
        def __init__(self, path):
            self.path = path
            self.pending = []
            self.fsyncs = 0
            self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

        def append(self, record):
            self.pending.append(json.dumps(record, sort_keys=True) + "\\n")

        def commit(self):
            data = "".join(self.pending).encode()
            self.pending.clear()
            os.write(self.fd, data)
            self._sync()

        def _sync(self):
            os.fsync(self.fd)
            self.fsyncs += 1

        def close(self):
            os.close(self.fd)
''')

INIT = '"""myruntime: an agent runtime\'s persistence."""\n\nfrom myruntime.store import TranscriptStore\n\n' \
       '__all__ = ["TranscriptStore"]\n'

OPS = textwrap.dedent('''\
    """perfsuite operations for myruntime (the operation protocol: README, "Measuring your own code")."""

    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from myruntime import TranscriptStore


    class Commit:
        """Five records appended on the loop, committed (written and fsynced) in the store's writer thread."""

        def __init__(self, ctx):
            self.store = TranscriptStore(str(ctx.scratch / "transcript.jsonl"))
            self.writer = ThreadPoolExecutor(1)
            self.writer.submit(int).result()  # its thread started before the sample, not inside it

        def submit(self, ack):
            for i in range(5):
                self.store.append({"role": "assistant", "turn": i, "text": "x" * 64})
            job = asyncio.get_running_loop().run_in_executor(self.writer, self.store.commit)
            job.add_done_callback(lambda f: ack(f.exception()))

        def metrics(self):
            return {"fsyncs": self.store.fsyncs}  # the store's own count: a deterministic cost

        def close(self):
            self.writer.shutdown()
            self.store.close()
''')

RECIPE = textwrap.dedent('''\
    name = "commit"
    description = "five records appended, committed with one fsync in a thread"
    samples = 2
    warmup = 0
    isolation = "process"
    allocation = true
    allocation_samples = 3  # the median of three: a thread's wake-up can move a single pass by ~2 KB
    settle_ms = 5

    [modes.commit]
    operation = "benchmarks.ops:Commit"
''')


def pyproject(dependencies: Sequence[str] = (), code_under_test: Sequence[str] | None = ("myruntime",),
              packages: Sequence[str] | None = None) -> str:
    """The project's pyproject.toml; ``code_under_test=None`` leaves the default (what the operations import);
    ``packages`` names setuptools' packages (``pip install .`` then needs no discovery of the top-level dirs)."""
    deps = "".join(f'    "{d}",\n' for d in dependencies)
    text = (f'[project]\nname = "myruntime"\nversion = "0.1.0"\nrequires-python = ">=3.11"\n'
            f'dependencies = [\n{deps}]\n')
    if code_under_test is not None:
        text += "\n[tool.perfsuite]\ncode-under-test = [" + ", ".join(f'"{c}"' for c in code_under_test) + "]\n"
    if packages is not None:
        text += "\n[tool.setuptools]\npackages = [" + ", ".join(f'"{p}"' for p in packages) + "]\n"
    return text


#: name -> (file, old text, new text, commit message): deterministic costs, one timing (block)
PLANTS: dict[str, tuple[str, str, str, str]] = {
    "fsync": ("myruntime/store.py", "        self._sync()\n", "        self._sync()\n" * 2, "commit fsyncs twice"),
    "alloc": ("myruntime/store.py", "        os.write(self.fd, data)\n",
              "        os.write(self.fd, data)\n        scratch = bytearray(1 << 20)  # 1 MB, dropped\n"
              "        del scratch\n", "commit allocates a 1 MB scratch buffer"),
    "block": ("myruntime/store.py", "    def append(self, record):\n",
              "    def append(self, record):\n        if not self.pending:  # 2 ms busy on the caller's thread\n"
              "            import time\n            end = time.perf_counter() + 0.002\n"
              "            while time.perf_counter() < end:\n                pass\n",
              "append blocks its thread for 2 ms at the first record"),
}


def block_plant(ms: int) -> tuple[str, str, str, str]:
    """The ``block`` plant with an ``ms`` millisecond busy loop (a timing: the max gap) instead of 2 ms."""
    rel, old, new, _ = PLANTS["block"]
    return (rel, old, new.replace("# 2 ms busy", f"# {ms} ms busy").replace("+ 0.002", f"+ {ms / 1000:g}"),
            f"append blocks its thread for {ms} ms at the first record")


PLANTS["block3"] = block_plant(3)  # the measured acceptance's block: 3 ms, over the 5 ms heartbeat's noise


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True,
                          env={**os.environ, **GIT_ENV})
    return proc.stdout.strip()


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def write(repo: Path, files: Mapping[str, str]) -> None:
    for rel, text in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def make_repo(repo: Path, *, dependencies: Sequence[str] = (),
              code_under_test: Sequence[str] | None = ("myruntime",)) -> str:
    """Create the repository at ``repo`` with one commit; returns the commit."""
    repo.mkdir(parents=True)
    write(repo, {"pyproject.toml": pyproject(dependencies, code_under_test), "myruntime/__init__.py": INIT,
                 "myruntime/store.py": STORE, "benchmarks/__init__.py": "", "benchmarks/ops.py": OPS,
                 "recipes/commit.toml": RECIPE, ".gitignore": "__pycache__/\nresults/\n"})
    git(repo, "init", "-q", "-b", "main")
    return commit_all(repo, "myruntime: a JSONL transcript store")


def plant(repo: Path, name: str) -> str:
    """Commit the plant ``name`` (see :data:`PLANTS`); returns the commit."""
    rel, old, new, message = PLANTS[name]
    path = repo / rel
    text = path.read_text()
    assert text.count(old) == 1, f"{rel}: expected one occurrence of {old!r}"
    path.write_text(text.replace(old, new))
    return commit_all(repo, f"plant: {message}")


def history(repo: Path, commits: int = 8, plant_at: int = 5, name: str = "fsync") -> list[str]:
    """A repository of ``commits`` commits (the first: :func:`make_repo`), plant ``name`` at commit number
    ``plant_at`` (1-based), the others harmless (a line of the changelog each); returns the commits, oldest
    first."""
    made = [make_repo(repo)]
    for number in range(2, commits + 1):
        if number == plant_at:
            made.append(plant(repo, name))
            continue
        with open(repo / "CHANGELOG.md", "a") as fh:
            fh.write(f"- change {number}\n")
        made.append(commit_all(repo, f"change {number}: the changelog"))
    return made


def unplant(repo: Path, name: str) -> None:
    """Undo the plant ``name`` in the working tree (not committed)."""
    rel, old, new, _ = PLANTS[name]
    path = repo / rel
    path.write_text(path.read_text().replace(new, old))


def tinydep(version: str) -> str:
    """The module of the dependency ``tinydep``: its ``sync(fd)`` fsyncs once in 1.0, twice from 2.0 on (a
    dependency bump whose cost is deterministic)."""
    times = 1 if version.startswith("1.") else 2
    return (f'"""tinydep {version}: durable writes."""\n\nimport os\n\nVERSION = "{version}"\n\n\n'
            f"def sync(fd):\n    for _ in range({times}):\n        os.fsync(fd)\n    return {times}\n")


def depend_on_tinydep(repo: Path, requirement: str) -> str:
    """Make the store sync through ``tinydep`` and declare ``requirement``; commits; returns the commit."""
    store = repo / "myruntime" / "store.py"
    text = store.read_text()
    if "import tinydep" not in text:
        text = text.replace("import os\n", "import os\n\nimport tinydep\n", 1)
        text = text.replace("        os.fsync(self.fd)\n        self.fsyncs += 1\n",
                            "        self.fsyncs += tinydep.sync(self.fd)\n")
        store.write_text(text)
    (repo / "pyproject.toml").write_text(pyproject([requirement]))
    return commit_all(repo, f"depend on {requirement}")


def tool_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of perfsuite as an installed tool: this checkout's perfsuite importable, nothing of the
    user's repository on the path (``python -m`` adds the working directory, as ``perfsuite`` does for ab)."""
    source = str(Path(__file__).resolve().parents[2])
    env = {k: v for k, v in os.environ.items() if k not in ("PERFSUITE_RECIPES", "PERFSUITE_FIXTURES")}
    return {**env, **GIT_ENV, "PYTHONPATH": source, **dict(extra or {})}


def perfsuite(repo: Path, *args: str, env: Mapping[str, str] | None = None,
              timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``perfsuite ARGS`` run in the user's repository."""
    return subprocess.run([sys.executable, "-m", "perfsuite", *args], cwd=repo, env=tool_env(env),
                          capture_output=True, text=True, timeout=timeout, check=False)


def wheel(directory: Path, name: str, version: str, module: str) -> Path:
    """A pure-Python wheel of ``name`` ``version`` holding one module ``name.py`` (written by hand: a wheel is
    a zip with METADATA, WHEEL and RECORD; no build backend and no network needed)."""
    directory.mkdir(parents=True, exist_ok=True)
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": module,
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: perfsuite-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{dist}/RECORD"] = "".join(f"{path},,\n" for path in files) + f"{dist}/RECORD,,\n"
    path = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for rel, text in files.items():
            zf.writestr(rel, text)
    return path
