"""`perfsuite watch` (SPEC M11) and `perfsuite typing` (M12): a live program's loop, and the latency of typing."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfsuite.watch import WatchEvent

from perfsuite._extras import require
from perfsuite.cli._common import (
    CliServices,
    Subparsers,
    non_empty,
    non_negative_float,
    output_dir,
    output_file,
    positive_float,
    positive_int,
)
from perfsuite.cli._console import console
from perfsuite.cli._formats import add_format_option, emit_json, markdown_table
from perfsuite.errors import PerfsuiteError

#: exit status of a watch stopped by SIGINT / SIGTERM (128 + the signal), after saving what it measured
_STOP_STATUS = {"interrupted": 130, "terminated": 143}


class _Progress:
    """A line on stderr for each window over the target (every window with -v), and a count every 10 windows."""

    def __init__(self, target_ms: float) -> None:
        self.target_ms = target_ms
        self.windows = self.over = 0

    def __call__(self, event: WatchEvent) -> None:
        out = console()
        if out.quiet or event.source != "program":
            return
        record = event.record
        self.windows += 1
        missed = record["max_gap_ms"] > self.target_ms
        self.over += missed
        if missed or out.verbose:
            stalls = record.get("stalls") or {}
            top = (stalls.get("top") or [{}])[0]
            name = f" ({top['name']})" if top.get("name") else ""
            print(f"perfsuite: watch {event.mode} window {record['index']}: max gap {record['max_gap_ms']:.2f} ms, "
                  f"longest callback {stalls.get('longest_ms', 0):.2f} ms{name}, GC {record['gc']['gc_ms']:.2f} ms",
                  file=sys.stderr)
        elif self.windows % 10 == 0:
            print(f"perfsuite: watch: {self.windows} windows, {self.over} over {self.target_ms:g} ms", file=sys.stderr)


def _cmd_watch(args: argparse.Namespace, services: CliServices) -> int:
    from perfsuite.report import Result, summary_table
    from perfsuite.watch import WatchOptions, parse_command, watch_program

    if not args.program:
        raise PerfsuiteError("watch: give the program to run, e.g. `perfsuite watch --duration 10 -- python app.py`")
    if args.allocation_every:
        require("alloc", "memray")  # the watched windows are traced by memray only (rule 4: one line)
    options = WatchOptions(
        duration_s=args.duration, window_s=args.window, delay_s=args.delay, period_ms=args.heartbeat,
        target_ms=args.target, control=not args.no_control, alloc_every=args.allocation_every or 0,
        name=args.name, output_dir=Path(args.output_dir), output=Path(args.output) if args.output else None,
        grace_s=args.grace,
    )
    options.check()  # before anything is printed or started
    command = parse_command(args.program)
    out = console()
    if not out.quiet:
        until = f"for {args.duration:g} s" if args.duration else "until it exits or Ctrl-C"
        print(f"perfsuite: watching `{command.display}` {until}, windows of {args.window:g} s", file=sys.stderr)
    run = watch_program(command, options, on_event=_Progress(args.target))
    doc = run.document
    out.table(summary_table(Result(run.path, doc)))
    live = doc["live"]
    for loop in live["loops"]:
        startup = loop.get("startup")
        if startup:
            top = ((startup.get("stalls") or {}).get("top") or [{}])[0]
            named = f" ({top['name']})" if top.get("name") else ""
            out.line(f"{loop['mode']} startup ({startup['window_ms'] / 1e3:.2f} s, not a window): max gap "
                     f"{startup['max_gap_ms']:.2f} ms, longest callback {top.get('ms', 0):.2f} ms{named}")
    for mode, body in doc["modes"].items():
        worst = max(body["samples"], key=lambda s: (s.get("stalls") or {}).get("longest_ms", 0), default=None)
        if worst and (worst.get("stalls") or {}).get("top"):
            entry = worst["stalls"]["top"][0]
            gc_note = f", {entry['gc_ms']:.2f} ms of it GC" if entry.get("gc_ms") else ""
            out.line(f"{mode} longest callback: {entry['ms']:.2f} ms in window {worst['index']}: "
                     f"{entry['name']}{gc_note}")
    for note in live["notes"]:
        out.line(f"note: {note}")
    ended = {"duration": "stopped after --duration", "exited": f"the program exited (status {run.exit_status})",
             "interrupted": "interrupted", "terminated": "terminated"}[run.stop]
    out.verdict(f"watch: {run.path} ({ended})")
    if run.stop in _STOP_STATUS:
        return _STOP_STATUS[run.stop]
    if run.stop == "exited" and run.exit_status:
        return 1  # the program failed on its own: its windows are kept, the watch says so
    return 0


def _cmd_typing(args: argparse.Namespace, services: CliServices) -> int:
    from perfsuite.watch import key_latency, key_latency_json, key_latency_table

    report = key_latency(args.results, target_ms=args.target)
    if args.format == "json":
        emit_json("typing", key_latency_json(report))
        return 0
    table = key_latency_table(report)
    if args.format == "markdown":
        print(markdown_table(table))
    else:
        console().table(table)
    out = console()
    for line in report.lines():
        out.line(line)
    return 0


def register(sub: Subparsers) -> None:
    w = sub.add_parser(
        "watch", help="run an asyncio program unchanged with the heartbeat, stall monitor and GC in its loop",
        description="Runs PROGRAM in its own interpreter with perfsuite's instruments in every asyncio event loop "
        "it creates (the 5 ms heartbeat, every loop callback timed and named, every garbage collection), beside an "
        "idle control process, and writes a results document of windows of time that report, evidence, compare, "
        "history and the dashboard read. Stops after --duration, when the program exits, or on Ctrl-C (everything "
        "measured so far is kept; a second Ctrl-C kills the program). Also: python -m perfsuite.watch PROGRAM ARGS.",
        epilog="examples: perfsuite watch --duration 10 -- python app.py --port 8000;  "
        "perfsuite watch --window 0.5 -- python -m mypackage.server")
    w.add_argument("--duration", type=positive_float, metavar="S", help="stop the program S seconds after start")
    w.add_argument("--window", type=positive_float, default=1.0, metavar="S",
                   help="window length: one sample per window (default: 1; at most 60)")
    w.add_argument("--delay", type=non_negative_float, default=0.0, metavar="S",
                   help="leave the first S seconds of each loop out of the windows (startup; default: 0)")
    w.add_argument("--heartbeat", type=positive_float, default=5.0, metavar="MS", help="heartbeat period (default: 5)")
    w.add_argument("--target", type=positive_float, default=20.0, metavar="MS",
                   help="M7 target on each window's max heartbeat gap (default: 20)")
    w.add_argument("--no-control", action="store_true", help="do not run the idle control process alongside")
    w.add_argument("--allocation-every", type=positive_int, metavar="N",
                   help="trace one window in N with memray (total and peak bytes allocated; never a latency sample)")
    w.add_argument("--name", type=non_empty, help="results name (default: watch-<program>)")
    w.add_argument("--output-dir", default="results/local", type=output_dir, metavar="DIR",
                   help="where the results go (default: results/local)")
    w.add_argument("--output", type=output_file, metavar="FILE", help="the results file (instead of a new name)")
    w.add_argument("--grace", type=positive_float, default=5.0, metavar="S",
                   help="after stopping the program with SIGINT, wait S seconds before SIGTERM (default: 5)")
    w.add_argument("program", nargs=argparse.REMAINDER, metavar="-- [python [options]] PROGRAM|-m MODULE ARGS",
                   help="the program as you would run it")
    w.set_defaults(func=_cmd_watch)

    t = sub.add_parser(
        "typing", help="key-to-frame latency per mode from typing results (p50/p99/max, slow keys attributed)",
        description="Reads results of the typing recipes (typing-*; a Textual TextArea typed into at a steady rate "
        "while the engine publishes) and prints, per recipe and mode, the latency a person feels: from the instant a "
        "key was due to the driver's write of the frame that shows it, p50/p99/max over every key against the "
        "target, beside the max heartbeat gap of the same windows, and the callbacks that delayed the slow keys.")
    t.add_argument("results", nargs="+", metavar="RESULT", type=non_empty, help="results files or directories")
    t.add_argument("--target", type=positive_float, default=20.0, metavar="MS", help="key latency target (default 20)")
    add_format_option(t)
    t.set_defaults(func=_cmd_typing)

