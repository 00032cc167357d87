"""Issue 28's measured acceptance of the pytest path on a team's own repository (not a test: it times; run it
on a quiet machine, where the CPU hog below is the only load).

The repository is tests/team/teamrepo.py's (a JSONL transcript store whose commit fsyncs in a writer thread, a
``perfsuite_bench`` test of one commit with the allocation pass), built in a scratch directory outside
perfsuite; pytest runs this checkout's plugin (``-p perfsuite.pytest_plugin``, PYTHONPATH), nothing of the
repository's but its working directory. Parts (``--only``):

  aa         10 A/A comparisons of two SEPARATE sessions of unchanged code (``--perfsuite-compare BASE
             --perfsuite-compare-fail``), each pair measured with a CPU hog busy-looping on the other core:
             expect exit 0 every time (``--runs-aa``); the issue saw exit 1 twice out of two;
  paired-aa  the same through the paired path, ``pytest --perfsuite-ab HEAD`` with the hog: expect exit 0;
  cost       a planted 2x cost, each ``--runs-plant`` times through the separate-run gate: the commit fsyncs
             twice (``metrics.fsyncs`` 2x) and allocates 1 MB more (``allocation.total_bytes``): expect exit 1
             naming that metric;
  block      a planted 2 ms sleep on the event loop's thread in every commit, committed, through the
             paired path ``pytest --perfsuite-ab HEAD~1``: expect exit 1 naming a timing (max gap, loop stall,
             submission or acknowledgement), ``--runs-plant`` times.

Every run prints its command (to re-run it by hand), exit status, duration and what it named; a JSON summary
closes the output (and goes to ``--json OUT``). Usage::

    python scripts/acceptance/pytest_gate_acceptance.py [--only aa,paired-aa,cost,block] [--runs-aa 10] [--runs-plant 5]
                                             [--rounds 16] [--samples 6] [--no-hog] [--workdir DIR] [--json OUT]

A smoke run: ``--runs-aa 1 --runs-plant 1 --rounds 4 --samples 3``. Figures from a loaded machine are not
acceptance figures: the output says how loaded each measured session was (its idle control).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).resolve().parents[2]
PARTS = ("aa", "paired-aa", "cost", "block")


def _teamrepo() -> Any:
    """tests/team/teamrepo.py: the repository the tests build."""
    spec = importlib.util.spec_from_file_location("teamrepo", SOURCE / "tests" / "team" / "teamrepo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["teamrepo"] = module
    spec.loader.exec_module(module)
    return module


team = _teamrepo()


@contextlib.contextmanager
def cpu_hog(enabled: bool) -> Iterator[str]:
    """A busy loop pinned to the last CPU (the measured sessions are pinned to the others); yields a description."""
    if not enabled:
        yield "no hog"
        return
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        if len(cpus) >= 2:
            os.sched_setaffinity(hog.pid, {cpus[-1]})
            yield f"a CPU hog pinned to CPU {cpus[-1]}, sessions on CPUs {cpus[:-1]}"
        else:
            yield "a CPU hog sharing the only CPU"
    finally:
        hog.kill()
        hog.wait()


def _session_cpus() -> set[int] | None:
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    return set(cpus[:-1]) if len(cpus) >= 2 else None


def pytest_run(repo: Path, args: list[str], pinned: bool) -> dict[str, Any]:
    """One pytest session in ``repo`` with the plugin: its command, exit status, duration and output lines."""
    env = team.env_for(repo, {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    argv = [sys.executable, "-m", "pytest", "-p", "perfsuite.pytest_plugin", "-p", "no:cacheprovider", *args, "tests"]
    cpus = _session_cpus() if pinned else None
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, check=False,
                          preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
    took = time.monotonic() - started
    lines = [ln.strip() for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    named = [ln for ln in lines if ln.startswith(("test_commit:", "perfsuite ab: ", "regressed:", "inconclusive:",
                                                  "separate runs:", "a loaded run:", "machine:"))
             and "round " not in ln]
    command = f"cd {shlex.quote(str(repo))} && PYTHONPATH={shlex.quote(str(SOURCE))} " \
              f"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {shlex.join(argv)}"
    print(f"$ {command}\n  exit {proc.returncode} in {took:.1f} s", flush=True)
    for line in named:
        print(f"  {line}", flush=True)
    return {"command": command, "exit": proc.returncode, "seconds": round(took, 1), "named": named}


def _record(results: list[dict[str, Any]], part: str, run: dict[str, Any], expect: int, want: str = "") -> None:
    ok = run["exit"] == expect and (not want or any(want in ln for ln in run["named"]))
    results.append({"part": part, **run, "expected": expect, "ok": ok})
    naming = f", naming {want}" if want else ""
    print(f"  -> {'as expected' if ok else 'NOT AS EXPECTED'} (expected exit {expect}{naming})", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts ({', '.join(PARTS)})")
    parser.add_argument("--runs-aa", type=int, default=10)
    parser.add_argument("--runs-plant", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=16, help="rounds of the paired path (default 16)")
    parser.add_argument("--samples", type=int, default=6, help="samples per separate session (default 6)")
    parser.add_argument("--no-hog", action="store_true", help="A/A without the CPU hog")
    parser.add_argument("--workdir", type=Path, help="where the repository is built (default: a temp dir)")
    parser.add_argument("--json", type=Path, help="also write the JSON summary here")
    args = parser.parse_args(argv)
    parts = [p for p in args.only.split(",") if p]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"unknown part(s): {', '.join(unknown)}")
    root = args.workdir or Path(tempfile.mkdtemp(prefix="perfsuite-pytest-gate-"))
    results: list[dict[str, Any]] = []
    separate = ["--perfsuite-samples", str(args.samples)]

    def fresh(name: str) -> Path:
        return team.build(root / name)

    if "aa" in parts:
        repo = fresh("aa")
        for i in range(args.runs_aa):
            with cpu_hog(not args.no_hog) as hog:
                print(f"# aa {i + 1}/{args.runs_aa}: two separate sessions of unchanged code, {hog}", flush=True)
                base = pytest_run(repo, [*separate, "--perfsuite-dir", f"results/aa-{i}/base"], pinned=True)
                new = pytest_run(repo, [*separate, "--perfsuite-dir", f"results/aa-{i}/new", "--perfsuite-compare",
                                        f"results/aa-{i}/base", "--perfsuite-compare-fail"], pinned=True)
            results.append({"part": "aa-base", **base, "expected": 0, "ok": base["exit"] == 0})
            _record(results, "aa", new, 0)
    if "paired-aa" in parts:
        repo = fresh("paired-aa")
        for i in range(args.runs_aa):
            with cpu_hog(not args.no_hog) as hog:
                print(f"# paired-aa {i + 1}/{args.runs_aa}: pytest --perfsuite-ab HEAD, {hog}", flush=True)
                run = pytest_run(repo, ["--perfsuite-ab", "HEAD", "--perfsuite-ab-rounds", str(args.rounds),
                                        "--perfsuite-dir", f"results/paired-aa-{i}"], pinned=True)
            _record(results, "paired-aa", run, 0)
    if "cost" in parts:
        for knob, value, metric in (("EXTRA_FSYNCS", "1", "metrics.fsyncs"),
                                    ("PADDING", str(1 << 20), "allocation.total_bytes")):
            for i in range(args.runs_plant):
                repo = fresh(f"cost-{knob.lower()}-{i}")
                print(f"# cost {knob} {i + 1}/{args.runs_plant}: separate sessions, the plant in the second",
                      flush=True)
                base = pytest_run(repo, [*separate, "--perfsuite-dir", "results/base"], pinned=False)
                results.append({"part": "cost-base", **base, "expected": 0, "ok": base["exit"] == 0})
                team.plant(repo, knob, value)
                run = pytest_run(repo, [*separate, "--perfsuite-dir", "results/new", "--perfsuite-compare",
                                        "results/base", "--perfsuite-compare-fail"], pinned=False)
                _record(results, f"cost-{knob.lower()}", run, 1, metric)
    if "block" in parts:
        for i in range(args.runs_plant):
            repo = fresh(f"block-{i}")
            team.plant(repo, "BLOCK_MS", "2")
            team.commit_all(repo, "plant: a 2 ms block on the loop thread in every commit")
            print(f"# block {i + 1}/{args.runs_plant}: pytest --perfsuite-ab HEAD~1 (HEAD blocks 2 ms)", flush=True)
            run = pytest_run(repo, ["--perfsuite-ab", "HEAD~1", "--perfsuite-ab-rounds", str(args.rounds),
                                    "--perfsuite-dir", "results/block"], pinned=False)
            ok_names = ("max_gap_ms", "stalls.longest_ms", "submission_ms", "ack_ms")
            named = any(f"regressed: test_commit/call {m}" in ln for ln in run["named"] for m in ok_names)
            results.append({"part": "block", **run, "expected": 1, "ok": run["exit"] == 1 and named})
            print(f"  -> {'as expected' if results[-1]['ok'] else 'NOT AS EXPECTED'} (expected exit 1 naming a "
                  "timing)", flush=True)
    summary: dict[str, Any] = {"workdir": str(root), "hog": not args.no_hog, "rounds": args.rounds,
                               "samples": args.samples, "parts": {}}
    for part in sorted({r["part"] for r in results}):
        runs = [r for r in results if r["part"] == part]
        summary["parts"][part] = {"runs": len(runs), "as_expected": sum(r["ok"] for r in runs),
                                  "exits": [r["exit"] for r in runs], "seconds": [r["seconds"] for r in runs]}
    summary["runs"] = results
    text = json.dumps(summary, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
