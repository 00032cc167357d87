"""`perfsuite crashcheck` (SPEC section 7): the crash, corruption and kill campaigns."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from perfsuite.cli._cluster import add_cluster_options, progress_bar, with_cluster_security
from perfsuite.cli._common import (
    CliServices,
    Subparsers,
    bounded_int,
    non_empty,
    non_negative_int,
    output_dir,
    output_file,
)
from perfsuite.cli._names import CRASH_MODELS, CRASH_WORKLOADS, SEEDED_BUGS
from perfsuite.errors import PerfsuiteError

if TYPE_CHECKING:
    from perfsuite.cli._console import Console
    from perfsuite.crash import (
        CampaignReport,
        CorruptConfig,
        CorruptReport,
        CrashConfig,
        Execution,
        KillConfig,
        KillReport,
    )


def _execution(args: argparse.Namespace) -> Execution:
    """Where the campaign runs and what it resumes from."""
    from perfsuite.crash import Execution

    if args.resume and not args.checkpoint:
        raise PerfsuiteError("--resume continues the campaign of a --checkpoint FILE: give it")
    return Execution(cluster=args.cluster, scheduler=args.scheduler, checkpoint=args.checkpoint, resume=args.resume)


def _write_document(args: argparse.Namespace, kind: str, report: CampaignReport | KillReport | CorruptReport,
                    config: CrashConfig | KillConfig | CorruptConfig, console: Console) -> None:
    """``--json OUT``: the result document, written atomically (its ``answer`` is the same on every back end)."""
    if not args.json:
        return
    from pathlib import Path

    from perfsuite.crash import campaign_document
    from perfsuite.harness import write_json_atomic

    jobs = getattr(config, "jobs", len(getattr(config, "profiles", ())))
    backend = f"dask {args.scheduler}" if args.scheduler else (
        f"dask LocalCluster of {jobs}" if args.cluster else f"pool of {jobs}")
    write_json_atomic(Path(args.json), campaign_document(kind, report, config, backend))
    console.print(f"json: {args.json}", markup=False)


def _cmd_crashcheck(args: argparse.Namespace, services: CliServices) -> int:
    """Exit 0: no violation (with --seeded-bug: the bug was caught); 1: violations (bug not caught)."""
    from rich.table import Table

    from perfsuite.cli._console import console as shared_console
    from perfsuite.crash import MODELS, CrashConfig, CrashResult, run_campaign

    console = shared_console()
    if args.kill is not None and args.corrupt:
        raise PerfsuiteError("--kill and --corrupt are different campaigns: choose one")
    _check_campaign_options(args)
    if args.kill is not None:
        return _crashcheck_kill(args, console)
    if args.corrupt:
        return _crashcheck_corrupt(args, console)
    config = CrashConfig(
        workloads=tuple(args.workload or ()), models=tuple(args.model or MODELS), max_states=args.max_states,
        seed=args.seed, seeded_bug=args.seeded_bug, jobs=args.jobs or os.cpu_count() or 1, keep_dir=args.keep,
    )

    def progress(result: CrashResult) -> None:
        console.print(f"{result.workload} / {result.model}: {result.states} states + {result.recovery_states} "
                      f"recovery-crash states, {len(result.violations)} violations, {result.seconds:.1f} s",
                      markup=False)

    with progress_bar(console, "states") as on_progress:
        report = run_campaign(config, on_result=progress, execution=_execution(args), on_progress=on_progress)
    _write_document(args, "crash", report, config, console)
    table = Table(title=f"crashcheck{f' --seeded-bug {report.seeded_bug}' if report.seeded_bug else ''}")
    for column in ("workload", "model", "ops", "syncs", "acks", "states", "recovery states",
                   "bad states", "violations", "seconds"):
        table.add_column(column, justify="left" if column in ("workload", "model") else "right", no_wrap=True)
    for r in report.results:
        table.add_row(r.workload, r.model, str(r.ops), str(r.persistence_points), str(r.acks), str(r.states),
                      str(r.recovery_states), str(r.violating_states), str(len(r.violations)), f"{r.seconds:.1f}")
    console.print(table)
    shown = report.violations[: args.show]
    for v in shown:
        lines = [f"[{v.invariant}] {v.name}: {v.message}", f"  {v.workload} / {v.model}: {v.crash}",
                 f"  recovery: {v.recovery}", *(f"  dropped: {d}" for d in v.dropped),
                 *(f"  torn: {t}" for t in v.torn), *(f"  {line}" for line in v.trace)]
        if v.kept:
            lines.append(f"  kept: {v.kept}")
        console.print("\n".join(lines), markup=False)
    if len(report.violations) > len(shown):
        console.print(f"... and {len(report.violations) - len(shown)} more violations", markup=False)
    console.print(f"{report.states} states explored, {len(report.violations)} violations, {report.seconds:.1f} s",
                  markup=False, verdict=True)
    if report.keep_dir and report.violations:
        console.print(f"violating states kept in {report.keep_dir}", markup=False)
    if report.seeded_bug:
        console.print(f"seeded bug {report.seeded_bug}: {'caught' if report.caught else 'NOT caught'}", markup=False,
                      verdict=True)
        return 0 if report.caught else 1
    return 1 if report.violations else 0


#: options that belong to one campaign: given to another, they would be silently ignored
_CAMPAIGN_OPTIONS = (("target", "--target", "corrupt"), ("max_cases", "--max-cases", "corrupt"),
                     ("profile", "--profile", "kill"), ("model", "--model", "crash"),
                     ("max_states", "--max-states", "crash"))


def _check_campaign_options(args: argparse.Namespace) -> None:
    campaign = "kill" if args.kill is not None else "corrupt" if args.corrupt else "crash"
    for dest, option, owner in _CAMPAIGN_OPTIONS:
        if getattr(args, dest) is not None and owner != campaign:
            needs = {"corrupt": "with --corrupt", "kill": "with --kill N", "crash": "without --corrupt or --kill"}
            raise PerfsuiteError(f"{option} applies only {needs[owner]} (the {owner} campaign); this is the "
                                 f"{campaign} campaign")


def _crashcheck_kill(args: argparse.Namespace, console: Console) -> int:
    """``crashcheck --kill N``: the SIGKILL campaign; exit 1 on any violation."""
    from perfsuite.crash import PROFILES, KillConfig, run_kill_campaign

    if args.kill < 1:
        raise PerfsuiteError("--kill must be at least 1")
    config = KillConfig(kills=args.kill, seed=args.seed, profiles=tuple(args.profile or PROFILES),
                        directory=args.keep, seeded_bug=args.seeded_bug)

    def progress(kill: int, profile: str, acks: int, violations: int) -> None:
        if (kill + 1) % 10 == 0 or kill + 1 == args.kill:
            console.print(f"kill {kill + 1}/{args.kill} ({profile}): {acks} acknowledgements read, "
                          f"{violations} violations so far", markup=False)

    if args.checkpoint:
        raise PerfsuiteError("--checkpoint and --resume are for the crash and corruption campaigns: a kill chain "
                             "continues one session on one machine and is run again whole if its worker dies")
    report = run_kill_campaign(config, on_kill=progress, execution=_execution(args))
    _write_document(args, "kill", report, config, console)
    for v in report.violations[: args.show]:
        console.print(f"[{v.invariant}] kill {v.kill} ({v.profile}): {v.message}"
                      + (f"\n  state before recovery kept: {v.kept}" if v.kept else ""), markup=False)
    if len(report.violations) > args.show:
        console.print(f"... and {len(report.violations) - args.show} more violations", markup=False)
    per = ", ".join(f"{n} {p}" for p, n in report.per_profile.items())
    console.print(f"{report.kills} kills ({per}; {report.torn} tore a transcript write first, {report.coalescing} "
                  f"coalescing kills, {report.coalesced} coalescing steps met a running checkpoint), {report.acks} "
                  f"acknowledgements recorded ({report.checked} checked one by one after reopen, {report.lost} lost), "
                  f"{report.recovered_pending} recoveries retried a pending publication, "
                  f"{len(report.violations)} violations, {report.seconds:.1f} s "
                  f"(children {report.child_seconds:.1f} s, recovery and checks {report.recovery_seconds:.1f} s)",
                  markup=False, verdict=True)
    if report.seeded_bug:
        console.print(f"seeded bug {report.seeded_bug}: {'caught' if report.caught else 'NOT caught'}", markup=False,
                      verdict=True)
        return 0 if report.caught else 1
    return 1 if report.violations else 0


def _crashcheck_corrupt(args: argparse.Namespace, console: Console) -> int:
    """``crashcheck --corrupt``: the corruption campaign; exit 1 on any violation (with
    ``--seeded-bug``: exit 0 only if the bug was caught)."""
    from rich.table import Table

    from perfsuite.crash import CorruptConfig, CorruptResult, run_corrupt_campaign

    config = CorruptConfig(workloads=tuple(args.workload or ()), seed=args.seed, seeded_bug=args.seeded_bug,
                           jobs=args.jobs or os.cpu_count() or 1, keep_dir=args.keep, max_cases=args.max_cases,
                           targets=tuple(args.target or ()))

    def progress(result: CorruptResult) -> None:
        console.print(f"{result.workload} ({result.profile}): {result.cases} cases, {len(result.violations)} "
                      f"violations, {result.seconds:.1f} s", markup=False)

    with progress_bar(console, "cases") as on_progress:
        report = run_corrupt_campaign(config, on_result=progress, execution=_execution(args), on_progress=on_progress)
    _write_document(args, "corrupt", report, config, console)
    title = f"crashcheck --corrupt{f' --seeded-bug {report.seeded_bug}' if report.seeded_bug else ''}"
    table = Table(title=title)
    for column in ("workload", "profile", "cases", "opened", "refused", "undetectable", "bad cases", "violations",
                   "seconds"):
        table.add_column(column, justify="left" if column in ("workload", "profile") else "right", no_wrap=True)
    for r in report.results:
        table.add_row(r.workload, r.profile, str(r.cases), str(r.opened), str(r.refused), str(r.undetectable),
                      str(r.violating), str(len(r.violations)), f"{r.seconds:.1f}")
    console.print(table)
    for v in report.violations[: args.show]:
        console.print(f"[{v.invariant}] {v.workload} ({v.base}): {v.kind} {v.target}: {v.message}"
                      + (f"\n  kept: {v.kept}" if v.kept else ""), markup=False)
    if len(report.violations) > args.show:
        console.print(f"... and {len(report.violations) - args.show} more violations", markup=False)
    console.print(f"{report.cases} cases, {len(report.violations)} violations, {report.seconds:.1f} s", markup=False,
                  verdict=True)
    if report.keep_dir and report.violations:
        console.print(f"violating cases kept in {report.keep_dir}", markup=False)
    if report.seeded_bug:
        console.print(f"seeded bug {report.seeded_bug}: {'caught' if report.caught else 'NOT caught'}", markup=False,
                      verdict=True)
        return 0 if report.caught else 1
    return 1 if report.violations else 0


def register(sub: Subparsers) -> None:
    crash = sub.add_parser("crashcheck", help="enumerate crash states of engine workloads and check recovery",
                           description="Exit status: 0 no violation (with --seeded-bug: the bug was caught), "
                           "1 violations (with --seeded-bug: the bug was not caught), 2 bad input.")
    crash.add_argument("--workload", action="append", choices=list(CRASH_WORKLOADS),
                       help="a workload to run, repeatable (default: every standard workload)")
    crash.add_argument("--model", action="append", choices=list(CRASH_MODELS),
                       help="crash model, repeatable (default: both)")
    crash.add_argument("--max-states", type=bounded_int("max_states"),
                       help="unique crash states per workload and model (default: each workload's cap, 5000 "
                       "unless the workload sets a smaller one)")
    crash.add_argument("--seed", type=bounded_int("seed"), default=0, help="seed of the sampled subsets (default: 0)")
    crash.add_argument("--seeded-bug", choices=list(SEEDED_BUGS), help="run against a deliberately broken engine")
    crash.add_argument("--jobs", type=bounded_int("jobs"), help="recovery worker processes (default: CPU count)")
    crash.add_argument("--keep", metavar="DIR", type=output_dir,
                       help="where violating states are kept (default: a temp dir)")
    crash.add_argument("--show", type=non_negative_int, default=10, help="violations printed in full (default: 10)")
    crash.add_argument("--kill", type=bounded_int("kills"), metavar="N",
                       help="instead: the kill campaign, N SIGKILLs of a child running a mixed session workload "
                       "on the real file system, recovery checked after each (200 is the acceptance run); "
                       "--seed seeds the kill points, --keep keeps the sessions, --seeded-bug applies")
    crash.add_argument("--profile", action="append", choices=["portable", "file", "langgraph"],
                       help="with --kill: session profile, repeatable (default: portable and file, alternating; "
                       "langgraph: a child driving the LangGraph saver, with the langgraph extra)")
    crash.add_argument("--corrupt", action="store_true",
                       help="instead: the corruption campaign; every file and directory of each finished session "
                       "workload is deleted, truncated (to 0, to half), overwritten with garbage, has a byte "
                       "flipped, is replaced by a directory or a dangling symlink, then opened, recovered and "
                       "retired in a worker process (--workload, --jobs, --keep, --seed, --seeded-bug apply)")
    crash.add_argument("--max-cases", type=bounded_int("max_cases"), metavar="N",
                       help="with --corrupt: a seeded sample of N cases per workload (default: every case)")
    crash.add_argument("--target", action="append", metavar="GLOB", type=non_empty,
                       help="with --corrupt: only damage paths matching GLOB, relative to the workload root "
                       "(e.g. 'sess/HEAD'), repeatable")
    crash.add_argument("--json", metavar="OUT", type=output_file,
                       help="also write the result document: its 'answer' (states, violations, in batch order) is "
                       "the same byte for byte on --jobs N, --cluster local and --scheduler; 'run' holds timings")
    add_cluster_options(crash, "the campaign")
    crash.add_argument("--checkpoint", metavar="FILE", type=output_file,
                       help="record finished batches in FILE (replaced atomically about once a second), so a "
                       "campaign whose client died can go on with --resume (crash and corruption campaigns)")
    crash.add_argument("--resume", action="store_true",
                       help="continue the campaign recorded in --checkpoint FILE from its last finished batch "
                       "(same options; a missing FILE starts afresh)")
    crash.set_defaults(func=with_cluster_security(_cmd_crashcheck))
