"""``pytest --perfsuite-ab BASE``: the paired path for pytest users.

Two separate pytest sessions cannot tell the machine's load from a regression in a timing. So, as ``perfsuite
ab`` does for recipes, BASE (a detached git worktree) and HEAD (the working tree, or ``--perfsuite-ab-head``)
are measured **round by round**: each round runs one fresh pytest session per side, in a seeded random order,
each measuring every ``perfsuite_bench`` call once (after its warm-up) with its idle-control window. A slow
spell of the machine hits both sessions of a round and cancels in the per-round ratio. The rounds are merged
into one results document per measurement and side (``base/``, ``head/``), with the pairing ``ab.json``, so
``perfsuite compare OUT`` (the signed-rank test on per-round log ratios, Holm over the timing headlines, costs
against their tolerance) gives the verdict this session ends with, and ``compare.md`` / ``summary.md`` are
written for a CI job summary or a pull-request comment.

Each side runs its own tests against its own code: the worktree's root (and ``src/``) go first on
``PYTHONPATH``, and each session records the files its repository's packages were imported from; a BASE
session that imported them from anywhere but its own worktree (an editable install of HEAD) is refused in
one line. Which side ran first in each round, the seed and the revisions are in ``ab.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from perfsuite.errors import PerfsuiteError

__all__ = ["AB_ROUNDS", "add_ab_options", "deselect_for_round", "pytest_runtestloop", "write_imported"]

#: rounds by default: 16, as `perfsuite ab`'s first look (6 paired rounds can never reach p < 0.05 after Holm)
AB_ROUNDS = 16
IMPORTED_FILE = "imported.json"
#: the controller's own options, left out of the sessions it starts (with a value: the next argument)
_OWN = {"--perfsuite-ab": True, "--perfsuite-ab-head": True, "--perfsuite-ab-rounds": True,
        "--perfsuite-ab-seed": True, "--perfsuite-ab-gate": True, "--perfsuite-ab-strict": False,
        "--perfsuite-dir": True, "--perfsuite-samples": True, "--perfsuite-round": True, "--perfsuite-compare": True,
        "--perfsuite-compare-fail": False, "--perfsuite-compare-timings": True}


def add_ab_options(group: Any) -> None:
    """The options of the paired path (and the hidden round number its sessions get)."""
    group.addoption("--perfsuite-ab", metavar="BASE",
                    help="the paired gate: measure git revision BASE and the working tree round by round, each round "
                    "one fresh session per side, compared as `perfsuite ab` does (fails the session on a regression; "
                    "inconclusive timings, or timings not gated on a loaded machine, fail it only with "
                    "--perfsuite-ab-strict)")
    group.addoption("--perfsuite-ab-head", metavar="REV", help="with --perfsuite-ab: HEAD is this revision, not the "
                    "working tree")
    group.addoption("--perfsuite-ab-rounds", type=int, metavar="N", default=AB_ROUNDS,
                    help=f"with --perfsuite-ab: rounds (default {AB_ROUNDS})")
    group.addoption("--perfsuite-ab-seed", type=int, metavar="S", help="with --perfsuite-ab: the seed of each "
                    "round's order (default: drawn, recorded)")
    group.addoption("--perfsuite-ab-gate", choices=("all", "costs"), default="all",
                    help="with --perfsuite-ab: what may fail it: timings and costs (default), or costs only")
    group.addoption("--perfsuite-ab-strict", action="store_true",
                    help="with --perfsuite-ab: timings gate on a loaded machine too, and an inconclusive one fails "
                    "the session (as `perfsuite ab --strict`)")
    group.addoption("--perfsuite-round", type=int, metavar="N", help=argparse.SUPPRESS)  # a round's session


# -- inside a round (a sub-session) -------------------------------------------------------------------------


def deselect_for_round(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A round measures: the tests that do not use ``perfsuite_bench`` are deselected."""
    if config.getoption("perfsuite_round") is None:
        return
    keep = [i for i in items if "perfsuite_bench" in getattr(i, "fixturenames", ())]
    gone = [i for i in items if i not in keep]
    if gone:
        config.hook.pytest_deselected(items=gone)
        items[:] = keep


def _packages(root: Path) -> list[str]:
    """The top-level packages and modules of a repository (``root`` and ``root/src``): its code."""
    names = []
    for base in (root, root / "src"):
        if not base.is_dir():
            continue
        for entry in sorted(base.iterdir()):
            if entry.name.startswith((".", "_")) or entry.name in ("tests", "test", "conftest.py", "setup.py"):
                continue
            if (entry / "__init__.py").is_file() or (entry.suffix == ".py" and entry.is_file()):
                names.append(entry.stem)
    return names


def write_imported(config: pytest.Config, directory: Path | None) -> None:
    """``imported.json``: the file each of the repository's packages was imported from in this session."""
    if directory is None:
        return
    root = Path(os.environ.get("PERFSUITE_AB_ROOT") or config.rootpath)
    found = {}
    for name in _packages(root):
        module = sys.modules.get(name)
        where = getattr(module, "__file__", None) if module is not None else None
        if where:
            found[name] = str(Path(where).resolve())
    directory.mkdir(parents=True, exist_ok=True)
    (directory / IMPORTED_FILE).write_text(json.dumps(found, indent=1, sort_keys=True) + "\n", encoding="utf-8")


# -- the controller ----------------------------------------------------------------------------------------


def _git(root: Path, *args: str, what: str) -> str:
    proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False, timeout=120)
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        raise PerfsuiteError(f"--perfsuite-ab: {what}: {lines[-1] if lines else f'git exited {proc.returncode}'}")
    return proc.stdout.strip()


def _session_args(args: Sequence[str]) -> list[str]:
    """The user's pytest arguments without the controller's own options."""
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in _OWN:
            skip = _OWN[name] and "=" not in arg
            continue
        out.append(arg)
    return out


def _path_env(tree: Path) -> dict[str, str]:
    first = [str(tree)] + ([str(tree / "src")] if (tree / "src").is_dir() else [])
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*first, *rest]), "PERFSUITE_AB_ROOT": str(tree)}


class _Side:
    """One revision measured: its name, commit, the tree its code and tests come from, where pytest runs."""

    def __init__(self, name: str, revision: str, commit: str, dirty: bool, tree: Path, cwd: Path) -> None:
        self.name, self.revision, self.commit, self.dirty = name, revision, commit, dirty
        self.tree, self.cwd = tree, cwd
        self.imported: dict[str, str] = {}

    def session(self, args: Sequence[str], out: Path, index: int) -> float:
        """One round's session of this side (``--perfsuite-warmup`` and every other option as the user gave)."""
        command = [sys.executable, "-m", "pytest", *args, "-q", "-p", "no:cacheprovider", "--perfsuite-round",
                   str(index), "--perfsuite-dir", str(out), "--perfsuite-samples", "1"]
        started = time.monotonic()
        proc = subprocess.run(command, cwd=self.cwd, env=_path_env(self.tree), capture_output=True, text=True,
                              check=False)
        if proc.returncode != 0:
            tail = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()][-1:] or ["no output"]
            raise PerfsuiteError(f"--perfsuite-ab: {self.name} ({self.revision}) round {index}: pytest exited "
                                 f"{proc.returncode}: {tail[0][:300]}")
        imported = json.loads((out / IMPORTED_FILE).read_text()) if (out / IMPORTED_FILE).is_file() else {}
        for package, where in imported.items():
            if not Path(where).is_relative_to(self.tree.resolve()):
                raise PerfsuiteError(f"--perfsuite-ab: {self.name} ({self.revision}) imported {package} from {where}, "
                                     f"not from its own tree {self.tree}: an installed copy shadows it (install it "
                                     "without -e, or run pytest with --import-mode=importlib)")
        self.imported.update(imported)
        return time.monotonic() - started


def _merge(round_docs: Sequence[Mapping[str, Any]], side: _Side, seed: int) -> dict[str, Any]:
    """One results document of ``side`` from its per-round documents: sample ``i`` and control window ``i`` are
    round ``i``'s, the allocation pass is round 0's; summaries, verdicts and the load recomputed."""
    from perfsuite.harness import machine_load, summarize_samples, validate_results, verdict

    doc = json.loads(json.dumps(round_docs[0]))
    mode = next(iter(doc["modes"]))
    body = doc["modes"][mode]
    samples, control, order = [], [], []
    for i, rd in enumerate(round_docs):
        sample = dict(rd["modes"][mode]["samples"][0], index=i)
        samples.append(sample)
        order.append({"kind": "sample", "mode": mode, "index": i})
        if rd["control"]["samples"]:
            control.append(dict(rd["control"]["samples"][0], index=i))
            order.append({"kind": "control", "mode": None, "index": i})
    alloc = body.get("allocation")  # round 0's pass, as it was summarised (costs need no rounds)
    if alloc:
        order += [{"kind": "allocation", "mode": mode, "index": s.get("index", j)}
                  for j, s in enumerate(alloc.get("samples", []))]
    body["samples"], body["summary"] = samples, summarize_samples(samples)
    body["verdict"] = verdict(samples, float(doc["recipe"]["target_ms"]), body.get("reference"))
    doc["control"]["samples"], doc["control"]["summary"] = control, summarize_samples(control)
    doc["order"], doc["progress"] = order, {"done": len(order), "total": len(order)}
    doc["recipe"]["samples"] = doc["recipe"]["control_windows"] = len(round_docs)
    doc["load"] = machine_load(control, float(doc["recipe"]["heartbeat_ms"])).to_dict()
    doc["finished_at"] = doc["updated_at"] = round_docs[-1].get("finished_at", doc.get("updated_at"))
    doc["variant"] = {"name": side.name, "of": ["base", "head"], "seed": seed, "rounds": len(round_docs),
                      "interleaved": "pytest --perfsuite-ab: each round one fresh pytest session per side, in a "
                                     "seeded random order; sample i and idle-control window i are round i's",
                      "code": {"root": str(side.tree), "imported": dict(side.imported)}}
    validate_results(doc)
    return doc


def _documents(directory: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for path in sorted(directory.glob("*.json")):
        if path.name.endswith(".pyperf.json") or path.name == IMPORTED_FILE:
            continue
        doc = json.loads(path.read_text(encoding="utf-8"))
        found[str(doc["recipe"]["name"])] = doc
    return found


def _sides(config: pytest.Config, parent: Path) -> tuple[_Side, _Side, list[Path]]:
    invoked = Path(config.invocation_params.dir).resolve()
    root = Path(_git(invoked, "rev-parse", "--show-toplevel", what="not in a git repository")).resolve()
    where = invoked.relative_to(root)
    made: list[Path] = []

    def worktree(name: str, revision: str) -> _Side:
        commit = _git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}",
                      what=f"unknown revision {revision!r}")
        path = parent / f"{name}-{commit[:12]}"
        _git(root, "worktree", "add", "--detach", "--quiet", str(path), commit, what=f"git worktree add {revision}")
        made.append(path)
        return _Side(name, revision, commit, False, path, path / where)

    base = worktree("base", config.getoption("perfsuite_ab"))
    head_rev = config.getoption("perfsuite_ab_head")
    if head_rev:
        head = worktree("head", head_rev)
    else:
        commit = _git(root, "rev-parse", "HEAD", what="the working tree has no commit")
        dirty = bool(_git(root, "status", "--porcelain", "--untracked-files=no", what="git status"))
        head = _Side("head", "working tree", commit, dirty, root, invoked)
    return base, head, made


def run_ab(config: pytest.Config, write: Any) -> tuple[int, str]:
    """Measure, merge, compare; returns (the gate's exit status, the output directory)."""
    from perfsuite.harness import write_json_atomic
    from perfsuite.report import PAIRING_FILE, PAIRING_FORMAT, compare, compare_headline, compare_markdown

    rounds = int(config.getoption("perfsuite_ab_rounds"))
    if rounds < 2:
        raise PerfsuiteError(f"--perfsuite-ab-rounds: expected at least 2 rounds, got {rounds}")
    seed = config.getoption("perfsuite_ab_seed")
    seed = random.SystemRandom().randrange(2**31) if seed is None else int(seed)
    given = config.getoption("perfsuite_dir")
    stamp = time.strftime("%Y%m%dT%H%M%S")
    # absolute: the sessions run in other directories (BASE's worktree)
    out = (Path(config.invocation_params.dir) / given if given else
           Path(config.rootpath) / "results" / "local" / f"pytest-ab-{stamp}").resolve()
    if out.exists() and any(out.iterdir()):
        raise PerfsuiteError(f"--perfsuite-dir: {out} is not empty (an A/B output needs a new or empty directory)")
    args = _session_args(config.invocation_params.args)
    parent = Path(tempfile.mkdtemp(prefix="perfsuite-pytest-ab-"))
    base, head, made = _sides(config, parent)
    rng = random.Random(seed)
    orders = []
    try:
        for i in range(rounds):
            sides = [base, head]
            rng.shuffle(sides)
            orders.append([s.name for s in sides])
            times = []
            for side in sides:
                took = side.session(args, out / "rounds" / side.name / f"{i:03d}", i)
                times.append(f"{side.name} {took:.1f} s")
            write(f"perfsuite ab: round {i + 1}/{rounds}: {', '.join(times)}")
    finally:
        for path in made:
            subprocess.run(["git", "-C", str(path), "worktree", "remove", "--force", str(path)], capture_output=True,
                           check=False)
        shutil.rmtree(parent, ignore_errors=True)
    per_side: dict[str, dict[str, dict[str, Any]]] = {}
    for side in (base, head):
        by_round = [_documents(out / "rounds" / side.name / f"{i:03d}") for i in range(rounds)]
        names = set.intersection(*(set(r) for r in by_round)) if by_round else set()
        per_side[side.name] = {n: _merge([r[n] for r in by_round], side, seed) for n in sorted(names)}
    common = sorted(set(per_side["base"]) & set(per_side["head"]))
    if not common:
        raise PerfsuiteError("--perfsuite-ab: no perfsuite_bench measurement ran on both sides (select the tests "
                             "that measure, and check they exist at BASE)")
    entries = []
    for name in common:
        for side_name in ("base", "head"):
            write_json_atomic(out / side_name / f"{name}.json", per_side[side_name][name])
        entries.append({"recipe": name, "base": f"base/{name}.json", "head": f"head/{name}.json", "seed": seed,
                        "rounds": rounds, "fixture": {"name": per_side["head"][name]["fixture"].get("name"),
                                                      "digest": per_side["head"][name]["fixture"].get("digest")}})
    only = sorted(set(per_side["base"]) ^ set(per_side["head"]))
    notes = [f"measured on one side only, not compared: {', '.join(only)}"] if only else []
    gate = config.getoption("perfsuite_ab_gate")
    pairing = {
        "format": PAIRING_FORMAT, "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "seed": seed,
        "base": {"revision": base.revision, "commit": base.commit, "dirty": base.dirty, "code": base.imported},
        "head": {"revision": head.revision, "commit": head.commit, "dirty": head.dirty, "code": head.imported},
        "instrument": {"path": "pytest --perfsuite-ab", "args": args}, "recipes": entries, "notes": notes,
        "flags": [], "orders": orders, "looks": 1,
        "options": {"alpha": 0.05, "factor": 1.10, "gate": gate, "paired": True, "looks": 1, "correction": "holm",
                    "strict": bool(config.getoption("perfsuite_ab_strict"))},
    }
    write_json_atomic(out / PAIRING_FILE, pairing)
    comparison = compare(out)
    (out / "compare.md").write_text(compare_markdown(comparison), encoding="utf-8")
    (out / "summary.md").write_text(compare_markdown(comparison, details=False), encoding="utf-8")
    write(f"perfsuite ab: {compare_headline(comparison)}")
    for change in (*comparison.regressions, *comparison.inconclusive):
        write(f"  {change.status}: {change.label} {change.ratio:.2f}x")
        write(f"    why: {change.reason}")  # the figures and the rule that decided (`perfsuite compare --explain`)
    write(f"perfsuite ab: {out} (base/, head/, ab.json, compare.md; `perfsuite compare {out}` says the same)")
    return int(comparison.exit_status), str(out)


def pytest_runtestloop(session: pytest.Session) -> bool | None:
    """With ``--perfsuite-ab``: the rounds replace the test loop; the session fails unless the gate passes."""
    config = session.config
    if not config.getoption("perfsuite_ab"):
        return None
    reporter = config.pluginmanager.get_plugin("terminalreporter")

    def write(line: str) -> None:
        if reporter is not None:
            reporter.write_line(line)

    try:
        status, _ = run_ab(config, write)
    except PerfsuiteError as exc:  # unusable input: one line, and the session fails
        write(f"perfsuite ab: error: {exc}")
        session.testsfailed = 1
        return True
    if status:  # 1 a regression; 3 (--perfsuite-ab-strict) it cannot tell; a neutral outcome is 0
        session.testsfailed = 1
    return True
