"""How often `perfsuite ab` passes an identical revision and catches a planted delay, by resampling real rounds.

Reads A/A `perfsuite ab` output directories (both sides the same revision: every difference between them is
the machine). A round is the BASE and HEAD sample of one index of every gating timing headline (the
registry's max gap, longest stall, submission, acknowledgement, drain; reference modes left out). For each
trial, rounds are drawn **without replacement** from all the directories' rounds pooled, BASE and HEAD are
swapped in a random half of them (A/A labels are exchangeable), a planted delay is added to HEAD if asked,
and the gate's timing rule is applied to the whole comparison:

* ``unpaired:N``: Mann-Whitney U and the Hodges-Lehmann ratio on N samples per side (the first gate);
* ``paired:N``: the signed-rank test on N rounds' log ratios and their Hodges-Lehmann estimate;
* ``paired:NxK``: up to K looks of N rounds while a headline is inconclusive, each at alpha / K;
* a ``:holm`` suffix: Holm's step-down over the comparison's headlines (the gate's default for ``ab``).

A headline regresses when its (adjusted) p is below the level and its ratio is beyond the factor the worse
way by at least 0.5 ms; beyond it but not significant is inconclusive. The comparison exits 1 on any
regression, else 3 on any inconclusive, else 0. The statistics are perfsuite's own
(:mod:`perfsuite.report`); costs are not simulated (they are exact). Not a test: it reads
measurements, it never makes them. Deterministic for a given seed.

Usage:
    python scripts/acceptance/ab_simulate.py --pairing AA_DIR [AA_DIR ...] [--recipe mailbox-delivery]
        [--rules unpaired:16,paired:16x4:holm] [--add-ms 1] [--planted sync:*,async:ack_ms,async:drain_ms]
        [--trials 1000] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import sys
from fnmatch import fnmatchcase
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from perfsuite.harness import sample_metrics
from perfsuite.report import TIMING_HEADLINES, hodges_lehmann_ratio, paired_ratio, signed_rank_p

DEFAULT_RULES = "unpaired:16,paired:16,paired:32,paired:32:holm,paired:16x4:holm"
#: where an off-loop delay shows: every synchronous headline (the loop waits for the pipeline) and the
#: asynchronous acknowledgement and drain
DEFAULT_PLANTED = "sync:*,async:ack_ms,async:drain_ms"


def load_rounds(folders: list[str], recipe: str) -> tuple[list[tuple[str, str]], np.ndarray]:
    """(the headlines every round holds, an array rounds x 2 sides x headlines) from A/A pairings."""
    found: list[dict[tuple[str, str], tuple[float, float]]] = []
    for folder in folders:
        pairing = json.loads((Path(folder) / "ab.json").read_text())
        entry = next((e for e in pairing["recipes"] if e["recipe"] == recipe), None)
        if entry is None:
            raise SystemExit(f"{folder}: no {recipe} in the pairing")
        sides = []
        for side in ("base", "head"):
            doc = json.loads((Path(folder) / entry[side]).read_text())
            table: dict[tuple[str, str, int], float] = {}
            for mode, body in doc["modes"].items():
                if body.get("reference"):  # a by-design reference (a floor): never gates
                    continue
                for sample in body["samples"]:
                    for key, value in sample_metrics(sample).items():
                        if key in TIMING_HEADLINES:
                            table[(mode, key, int(sample["index"]))] = float(value)
            sides.append(table)
        for i in sorted({i for _, _, i in sides[0]} & {i for _, _, i in sides[1]}):
            found.append({(m, k): (sides[0][(m, k, j)], sides[1][(m, k, j)]) for m, k, j in sides[0]
                          if j == i and (m, k, j) in sides[1]})
    keys = sorted(set.intersection(*(set(r) for r in found))) if found else []
    if not keys:
        raise SystemExit("no rounds with a headline on both sides")
    return keys, np.array([[[r[k][s] for k in keys] for s in (0, 1)] for r in found], dtype=float)


def verdicts(sample: np.ndarray, keys: list[tuple[str, str]], paired: bool, level: float, holm: bool,
             factor: float) -> tuple[bool, bool]:
    """(any regression, any inconclusive) of one comparison of ``sample`` (rounds x 2 x headlines)."""
    from scipy.stats import mannwhitneyu

    results = []
    for j, (_, metric) in enumerate(keys):
        b, n = sample[:, 0, j], sample[:, 1, j]
        ratio = paired_ratio(b, n) if paired else hodges_lehmann_ratio(b, n)
        if ratio is not None and paired:
            p, _ = signed_rank_p(np.log(n / b))
        else:
            ratio = ratio if ratio is not None else float(np.median(n) / np.median(b))
            p = float(mannwhitneyu(b, n, alternative="two-sided").pvalue)
        floor = TIMING_HEADLINES[metric].min_change_ms
        beyond = ratio >= factor and (ratio - 1.0) * float(np.median(b)) >= floor
        results.append((p, beyond))
    ps = np.array([p for p, _ in results])
    significant = np.zeros(len(results), dtype=bool)
    if holm:
        for rank, j in enumerate(np.argsort(ps)):
            if ps[j] * (len(ps) - rank) >= level:
                break
            significant[j] = True
    else:
        significant = ps < level
    regressed = any(beyond and sig for (_, beyond), sig in zip(results, significant))
    unsure = any(beyond and not sig for (_, beyond), sig in zip(results, significant))
    return regressed, unsure


def simulate(rounds: np.ndarray, keys: list[tuple[str, str]], rule: str, plant: np.ndarray, trials: int,
             alpha: float, factor: float, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    parts = rule.split(":")
    paired, holm = parts[0] == "paired", "holm" in parts[2:]
    size, _, looks = parts[1].partition("x")
    per_look, looks_n = int(size), int(looks or 1)
    if per_look * looks_n > len(rounds):
        raise SystemExit(f"{rule}: needs {per_look * looks_n} rounds, the pairings hold {len(rounds)}")
    exits = np.zeros(4, dtype=int)
    used = 0
    for _ in range(trials):
        sample = rounds[rng.permutation(len(rounds))[: per_look * looks_n]].copy()
        swap = rng.random(len(sample)) < 0.5
        sample[swap] = sample[swap][:, ::-1, :]
        sample[:, 1, :] += plant
        for look in range(1, looks_n + 1):
            regressed, unsure = verdicts(sample[: per_look * look], keys, paired, alpha / looks_n, holm, factor)
            if regressed or not unsure:
                break
        used += per_look * look
        exits[1 if regressed else 3 if unsure else 0] += 1
    return exits, used / trials


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairing", nargs="+", required=True, help="A/A `perfsuite ab` output directories")
    parser.add_argument("--recipe", default="mailbox-delivery")
    parser.add_argument("--rules", default=DEFAULT_RULES, help=f"comma-separated (default: {DEFAULT_RULES})")
    parser.add_argument("--add-ms", type=float, default=1.0, help="the planted delay added to HEAD (ms)")
    parser.add_argument("--planted", default=DEFAULT_PLANTED, help="mode:metric patterns the delay shows in")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--factor", type=float, default=1.10)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    keys, rounds = load_rounds(args.pairing, args.recipe)
    patterns = [p.split(":", 1) for p in args.planted.split(",") if p]
    plant = np.array([args.add_ms if any(fnmatchcase(m, pm) and fnmatchcase(k, pk) for pm, pk in patterns) else 0.0
                      for m, k in keys])
    print(f"{len(rounds)} rounds of {len(args.pairing)} A/A pairings, {args.recipe}, {len(keys)} headlines: "
          f"{', '.join(f'{m} {k}' for m, k in keys)}; planted +{args.add_ms:g} ms in "
          f"{', '.join(f'{m} {k}' for (m, k), x in zip(keys, plant) if x)}; {args.trials} trials, seed {args.seed}")
    print(f"{'rule':24} {'A/A exit 0':>10} {'exit 1':>7} {'exit 3':>7} {'rounds':>7} | {'planted exit 1':>14} "
          f"{'exit 3':>7} {'rounds':>7}")
    for rule in args.rules.split(","):
        rng = np.random.default_rng(args.seed)
        aa, aa_rounds = simulate(rounds, keys, rule, np.zeros(len(keys)), args.trials, args.alpha, args.factor, rng)
        pl, pl_rounds = simulate(rounds, keys, rule, plant, args.trials, args.alpha, args.factor, rng)
        t = args.trials
        print(f"{rule:24} {aa[0] / t:10.1%} {aa[1] / t:7.1%} {aa[3] / t:7.1%} {aa_rounds:7.1f} | "
              f"{pl[1] / t:14.1%} {pl[3] / t:7.1%} {pl_rounds:7.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
