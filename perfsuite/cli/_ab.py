"""`perfsuite ab BASE [HEAD]` (SPEC section 5): parsing and printing only; see :mod:`perfsuite.ab`."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfsuite.cli._common import (
    CliServices,
    Subparsers,
    add_gate_option,
    add_strict_options,
    bounded_int,
    finite_float,
    gate_exit,
    non_empty,
    output_dir,
    thresholds,
)
from perfsuite.cli._console import console
from perfsuite.cli._formats import add_format_option
from perfsuite.cli._report import add_explain_option
from perfsuite.errors import PerfsuiteError

if TYPE_CHECKING:
    from collections.abc import Callable

    from perfsuite.harness import Recipe


def default_recipes(cwd: Path, dirs: list[Path] | None = None) -> tuple[list[str], bool]:
    """What `ab` and `bisect` measure without -r: ``[tool.perfsuite] recipes`` of the project's
    pyproject.toml (:func:`perfsuite.cli._root.project_root`: found from any directory of the repository);
    else, but in perfsuite's own repository, the project's own recipes (``dirs``: ``./recipes``, the root's
    ``recipes/`` or ``$PERFSUITE_RECIPES``, when that is not perfsuite's built-in catalogue); else the quick
    set. The flag: leave out recipes that import no code under test (only for the quick set, perfsuite's)."""
    from perfsuite._paths import builtin_dir
    from perfsuite.ab import read_config
    from perfsuite.cli._root import project_root
    from perfsuite.harness import list_recipes, recipe_dirs
    from perfsuite.workloads.plan import DEFAULT_RUN_RECIPES

    root = project_root(cwd)
    config = read_config(root) if root is not None else None  # not a repository: said by the command itself
    if config is not None and config.recipes:
        return list(config.recipes), False
    if root is not None and (root / "perfsuite" / "__init__.py").is_file():  # perfsuite's own (or a copy of it)
        return list(DEFAULT_RUN_RECIPES), True
    builtin = builtin_dir("recipes").resolve()
    own = [d for d in (recipe_dirs() if dirs is None else dirs) if d.resolve() != builtin]
    if own:
        names = list_recipes(dirs=own)
        if names:
            return names, False
    return list(DEFAULT_RUN_RECIPES), True


def load_ab_recipes(args: argparse.Namespace) -> tuple[list[Recipe], bool]:
    """The recipes of `ab` / `bisect` with the command line's overrides, and whether to skip machine-only ones."""
    from perfsuite.ab import AB_SAMPLES
    from perfsuite.cli._root import project_recipes, project_root
    from perfsuite.harness import check_parameters, list_recipes, load_recipe, recipe_dirs, resolve_factories

    cwd = Path.cwd()
    root = project_root(cwd)  # from a subdirectory: the project's recipes and operations, as from its top
    for where in (os.getcwd(), *([str(root)] if root is not None else [])):
        if where not in sys.path:  # operations import like `python -m` would (workers get the same)
            sys.path.insert(1 if where != os.getcwd() else 0, where)
    dirs = recipe_dirs(project_recipes(cwd, None, os.environ.get("PERFSUITE_RECIPES")))
    if args.all and args.recipes:
        raise PerfsuiteError("--all runs the whole catalogue: give no --recipe with it")
    skip = False
    if args.all:
        names = list_recipes(catalogue_only=True)
    elif args.recipes:
        names = list(args.recipes)
    else:
        names, skip = default_recipes(cwd, dirs)
    recipes = [
        load_recipe(ref, dirs).with_overrides(samples=args.samples or AB_SAMPLES, warmup=args.warmup, gc=args.gc,
                                        allocation_samples=args.allocation_samples, isolation="process",
                                        instructions=True if getattr(args, "instructions", False) else None)
        for ref in names
    ]
    for recipe in recipes:  # declared parameters checked before any worktree or fixture
        try:
            factories = resolve_factories(recipe)
        except PerfsuiteError:
            continue  # imported in each revision's worktree instead, where its error is said
        check_parameters(recipe, factories)
    return recipes, skip


def _cmd_ab(args: argparse.Namespace, services: CliServices) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from perfsuite.ab import AB_LOOKS, run_ab
    from perfsuite.cli._report import print_comparison
    from perfsuite.harness import SampleEvent

    recipes, skip = load_ab_recipes(args)
    if any(r.instructions for r in recipes):  # one line, once: the pass records "not measured"
        from perfsuite.harness import instructions_unavailable

        why = instructions_unavailable(args.valgrind)
        if why:
            print(f"perfsuite: instructions not measured: {why}", file=sys.stderr)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    output = Path(args.output_dir) if args.output_dir else Path("results/local") / f"ab-{stamp}"
    resolver = services.resolve_fixture
    out = console()
    err = out.rich(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    # the bar is for a terminal (never with -q, in a pipe or a CI log); started at the first sample, so an
    # error before it stays one line
    progress = Progress(*columns, console=err, disable=out.quiet or not err.is_terminal)
    tasks: dict[str, Any] = {}

    def on_sample(event: SampleEvent) -> None:
        if not tasks:
            progress.start()
        task = tasks.get(event.recipe)
        if task is None:
            task = tasks[event.recipe] = progress.add_task(event.recipe, total=event.total)
        who = f"{event.variant} " if event.variant else ""
        what = event.kind if event.mode is None else f"{who}{event.mode} {event.kind} {event.index}"
        progress.update(task, completed=event.done, total=event.total, description=f"{event.recipe}: {what}")

    try:
        result = run_ab(
            args.base, args.head, recipes, resolve_fixture=lambda name: resolver(name, None), output_dir=output,
            seed=args.seed, work_root=Path(args.work_dir) if args.work_dir else None, on_sample=on_sample,
            gate=args.gate, skip_machine_only=skip, valgrind=args.valgrind,
            looks=AB_LOOKS if args.looks is None else args.looks, env=args.env, installer=args.installer,
            on_note=note_printer(), strict=args.strict, **thresholds(args),
        )
    finally:
        if tasks:
            progress.stop()
    print_comparison(result.comparison, "ab", fmt=args.format, everything=False, explain=args.explain)
    rounds = ", ".join(f"{name} {n}" for name, n in result.rounds)
    line = (f"ab: BASE {result.base.describe()} vs HEAD {result.head.describe()}: rounds (one sample per mode per "
            f"revision each) {rounds}; {result.looks} look{'s' if result.looks != 1 else ''} of {result.samples} "
            f"rounds, interleaved (seed {result.seed}), {result.seconds:.0f} s; pairing: {result.pairing}")
    if args.format == "markdown":
        print(f"<!-- {line} -->")
    elif args.format == "json":  # stdout holds the one JSON document: side notes go to stderr
        print(line, file=sys.stderr)
    else:
        out.line(line)  # hidden by -q: the verdict line and what made it are what -q keeps
    return gate_exit(result.comparison, args)


def note_printer() -> Callable[[str], None]:
    """Progress before the first sample (environments built, their time), one line each on stderr (hidden by
    -q): stdout keeps the verdict, and JSON output stays one document."""
    out = console()

    def note(text: str) -> None:
        if not out.quiet:
            print(f"perfsuite: {text}", file=sys.stderr, flush=True)

    return note


def add_measure_options(parser: argparse.ArgumentParser) -> None:
    """What `ab` and `bisect` share: the recipes, rounds and looks, environments, thresholds and the gate."""
    from perfsuite.cli._names import AB_LOOKS, AB_SAMPLES, ENV_MODES, INSTALLERS

    parser.add_argument("-r", "--recipe", action="append", dest="recipes", metavar="RECIPE", type=non_empty,
                        help="a recipe name or .toml path, repeatable (default: [tool.perfsuite] recipes of "
                        "pyproject.toml, else the repository's own ./recipes, else the quick set's recipes that "
                        "import the engine: mailbox-delivery, root-checkpoint, diagnostic-append)")
    parser.add_argument("--all", action="store_true", help="the whole catalogue instead of the default set")
    parser.add_argument("--samples", type=bounded_int("samples"),
                        help=f"rounds per look: one sample per mode per revision each (default: {AB_SAMPLES})")
    parser.add_argument("--looks", type=bounded_int("looks"),
                        help="at most this many looks of --samples rounds while a "
                        f"headline stays inconclusive, each testing at alpha / looks (default: {AB_LOOKS}; 1: a "
                        "fixed sample)")
    parser.add_argument("--warmup", type=bounded_int("warmup"),
                        help="discarded warm-up samples per mode per revision (recipe default: 1)")
    parser.add_argument("--allocation-samples", type=bounded_int("allocation_samples"),
                        help="allocation-pass samples per mode per revision (recipe default: 3; costs need no p-value)")
    parser.add_argument("--gc", choices=("collect-before", "natural"), help="GC policy before each sample")
    parser.add_argument("--env", choices=ENV_MODES, default="auto",
                        help="an environment per revision: when their declared dependencies differ (auto, the "
                        "default), always (revision), or never: both in this interpreter's (current)")
    parser.add_argument("--installer", choices=INSTALLERS, default="auto",
                        help="what builds those environments: uv when it is on PATH, else venv + pip (auto)")
    parser.add_argument("--seed", type=bounded_int("seed"),
                        help="seed of the interleaved order (default: random, recorded)")
    parser.add_argument("--work-dir", metavar="DIR", type=output_dir,
                        help="where private fixture copies live (default: temp dir)")
    parser.add_argument("--alpha", type=finite_float, help="significance level (default: 0.05)")
    parser.add_argument("--factor", type=finite_float,
                        help="ratio that counts as a change, either way (default: 1.1)")
    add_gate_option(parser)


def register(sub: Subparsers) -> None:
    """`ab`."""
    ab = sub.add_parser(
        "ab",
        help="A/B two git revisions on this machine, samples interleaved; exit 1 on a regression (the CI gate)",
        description="Measures BASE and HEAD (default: the working tree, uncommitted changes included) of any git "
        "repository in one run: each revision's code under test ([tool.perfsuite] code-under-test of "
        "pyproject.toml, default: the repository's packages the operations import) is imported from its own git "
        "worktree, the harness, operations and recipes are this checkout's; when the revisions declare different "
        "dependencies, each gets a virtual environment of its own (cached). Samples interleaved round by round in "
        "a seeded random order, on the same fixture copies and idle control. Timings are compared round by round "
        "(signed-rank test), Holm-adjusted over the gating headlines; while a headline is inconclusive (slower, "
        "not confirmed), more rounds are measured (up to --looks); an improvement takes none. Writes base/ and "
        "head/ results and the pairing ab.json, then compares them as `perfsuite compare` does. "
        "When the idle control says the machine was loaded, timings are reported, not gated (the counts gate: I/O, "
        "allocations, instructions), unless --strict; the first line says which gated and why. Exit status: 0 no "
        "regression (passed, or neutral: timings not gated or inconclusive; --neutral-exit), 1 regression, 2 unusable "
        "input, 3 inconclusive (--strict).",
    )
    ab.add_argument("base", metavar="BASE", type=non_empty,
                    help="the baseline revision (branch, tag, commit, e.g. the merge base)")
    ab.add_argument("head", metavar="HEAD", nargs="?", type=non_empty,
                    help="the revision to test (default: the working tree)")
    add_measure_options(ab)
    add_strict_options(ab)
    ab.add_argument("--instructions", action="store_true",
                    help="also count instructions per operation under valgrind (callgrind), both revisions "
                    "interleaved; gated as a cost, 1%% tolerance (recipe setting: instructions = true)")
    ab.add_argument("--valgrind", metavar="PATH", type=non_empty,
                    help="the valgrind executable for --instructions (default: $PERFSUITE_VALGRIND, else PATH)")
    ab.add_argument("--output-dir", metavar="DIR", type=output_dir,
                    help="a new or empty directory for base/, head/ and ab.json (default: results/local/ab-<time>)")
    add_format_option(ab)
    add_explain_option(ab)
    ab.set_defaults(func=_cmd_ab)
