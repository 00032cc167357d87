"""Issue 15's acceptance measurements for `perfsuite ab`, as one re-runnable command (not a test: it times).

On a scratch clone of this repository (never the checkout itself), each planted regression is committed on
a branch of its own and `perfsuite ab <base> -r mailbox-delivery` run from that branch, HEAD being the
working tree of the planted commit:

  sleep3   time.sleep(0.003) at the start of hash_staged, an off-loop step of the publication pipeline
           (inline on the loop for the synchronous writer): expect exit 1 naming the synchronous max gap or
           acknowledgement and the asynchronous acknowledgement, and not the asynchronous max gap;
  alloc    1 MB allocated and dropped per publication in Session.freeze (the loop thread): expect exit 1
           naming allocation.total_bytes;
  sleep1   time.sleep(0.001) in the same off-loop step (about +20% on the asynchronous acknowledgement):
           expect exit 1 in at least 4 of 5 runs;
  aa       nothing planted, the base against itself: expect exit 0 every time (10 runs);
  mdr      the base against itself at 6 samples (`--samples 6 --looks 1`): the smallest detectable ratio
           of mailbox-delivery's sync and async acknowledgement and max gap, as the gate states it (6
           paired rounds, Holm over the headlines) and as `perfsuite compare base/ head/` states it for
           two sets of 6 samples (Mann-Whitney U, each headline at alpha).

Prints one line per run (exit status, the named metrics) and a summary, with the exact commands. Usage:

    python scripts/acceptance/ab_acceptance.py [--only sleep3,alloc,sleep1,aa,mdr] [--runs-sleep1 5] [--runs-aa 10]
                                    [--recipe mailbox-delivery] [--samples N] [--workdir DIR] [--json OUT]

``--samples`` defaults to `perfsuite ab`'s own default. The machine should be quiet: figures from a loaded
machine are preliminary.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).resolve().parents[2]
GIT_ENV = {"GIT_AUTHOR_NAME": "ab-acceptance", "GIT_AUTHOR_EMAIL": "ab@example.invalid",
           "GIT_COMMITTER_NAME": "ab-acceptance", "GIT_COMMITTER_EMAIL": "ab@example.invalid"}

_HASH_DOC = '    """E4 phase 3: digest the staged bytes (never live state), resuming from kept hasher state."""\n'
_FREEZE_DOC = '        (all when None), new attachments, and (unless ``sidecar`` is False) the detached sidecar."""\n'
#: name -> (file, anchor line, line inserted after it, commit message)
PLANTS = {
    "sleep3": ("perfsuite/engine/_pipeline.py", _HASH_DOC,
               "    time.sleep(0.003)  # planted by scripts/acceptance/ab_acceptance.py: 3 ms in an off-loop step\n",
               "plant: 3 ms sleep in hash_staged (off the loop for the asynchronous job)"),
    "sleep1": ("perfsuite/engine/_pipeline.py", _HASH_DOC,
               "    time.sleep(0.001)  # planted by scripts/acceptance/ab_acceptance.py: 1 ms in an off-loop step\n",
               "plant: 1 ms sleep in hash_staged (off the loop for the asynchronous job)"),
    "alloc": ("perfsuite/engine/_publishing.py", _FREEZE_DOC,
              "        _planted = bytes(1 << 20)  # planted by scripts/acceptance/ab_acceptance.py: 1 MB, loop thread\n"
              "        del _planted\n",
              "plant: 1 MB allocated and dropped per publication in freeze (loop thread)"),
}


def sh(args: list[str], cwd: Path, env: dict[str, str] | None = None,
       check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a command; its output captured as text."""
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=check)


def clone(workdir: Path) -> tuple[Path, str]:
    repo = workdir / "clone"
    sh(["git", "clone", "--quiet", "--no-hardlinks", str(SOURCE), str(repo)], workdir)
    base = sh(["git", "rev-parse", "HEAD"], repo).stdout.strip()
    return repo, base


def plant(repo: Path, base: str, name: str) -> str:
    """A branch ``plant-<name>`` off ``base`` with the plant committed; checked out. Returns the commit."""
    env = {**os.environ, **GIT_ENV}
    sh(["git", "checkout", "--quiet", "-B", f"plant-{name}", base], repo, env)
    path, anchor, line, message = PLANTS[name]
    file = repo / path
    text = file.read_text()
    if text.count(anchor) != 1:
        raise SystemExit(f"{path}: the anchor for plant {name!r} moved; update scripts/acceptance/ab_acceptance.py")
    file.write_text(text.replace(anchor, anchor + line))
    sh(["git", "commit", "--quiet", "-am", message], repo, env)
    return sh(["git", "rev-parse", "HEAD"], repo).stdout.strip()


def _headlines(comparison: Any) -> dict[str, Any]:
    return {
        c.label: {"ratio": round(c.ratio, 3), "p": c.p_value, "p_adjusted": c.p_adjusted, "test": c.test,
                  "detectable": c.detectable, "status": c.status, "gating": c.gating, "reference": c.reference}
        for c in comparison.changes
        if c.metric in ("ack_ms", "max_gap_ms", "submission_ms", "allocation.total_bytes") and c.mode != "control"
    }


def ab(repo: Path, base: str, out: Path, recipe: str, samples: int | None, looks: int | None = None) -> dict[str, Any]:
    """One `perfsuite ab` run; its exit status, first line, rounds, and what the comparison named."""
    args = [sys.executable, "-m", "perfsuite", "ab", base, "-r", recipe, "--output-dir", str(out)]
    if samples:
        args += ["--samples", str(samples)]
    if looks:
        args += ["--looks", str(looks)]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    started = time.monotonic()
    proc = sh(args, repo, env, check=False)
    result: dict[str, Any] = {
        "command": f"cd {repo} && PYTHONPATH={repo} " + " ".join(a if a != sys.executable else "python" for a in args),
        "exit": proc.returncode,
        "first_line": (proc.stdout.splitlines() or [proc.stderr.strip()])[0],
        "seconds": round(time.monotonic() - started, 1),
    }
    if (out / "ab.json").is_file():
        sys.path.insert(0, str(repo))
        from perfsuite.report import compare

        comparison = compare(out)
        result["regressed"] = [c.label for c in comparison.regressions]
        result["inconclusive"] = [c.label for c in comparison.inconclusive]
        result["headlines"] = _headlines(comparison)
        pairing = json.loads((out / "ab.json").read_text())
        result["looks"] = pairing.get("looks", 1)
        result["rounds"] = {e["recipe"]: e.get("rounds") for e in pairing["recipes"]}
        # the same samples as two unrelated sets, each headline at alpha: `perfsuite compare base/ head/`
        result["unpaired_headlines"] = _headlines(compare(out / "base", out / "head"))
    return result


def line(name: str, i: int, r: dict[str, Any]) -> str:
    named = ", ".join(r.get("regressed", [])) or "-"
    unsure = ", ".join(r.get("inconclusive", [])) or "-"
    rounds = ", ".join(f"{k} {v}" for k, v in (r.get("rounds") or {}).items())
    return (f"{name:7} run {i}: exit {r['exit']} ({r['seconds']:.0f} s, {r.get('looks', '?')} look(s), rounds "
            f"{rounds or '?'}) regressed: {named}; inconclusive: {unsure}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="sleep3,alloc,sleep1,aa,mdr", help="comma-separated scenarios")
    parser.add_argument("--runs-sleep1", type=int, default=5)
    parser.add_argument("--runs-aa", type=int, default=10)
    parser.add_argument("--recipe", default="mailbox-delivery")
    parser.add_argument("--samples", type=int, help="samples per mode per revision (default: perfsuite ab's)")
    parser.add_argument("--workdir", help="where the scratch clone and results go (default: a temp dir, kept)")
    parser.add_argument("--json", help="write every run's details here")
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="ab-acceptance-"))
    workdir.mkdir(parents=True, exist_ok=True)
    repo, base = clone(workdir)
    print(f"scratch clone {repo} at {base[:12]} (from {SOURCE}); results under {workdir}", flush=True)
    scenarios = args.only.split(",")
    runs: dict[str, list[dict[str, Any]]] = {}
    plan = [("sleep3", 1), ("alloc", 1), ("sleep1", args.runs_sleep1), ("aa", args.runs_aa), ("mdr", 1)]
    for name, count in plan:
        if name not in scenarios:
            continue
        if name in PLANTS:
            commit = plant(repo, base, name)
            print(f"{name}: planted as {commit[:12]} ({PLANTS[name][3]})", flush=True)
        else:
            sh(["git", "checkout", "--quiet", "--detach", base], repo)
        runs[name] = []
        for i in range(1, count + 1):
            out = workdir / f"{name}-{i}"
            samples = 6 if name == "mdr" else args.samples
            r = ab(repo, base, out, args.recipe, samples, 1 if name == "mdr" else None)
            runs[name].append(r)
            print(line(name, i, r), flush=True)
            print(f"          {r['command']}", flush=True)
    print("\nsummary (machine load now: {})".format(" ".join(f"{x:.2f}" for x in os.getloadavg())))
    for name, results in runs.items():
        exits = [r["exit"] for r in results]
        print(f"  {name:7} exits {exits}")
        if name == "mdr" and results and "headlines" in results[0]:
            unpaired = results[0].get("unpaired_headlines", {})
            for label, h in results[0]["headlines"].items():
                if label.split()[-1] in ("ack_ms", "max_gap_ms"):
                    if not h.get("gating", True):  # a reference mode (the publication floor): never gated
                        print(f"          {label}: not gated (reference mode: {h.get('reference')})")
                        continue
                    d, u = h["detectable"], (unpaired.get(label) or {}).get("detectable")
                    print(f"          {label}: smallest detectable ratio at 6 samples: the gate (6 paired rounds, "
                          f"Holm) {'never' if d is None else f'{d:.2f}x'}; two sets of 6 (Mann-Whitney U, "
                          f"alpha) {'never' if u is None else f'{u:.2f}x'} (observed {h['ratio']:.2f}x)")
    if args.json:
        Path(args.json).write_text(json.dumps({"base": base, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
