"""The test suite as CI runs it, N times, each on a fresh clone of this checkout's committed HEAD (`make test`,
the README's test command; fresh install included), optionally with CPU hogs: not a test, it times.

A suite that passes only on a quiet machine gets switched off; this measures whether it passes loaded, and
how long it takes quiet and loaded. Every run prints its exit status, its wall time, pytest's summary line
and the failures' names; the JSON of every run goes to --out, rewritten after each.

    python scripts/acceptance/suite_acceptance.py [--runs 5] [--hogs 2] [--until HH:MM] [--workdir DIR] [--out OUT]
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).resolve().parents[2]
_SUMMARY = re.compile(r"^=*\s*(\d+ (passed|failed).*) in [\d.]+s")


def _hogs() -> Any:
    spec = importlib.util.spec_from_file_location("ab_user_acceptance", SOURCE / "scripts" / "acceptance" /
                                                  "ab_user_acceptance.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ab_user_acceptance"] = module
    spec.loader.exec_module(module)
    return module.hogs


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def one_run(clone: Path, log: Path) -> dict[str, Any]:
    """`make test` in a fresh clone: exit status, wall time, pytest's summary line, the failed tests."""
    started = time.monotonic()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    with open(log, "w") as out:
        proc = subprocess.run(["make", "test"], cwd=clone, stdout=out, stderr=subprocess.STDOUT, env=env,
                              check=False)
    seconds = time.monotonic() - started
    text = log.read_text(errors="replace")
    summary = next((m.group(1) for ln in reversed(text.splitlines()) if (m := _SUMMARY.match(ln.strip("= ")))),
                   "(no pytest summary)")
    failed = [ln.split()[1] for ln in text.splitlines() if ln.startswith(("FAILED ", "ERROR "))]
    pytest_s = re.findall(r" in ([\d.]+)s \(", text)
    return {"exit": proc.returncode, "seconds": round(seconds, 1), "pytest_seconds": float(pytest_s[-1]) if
            pytest_s else None, "summary": summary, "failed": failed, "finished_at": _now(),
            "load": [round(x, 2) for x in os.getloadavg()], "log": str(log)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--hogs", type=int, default=0, help="CPU hogs running for the whole acceptance")
    parser.add_argument("--until", help="start no run after this UTC time (today), HH:MM")
    parser.add_argument("--workdir", help="where the clones and logs go (default: a temp dir, kept)")
    parser.add_argument("--out", help="write every run here (rewritten after each run)")
    args = parser.parse_args()
    until = None
    if args.until:
        hour, minute = (int(x) for x in args.until.split(":"))
        until = dt.datetime.now(dt.UTC).replace(hour=hour, minute=minute, second=0, microsecond=0)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="suite-acceptance-"))
    workdir.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "-C", str(SOURCE), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    document: dict[str, Any] = {"commit": commit, "hogs": args.hogs, "started_at": _now(), "runs": []}
    print(f"make test on fresh clones of {commit[:12]}, {args.runs} runs, {args.hogs} hogs; logs in {workdir}",
          flush=True)
    with _hogs()(args.hogs):
        for i in range(1, args.runs + 1):
            if until is not None and dt.datetime.now(dt.UTC) >= until:
                document["stopped"] = f"--until {args.until} reached before run {i}"
                break
            clone = workdir / f"clone-{i}"
            shutil.rmtree(clone, ignore_errors=True)
            subprocess.run(["git", "clone", "--quiet", str(SOURCE), str(clone)], check=True)
            r = one_run(clone, workdir / f"run-{i}.log")
            document["runs"].append(r)
            document["ended_at"] = _now()
            if args.out:
                Path(args.out).write_text(json.dumps(document, indent=1))
            print(f"run {i}: exit {r['exit']} in {r['seconds'] / 60:.1f} min (pytest {r['pytest_seconds']} s, load "
                  f"{r['load'][0]}): {r['summary']}" + (f"; failed: {', '.join(r['failed'])}" if r["failed"] else ""),
                  flush=True)
            shutil.rmtree(clone, ignore_errors=True)  # the log stays
    green = sum(r["exit"] == 0 for r in document["runs"])
    print(f"{green}/{len(document['runs'])} green")
    return 0 if green == len(document["runs"]) == args.runs else 1


if __name__ == "__main__":
    raise SystemExit(main())
