"""Issue 28's measured acceptance of `perfsuite ab` and `bisect` on a user's own repository (not a test: it
times; run it on a quiet machine).

A scratch git repository outside perfsuite (tests/ab/userrepo.py: a JSONL transcript store whose commit fsyncs
in a writer thread, its own operation and recipe `commit` in ./recipes), perfsuite run as an installed tool
from it (this checkout's perfsuite on PYTHONPATH, nothing of the repository's but the working directory):

  aa      a harmless commit (a changelog line) on the base, `perfsuite ab <base>` from it: expect exit 0 every
          time (--runs-aa, default 10);
  block   a 2 ms busy loop on the event loop's thread at the first append of each commit: expect exit 1 naming
          a timing (max gap, loop stall or submission) every time (--runs-plant, default 5);
  fsync   the commit fsyncs twice: expect exit 1 naming metrics.fsyncs every time (--runs-plant);
  bisect  eight commits, the extra fsync planted at the fifth: `perfsuite bisect <first> HEAD`: expect exit 0
          naming the fifth, with its steps and their time (--bisect-plant block: the 2 ms block instead).

Every run prints its command (to re-run it by hand), exit status, duration and what it named; a JSON summary
closes the output (and goes to --json OUT). Usage:

    python scripts/acceptance/ab_user_acceptance.py [--only aa,block,fsync,bisect] [--runs-aa 10] [--runs-plant 5]
                                         [--samples N] [--looks N] [--bisect-plant fsync|block]
                                         [--workdir DIR] [--json OUT]

``--samples`` / ``--looks`` default to `perfsuite ab`'s own defaults (a smoke run: ``--runs-aa 1
--runs-plant 1 --samples 6 --looks 1``). Figures from a loaded machine are preliminary.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).resolve().parents[2]


def _userrepo() -> Any:
    """tests/ab/userrepo.py: the same repository the tests build."""
    spec = importlib.util.spec_from_file_location("userrepo", SOURCE / "tests" / "ab" / "userrepo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["userrepo"] = module
    spec.loader.exec_module(module)
    return module


u = _userrepo()


def run(repo: Path, args: list[str], out: Path) -> dict[str, Any]:
    """One `perfsuite ...` in ``repo``: its command, exit status, duration, first line and what it named."""
    env = u.tool_env()
    argv = [sys.executable, "-m", "perfsuite", *args]
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    shown = " ".join(shlex.quote(a) for a in ["python", *argv[1:]])
    result: dict[str, Any] = {
        "command": f"cd {shlex.quote(str(repo))} && PYTHONPATH={shlex.quote(str(SOURCE))} {shown}",
        "exit": proc.returncode,
        "seconds": round(seconds, 1),
        "first_line": (proc.stdout.splitlines() or [proc.stderr.strip()])[0],
    }
    if proc.returncode not in (0, 1, 3):
        result["stderr"] = proc.stderr.strip().splitlines()[-1:] if proc.stderr.strip() else []
    pairing = out / "ab.json"
    if pairing.is_file():
        sys.path.insert(0, str(SOURCE))
        from perfsuite.report import compare

        comparison = compare(out)
        result["regressed"] = [c.label for c in comparison.regressions]
        result["inconclusive"] = [c.label for c in comparison.inconclusive]
        document = json.loads(pairing.read_text())
        result["looks"] = document.get("looks", 1)
        result["rounds"] = {e["recipe"]: e.get("rounds") for e in document["recipes"]}
    if (out / "bisect.json").is_file():
        document = json.loads((out / "bisect.json").read_text())
        result["bisect"] = {k: document.get(k) for k in ("status", "first_bad", "candidates", "metrics")}
        result["steps"] = [{k: s[k] for k in ("step", "commit", "position", "verdict", "ab_exit_status",
                                              "seconds", "evidence")} for s in document.get("steps", [])]
    return result


def describe(name: str, i: int, r: dict[str, Any]) -> str:
    named = ", ".join(r.get("regressed", [])) or "-"
    unsure = ", ".join(r.get("inconclusive", [])) or "-"
    rounds = ", ".join(f"{k} {v}" for k, v in (r.get("rounds") or {}).items())
    return (f"{name:6} run {i}: exit {r['exit']} ({r['seconds']:.0f} s, {r.get('looks', '?')} look(s), rounds "
            f"{rounds or '?'}) regressed: {named}; inconclusive: {unsure}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="aa,block,fsync,bisect", help="comma-separated scenarios")
    parser.add_argument("--runs-aa", type=int, default=10)
    parser.add_argument("--runs-plant", type=int, default=5)
    parser.add_argument("--samples", type=int, help="rounds per look (default: perfsuite ab's)")
    parser.add_argument("--looks", type=int, help="at most this many looks (default: perfsuite ab's)")
    parser.add_argument("--bisect-plant", choices=("fsync", "block"), default="fsync")
    parser.add_argument("--workdir", help="where the scratch repositories and results go (default: a temp dir, kept)")
    parser.add_argument("--json", help="write the summary and every run's details here")
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="ab-user-acceptance-"))
    workdir.mkdir(parents=True, exist_ok=True)
    extra = [*(["--samples", str(args.samples)] if args.samples else []),
             *(["--looks", str(args.looks)] if args.looks else [])]
    scenarios = args.only.split(",")
    repo = workdir / "myruntime"
    base = u.make_repo(repo)
    print(f"scratch repository {repo} at {base[:12]}; perfsuite from {SOURCE}; results under {workdir}", flush=True)
    runs: dict[str, list[dict[str, Any]]] = {}
    expected = {"aa": 0, "block": 1, "fsync": 1, "bisect": 0}
    for name, count in (("aa", args.runs_aa), ("block", args.runs_plant), ("fsync", args.runs_plant)):
        if name not in scenarios:
            continue
        u.git(repo, "checkout", "--quiet", "-B", name, base)
        if name == "aa":
            with open(repo / "CHANGELOG.md", "a") as fh:
                fh.write("- nothing that runs\n")
            commit = u.commit_all(repo, "a changelog line")
        else:
            commit = u.plant(repo, name)
        print(f"{name}: {commit[:12]} on {base[:12]} ({u.git(repo, 'log', '-1', '--format=%s')})", flush=True)
        runs[name] = []
        for i in range(1, count + 1):
            out = workdir / f"{name}-{i}"
            r = run(repo, ["ab", base, "-r", "commit", "--output-dir", str(out), *extra], out)
            runs[name].append(r)
            print(describe(name, i, r), flush=True)
            print(f"         {r['command']}", flush=True)
    if "bisect" in scenarios:
        history = workdir / "history"
        commits = u.history(history, commits=8, plant_at=5, name=args.bisect_plant)
        out = workdir / "bisect"
        r = run(history, ["bisect", commits[0], "HEAD", "-r", "commit", "--output-dir", str(out), *extra], out)
        r["planted_at"] = {"number": 5, "commit": commits[4]}
        r["named_the_fifth"] = (r.get("bisect") or {}).get("first_bad") == commits[4]
        runs["bisect"] = [r]
        print(f"bisect: exit {r['exit']} ({r['seconds']:.0f} s): {r['first_line']}", flush=True)
        for s in r.get("steps", []):
            print(f"         step {s['step']}: {s['commit'][:12]} ({s['position']}/7) {s['verdict']} "
                  f"(ab exit {s['ab_exit_status']}, {s['seconds']:.0f} s): {'; '.join(s['evidence'])}", flush=True)
        print(f"         {r['command']}", flush=True)
    summary = {
        name: {"expected_exit": expected[name], "exits": [r["exit"] for r in results],
               "as_expected": sum(r["exit"] == expected[name] for r in results), "runs": len(results),
               "seconds": [r["seconds"] for r in results],
               **({"named_the_fifth": results[0].get("named_the_fifth")} if name == "bisect" else {})}
        for name, results in runs.items()
    }
    document = {"source": str(SOURCE), "workdir": str(workdir), "base": base, "loadavg": list(os.getloadavg()),
                "options": {"samples": args.samples, "looks": args.looks, "bisect_plant": args.bisect_plant},
                "summary": summary, "runs": runs}
    print(json.dumps({"summary": summary, "loadavg": document["loadavg"]}, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(document, indent=1))
    ok = all(s["as_expected"] == s["runs"] for s in summary.values())
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
