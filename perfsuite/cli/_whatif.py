"""`perfsuite whatif` (SPEC section 6)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from perfsuite._extras import require
from perfsuite.cli._cluster import add_cluster_options, with_cluster_security
from perfsuite.cli._common import (
    CliServices,
    Subparsers,
    bounded_float,
    bounded_int,
    interval_list,
    non_empty,
    output_file,
    seconds_or_all,
)
from perfsuite.cli._console import console
from perfsuite.cli._formats import add_format_option, emit_json, markdown_table
from perfsuite.errors import PerfsuiteError


def _cmd_whatif(args: argparse.Namespace, services: CliServices) -> int:
    """Exit 0; with --validate: 0 when the simulation matches the real session, 1 when it does not."""
    from perfsuite import whatif

    out = console()

    def note(text: str) -> None:  # progress and side notes: stdout in text, stderr when stdout is JSON/Markdown
        if args.format == "text":
            out.line(text)
        elif not out.quiet:
            print(text, file=sys.stderr)

    if args.plot:
        require("report", "matplotlib")  # the trade-off plot: say so before simulating
    sources = [bool(args.trace), args.storm, args.unattended]
    if sum(sources) != 1:
        raise PerfsuiteError("give exactly one of --trace FILE, --storm or --unattended")
    if args.trace:
        trace = whatif.read_trace(args.trace)
    elif args.storm:
        trace = whatif.permission_storm(whatif.StormSpec(**({"seed": args.seed} if args.seed is not None else {})))
    else:
        trace = whatif.unattended_run(whatif.UnattendedSpec(**({"seed": args.seed} if args.seed is not None else {})))
    if not trace.events:
        hint = ""
        if trace.meta.get("generator") == "recorded":
            hint = ("; it was recorded from a run whose code neither used perfsuite's engine nor called "
                    "perfsuite.whatif.emit(kind, ...)")
        raise PerfsuiteError(f"{trace.source}: the trace has no events{hint}")
    target = None
    if args.target:
        if os.getcwd() not in sys.path:  # targets import like a recipe's operations (`python -m` would)
            sys.path.insert(0, os.getcwd())
        if args.remeasure:
            raise PerfsuiteError("--remeasure measures the engine's publication costs; with --target give "
                                 "--costs FILE for your own kinds (or report bytes from your code)")
        target = whatif.resolve_target(args.target)
    if args.save_trace:
        note(f"trace: {whatif.write_trace(trace, args.save_trace)}")
    debounce = args.debounce  # parsed and checked by interval_list ("" is an error, not the default)
    checkpoint = args.checkpoint_interval or whatif.DEFAULT_CHECKPOINT_S
    notify = args.notify_max or whatif.DEFAULT_NOTIFY_MAX_S
    if args.validate:
        grid = whatif.make_grid(debounce or (2.0,), checkpoint, notify)
        if len(grid) != 1:
            raise PerfsuiteError("--validate checks one setting: give one value to each grid option")
        seconds = args.validate_seconds  # None: `--validate-seconds all`, the whole trace
        note(f"validating {grid[0].label} on the first {seconds or trace.duration_s:g} s of {trace.source} "
             f"at speed {args.speed:g} (about {(seconds or trace.duration_s) / args.speed:.1f} s)...")
        if target is not None:
            check = whatif.validate_target(trace, grid[0], target, speed=args.speed, seconds=seconds)
        else:
            check = whatif.validate(trace, grid[0], speed=args.speed, seconds=seconds)
        note(f"publications: simulated {check.simulated_publications} {dict(check.simulated_by_kind)}, "
             f"real {check.real_publications} {dict(check.real_by_kind)} (tolerance +-{check.publications_tolerance})")
        note(f"generations: simulated {check.simulated_generations}, real {check.real_generations}")
        note(f"crash-loss window: simulated {check.simulated_loss_s:.3f} s, real {check.real_loss_s:.3f} s "
             f"(tolerance +-{check.loss_tolerance_s:.3f} s; trace seconds)")
        durations = ", ".join(f"{k} {v:.1f} ms" for k, v in sorted(check.real_durations_ms.items())) or "none"
        if target is not None:
            note(f"real publication durations (medians, begin to done; executor work takes no virtual time, so the "
                 f"loss tolerance includes the slowest): {durations}")
        else:
            note(f"real publication durations (medians, not compressed; the simulation used them): {durations}")
        if args.json:
            import json

            Path(args.json).write_text(json.dumps(check.to_json(), indent=2) + "\n", encoding="utf-8")
            note(f"json: {args.json}")
        out.verdict("validate: " + ("PASS" if check.passed else "FAIL: " + "; ".join(check.problems)))
        return 0 if check.passed else 1
    grid = whatif.make_grid(debounce or whatif.DEFAULT_DEBOUNCE_S, checkpoint, notify)
    if args.no_costs:
        costs = None
    elif args.costs:
        costs = whatif.read_costs(args.costs, required=None) if target is not None else whatif.read_costs(args.costs)
    elif target is not None:
        costs = None  # the engine's measured costs say nothing of your code: bytes come from it or --costs
    else:
        if args.remeasure or not _whatif_cached():
            note("measuring this machine's per-publication costs (allocation pass, once; cached)...")
        costs = whatif.load_costs(refresh=args.remeasure)
    if args.cluster or args.scheduler or args.jobs:  # a target's grid too: one setting per task (by its name)
        from perfsuite.cluster import make_runner

        with make_runner(args.jobs or os.cpu_count() or 1, cluster=args.cluster, scheduler=args.scheduler) as runner:
            note(f"replaying {len(grid)} settings on {runner.describe()}")
            if target is not None:
                report = whatif.sweep_target(trace, grid, args.target, costs, runner=runner)
            else:
                report = whatif.sweep(trace, grid, costs, runner=runner)
    elif target is not None:
        report = whatif.sweep_target(trace, grid, target, costs)
    else:
        report = whatif.sweep(trace, grid, costs)
    writers = (("csv", whatif.write_csv), ("json", whatif.write_json), ("plot", whatif.write_plot))
    written = [f"{name}: {writer(report, getattr(args, name))}" for name, writer in writers if getattr(args, name)]
    if args.format == "json":
        emit_json("whatif", {"sweep": report.to_json()})
        return 0
    table = whatif.build_table(report)
    if args.format == "markdown":
        print(markdown_table(table))
        print("\n".join(f"- {line}" for line in whatif.describe_notes(report)))
        return 0
    out.table(table)
    for line in whatif.describe_notes(report):
        out.line(line)
    for line in written:
        out.line(line)
    return 0


def _whatif_cached() -> bool:
    from perfsuite.whatif import cache_path

    return cache_path().is_file()


def register(sub: Subparsers) -> None:
    w = sub.add_parser(
        "whatif", help="replay a trace through the real schedulers for a grid of debounce/checkpoint settings",
        description="Replays an event trace in virtual time through the engine's real Debouncer, CheckpointTimer "
        "and NotificationQueue for every setting of the grid, and reports publications per minute, bytes "
        "(this machine's measured costs), the crash-loss window and notification delay. --validate replays the "
        "trace's first --validate-seconds through a real Session in real time and compares; --speed F divides "
        "every trace time and the debounce, checkpoint and notification intervals by F (the engine's 50 ms "
        "deferral step and the publications' own durations are real and not scaled), both sides run the same "
        "compressed trace, and loss windows are reported back in trace seconds. It passes when publications "
        "match within max(1, 5%) and the crash-loss window within 30 ms + 10% (compressed time) plus the slowest "
        "real publication's excess over its median. --target MODULE:CLASS replays the trace through your own "
        "asyncio code instead (a virtual-clock event loop; --validate against a real-time replay of the same "
        "code). Exit status 2 "
        "on bad input; with --validate, 1 when the simulation does not match the real session.")
    w.add_argument("--trace", metavar="FILE", type=non_empty,
                   help="a trace file (JSON lines: time, session, conversation, kind, size)")
    w.add_argument("--target", metavar="MODULE:CLASS", type=non_empty,
                   help="replay through your own scheduler instead of the engine's: a replay target class (see "
                   "docs/whatif.md, 'What-if for your own scheduler'), imported from the current directory; "
                   "it runs on a virtual-clock event loop, and --validate replays it in real time")
    w.add_argument("--storm", action="store_true", help="the generated permission storm (SPEC M6)")
    w.add_argument("--unattended", action="store_true", help="a generated unattended agent run (checkpoints)")
    w.add_argument("--seed", type=bounded_int("seed"), help="seed of the generated trace")
    w.add_argument("--save-trace", metavar="FILE", type=output_file, help="also write the replayed trace to FILE")
    w.add_argument("--debounce", metavar="S,S,...", type=interval_list(allow_zero=True),
                   help="registry debounce intervals (default: 0.1,0.5,1,2,5,10)")
    w.add_argument("--checkpoint-interval", metavar="S,S,...", type=interval_list(allow_zero=False),
                   help="in-flight checkpoint intervals (default: 30)")
    w.add_argument("--notify-max", metavar="S,S,...", type=interval_list(allow_zero=False),
                   help="notification backoff limits (default: 0.5)")
    add_format_option(w)
    w.add_argument("--csv", metavar="OUT", type=output_file, help="write one row per setting")
    w.add_argument("--json", metavar="OUT", type=output_file, help="write the sweep (or the validation) as JSON")
    w.add_argument("--plot", metavar="OUT.png", type=output_file,
                   help="the trade-off plot, Pareto-optimal settings marked")
    w.add_argument("--costs", metavar="FILE", type=non_empty,
                   help="per-publication costs to use instead of this machine's cache (with --target: the costs "
                   "of your own publication kinds; the format is in docs/whatif.md)")
    w.add_argument("--no-costs", action="store_true", help="skip bytes (no allocation pass)")
    w.add_argument("--remeasure", action="store_true", help="measure this machine's costs again")
    w.add_argument("--validate", action="store_true",
                   help="replay the trace's start in real time through a real Session and compare")
    w.add_argument("--validate-seconds", type=seconds_or_all, default=120.0, metavar="S",
                   help="how much of the trace --validate replays, in seconds > 0, or 'all' (default: 120)")
    w.add_argument("--speed", type=bounded_float("speed"), default=10.0, metavar="FACTOR",
                   help="--validate compresses time: trace times and scheduler intervals divided by FACTOR "
                   "(default: 10)")
    w.add_argument("--jobs", type=bounded_int("jobs"),
                   help="replay the grid's settings in N worker processes (default: in this process; the "
                   "results are the same: the simulation is deterministic; with --target one setting per task, "
                   "the target imported there by its MODULE:CLASS)")
    add_cluster_options(w, "the grid's replays (deterministic: the same table anywhere)", default="in this process")
    w.set_defaults(func=with_cluster_security(_cmd_whatif))

