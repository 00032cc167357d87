"""Per-batch cost of a crash campaign, client against workers, and what it says about N workers (issue 32).

    python scripts/acceptance/cluster_costs.py [--max-states 500] [--jobs 2]

Runs ``crashcheck --max-states N`` on a local pool and measures CPU seconds: the client's (recording the
workloads, enumerating states, checking every outcome against the invariants, folding) and the workers'
(rebuilding and recovering states). Every crash state is checked in the client, so the client is the limit
of a cluster: with W workers the campaign scales about linearly until W * (client CPU per batch) reaches
the workers' CPU per batch; past that it runs at the client's pace. Prints both and the estimate.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

from perfsuite.cluster import PoolRunner
from perfsuite.crash import CrashConfig, Progress, run_campaign


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--max-states", type=int, default=500)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    events: list[Progress] = []
    load = os.getloadavg()
    client0, wall0 = _cpu(resource.RUSAGE_SELF), time.perf_counter()
    with PoolRunner(args.jobs) as runner:
        report = run_campaign(CrashConfig(max_states=args.max_states, jobs=args.jobs), runner=runner,
                              on_progress=events.append)
    wall = time.perf_counter() - wall0
    client, workers = _cpu(resource.RUSAGE_SELF) - client0, _cpu(resource.RUSAGE_CHILDREN)
    batches = len(events) - len(report.results)  # (each unit ends with one closing event)
    per_state = workers / report.states
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; after: "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"{report.states} states ({sum(r.states for r in report.results)} crash states, the rest recovery "
          f"crash states) in {batches} batches, {wall:.1f} s wall on {args.jobs} workers: "
          f"{report.states / wall:.0f} states/s")
    print(f"client CPU {client:.1f} s ({1000 * client / batches:.1f} ms per batch); workers' CPU {workers:.1f} s "
          f"({1000 * workers / batches:.1f} ms per batch, {1000 * per_state:.2f} ms per state)")
    knee = workers / client
    print(f"estimate: about {1 / per_state:.0f} states/s per busy worker core, linear up to about {knee:.0f} "
          f"workers, then bounded by one client core at about {report.states / client:.0f} states/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
