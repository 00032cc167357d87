"""How many samples `perfsuite ab` needs: the gate's timing rule simulated at several sample counts.

For one metric of one mode, draws BASE and HEAD samples and applies the rule of `perfsuite compare`
(Mann-Whitney U p < alpha and the Hodges-Lehmann ratio beyond the factor, shift of at least 0.5 ms): the
share of runs that detect a planted shift (``--shift 1.2``: +20%; ``--add-ms 1``: +1 ms), and the share of
A/A runs (no shift) that come out "inconclusive" or "regressed". Samples come from:

* ``--pairing DIR`` (an A/A `perfsuite ab` output with many samples, e.g. ``--samples 40``): resampled with
  replacement from both sides pooled: the machine's real spread, outliers included; or
* ``--result FILE``: a lognormal with the median and the robust log-spread (1.4826 x MAD of the logs) of
  that document's samples (few samples, e.g. the committed baseline: a model, said so in the output).

With ``--paired`` (and one or more ``--pairing`` A/A outputs) whole rounds are resampled instead: a round is
the BASE and HEAD sample of one index, run back to back, so a slow spell of the machine hits both; the
output then sets the gate's rule (unpaired U and Hodges-Lehmann, as `perfsuite compare` does today) beside
a paired rule on the same draws (Wilcoxon signed-rank on the per-round log ratios, the Hodges-Lehmann
estimate of their Walsh averages): what pairing the rounds would buy.

Usage: python scripts/ab_power.py --result results/baseline/mailbox-delivery-*.json --mode async
       --metric ack_ms --shift 1.2 [--n 6,8,12,16,20,24] [--trials 2000] [--seed 1]
       python scripts/ab_power.py --paired --pairing AA_DIR [AA_DIR ...] --mode sync --metric ack_ms
Deterministic for a given seed. Not a test: it reads measurements, it never makes them.
"""

from __future__ import annotations

import argparse
import glob
import json
from pathlib import Path

import numpy as np
from scipy.stats import mannwhitneyu, wilcoxon

FLOOR_MS = 0.5


def _values(doc: dict, mode: str, metric: str) -> np.ndarray:
    return np.asarray([float(s[metric]) for s in doc["modes"][mode]["samples"]], dtype=float)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--pairing", nargs="+", help="A/A `perfsuite ab` output directories (resampled)")
    source.add_argument("--result", help="a results document (lognormal model of its samples)")
    parser.add_argument("--mode", required=True)
    parser.add_argument("--metric", default="ack_ms")
    parser.add_argument("--shift", type=float, default=1.2, help="multiplicative shift planted in HEAD")
    parser.add_argument("--add-ms", type=float, default=0.0, help="additive shift planted in HEAD (ms)")
    parser.add_argument("--n", default="6,8,12,16,20,24", help="samples per side to try")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--factor", type=float, default=1.10)
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--paired", action="store_true", help="resample whole rounds; compare the two rules")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    if args.paired:
        if not args.pairing:
            parser.error("--paired needs --pairing")
        return _paired(args, rng)
    if args.pairing:
        pool = np.concatenate([
            _values(json.loads((Path(folder) / e[side]).read_text()), args.mode, args.metric)
            for folder in args.pairing
            for e in json.loads((Path(folder) / "ab.json").read_text())["recipes"] for side in ("base", "head")])
        what = f"resampled from {pool.size} A/A samples of {', '.join(args.pairing)}"

        def draw(n: int) -> np.ndarray:
            return rng.choice(pool, size=n, replace=True)
    else:
        path = sorted(p for p in glob.glob(args.result) if not p.endswith(".pyperf.json"))[-1]
        logs = np.log(_values(json.loads(Path(path).read_text()), args.mode, args.metric))
        centre = float(np.median(logs))
        spread = 1.4826 * float(np.median(np.abs(logs - centre)))
        what = (f"lognormal model of {path} ({logs.size} samples): median {np.exp(centre):.3f}, "
                f"log-spread {spread:.3f}")

        def draw(n: int) -> np.ndarray:
            return np.exp(rng.normal(centre, spread, n))
    plant = f"x{args.shift:g}" + (f" +{args.add_ms:g} ms" if args.add_ms else "")
    print(f"{args.mode} {args.metric}: {what}; planted {plant}; alpha {args.alpha:g}, factor {args.factor:g}, "
          f"{args.trials} trials, seed {args.seed}")
    for n in (int(x) for x in args.n.split(",")):
        detected = aa_inconclusive = aa_regressed = 0
        for _ in range(args.trials):
            base, head, again = draw(n), draw(n) * args.shift + args.add_ms, draw(n)
            for new, planted in ((head, True), (again, False)):
                ratio = float(np.median(np.divide.outer(new, base)))
                p = float(mannwhitneyu(base, new, alternative="two-sided").pvalue)
                beyond = ratio >= args.factor and (ratio - 1.0) * float(np.median(base)) >= FLOOR_MS
                if planted:
                    detected += beyond and p < args.alpha
                else:
                    aa_regressed += beyond and p < args.alpha
                    aa_inconclusive += beyond and p >= args.alpha
        t = args.trials
        print(f"  n = {n:2} per side: planted shift detected {detected / t:5.1%}; A/A worse-way inconclusive "
              f"{aa_inconclusive / t:5.1%}, regressed {aa_regressed / t:5.1%}")
    return 0


def _rounds(folders: list[str], mode: str, metric: str) -> np.ndarray:
    """``(rounds, 2)``: each A/A run's BASE and HEAD samples of one index (rounds missing a side are left out)."""
    out = []
    for folder in folders:
        for entry in json.loads((Path(folder) / "ab.json").read_text())["recipes"]:
            sides = [json.loads((Path(folder) / entry[side]).read_text()) for side in ("base", "head")]
            by_index = [{int(s["index"]): float(s[metric]) for s in doc["modes"][mode]["samples"]} for doc in sides]
            out += [(by_index[0][i], by_index[1][i]) for i in sorted(set(by_index[0]) & set(by_index[1]))]
    return np.asarray(out, dtype=float)


def _walsh_median(d: np.ndarray) -> float:
    i, j = np.triu_indices(d.size)
    return float(np.median((d[i] + d[j]) / 2.0))


def _paired(args: argparse.Namespace, rng: np.random.Generator) -> int:
    rounds = _rounds(args.pairing, args.mode, args.metric)
    print(f"{args.mode} {args.metric}: {len(rounds)} A/A rounds of {len(args.pairing)} runs resampled whole; planted "
          f"x{args.shift:g}; alpha {args.alpha:g}, factor {args.factor:g}, {args.trials} trials, seed {args.seed}")
    for n in (int(x) for x in args.n.split(",")):
        counts = {rule: [0, 0, 0] for rule in ("unpaired", "paired")}  # detected, A/A inconclusive, A/A regressed
        for _ in range(args.trials):
            for planted in (True, False):
                pick = rounds[rng.integers(0, len(rounds), n)]
                base, new = pick[:, 0], pick[:, 1] * (args.shift if planted else 1.0) + (args.add_ms if planted else 0)
                floor_ok = float(np.median(base))
                ratio_u = float(np.median(np.divide.outer(new, base)))
                p_u = float(mannwhitneyu(base, new, alternative="two-sided").pvalue)
                d = np.log(new) - np.log(base)
                ratio_p = float(np.exp(_walsh_median(d)))
                p_p = float(wilcoxon(d).pvalue) if np.any(d != 0) else 1.0
                for rule, ratio, p in (("unpaired", ratio_u, p_u), ("paired", ratio_p, p_p)):
                    beyond = ratio >= args.factor and (ratio - 1.0) * floor_ok >= FLOOR_MS
                    c = counts[rule]
                    if planted:
                        c[0] += beyond and p < args.alpha
                    else:
                        c[1] += beyond and p >= args.alpha
                        c[2] += beyond and p < args.alpha
        t = args.trials
        for rule, (det, inc, reg) in counts.items():
            print(f"  n = {n:2} rounds, {rule:8}: planted shift detected {det / t:5.1%}; A/A worse-way inconclusive "
                  f"{inc / t:5.1%}, regressed {reg / t:5.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
