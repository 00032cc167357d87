"""``perfsuite ab BASE [HEAD]``: two git revisions of any git repository measured on one runner, their
samples interleaved (any repository, not only perfsuite's).

**Which parts come from which revision** (so a change to the instrument never passes for a change in the
code): the **code under test** (:mod:`perfsuite.ab._project`: ``[tool.perfsuite] code-under-test`` of the
repository's ``pyproject.toml``, by default the repository's packages the recipes' operations import;
perfsuite's own repository declares ``perfsuite.engine``) is imported from each revision's tree;
everything else (the harness, the operations, the recipes and the fixture builders) comes from the running
checkout and the running perfsuite, as asv runs every revision under the current benchmark suite. With
HEAD omitted the running checkout is HEAD's working tree, uncommitted changes included. When the
operations do not import against BASE's code (a renamed or new name), that side falls back to its own copy
of the operations' packages too (``perfsuite.workloads``, ``benchmarks``...), and the first line of every
comparison says so.

Each revision but the working tree is a detached ``git worktree``. Both run in this interpreter's
environment while their declared dependencies are the same; when they differ, each revision gets an
environment of its own (:mod:`perfsuite.ab._envs`: built before any sample, cached by the digest of its
dependency specification) and each side's worker processes run in it. Fixtures are resolved once, by the
running checkout, and every sample of both sides copies the same fixture; when the fixture builders are part
of the repository (perfsuite's), the fixture spec digest BASE would build is compared and a difference is
stated. The output directory holds ``base/`` and ``head/`` (one results
document per recipe each, the schema of ``perfsuite run``) and the pairing ``ab.json``
(:mod:`perfsuite.report._pairing`) with the thresholds used; the verdict is :func:`perfsuite.report.compare`
of that pairing, also written as Markdown: ``compare.md`` (everything, for a job summary) and ``summary.md``
(the verdict and the headline table, for a pull-request comment).

**Paired rounds, sequential looks** (the gate's error rates: ``scripts/acceptance/ab_acceptance.py`` measures them): a
round runs BASE's and HEAD's sample of one index back to back (in a random order), so timings are compared
round by round (the Wilcoxon signed-rank test on the per-round log ratios: the machine's slow spells hit
both sides and cancel). The gating timing headlines of the whole comparison are one family under Holm's
step-down, so an identical revision fails the gate about ``alpha`` of the time, not ``alpha`` per headline.
A first look measures ``samples`` rounds; while some gating headline is inconclusive (beyond the factor
the worse way, not significant) and no regression is found, the recipes concerned get ``samples`` more
rounds, up to ``looks`` looks; every look tests at ``alpha / looks`` (Bonferroni over the looks), so
looking again never buys a false regression. Inconclusive after the last look is said as such: neutral (exit 0)
unless ``strict`` (exit 3). On a loaded machine (the idle control) timings gate nothing unless ``strict``, so no
look is taken for them (:mod:`perfsuite.report._gate_policy`). A
headline that is only faster takes no look: confirmed it is ``improved``, unconfirmed it is no change for the
gate, and either way it could only ever pass.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from perfsuite.ab._envs import ENV_MODES, DependencySpec, Environment, dependency_spec, ensure_environment
from perfsuite.ab._git import Revision, materialise, project_in, working_tree
from perfsuite.ab._project import (
    INSTRUMENT,
    CodeUnderTest,
    code_layout,
    default_code,
    operation_packages,
    read_config,
)
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import (
    CodeVariant,
    Recipe,
    SampleEvent,
    extend_variants,
    imported_modules,
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

__all__ = ["AB_LOOKS", "AB_SAMPLES", "AbResult", "look_again", "resolve_code", "run_ab"]

#: rounds per look (one sample per mode per revision each; recipes say 6 for a single run): 16 paired rounds
#: decide a large change at the first look (the signed-rank test can reach p = 3e-5 there)
AB_SAMPLES = 16
#: at most this many looks of AB_SAMPLES rounds each while a headline stays inconclusive (at most 64 rounds);
#: chosen with scripts/acceptance/ab_simulate.py on A/A runs of this project's machine, checked with
#: scripts/acceptance/ab_acceptance.py (it prints each figure with its command)
AB_LOOKS = 4

FixtureResolver = Callable[[str | None], tuple[Path | None, Mapping[str, Any]]]
OnSample = Callable[[SampleEvent], None]
OnNote = Callable[[str], None]


class PairingEntry(TypedDict):
    """One recipe of ``ab.json``: its two results files (relative to the output directory), seed and rounds."""

    recipe: str
    base: str
    head: str
    seed: int
    rounds: int
    fixture: dict[str, Any]


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
    code: CodeUnderTest | None = None  # what was imported from each revision, and how it was chosen
    environments: Mapping[str, Environment] | None = None  # side -> its own environment (None: this one)


def _instrument() -> Path:
    import perfsuite

    return Path(perfsuite.__file__).resolve().parent.parent


def _environments(mode: str, base: Revision, head: Revision, installer: str,
                  on_note: OnNote | None) -> tuple[dict[str, Environment], list[str]]:
    """Each side's own environment when ``mode`` asks for one (``auto``: when the revisions declare different
    dependencies), built before anything is measured; and the notes saying so."""
    if mode not in ENV_MODES:
        raise PerfsuiteError(f"--env must be one of {', '.join(ENV_MODES)}, got {mode!r}")
    specs: dict[str, DependencySpec] = {"base": dependency_spec(base.tree), "head": dependency_spec(head.tree)}
    b, h = specs["base"].requirements, specs["head"].requirements
    differ = b is not None and h is not None and b != h
    changed = ", ".join(sorted(set(b or ()) ^ set(h or ()))) if differ else ""
    if mode == "current" or (mode == "auto" and not differ):
        notes = [f"both revisions in this interpreter's environment although their dependencies differ ({changed}; "
                 "--env current)"] if differ else []
        return {}, notes
    revisions = {"base": base, "head": head}
    built: dict[str, Environment] = {}
    for side in ("base", "head"):
        who = f"{side.upper()} {revisions[side].describe()}"
        reqs = ", ".join(specs[side].requirements or ()) or "no dependencies"

        def building(tool: str, who: str = who, reqs: str = reqs) -> None:
            if on_note is not None:
                on_note(f"building the environment of {who} with {tool}: {reqs} ...")

        try:
            env = ensure_environment(specs[side], installer=installer, on_build=building)
        except PerfsuiteError as exc:
            raise PerfsuiteError(f"{who}: {exc}") from None
        built[side] = env
        if on_note is not None:
            on_note(f"environment of {who}: {env.describe()}: {env.path}")
    why = f"their dependencies differ ({changed})" if differ else "--env revision"
    notes = [f"an environment per revision ({why}), built before any sample: BASE {built['base'].describe()}, "
             f"HEAD {built['head'].describe()}"]
    return built, notes


def resolve_code(root: Path, operations: Sequence[str], *, python: str | None = None) -> CodeUnderTest:
    """The code under test of the repository at ``root`` (the running checkout) for ``operations``: declared
    in its pyproject.toml, else what the operations import of it (probed with ``python``, default this one)."""
    config = read_config(root)
    if config.code_under_test is not None:
        packages = config.code_under_test
        return CodeUnderTest(packages, code_layout(root, packages), f"declared in {config.source}")
    return default_code(root, operations, imported_modules(operations, root, python=python))


def _choose_code(side: str, revision: Revision, operations: Sequence[str], code: CodeUnderTest,
                 env: Environment | None) -> tuple[CodeVariant, list[str]]:
    """The variant for one side: its code under test alone, or with its own operations if the running
    checkout's do not import against it."""
    flags: list[str] = []
    root = code.root(revision.tree)
    python = env.python if env is not None else None
    extra: dict[str, Any] = {"environment": env.info()} if env is not None else {}
    variant = CodeVariant(side, root, code.packages, git=revision.git_state(), python=python,
                          info={"revision": revision.name, "from_revision": "code under test", **extra})
    try:
        probe_variant(variant, operations)
        return variant, flags
    except PerfsuiteError as first:
        own = [p for p in operation_packages(operations) if p not in code.packages and _has(root, p)]
        where = f"{side.upper()} {revision.describe()}"
        if not own:
            raise PerfsuiteError(f"{where}: the operations do not import against its code under test "
                                 f"({', '.join(code.packages)}): {first}") from None
        fallback = CodeVariant(side, root, (*code.packages, *own), git=revision.git_state(), python=python,
                               info={"revision": revision.name, "from_revision": "code under test and operations",
                                     "fallback_reason": str(first), **extra})
        try:
            probe_variant(fallback, operations)
        except PerfsuiteError as second:
            packages = ", ".join(code.packages)
            reasons = (f"({packages}) nor with its own {', '.join(own)}: {first}" if str(second) == str(first) else
                       f"({packages}: {first}) nor with its own {', '.join(own)} ({second})")
            raise PerfsuiteError(f"{where}: the operations import neither against its code under test {reasons}"
                                 ) from None
        flags.append(f"{side.upper()} ran with its own operations ({', '.join(own)} from {revision.describe()}): "
                     f"the running checkout's did not import against its code under test: {first}")
        return fallback, flags


def _has(root: Path, name: str) -> bool:
    target = root.joinpath(*name.split("."))
    return (target / "__init__.py").is_file() or target.with_name(target.name + ".py").is_file()


def _measures_machine(operation: str) -> bool:
    """Whether the operation's factory declares ``measures = "machine"`` (a floor or the idle control: it may
    import the engine, e.g. the storage delay model of M10, yet measures no code under test)."""
    try:
        return getattr(resolve_operation(operation), "measures", None) == "machine"
    except PerfsuiteError:
        return False  # an operation that does not resolve here is measured, and its error said there


def _code_recipes(recipes: Sequence[Recipe], packages: Sequence[str],
                  python: str | None = None) -> tuple[list[Recipe], list[str]]:
    """(recipes with an operation that measures the code under test, names of the others): an operation
    measures it unless it declares it measures the machine or importing it imports no code under test."""
    touches: dict[str, bool] = {}
    kept: list[Recipe] = []
    skipped: list[Recipe] = []
    for recipe in recipes:
        for mode in recipe.modes:
            if mode.operation not in touches:
                touches[mode.operation] = (not _measures_machine(mode.operation)
                                           and imports_packages(mode.operation, packages, python=python))
        (kept if any(touches[m.operation] for m in recipe.modes) else skipped).append(recipe)
    return kept, [r.name for r in skipped]


def _spec_digest(tree: Path, fixture: str) -> str | None:
    """The fixture spec digest ``tree``'s code would build (``None`` when it cannot say, or when the fixture
    builders are not part of the repository: then both revisions' builder is the running perfsuite's)."""
    if not (tree / INSTRUMENT / "workloads" / "fixtures.py").is_file():
        return None
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
    env: str = "auto",
    installer: str = "auto",
    on_note: OnNote | None = None,
    strict: bool = False,
) -> AbResult:
    """Measure ``recipes`` for BASE and HEAD (``None``: the working tree) interleaved, write both documents
    per recipe and the pairing under ``output_dir``, and compare them; see the module docstring.
    ``skip_machine_only`` leaves out recipes none of whose operations import the code under test (they
    measure the machine, e.g. idle-control and fsync-floor: between two revisions they can only add noise).
    ``valgrind`` is the instruction pass's valgrind, for recipes with ``instructions = true``.
    ``looks``: at most this many looks of each recipe's ``samples`` rounds (see the module docstring).
    ``env``: an environment per revision when their dependencies differ (``auto``), always (``revision``)
    or never (``current``); ``installer``: ``auto`` (uv when on PATH), ``uv`` or ``pip``. ``on_note`` hears
    what happens before the first sample (environments built, and their time), one line each. ``strict``
    (recorded in the pairing): a loaded machine's timings gate too, and inconclusive after the last look exits 3."""
    started = time.monotonic()
    if not recipes:
        raise PerfsuiteError("no recipe to measure")
    for recipe in recipes:
        if recipe.isolation != "process":
            raise PerfsuiteError(f"{recipe.name}: perfsuite ab needs process isolation (one interpreter cannot "
                                 "import two revisions of the code under test)")
    if not 0 < alpha < 1 or not factor > 1 or (gate or "all") not in GATES:  # before minutes of measuring
        raise PerfsuiteError(f"--alpha must be in (0, 1), --factor above 1 and --gate one of {', '.join(GATES)}; "
                             f"got {alpha:g}, {factor:g}, {gate}")
    if looks < 1:
        raise PerfsuiteError(f"--looks must be at least 1, got {looks}")
    if env not in ENV_MODES:
        raise PerfsuiteError(f"--env must be one of {', '.join(ENV_MODES)}, got {env!r}")
    top, within = project_in(Path(cwd or Path.cwd()))  # a project inside a larger repository: its directory
    root = top / within if within else top
    output_dir = Path(output_dir)
    _check_output(output_dir)
    seed = secrets.randbelow(2**31) if seed is None else seed
    names = [base] if head is None else [base, head]
    with materialise(top, names, within) as trees:
        base_rev = trees[0]
        head_rev = working_tree(top, within) if head is None else trees[1]
        envs, env_notes = _environments(env, base_rev, head_rev, installer, on_note)
        head_python = envs["head"].python if envs else None
        operations = sorted({m.operation for r in recipes for m in r.modes})
        code = resolve_code(root, operations, python=head_python)
        skipped: list[str] = []
        if skip_machine_only:
            recipes, skipped = _code_recipes(recipes, code.packages, head_python)
            if not recipes:
                raise PerfsuiteError(f"no recipe to measure: none of {', '.join(skipped)} imports the code under "
                                     f"test ({', '.join(code.packages)}); name recipes with -r")
            operations = sorted({m.operation for r in recipes for m in r.modes})
        base_variant, flags = _choose_code("base", base_rev, operations, code, envs.get("base"))
        head_variant, head_flags = _choose_code("head", head_rev, operations, code, envs.get("head"))
        flags += head_flags
        _prepare_output(output_dir)
        instrument = _instrument()
        notes = [
            f"code under test ({', '.join(code.packages)}: {code.how}) from each revision: BASE "
            f"{base_rev.describe()}, HEAD {head_rev.describe()}; harness from {instrument}, operations and "
            f"recipes from the running checkout {root}; samples interleaved in one plan (seed {seed}), one idle "
            "control for both",
            *env_notes,
        ]
        if skipped:
            notes.append(f"not measured: {', '.join(skipped)} (they import no code under test: the machine, not "
                         "the revisions; every recipe has its own idle control)")
        part_of_repo = (head_rev.tree / INSTRUMENT / "__init__.py").is_file()  # perfsuite's own repository
        if part_of_repo and instrument.resolve() != head_rev.tree.resolve() and head is None:
            flags.append(f"instrument from {instrument}, not from HEAD's tree {head_rev.tree}")
        entries: list[PairingEntry] = []
        run_id = f"ab-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
        for index, recipe in enumerate(recipes):
            fixture, info = resolve_fixture(recipe.fixture)
            theirs = _spec_digest(base_rev.tree, recipe.fixture) if recipe.fixture else None
            if recipe.fixture and (base_rev.tree / INSTRUMENT / "workloads" / "fixtures.py").is_file():
                mine = info.get("digest")
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
            "code_under_test": {"packages": list(code.packages), "subdir": code.subdir, "how": code.how},
            "instrument": {"path": str(instrument)},
            "recipes": entries,
            "notes": notes,
            "flags": flags,
            "options": {"alpha": alpha, "factor": factor, "gate": gate or "all", "paired": True, "looks": looks,
                        "correction": "holm", "strict": strict},
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
                                outputs={"base": output_dir / entry["base"], "head": output_dir / entry["head"]},
                                rounds=recipe.samples, fixture=resolve_fixture(recipe.fixture)[0],
                                work_root=work_root, seed=seed + index + 7919 * look, on_sample=on_sample,
                                valgrind=valgrind)
                entry["rounds"] += recipe.samples
            taken = look
            notes.append(f"look {look} of {looks}: {', '.join(pending)} inconclusive at look {look - 1}; "
                         f"{recipes[0].samples} more rounds each")
            document["looks"] = taken
            write_json_atomic(pairing, document)
    comparison = compare(output_dir)  # exactly what `perfsuite compare DIR` says later
    _write_text(output_dir / "compare.md", compare_markdown(comparison, command="ab"))
    _write_text(output_dir / "summary.md", compare_markdown(comparison, details=False, command="ab"))
    return AbResult(output_dir, pairing, base_rev, head_rev, comparison, time.monotonic() - started, seed,
                    tuple(r.name for r in recipes), recipes[0].samples,
                    tuple((e["recipe"], e["rounds"]) for e in entries), taken, code, envs or None)


def look_again(comparison: Comparison) -> tuple[str, ...]:
    """The recipes a sequential A/B measures again: those with an inconclusive gating headline (beyond the
    factor the worse way, not significant), unless a regression already decides the gate. Rows that are only
    faster (improved, or faster than the factor without the evidence) never earn a look: more rounds could
    only confirm a pass."""
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
