"""Acceptance measurements of issue 17 (the instrument's second pass), one command:

    python scripts/acceptance/instrument_acceptance.py [--samples N] [--out DIR] [--only a,b,c]

(a) **Loop stalls vs the max gap.** Busy-waits of 0 (control), 1, 3 and 8 ms are planted in the
    asynchronous select step (E4 phase 4, which runs on the loop thread) of a *planted copy* of the package
    in a temporary directory (``select_changes`` gets a busy-wait on ``time.perf_counter_ns`` as its first
    statement; the working tree is never edited). ``mailbox-delivery``'s async mode runs on that copy; per
    plant it prints the longest loop callback (M9, with its name) next to the max heartbeat gap (M1).
(b) **Process offload after warm-up** (``recipes/offload.toml``): acknowledgement, bytes written and file and
    directory fsyncs per publication for the process offload, next to the thread offload's.
(c) **Ack against the publication floor** for ``mailbox-delivery``, ``root-checkpoint`` and
    ``agent-checkpoint``: the median async (and sync) acknowledgement, the median publication floor
    (one generation's durable operations as raw os calls, same document), and their ratios; the fsync
    floor of the same invocation beside it.

Every run is ``python -m perfsuite run RECIPE`` (process isolation, the recipe's warm-up; the allocation pass
is switched off in temporary copies of the recipes because nothing here reads it). Figures are medians
over the samples (min-max in brackets), read from the results documents, which are kept in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PLANT = (
    "def select_changes(batch: Batch, jobs: Sequence[StageJob], staged: Staged, hashed: Hashed, "
    "view: BaseView) -> Selection:\n"
    '    """E4 phase 4: compare digests with the committed manifest; publish only what changed."""\n'
)
PLANTED = PLANT + (
    "    _planted_end = time.perf_counter_ns() + {ns}  # PLANTED by scripts/acceptance/instrument_acceptance.py\n"
    "    while time.perf_counter_ns() < _planted_end:\n"
    "        pass\n"
)


def _stat(values: list[float], fmt: str = "{:.3f}") -> str:
    if not values:
        return "not measured"
    med = statistics.median(values)
    return f"{fmt.format(med)} [{fmt.format(min(values))}-{fmt.format(max(values))}]"


def _recipe_copy(name: str, directory: Path, keep_modes: tuple[str, ...] | None = None) -> Path:
    """A copy of ``recipes/NAME.toml`` with the allocation pass off (and only ``keep_modes``, if given)."""
    text = (ROOT / "recipes" / f"{name}.toml").read_text(encoding="utf-8")
    text = re.sub(r"(?m)^allocation = true$", "allocation = false", text)
    if keep_modes is not None:
        head, *tables = re.split(r"(?m)^(?=\[modes\.)", text)
        kept = [t for t in tables if re.match(r"\[modes\.([\w-]+)\]", t).group(1) in keep_modes]
        text = head + "".join(kept)
    path = directory / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _run(recipes: list[Path], out: Path, samples: int, pythonpath: Path) -> dict[str, dict[str, Any]]:
    """One ``perfsuite run RECIPE...`` (one run id) with the package at ``pythonpath``: recipe -> document."""
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    cmd = [sys.executable, "-m", "perfsuite", "run", *map(str, recipes), "--samples", str(samples),
           "--output-dir", str(out)]
    # cwd = the package's root: `python -m` puts the working directory first on sys.path (and workers inherit it)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=pythonpath, check=False, timeout=7200)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"instrument_acceptance: {' '.join(cmd)} failed: {last}")
    docs = {}
    for line in proc.stdout.splitlines():
        if line.startswith("results: "):
            doc = json.loads(Path(line[len("results: "):]).read_text(encoding="utf-8"))
            docs[doc["recipe"]["name"]] = doc
    return docs


def _values(doc: dict[str, Any], mode: str, *keys: str) -> list[float]:
    out = []
    for sample in doc["modes"][mode]["samples"]:
        node: Any = sample
        for key in keys:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, int | float) and not isinstance(node, bool):
            out.append(float(node))
    return out


def planted_copy(directory: Path, busy_ms: float) -> Path:
    """The package, fixtures and recipes copied into ``directory`` with a busy-wait in ``select_changes``."""
    for part in ("perfsuite", "fixtures", "recipes"):
        shutil.copytree(ROOT / part, directory / part, ignore=shutil.ignore_patterns("__pycache__"))
    pipeline = directory / "perfsuite" / "engine" / "_pipeline.py"
    text = pipeline.read_text(encoding="utf-8")
    if PLANT not in text:
        raise SystemExit("instrument_acceptance: select_changes changed; update PLANT in this script")
    if busy_ms > 0:
        text = text.replace(PLANT, PLANTED.format(ns=int(busy_ms * 1e6)))
        if "\nimport time\n" not in text:
            raise SystemExit("instrument_acceptance: _pipeline.py no longer imports time")
    pipeline.write_text(text, encoding="utf-8")
    return directory


def part_a(work: Path, out: Path, samples: int) -> None:
    print("(a) planted busy-wait in the asynchronous select step (mailbox-delivery, async mode)")
    print(f"    {'planted':>8}  {'longest loop callback (ms)':>30}  {'max heartbeat gap (ms)':>28}  longest callback")
    for busy in (0.0, 1.0, 3.0, 8.0):
        copy = planted_copy(work / f"plant-{busy:g}ms", busy)
        recipe = _recipe_copy("mailbox-delivery", copy, keep_modes=("async",))
        doc = _run([recipe], out / f"a-plant-{busy:g}ms", samples, copy)["mailbox-delivery"]
        stalls = _values(doc, "async", "stalls", "longest_ms")
        gaps = _values(doc, "async", "max_gap_ms")
        names = {(s.get("stalls") or {}).get("top", [{}])[0].get("name") for s in doc["modes"]["async"]["samples"]}
        print(f"    {busy:>6g} ms  {_stat(stalls):>30}  {_stat(gaps):>28}  {', '.join(sorted(n for n in names if n))}")


def part_b(work: Path, out: Path, samples: int) -> None:
    print("(b) offload after warm-up (offload recipe: root checkpoint of the 27 MB session)")
    doc = _run([_recipe_copy("offload", work)], out / "b-offload", samples, ROOT)["offload"]
    print(f"    {'mode':<8} {'ack (ms)':>28} {'bytes written / publication':>30} {'fsyncs / pub':>14} "
          f"{'dir fsyncs / pub':>17} {'stage (ms)':>24}")
    for mode in ("thread", "process"):
        pubs = _values(doc, mode, "metrics", "publications")

        def per(key: str, mode: str = mode, pubs: list[float] = pubs) -> str:
            values = [v / p for v, p in zip(_values(doc, mode, "metrics", key), pubs) if p]
            return _stat(values, "{:,.0f}") if values else "not measured"

        print(f"    {mode:<8} {_stat(_values(doc, mode, 'ack_ms')):>28} {per('bytes_written'):>30} "
              f"{per('fsyncs'):>14} {per('dir_fsyncs'):>17} {_stat(_values(doc, mode, 'phases_ms', 'stage')):>24}")


def part_c(work: Path, out: Path, samples: int) -> None:
    print("(c) acknowledgement against the publication floor (and the fsync floor of the same invocation)")
    names = ("mailbox-delivery", "root-checkpoint", "agent-checkpoint")
    docs = _run([_recipe_copy(n, work) for n in ("fsync-floor", *names)], out / "c-floors", samples, ROOT)
    fsync_floor = statistics.median(_values(docs["fsync-floor"], "raw-os", "ack_ms"))
    print(f"    fsync floor (write, fsync, os.replace, directory fsync of 4 KiB): {fsync_floor:.3f} ms median")
    for name in names:
        doc = docs[name]
        floor = _values(doc, "publication-floor", "ack_ms")
        counts = {k: _values(doc, "publication-floor", "metrics", k) for k in ("fsyncs", "dir_fsyncs", "replaces")}
        pub = statistics.median(floor)
        print(f"    {name}: publication floor {_stat(floor)} ms "
              f"({', '.join(f'{k} {statistics.median(v):g}' for k, v in counts.items() if v)})")
        for mode in ("async", "sync"):
            ack = _values(doc, mode, "ack_ms")
            med = statistics.median(ack)
            print(f"      {mode:<6} ack {_stat(ack)} ms = {med / pub:.2f}x the publication floor, "
                  f"{med / fsync_floor:.2f}x the fsync floor")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=6, help="samples per mode (default: 6, the recipes')")
    parser.add_argument("--out", default="results/local/instrument-acceptance", help="where results documents go")
    parser.add_argument("--only", default="a,b,c", help="which parts to run (default: a,b,c)")
    args = parser.parse_args(argv)
    out = Path(args.out).resolve()
    parts = {"a": part_a, "b": part_b, "c": part_c}
    chosen = [p.strip() for p in args.only.split(",") if p.strip()]
    if not chosen or any(p not in parts for p in chosen) or args.samples < 1:
        print("instrument_acceptance: --only takes a,b,c and --samples a positive integer", file=sys.stderr)
        return 2
    print(f"instrument_acceptance: {args.samples} samples per mode, process isolation; documents in {out}")
    with tempfile.TemporaryDirectory(prefix="instrument-acceptance-") as tmp:
        for key in chosen:
            directory = Path(tmp) / key
            directory.mkdir()
            parts[key](directory, out, args.samples)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
