"""The measured acceptance of `perfsuite ab` and `bisect` on a user's own repository (SPEC section 5, the CI
gate): not a test, it times.

A scratch git repository outside perfsuite (tests/ab/userrepo.py: a JSONL transcript store whose commit fsyncs
in a writer thread, its own operation and recipe `commit` in ./recipes), perfsuite run as an installed tool
from it (this checkout's perfsuite on PYTHONPATH, nothing of the repository's but the working directory):

  aa      a harmless commit (a changelog line) on the base, `perfsuite ab <base>` from it: expect exit 0 (passed
          or neutral: the loaded-runner policy, docs/gates.md "Exit status and loaded runners");
  block   a 3 ms busy loop on the event loop's thread at the first append of each commit (--block-ms 2: the
          older 2 ms plant): expect exit 1 naming a timing (max gap, loop stall, submission, acknowledgement)
          or, with --instructions, the instruction count. On a loaded machine timings are reported, not gated
          (unless --strict), so there only the instruction count can catch it;
  fsync   the commit fsyncs twice: expect exit 1 naming metrics.fsyncs;
  alloc   the commit allocates and drops 1 MB: expect exit 1 naming an allocation metric;
  bisect  eight commits, the extra fsync planted at the fifth: `perfsuite bisect <first> HEAD`: expect exit 0
          naming the fifth, with its steps and their time (--bisect-plant: another plant).

The scenarios run round by round (run 1 of each, then run 2 of each...), so a run stopped by --until or by
hand leaves every scenario with as many runs. ``--hogs N`` starts N ``python3 -c 'while True: pass'`` CPU
hogs for the whole run and always ends them (an error, Ctrl-C or SIGTERM included). Every run prints its exit
status, duration, first line and the command to re-run it by hand; then one tally per scenario
(``block: 19/20 as expected``). The JSON of the tallies and every run goes to --out, rewritten after each run.

    python scripts/acceptance/ab_user_acceptance.py [--only aa,block,fsync,alloc,bisect] [--runs N]
        [--runs-aa 10] [--runs-plant 5] [--samples N] [--looks N] [--block-ms 3] [--instructions] [--strict]
        [--hogs N] [--until HH:MM] [--bisect-plant fsync|block|block3|alloc] [--workdir DIR] [--out OUT]

``--samples`` / ``--looks`` default to `perfsuite ab`'s own (a smoke run: ``--runs 1 --samples 6 --looks 1``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

SOURCE = Path(__file__).resolve().parents[2]
SCENARIOS = ("aa", "block", "fsync", "alloc", "bisect")
EXPECTED = {"aa": 0, "block": 1, "fsync": 1, "alloc": 1, "bisect": 0}
#: what a plant's regression must name (a substring of a regressed metric's label)
NAMES = {"block": ("max_gap", "stall", "submission", "ack_ms", "instructions."), "fsync": ("metrics.fsyncs",),
         "alloc": ("allocation.",)}


def _userrepo() -> Any:
    """tests/ab/userrepo.py: the same repository the tests build."""
    spec = importlib.util.spec_from_file_location("userrepo", SOURCE / "tests" / "ab" / "userrepo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["userrepo"] = module
    spec.loader.exec_module(module)
    return module


u = _userrepo()

#: the ``block`` plant's fixed work on the caller's thread: ``rounds`` steps of small-int arithmetic, which
#: allocates nothing (every value under 257: cached ints; ``itertools.repeat``), so the plant moves the time
#: and the instructions only, not the allocation pass (a hashlib loop also allocated 4 MB per operation)
WORK = "h = 1\nfor _ in itertools.repeat(None, rounds):\n    h = (h * 3 + 7) & 63\n"


def _work_seconds(rounds: int) -> float:
    """One timing of :data:`WORK` with ``rounds`` steps in this interpreter (the workers' own)."""
    # a function's body, as in the planted method: locals are faster than a module's names (hazard: 2x)
    text = "def work(rounds):\n" + "".join(f"    {line}\n" for line in WORK.splitlines())
    namespace: dict[str, Any] = {"itertools": __import__("itertools")}
    exec(compile(text, "<block-work>", "exec"), namespace)  # pylint: disable=exec-used  # the plant's own text
    started = time.perf_counter()
    namespace["work"](rounds)
    return time.perf_counter() - started


def calibrate_rounds(ms: int, tries: int = 15) -> tuple[int, float]:
    """How many steps of :data:`WORK` take ``ms`` milliseconds here: the minimum of ``tries`` timings (the
    quietest moment, hazard: a busy machine reads slow and plants too little work), scaled; calibrated once,
    before any hog starts, and written into the planted commit as a constant, so the plant is the same work
    (instructions) under load and a ``ms`` synchronous step on a quiet machine. Returns (rounds, ns per step)."""
    rounds = 20000
    for _ in range(2):  # a first guess, then timings of the planted size itself (a short probe reads fast)
        per = min(_work_seconds(rounds) for _ in range(tries)) / rounds
        rounds = max(1, round(ms / 1000 / per))
    return rounds, per * 1e9


def work_plant(ms: int, rounds: int) -> tuple[str, str, str, str]:
    """The ``block`` plant as fixed work: ``rounds`` steps (calibrated to ``ms`` ms) at the first append of
    each commit, on the event loop's thread. A wall-clock busy loop (``while perf_counter() < end``) runs few
    iterations under valgrind, so its instruction count barely moved (+1.2%, inside NEW's range) and a loaded
    runner, where only counts gate, could not catch it; a fixed count of iterations is the same instructions
    under any load."""
    rel, old, _, _ = u.PLANTS["block"]
    body = "".join(f"            {line}\n" for line in WORK.splitlines())
    new = (f"{old}        if not self.pending:  # {ms} ms of fixed work on the caller's thread (calibrated)\n"
           f"            import itertools\n            rounds = {rounds}\n{body}")
    return rel, old, new, f"append does {ms} ms of work ({rounds} steps) on its thread at the first record"


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "first_line": (proc.stdout.splitlines() or [proc.stderr.strip()])[0],
    }
    if proc.returncode not in (0, 1, 3):
        result["stderr"] = proc.stderr.strip().splitlines()[-1:] if proc.stderr.strip() else []
    pairing = out / "ab.json"
    if pairing.is_file():
        sys.path.insert(0, str(SOURCE))
        from perfsuite.report import compare

        comparison = compare(out)
        result["outcome"] = comparison.outcome
        result["loaded"] = bool(comparison.loaded)
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


def as_expected(name: str, r: dict[str, Any]) -> bool:
    """The run's exit status is the scenario's, and a plant's regression names what it planted."""
    if r["exit"] != EXPECTED[name]:
        return False
    if name in NAMES:
        return any(any(part in label for part in NAMES[name]) for label in r.get("regressed", []))
    if name == "bisect":
        return bool(r.get("named_the_fifth"))
    return True


def describe(name: str, i: int, r: dict[str, Any]) -> str:
    named = ", ".join(r.get("regressed", [])) or "-"
    rounds = ", ".join(f"{k} {v}" for k, v in (r.get("rounds") or {}).items())
    mark = "ok" if r["ok"] else "NOT AS EXPECTED"
    return (f"{name:6} run {i}: exit {r['exit']} {mark} ({r['seconds']:.0f} s, {r.get('outcome', '-')}, "
            f"{r.get('looks', '?')} look(s), rounds {rounds or '?'}, load {r['loadavg'][0]:.2f}) regressed: {named}\n"
            f"         first line: {r['first_line']}\n         {r['command']}")


@contextmanager
def hogs(count: int) -> Iterator[list[int]]:
    """``count`` CPU hogs (``python3 -c 'while True: pass'``) for the duration; always ended, by their pid."""
    python = shutil.which("python3") or sys.executable
    started: list[subprocess.Popen[bytes]] = []

    def stop(signum: int, frame: FrameType | None) -> None:  # SIGTERM: unwind, so the hogs end too
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        for _ in range(count):
            started.append(subprocess.Popen([python, "-c", "while True: pass"], stdin=subprocess.DEVNULL))
        yield [p.pid for p in started]
    finally:
        for p in started:
            p.kill()
        for p in started:
            p.wait()
        signal.signal(signal.SIGTERM, previous)


def tallies(runs: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    return {name: {"expected_exit": EXPECTED[name], "as_expected": sum(r["ok"] for r in results),
                   "runs": len(results), "exits": [r["exit"] for r in results],
                   "outcomes": [r.get("outcome") for r in results], "seconds": [r["seconds"] for r in results]}
            for name, results in runs.items()}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated scenarios")
    parser.add_argument("--runs", type=int, help="runs per scenario (bisect: 1 unless given), over --runs-aa/-plant")
    parser.add_argument("--runs-aa", type=int, default=10)
    parser.add_argument("--runs-plant", type=int, default=5)
    parser.add_argument("--samples", type=int, help="rounds per look (default: perfsuite ab's)")
    parser.add_argument("--looks", type=int, help="at most this many looks (default: perfsuite ab's)")
    parser.add_argument("--block-ms", type=int, choices=(2, 3), default=3, help="the block plant's busy loop")
    parser.add_argument("--block-kind", choices=("work", "wall"), default="work",
                        help="block: fixed work calibrated to --block-ms (default), or the wall-clock busy loop")
    parser.add_argument("--instructions", action="store_true", help="pass --instructions to every ab (callgrind)")
    parser.add_argument("--strict", action="store_true", help="pass --strict to every ab and bisect")
    parser.add_argument("--hogs", type=int, default=0, help="CPU hogs running for the whole acceptance")
    parser.add_argument("--until", metavar="HH:MM", help="start no run after this UTC time (today)")
    parser.add_argument("--bisect-plant", choices=("fsync", "block", "block3", "alloc"), default="fsync")
    parser.add_argument("--workdir", help="where the scratch repositories and results go (default: a temp dir, kept)")
    parser.add_argument("--out", "--json", dest="out", help="write the tallies and every run's details here")
    return parser


def main() -> int:
    args = _parser().parse_args()
    scenarios = [s for s in args.only.split(",") if s]
    unknown = sorted(set(scenarios) - set(SCENARIOS))
    if unknown:
        print(f"ab_user_acceptance: unknown scenario(s) {', '.join(unknown)}; known: {', '.join(SCENARIOS)}",
              file=sys.stderr)
        return 2
    until = None
    if args.until:
        hour, minute = (int(x) for x in args.until.split(":"))
        until = dt.datetime.now(dt.UTC).replace(hour=hour, minute=minute, second=0, microsecond=0)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="ab-user-acceptance-"))
    workdir.mkdir(parents=True, exist_ok=True)
    extra = [*(["--samples", str(args.samples)] if args.samples else []),
             *(["--looks", str(args.looks)] if args.looks else []), *(["--strict"] if args.strict else [])]
    ab_extra = [*extra, *(["--instructions"] if args.instructions else [])]
    counts = {name: (args.runs if args.runs is not None else
                     1 if name == "bisect" else args.runs_aa if name == "aa" else args.runs_plant)
              for name in scenarios}
    repo = workdir / "myruntime"
    base = u.make_repo(repo)
    calibration: dict[str, Any] = {}
    if "block" in scenarios and args.block_kind == "work":
        rounds, ns = calibrate_rounds(args.block_ms)
        u.PLANTS["block-work"] = work_plant(args.block_ms, rounds)
        calibration = {"rounds": rounds, "ns_per_step": round(ns, 1), "ms": args.block_ms}
        print(f"block: {rounds} steps = {args.block_ms} ms here (min of 15 timings: {ns:.0f} ns each, "
              f"load {os.getloadavg()[0]:.2f})", flush=True)
    branches: dict[str, str] = {}
    for name in scenarios:
        if name == "bisect":
            continue
        u.git(repo, "checkout", "--quiet", "-B", name, base)
        if name == "aa":
            with open(repo / "CHANGELOG.md", "a") as fh:
                fh.write("- nothing that runs\n")
            branches[name] = u.commit_all(repo, "a changelog line")
        else:
            branches[name] = u.plant(repo, _plant_name(name, args))
        print(f"{name}: {branches[name][:12]} on {base[:12]} ({u.git(repo, 'log', '-1', '--format=%s')})", flush=True)
    document: dict[str, Any] = {
        "source": str(SOURCE), "workdir": str(workdir), "base": base, "started_at": _now(),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()], "argv": sys.argv[1:],
        "options": {k: v for k, v in vars(args).items() if k != "out"}, "block_calibration": calibration,
        "summary": {}, "runs": {}}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in scenarios}

    def save() -> None:
        document["summary"], document["runs"] = tallies(runs), runs
        document["ended_at"], document["loadavg_end"] = _now(), [round(x, 2) for x in os.getloadavg()]
        if args.out:
            Path(args.out).write_text(json.dumps(document, indent=1))

    print(f"scratch repository {repo} at {base[:12]}; perfsuite from {SOURCE}; results under {workdir}; "
          f"started {document['started_at']}, load {document['loadavg_start']}", flush=True)
    stopped = ""
    with hogs(args.hogs) as pids:
        if pids:
            print(f"hogs: {len(pids)} x python3 -c 'while True: pass' (pids {', '.join(map(str, pids))})", flush=True)
        try:
            for i in range(1, max(counts.values(), default=0) + 1):
                for name in scenarios:
                    if i > counts[name]:
                        continue
                    if until is not None and dt.datetime.now(dt.UTC) >= until:
                        stopped = f"--until {args.until} reached before {name} run {i}"
                        raise StopIteration
                    out = workdir / f"{name}-{i}"
                    if name == "bisect":
                        r = _bisect(workdir / f"history-{i}", out, args.bisect_plant, extra)
                    else:
                        u.git(repo, "checkout", "--quiet", name)
                        r = run(repo, ["ab", base, "-r", "commit", "--output-dir", str(out), *ab_extra], out)
                    r["ok"] = as_expected(name, r)
                    runs[name].append(r)
                    print(describe(name, i, r), flush=True)
                    save()
        except StopIteration:
            print(f"stopped: {stopped}", flush=True)
        except KeyboardInterrupt as exc:
            stopped = f"interrupted ({exc or 'Ctrl-C'})"
            print(f"stopped: {stopped}", flush=True)
    document["stopped"] = stopped
    save()
    print(f"ended {document['ended_at']}, load {document['loadavg_end']}")
    for name, tally in document["summary"].items():
        print(f"{name}: {tally['as_expected']}/{tally['runs']} as expected (exits {tally['exits']})")
    ok = all(t["as_expected"] == t["runs"] == counts[n] for n, t in document["summary"].items())
    return 0 if ok else 1


def _plant_name(name: str, args: argparse.Namespace) -> str:
    """The plant of a scenario: ``block`` is fixed work (``--block-kind work``) or the wall-clock loop."""
    if name != "block":
        return name
    if args.block_kind == "work":
        return "block-work"
    return "block" if args.block_ms == 2 else f"block{args.block_ms}"


def _bisect(history: Path, out: Path, plant: str, extra: list[str]) -> dict[str, Any]:
    commits = u.history(history, commits=8, plant_at=5, name=plant)
    r = run(history, ["bisect", commits[0], "HEAD", "-r", "commit", "--output-dir", str(out), *extra], out)
    r["planted_at"] = {"number": 5, "commit": commits[4]}
    r["named_the_fifth"] = (r.get("bisect") or {}).get("first_bad") == commits[4]
    for s in r.get("steps", []):
        r["first_line"] += (f"\n         step {s['step']}: {s['commit'][:12]} ({s['position']}/7) {s['verdict']} "
                            f"(ab exit {s['ab_exit_status']}, {s['seconds']:.0f} s): {'; '.join(s['evidence'])}")
    return r


if __name__ == "__main__":
    raise SystemExit(main())
