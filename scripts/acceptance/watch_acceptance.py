"""Issue 31's acceptance measurements (SPEC M11, M12), one command each; every figure printed comes from the results
documents these commands write, and each command is printed before it runs.

    python scripts/acceptance/watch_acceptance.py plant [--duration 10]    # 8 ms planted every 100 ms vs none
    python scripts/acceptance/watch_acceptance.py gc [--duration 6]        # a planted full collection, attributed
    python scripts/acceptance/watch_acceptance.py sigint                   # SIGINT mid-run: what was measured is kept
    python scripts/acceptance/watch_acceptance.py third-party [--duration 20]  # Textual's demo, AsyncSqliteSaver
    python scripts/acceptance/watch_acceptance.py typing [--samples 6]     # the typing recipes, then `perfsuite typing`
    python scripts/acceptance/watch_acceptance.py all                      # all of the above, short

Results go to ``--output-dir`` (default ``results/local/watch-acceptance-<time>/``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ROOT / "scripts" / "acceptance" / "watch_programs"
PY = sys.executable
TEXTUAL_KEYS = ("wait:1500,tab,wait:400,tab,wait:400,down,wait:300,down,wait:300,enter,wait:1200,tab,wait:400,"
                "down,down,down,wait:800,up,up,wait:800")


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.update(extra or {})
    return env


def _perfsuite(args: list[str], env: dict[str, str] | None = None, check: bool = True) -> int:
    shown = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
    print(f"$ {shown + ' ' if shown else ''}perfsuite {shlex.join(args)}", flush=True)
    proc = subprocess.run([PY, "-m", "perfsuite", *args], env=_env(env), check=False)
    if check and proc.returncode not in (0, 1):
        raise SystemExit(f"watch_acceptance: perfsuite {args[0]} exited {proc.returncode}")
    return proc.returncode


def _doc(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _whole(doc: dict[str, Any], mode: str = "live") -> list[dict[str, Any]]:
    return [w for w in doc["modes"][mode]["samples"] if w["labels"].get("window") == "whole"]


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def plant(out: Path, duration: float) -> None:
    """The acceptance of item 1: the stall and the max gap read about 8 ms more with the plant than without."""
    runs = {}
    for block in ("0", "8"):
        path = out / f"watch-plant-{block}ms.json"
        _perfsuite(["watch", "--duration", str(duration), "--window", "1", "--name", "watch-plant", "--output",
                    str(path), "--", PY, str(PROGRAMS / "plant.py"), "--block-ms", block, "--every-ms", "100"])
        runs[block] = _doc(path)
    print("\nplanted block  windows  max gap median/max (ms)  longest callback median/max (ms)  control max gap median")
    stats = {}
    for block, doc in runs.items():
        windows = _whole(doc)
        gaps = [w["max_gap_ms"] for w in windows]
        stalls = [w["stalls"]["longest_ms"] for w in windows]
        control = [w["max_gap_ms"] for w in doc["control"]["samples"]]
        stats[block] = (_median(gaps), _median(stalls))
        print(f"{block + ' ms':>13}  {len(windows):7}  {_median(gaps):10.3f} / {max(gaps):8.3f}  "
              f"{_median(stalls):16.3f} / {max(stalls):8.3f}  {_median(control):10.3f}")
    gap_delta = stats["8"][0] - stats["0"][0]
    stall_delta = stats["8"][1] - stats["0"][1]
    period = float(runs["8"]["recipe"]["heartbeat_ms"])
    gap_ok, stall_ok = (("yes" if abs(delta - 8) <= period else "no") for delta in (gap_delta, stall_delta))
    print(f"\ndifference (8 ms plant - none), medians over windows: max gap {gap_delta:+.3f} ms, longest callback "
          f"{stall_delta:+.3f} ms; within one heartbeat period ({period:g} ms) of 8 ms: max gap {gap_ok}, "
          f"stall {stall_ok}")
    _perfsuite(["compare", str(out / "watch-plant-0ms.json"), str(out / "watch-plant-8ms.json")], check=False)


def gc_pause(out: Path, duration: float) -> None:
    path = out / "watch-gc.json"
    _perfsuite(["watch", "--duration", str(duration), "--window", "1", "--output", str(path), "--", PY,
                str(PROGRAMS / "gc_pause.py"), "--objects", "300000", "--every-ms", "500"])
    doc = _doc(path)
    print("\nwindow  gen-2 collections  GC ms in window  in max gap  max gap ms  callback attributed (ms, of it GC)")
    for w in doc["modes"]["live"]["samples"]:
        entries = [e for e in w["stalls"]["top"] if e.get("gc_ms")]
        named = "; ".join(f"{e['name']} ({e['ms']:.3f}, {e['gc_ms']:.3f} GC)" for e in entries[:2]) or "-"
        print(f"{w['index']:6}  {w['gc']['by_generation']['2']:17}  {w['gc']['gc_ms']:15.3f}  "
              f"{w['gc']['in_max_gap']!s:>10}  {w['max_gap_ms']:10.3f}  {named}")


def sigint(out: Path) -> None:
    path = out / "watch-sigint.json"
    args = ["watch", "--window", "0.5", "--output", str(path), "--", PY, str(PROGRAMS / "plant.py"), "--block-ms", "8"]
    print(f"$ perfsuite {shlex.join(args)}   (SIGINT after 3 windows)", flush=True)
    proc = subprocess.Popen([PY, "-m", "perfsuite", *args], env=_env())
    seen = 0
    while seen < 3:
        time.sleep(0.1)
        try:
            seen = len(_doc(path)["modes"]["live"]["samples"])
        except (OSError, ValueError, KeyError):
            pass
    proc.send_signal(signal.SIGINT)
    status = proc.wait(timeout=60)
    doc = _doc(path)
    print(f"\nexit status {status}; document status {doc['status']}, stop {doc['live']['stop']}; windows on disk "
          f"before SIGINT {seen}, kept {len(doc['modes']['live']['samples'])}; control windows "
          f"{len(doc['control']['samples'])}")


def third_party(out: Path, duration: float) -> None:
    """Textual's own demo app (unchanged; headless with rendering on, keys pressed by Textual's autopilot) and
    LangGraph's AsyncSqliteSaver storing a growing checkpoint every 100 ms."""
    textual = out / "watch-textual-demo.json"
    env = {"TEXTUAL_DRIVER": "perfsuite.workloads.typing:FrameDriver", "TEXTUAL_PRESS": TEXTUAL_KEYS}
    _perfsuite(["watch", "--duration", str(duration), "--window", "1", "--name", "watch-textual-demo", "--output",
                str(textual), "--", PY, "-m", "textual.demo"], env=env)
    saver = out / "watch-sqlite-saver.json"
    _perfsuite(["watch", "--duration", str(duration), "--window", "1", "--name", "watch-sqlite-saver", "--output",
                str(saver), "--", PY, str(PROGRAMS / "sqlite_saver.py"), "--every-ms", "100"])
    for path in (textual, saver):
        doc = _doc(path)
        windows = doc["modes"]["live"]["samples"]
        worst = max(windows, key=lambda w: w["stalls"]["longest_ms"])
        top = worst["stalls"]["top"][0]
        gc_windows = sum(1 for w in windows if w["gc"]["collections"])
        verdict = doc["modes"]["live"]["verdict"]
        print(f"\n{doc['recipe']['name']}: {len(windows)} windows, max gap median "
              f"{_median([w['max_gap_ms'] for w in windows]):.3f} ms (worst {verdict['worst_ms']:.3f}), "
              f"{verdict['missed']} over {verdict['target_ms']:g} ms ({verdict['missed_with_gc']} with GC); "
              f"longest callback {top['ms']:.3f} ms in window {worst['index']}: {top['name']}"
              + (f" ({top['gc_ms']:.3f} ms of it GC)" if top.get("gc_ms") else "")
              + f"; windows with a collection {gc_windows}")
        growth = [(w["index"], w["stalls"]["longest_ms"]) for w in windows]
        print("  longest callback per window (ms): " + ", ".join(f"{i}:{ms:.2f}" for i, ms in growth))


def typing(out: Path, samples: int) -> None:
    """Item 2's acceptance: key latency per mode; the sync modes' slow keys named after the publication; the planted
    10 ms step in p99 (and not p50) against the frozen floor; the idle editor's latency stated as the floor."""
    recipes = ["typing-floor", "typing-root-checkpoint", "typing-agent-checkpoint", "typing-mailbox-delivery"]
    _perfsuite(["run", *recipes, "--samples", str(samples), "--output-dir", str(out)])
    _perfsuite(["typing", str(out)])
    print(f"$ perfsuite typing {out} --format json   (read below)", flush=True)
    proc = subprocess.run([PY, "-m", "perfsuite", "typing", str(out), "--format", "json"], env=_env(),
                          capture_output=True, text=True, check=True)
    rows = {(r["recipe"], r["mode"]): r for r in json.loads(proc.stdout)["rows"]}
    idle, plant = rows[("typing-floor", "idle")], rows[("typing-floor", "plant")]
    print(f"\nplanted 10 ms step against the frozen floor: p50 {idle['p50_ms']:.2f} -> {plant['p50_ms']:.2f} ms "
          f"({plant['p50_ms'] - idle['p50_ms']:+.2f}), p99 {idle['p99_ms']:.2f} -> {plant['p99_ms']:.2f} ms "
          f"({plant['p99_ms'] - idle['p99_ms']:+.2f}); keys held by the step: "
          + ", ".join(f"{b['name']} {b['keys']}" for b in plant["blame"] if "planted" in b["name"]))
    for (recipe, mode), row in sorted(rows.items()):
        if mode in ("sync", "async"):
            engine = [b for b in row["blame"] if b["name"].startswith("perfsuite.engine.")]
            named = ", ".join(f"{b['name']} {b['keys']} (worst {b['worst_ms']:.1f} ms)" for b in engine) or "none"
            print(f"{recipe} {mode}: slow keys held by an engine callback: {named}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["plant", "gc", "sigint", "third-party", "typing", "all"])
    parser.add_argument("--duration", type=float, default=None, help="seconds per watch")
    parser.add_argument("--samples", type=int, default=6, help="typing: samples per mode")
    parser.add_argument("--output-dir", default=None)
    args = parser.parse_args(argv)
    out = Path(args.output_dir or ROOT / "results" / "local" / f"watch-acceptance-{time.strftime('%Y%m%dT%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    short = args.what == "all"
    if args.what in ("plant", "all"):
        plant(out, args.duration or (6 if short else 10))
    if args.what in ("gc", "all"):
        gc_pause(out, args.duration or 6)
    if args.what in ("sigint", "all"):
        sigint(out)
    if args.what in ("third-party", "all"):
        third_party(out, args.duration or (10 if short else 20))
    if args.what in ("typing", "all"):
        typing(out, 2 if short and args.samples == 6 else args.samples)
    print(f"\nresults: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
