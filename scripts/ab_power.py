"""How many samples `perfsuite ab` needs: the gate's timing rule simulated at several sample counts.

For one metric of one mode, draws BASE and HEAD samples and applies the rule of `perfsuite compare`
(Mann-Whitney U p < alpha and the Hodges-Lehmann ratio beyond the factor, shift of at least 0.5 ms): the
share of runs that detect a planted shift (``--shift 1.2``: +20%; ``--add-ms 1``: +1 ms), and the share of
A/A runs (no shift) that come out "inconclusive" or "regressed". Samples come from:

* ``--pairing DIR`` (an A/A `perfsuite ab` output with many samples, e.g. ``--samples 40``): resampled with
  replacement from both sides pooled: the machine's real spread, outliers included; or
* ``--result FILE``: a lognormal with the median and the robust log-spread (1.4826 x MAD of the logs) of
  that document's samples (few samples, e.g. the committed baseline: a model, said so in the output).

Usage: python scripts/ab_power.py --result results/baseline/mailbox-delivery-*.json --mode async
       --metric ack_ms --shift 1.2 [--n 6,8,12,16,20,24] [--trials 2000] [--seed 1]
Deterministic for a given seed. Not a test: it reads measurements, it never makes them.
"""

from __future__ import annotations

import argparse
import glob
import json
from pathlib import Path

import numpy as np
from scipy.stats import mannwhitneyu

FLOOR_MS = 0.5


def _values(doc: dict, mode: str, metric: str) -> np.ndarray:
    return np.asarray([float(s[metric]) for s in doc["modes"][mode]["samples"]], dtype=float)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--pairing", help="an A/A `perfsuite ab` output directory (resampled)")
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
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    if args.pairing:
        pairing = json.loads((Path(args.pairing) / "ab.json").read_text())
        pool = np.concatenate([
            _values(json.loads((Path(args.pairing) / e[side]).read_text()), args.mode, args.metric)
            for e in pairing["recipes"] for side in ("base", "head")])
        what = f"resampled from {pool.size} A/A samples of {args.pairing}"

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


if __name__ == "__main__":
    raise SystemExit(main())
