"""``perfsuite ab BASE [HEAD]``: two git revisions measured on one runner, their samples interleaved.

**Which parts come from which revision** (so a change to the instrument never passes for a change in the
engine): the code under test, ``perfsuite.engine``, is imported from each revision's tree; everything else
(the harness, the operations of ``perfsuite.workloads``, the recipes and the fixture builders) comes from
the running checkout, as asv runs every revision under the current benchmark suite. With HEAD omitted the
running checkout is HEAD's working tree, uncommitted changes included. When HEAD's operations do not
import against BASE's engine (a renamed or new engine name), that side falls back to its own
``perfsuite.workloads`` too, and the first line of every comparison says so.

Each revision but the working tree is a detached ``git worktree``; both run in the same interpreter and
virtual environment, so revisions whose ``pyproject.toml`` declare different dependencies are refused in
one line (a venv per revision is not implemented). Fixtures are resolved once, by the running checkout,
and every sample of both sides copies the same fixture; the fixture spec digest each revision would build
is compared and a difference is stated. The output directory holds ``base/`` and ``head/`` (one results
document per recipe each, the schema of ``perfsuite run``) and the pairing ``ab.json``
(:mod:`perfsuite.report._pairing`) with the thresholds used; the verdict is :func:`perfsuite.report.compare`
of that pairing, also written as Markdown: ``compare.md`` (everything, for a job summary) and ``summary.md``
(the verdict and the headline table, for a pull-request comment).

**Paired rounds, sequential looks** (the gate's error rates, measured in the closing note of issue 15): a
round runs BASE's and HEAD's sample of one index back to back (in a random order), so timings are compared
round by round (the Wilcoxon signed-rank test on the per-round log ratios: the machine's slow spells hit
both sides and cancel). The gating timing headlines of the whole comparison are one family under Holm's
step-down, so an identical revision fails the gate about ``alpha`` of the time, not ``alpha`` per headline.
A first look measures ``samples`` rounds; while some gating headline is inconclusive (beyond the factor
the worse way, not significant) and no regression is found, the recipes concerned get ``samples`` more
rounds, up to ``looks`` looks; every look tests at ``alpha / looks`` (Bonferroni over the looks), so
looking again never buys a false regression. Inconclusive after the last look is exit 3, said as such.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.ab._git import Revision, materialise, repo_root, working_tree
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import (
    CodeVariant,
    Recipe,
    SampleEvent,
    extend_variants,
    imports_packages,
    probe_variant,
    resolve_operation,
    run_variants,
    write_json_atomic,
)
from perfsuite.report import (
    DEFAULT_ALPHA,
    DEFAULT_FACTOR,
    GATES,
    PAIRING_FILE,
    PAIRING_FORMAT,
    Comparison,
    compare,
    compare_markdown,
)

__all__ = ["AB_LOOKS", "AB_SAMPLES", "CODE_UNDER_TEST", "FALLBACK_CODE", "AbResult", "look_again", "run_ab"]

#: rounds per look (one sample per mode per revision each; recipes say 6 for a single run): 16 paired rounds
#: decide a large change at the first look (the signed-rank test can reach p = 3e-5 there)
AB_SAMPLES = 16
#: at most this many looks of AB_SAMPLES rounds each while a headline stays inconclusive (at most 64 rounds);
#: chosen with scripts/ab_simulate.py on A/A runs of this project's machine, checked with
#: scripts/ab_acceptance.py (the figures and their commands: issue 15's closing note)
AB_LOOKS = 4
#: imported from each revision's tree
CODE_UNDER_TEST: tuple[str, ...] = ("perfsuite.engine",)
#: ... and when the running checkout's operations do not import against a revision's engine
FALLBACK_CODE: tuple[str, ...] = ("perfsuite.engine", "perfsuite.workloads")

FixtureResolver = Callable[[str | None], tuple[Path | None, Mapping[str, Any]]]
OnSample = Callable[[SampleEvent], None]


@dataclass(frozen=True, slots=True)
class AbResult:
    """A finished A/B run: where it went, the two revisions, the comparison and how long it took."""

    directory: Path
    pairing: Path
    base: Revision
    head: Revision
    comparison: Comparison
    seconds: float
    seed: int
    recipes: tuple[str, ...] = ()  # measured (the default set leaves out machine-only recipes)
    samples: int = 0  # rounds per look (one sample per mode per revision each)
    rounds: tuple[tuple[str, int], ...] = ()  # (recipe, rounds measured) after the last look
    looks: int = 1  # looks taken (of the planned ones in the pairing's options)


def _instrument() -> Path:
    import perfsuite

    return Path(perfsuite.__file__).resolve().parent.parent


def _dependencies(tree: Path) -> list[str] | None:
    try:
        with open(tree / "pyproject.toml", "rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return sorted(str(d) for d in (data.get("project") or {}).get("dependencies", []))


def _check_dependencies(base: Revision, head: Revision) -> None:
    b, h = _dependencies(base.tree), _dependencies(head.tree)
    if b is not None and h is not None and b != h:
        changed = sorted(set(b) ^ set(h))
        raise PerfsuiteError(
            f"{base.describe()} and {head.describe()} declare different dependencies ({', '.join(changed)}): a "
            "separate virtual environment per revision is not implemented; measure each with `perfsuite run` in "
            "its own environment instead"
        )


def _choose_code(side: str, revision: Revision, operations: Sequence[str]) -> tuple[CodeVariant, list[str]]:
    """The variant for one side: the engine alone, or with its own operations if HEAD's do not import."""
    flags: list[str] = []
    variant = CodeVariant(side, revision.tree, CODE_UNDER_TEST, git=revision.git_state(),
                          info={"revision": revision.name, "from_revision": "engine"})
    try:
        probe_variant(variant, operations)
        return variant, flags
    except PerfsuiteError as first:
        fallback = CodeVariant(side, revision.tree, FALLBACK_CODE, git=revision.git_state(),
                               info={"revision": revision.name, "from_revision": "engine and operations",
                                     "fallback_reason": str(first)})
        try:
            probe_variant(fallback, operations)
        except PerfsuiteError as second:
            raise PerfsuiteError(f"{side.upper()} {revision.describe()}: the operations import neither against its "
                                 f"engine ({first}) nor with its own perfsuite.workloads ({second})") from None
        flags.append(f"{side.upper()} ran with its own operations (perfsuite.workloads from {revision.describe()}): "
                     f"the running checkout's did not import against its engine: {first}")
        return fallback, flags


def _measures_machine(operation: str) -> bool:
    """Whether the operation's factory declares ``measures = "machine"`` (a floor or the idle control: it may
    import the engine, e.g. the storage delay model of M10, yet measures no code under test)."""
    try:
        return getattr(resolve_operation(operation), "measures", None) == "machine"
    except PerfsuiteError:
        return False  # an operation that does not resolve here is measured, and its error said there


def _code_recipes(recipes: Sequence[Recipe]) -> tuple[list[Recipe], list[str]]:
    """(recipes with an operation that measures the code under test, names of the others): an operation
    measures it unless it declares it measures the machine or importing it imports no code under test."""
    touches: dict[str, bool] = {}
    kept, skipped = [], []
    for recipe in recipes:
        for mode in recipe.modes:
            if mode.operation not in touches:
                touches[mode.operation] = (not _measures_machine(mode.operation)
                                           and imports_packages(mode.operation, CODE_UNDER_TEST))
        (kept if any(touches[m.operation] for m in recipe.modes) else skipped).append(recipe)
    return kept, [r.name for r in skipped]


def _spec_digest(tree: Path, fixture: str) -> str | None:
    """The fixture spec digest ``tree``'s code would build (``None`` when it cannot say)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PERFSUITE_FIXTURES": str(tree / "fixtures")}
    code = "import sys; from perfsuite.workloads.fixtures import load_spec; print(load_spec(sys.argv[1]).digest)"
    try:
        proc = subprocess.run([sys.executable, "-c", code, fixture], capture_output=True, text=True, env=env,
                              timeout=120, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def _check_output(directory: Path) -> None:
    """A/B results go to a new or empty directory (empty ``base/`` and ``head/`` of a failed start are fine)."""
    if not directory.exists():
        return
    if not directory.is_dir():
        raise PerfsuiteError(f"{directory}: not a directory")
    leftovers = [p for p in directory.iterdir() if not (p.name in ("base", "head") and p.is_dir()
                                                         and not any(p.iterdir()))]
    if leftovers:
        raise PerfsuiteError(f"{directory}: not an empty directory; A/B results need a fresh --output-dir")


def _prepare_output(directory: Path) -> None:
    _check_output(directory)
    try:
        for side in ("base", "head"):
            (directory / side).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PerfsuiteError(f"{directory}: cannot create the output directory: {exc.strerror or exc}") from None


def run_ab(
    base: str,
    head: str | None,
    recipes: Sequence[Recipe],
    *,
    resolve_fixture: FixtureResolver,
    output_dir: Path,
    cwd: Path | None = None,
    seed: int | None = None,
    work_root: Path | None = None,
    on_sample: OnSample | None = None,
    alpha: float = DEFAULT_ALPHA,
    factor: float = DEFAULT_FACTOR,
    gate: str | None = None,
    skip_machine_only: bool = False,
    valgrind: str | None = None,
    looks: int = AB_LOOKS,
) -> AbResult:
    """Measure ``recipes`` for BASE and HEAD (``None``: the working tree) interleaved, write both documents
    per recipe and the pairing under ``output_dir``, and compare them; see the module docstring.
    ``skip_machine_only`` leaves out recipes none of whose operations import the code under test (they
    measure the machine, e.g. idle-control and fsync-floor: between two revisions they can only add noise).
    ``valgrind`` is the instruction pass's valgrind, for recipes with ``instructions = true`` (issue 22).
    ``looks``: at most this many looks of each recipe's ``samples`` rounds (see the module docstring)."""
    started = time.monotonic()
    skipped: list[str] = []
    if skip_machine_only:
        recipes, skipped = _code_recipes(recipes)
    if not recipes:
        raise PerfsuiteError("no recipe to measure")
    for recipe in recipes:
        if recipe.isolation != "process":
            raise PerfsuiteError(f"{recipe.name}: perfsuite ab needs process isolation (one interpreter cannot "
                                 "import two revisions of the engine)")
    if not 0 < alpha < 1 or not factor > 1 or (gate or "all") not in GATES:  # before minutes of measuring
        raise PerfsuiteError(f"--alpha must be in (0, 1), --factor above 1 and --gate one of {', '.join(GATES)}; "
                             f"got {alpha:g}, {factor:g}, {gate}")
    if looks < 1:
        raise PerfsuiteError(f"--looks must be at least 1, got {looks}")
    root = repo_root(Path(cwd or Path.cwd()))
    output_dir = Path(output_dir)
    _check_output(output_dir)
    seed = secrets.randbelow(2**31) if seed is None else seed
    names = [base] if head is None else [base, head]
    with materialise(root, names) as trees:
        base_rev = trees[0]
        head_rev = working_tree(root) if head is None else trees[1]
        _check_dependencies(base_rev, head_rev)
        operations = sorted({m.operation for r in recipes for m in r.modes})
        base_variant, flags = _choose_code("base", base_rev, operations)
        head_variant, head_flags = _choose_code("head", head_rev, operations)
        flags += head_flags
        _prepare_output(output_dir)
        instrument = _instrument()
        notes = [
            f"code under test ({', '.join(CODE_UNDER_TEST)}) from each revision: BASE {base_rev.describe()}, HEAD "
            f"{head_rev.describe()}; harness, operations, recipes and fixtures from the running checkout "
            f"{instrument}; samples interleaved in one plan (seed {seed}), one idle control for both",
        ]
        if skipped:
            notes.append(f"not measured: {', '.join(skipped)} (they import no code under test: the machine, not "
                         "the revisions; every recipe has its own idle control)")
        if instrument.resolve() != head_rev.tree.resolve() and head is None:
            flags.append(f"instrument from {instrument}, not from HEAD's tree {head_rev.tree}")
        entries = []
        run_id = f"ab-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
        for index, recipe in enumerate(recipes):
            fixture, info = resolve_fixture(recipe.fixture)
            if recipe.fixture:
                mine, theirs = info.get("digest"), _spec_digest(base_rev.tree, recipe.fixture)
                if mine != theirs:
                    notes.append(f"{recipe.name}: fixture {recipe.fixture}: BASE's spec digest "
                                 f"{(theirs or 'unknown')[:19]} differs from the one measured ({str(mine)[:19]}); "
                                 "both sides used the same copies")
            stamp = time.strftime("%Y%m%dT%H%M%S")
            outputs = {"base": output_dir / "base" / f"{recipe.name}-{stamp}.json",
                       "head": output_dir / "head" / f"{recipe.name}-{stamp}.json"}
            run_variants(recipe, [base_variant, head_variant], outputs=outputs, fixture=fixture, fixture_info=info,
                         work_root=work_root, seed=seed + index, on_sample=on_sample, run_id=run_id,
                         valgrind=valgrind)
            entries.append({"recipe": recipe.name, "base": f"base/{outputs['base'].name}",
                            "head": f"head/{outputs['head'].name}", "seed": seed + index, "rounds": recipe.samples,
                            "fixture": {"name": recipe.fixture, "digest": info.get("digest")}})
        pairing = output_dir / PAIRING_FILE
        document = {
            "format": PAIRING_FORMAT,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "seed": seed,
            "base": _side(base_rev, base_variant),
            "head": _side(head_rev, head_variant),
            "instrument": {"path": str(instrument)},
            "recipes": entries,
            "notes": notes,
            "flags": flags,
            "options": {"alpha": alpha, "factor": factor, "gate": gate or "all", "paired": True, "looks": looks,
                        "correction": "holm"},
            "looks": 1,
        }
        write_json_atomic(pairing, document)
        taken = 1
        by_name = {r.name: (i, r) for i, r in enumerate(recipes)}
        for look in range(2, looks + 1):
            pending = look_again(compare(output_dir))
            if not pending:
                break
            for name in pending:
                index, recipe = by_name[name]
                entry = entries[index]
                extend_variants(recipe, [base_variant, head_variant],
                                outputs={side: output_dir / entry[side] for side in ("base", "head")},
                                rounds=recipe.samples, fixture=resolve_fixture(recipe.fixture)[0],
                                work_root=work_root, seed=seed + index + 7919 * look, on_sample=on_sample,
                                valgrind=valgrind)
                entry["rounds"] = int(entry.get("rounds", recipe.samples)) + recipe.samples
            taken = look
            notes.append(f"look {look} of {looks}: {', '.join(pending)} inconclusive at look {look - 1}; "
                         f"{recipes[0].samples} more rounds each")
            document["looks"] = taken
            write_json_atomic(pairing, document)
    comparison = compare(output_dir)  # exactly what `perfsuite compare DIR` says later
    _write_text(output_dir / "compare.md", compare_markdown(comparison))
    _write_text(output_dir / "summary.md", compare_markdown(comparison, details=False))
    return AbResult(output_dir, pairing, base_rev, head_rev, comparison, time.monotonic() - started, seed,
                    tuple(r.name for r in recipes), recipes[0].samples,
                    tuple((str(e["recipe"]), int(e["rounds"])) for e in entries), taken)


def look_again(comparison: Comparison) -> tuple[str, ...]:
    """The recipes a sequential A/B measures again: those with an inconclusive gating headline (beyond the
    factor the worse way, not significant), unless a regression already decides the gate."""
    if comparison.regressions:
        return ()
    return tuple(sorted({c.recipe for c in comparison.inconclusive}))


def _write_text(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise PerfsuiteError(f"{path}: cannot write: {exc.strerror or exc}") from None


def _side(revision: Revision, variant: CodeVariant) -> dict[str, Any]:
    return {"revision": revision.name, "commit": revision.commit, "dirty": revision.dirty,
            "worktree": revision.worktree, "code": list(variant.packages), **dict(variant.info)}
