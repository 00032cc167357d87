"""The CI gate: compare two runs per recipe, mode and metric (SPEC section 5, ``perfsuite compare`` / ``ab``).

Three kinds of metric (:mod:`perfsuite.report._metrics`):

* **costs** (:data:`COST_METRICS`: allocation, bytes written, fsync/rename/create counts) are counts: the
  medians are compared against a tolerance (1% and at least 1 KiB or 1 operation by default). Steady samples
  gate exactly (3 allocation samples against 3 can never reach p < 0.05); samples that vary gate on their
  median too, confirmed by a rank test on the counts or beyond their widest range plus the tolerance, so one
  stray sample can neither hide a shift nor fake one (:mod:`perfsuite.report._costs`);
* **timings** with a known direction: changed only when both tests agree, the two-sided Mann-Whitney U on
  the samples gives p < ``alpha`` and the ratio (new / base: the Hodges-Lehmann estimate, the median of all
  pairwise ratios, :mod:`perfsuite.report._power`; the ratio of medians when a value is not positive) is
  beyond ``factor`` either way
  (and, for the headlines, the medians moved by at least ``min_change_ms``). Every gating timing states
  the **smallest detectable ratio** at its sample counts and spread (:mod:`perfsuite.report._power`). The
  same test decides both ways: slower is **regressed**, faster **improved** (which never fails the gate). A
  gating timing beyond the factor the worse way whose test does not reach significance is **inconclusive**:
  never a pass (exit 3); the better way it is no change for the gate, never inconclusive;
* **paired rounds** (a pairing written by ``perfsuite ab`` that says ``paired``): round ``i`` of BASE and of
  HEAD ran back to back, so timings are compared round by round, the Wilcoxon signed-rank test on the
  per-round log ratios with the Hodges-Lehmann estimate of those as the ratio (:mod:`._power`); the
  pairing's ``looks`` divide alpha (each look of a sequential A/B tests at ``alpha / looks``) and its
  ``correction="holm"`` adjusts the gating timing headlines' p-values together (:func:`._change.holm`), so
  an identical revision fails about ``alpha`` of the time per comparison, not per headline. Two separate
  runs are compared unpaired and uncorrected (6 samples per side could never survive a correction);
* the rest (lag percentiles, phases, GC, metrics without a direction, the idle control) is compared and
  shown as ``(info)`` for diagnosis, never gating: with some 25 metrics per mode, gating on all of them
  would raise false alarms on every few runs, and they move with the headlines anyway.

**Separate runs** cannot tell the machine's load from a regression in a timing, while costs
do not move with load: the commands compare them with ``timings="info"`` (costs gate, timings are shown as
information, said in the first line); ``"gate"`` gates timings unless a run is loaded (its idle control,
:func:`perfsuite.harness.machine_load`); an A/B pairing gates them whatever the load (``"paired"``). Every
comparison names its loaded runs in the first line.

**A loaded machine** (either run's idle control says so) cannot gate timings at all unless ``strict``: they are
reported, the counts gate, and the first line says which and why (:mod:`perfsuite.report._gate_policy`).

Exit status (:attr:`Comparison.outcome`): 1 on a regression; 3 when an incomplete document was compared on
purpose, or with ``strict`` when a timing is inconclusive; else 0, *neutral* when timings could not gate (a
loaded machine) or were inconclusive, *passed* otherwise (improvements included); unusable input is a
one-line :class:`PerfsuiteError` (exit 2). Every row carries its verdict in one line (``MetricChange.reason``,
:meth:`Comparison.explain`).

Inputs: recipe sets may differ (the intersection is compared, the rest listed,
``require_all`` makes it an error); documents of different kinds of machine (CPU model, cores, filesystem,
Python minor version: :meth:`Machine.same_kind <perfsuite.report.Machine.same_kind>`) are compared only with
``cross_machine``; incomplete documents (``running``, ``interrupted``) only with
``allow_incomplete``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from perfsuite._limits import LIMITS
from perfsuite.errors import PerfsuiteError
from perfsuite.report._change import (
    DEFAULT_ALPHA,
    DEFAULT_FACTOR,
    GATING_METRICS,
    MetricChange,
    holm,
    is_gating,
    timing_change,
)
from perfsuite.report._compare_inputs import MetricInput, metric_inputs
from perfsuite.report._compare_types import Comparison
from perfsuite.report._costs import cost_change, varying_note
from perfsuite.report._gate_policy import loaded_policy
from perfsuite.report._load import Result, latest_by_recipe, scan_results
from perfsuite.report._machine import machine_of
from perfsuite.report._metrics import (
    HIGHER,
    LOWER,
    METRIC_DIRECTIONS,
    SHOWN_METRICS,
    TIMING_HEADLINES,
    metric_direction,
)
from perfsuite.report._pairing import find_pairing, read_pairing

__all__ = [
    "CORRECTIONS",
    "DEFAULT_ALPHA",
    "DEFAULT_FACTOR",
    "GATES",
    "GATING_METRICS",
    "HEADLINE_METRICS",
    "HIGHER",
    "LOWER",
    "METRIC_DIRECTIONS",
    "SEPARATE_NOTE",
    "TIMINGS",
    "Comparison",
    "MetricChange",
    "compare",
    "compare_results",
    "metric_direction",
]

#: what may fail the gate: everything, or only the deterministic costs (timings then shown as info)
GATES = ("all", "costs")
#: error-rate control over a comparison's gating timings: none (each at alpha), or Holm's step-down
CORRECTIONS = ("none", "holm")
#: what timings may do: ``gate`` (unless a run is loaded), ``info`` (separate runs' default) or
#: ``paired`` (an interleaved A/B: gate whatever the load)
TIMINGS = ("gate", "info", "paired")
#: the first line's note when timings of separate runs are information
SEPARATE_NOTE = ("separate runs: timings are information, only costs gate (a timing gate needs both sides "
                 "interleaved in one run: perfsuite ab, pytest --perfsuite-ab)")


def _headline_metrics() -> tuple[str, ...]:
    return (*TIMING_HEADLINES, *SHOWN_METRICS)


#: shown in tables even when unchanged (the rest only when changed, or ``--all``); see :mod:`._metrics`
HEADLINE_METRICS = _headline_metrics()


# -- pairs of documents -------------------------------------------------------------------------------


def _machine_differences(pairs: Sequence[tuple[Result, Result]]) -> tuple[str, ...]:
    """What differs between the machines of each pair that are not of one kind (:meth:`Machine.same_kind`:
    CPU model, cores, work-dir filesystem, Python implementation and minor version; the host may differ)."""
    found: list[str] = []
    for b, n in pairs:
        mb, mn = machine_of(b), machine_of(n)
        if mb.same_kind(mn):  # the one definition of a machine decides; the loop below names why
            continue
        for name, x, y in (("cpu model", mb.cpu_model, mn.cpu_model), ("cores", mb.cores, mn.cores),
                           ("filesystem", mb.filesystem, mn.filesystem), ("python", mb.python, mn.python)):
            text = f"{name} {x!r} vs {y!r}"
            if x != y and text not in found:
                found.append(text)
    return tuple(found)


def _check_complete(results: Sequence[Result], side: str, allow: bool) -> list[str]:
    found = []
    for r in results:
        if r.complete:
            continue
        where = str(r.path) if r.path is not None else r.recipe
        if not allow:
            hint = f"; finish it with `perfsuite run --resume {r.path}`" if r.path is not None else ""
            raise PerfsuiteError(f"{where} ({side}) is incomplete ({r.progress}): refusing to compare it{hint} "
                                 "or pass --allow-incomplete")
        found.append(f"{side} {r.name} is incomplete ({r.progress})")
    return found


def compare_results(
    base: Sequence[Result],
    new: Sequence[Result],
    *,
    alpha: float = DEFAULT_ALPHA,
    factor: float = DEFAULT_FACTOR,
    base_name: str = "BASE",
    new_name: str = "NEW",
    require_all: bool = False,
    cross_machine: bool = False,
    allow_incomplete: bool = False,
    notes: Sequence[str] = (),
    flags: Sequence[str] = (),
    skipped: Sequence[str] = (),
    gate: str = "all",
    paired: bool = False,
    looks: int = 1,
    correction: str = "none",
    timings: str = "gate",
    strict: bool = False,
) -> Comparison:
    """Compare loaded results (the latest of each recipe per side); see the module docstring. ``gate="costs"``
    lets only the deterministic costs fail the gate (timings are still compared, and shown as info).
    ``paired``: samples of one index are one round (``perfsuite ab``); ``looks``: the planned looks of a
    sequential A/B (each at ``alpha / looks``); ``correction="holm"``: Holm over the gating timings.
    ``timings``: see the module docstring (``info`` for separate runs, as the commands pass it). ``strict``: a
    loaded machine's timings gate as a quiet one's would (paired) and an inconclusive timing exits 3."""
    if timings not in TIMINGS:
        raise PerfsuiteError(f"--timings must be one of {', '.join(TIMINGS)}, got {timings!r}")
    if gate not in GATES:
        raise PerfsuiteError(f"--gate must be one of {', '.join(GATES)}, got {gate!r}")
    if correction not in CORRECTIONS:
        raise PerfsuiteError(f"--correction must be one of {', '.join(CORRECTIONS)}, got {correction!r}")
    if looks < 1:
        raise PerfsuiteError(f"looks must be at least 1, got {looks}")
    if not 0 < alpha < 1:
        raise PerfsuiteError(f"--alpha must be between 0 and 1, got {alpha:g}")
    if not factor > 1:
        raise PerfsuiteError(f"--factor must be greater than 1, got {factor:g}")
    if not factor <= LIMITS["factor"].high:  # a gate that can never fail is no gate
        raise PerfsuiteError(f"--factor must be at most {LIMITS['factor'].high:g}, got {factor:g}")
    lb, ln = latest_by_recipe(base), latest_by_recipe(new)
    only_base = tuple(r for r in lb if r not in ln)
    only_new = tuple(r for r in ln if r not in lb)
    if require_all and (only_base or only_new):
        parts = [f"{', '.join(only_base)} only in {base_name}" if only_base else "",
                 f"{', '.join(only_new)} only in {new_name}" if only_new else ""]
        raise PerfsuiteError(f"--require-all: recipe sets differ: {'; '.join(p for p in parts if p)}")
    pairs = [(lb[r], ln[r]) for r in lb if r in ln]
    if not pairs:
        raise PerfsuiteError(f"{base_name} and {new_name} have no recipe in common")
    out_notes = list(notes)
    for side, results, latest in ((base_name, base, lb), (new_name, new, ln)):
        for recipe, chosen in latest.items():
            count = sum(1 for r in results if r.recipe == recipe)
            if count > 1 and recipe in lb and recipe in ln:
                out_notes.append(f"{recipe}: {count} documents in {side}; compared the newest, {chosen.name}")
    incomplete = _check_complete([b for b, _ in pairs], base_name, allow_incomplete)
    incomplete += _check_complete([n for _, n in pairs], new_name, allow_incomplete)
    machines = _machine_differences(pairs)
    if machines and not cross_machine:
        raise PerfsuiteError(
            f"{base_name} and {new_name} were measured on different machines ({'; '.join(machines)}): their timings "
            "are not comparable; run both on one machine (`perfsuite ab`) or pass --cross-machine"
        )
    loaded = _loaded(pairs)
    timing_note = None
    policy = gate == "all" and timings != "info" and bool(loaded) and not strict  # the loaded-runner policy
    if gate == "all" and timings == "info":
        timing_note = SEPARATE_NOTE
    elif policy:
        timing_note = "machine loaded: timings reported, not gated"
    elif gate == "all" and timings == "gate" and loaded:
        timing_note = ("a loaded run: timings are information, only costs gate (a loaded machine's timings cannot "
                       "tell its load from a regression; measure on a quiet machine or interleaved: perfsuite ab)")
    gate_for_timings = "costs" if timing_note is not None else gate
    inputs: list[MetricInput] = []
    for b, n in pairs:
        inputs += metric_inputs(b, n, base_name, new_name, out_notes, paired)
    # each look tests at alpha / looks (Bonferroni over the looks of a sequential A/B); Holm then spreads that
    # over the gating timings, so the smallest detectable ratio is stated at the level every one of them is
    # sure to get: alpha / looks / their number
    level = alpha / looks
    family = sum(1 for i in inputs if _in_family(i, gate_for_timings))
    changes = [_change(i, level, factor, gate_for_timings,
                       level / family if correction == "holm" and _in_family(i, gate_for_timings) else level,
                       out_notes) for i in inputs]
    if correction == "holm":
        changes = holm(changes, level, factor)
    if gate == "costs":
        flags = [*flags, "costs-only gate: timings shown, not gating"]
    underpowered = sorted({(c.base.n, c.new.n, c.test) for c in changes if c.underpowered and c.gating})
    if underpowered:
        out_notes.append(
            "too few samples for p < {:g} with {}: timings there can only be unchanged or inconclusive".format(
                level, ", ".join(f"{x} paired rounds (the signed-rank test cannot reach it)" if t == "signed-rank"
                                 else f"{x} vs {y} (Mann-Whitney U cannot reach it)" for x, y, t in underpowered))
        )
    if only_base:
        out_notes.append(f"only in BASE ({base_name}), not compared: {', '.join(only_base)}")
    if only_new:
        out_notes.append(f"only in NEW ({new_name}), not compared: {', '.join(only_new)}")
    return Comparison(
        base=base_name,
        new=new_name,
        alpha=alpha,
        factor=factor,
        changes=tuple(changes),
        looks=looks,
        correction=correction,
        notes=tuple(out_notes),
        only_base=only_base,
        only_new=only_new,
        cross_machine=machines,
        incomplete=tuple(incomplete),
        skipped=tuple(skipped),
        flags=tuple(flags),
        timing_note=timing_note,
        loaded=tuple(loaded),
        strict=strict,
        load_policy=loaded_policy(_loaded(pairs, short=True), changes) if policy else None,
    )


def _loaded(pairs: Sequence[tuple[Result, Result]], short: bool = False) -> list[str]:
    """``BASE x.json: LOADED: idle control median ...`` for every compared run measured on a loaded machine
    (``short``: ``BASE x.json median 8.86 ms > 6 ms``)."""
    found: list[str] = []
    for side, results in (("BASE", [b for b, _ in pairs]), ("NEW", [n for _, n in pairs])):
        for r in results:
            load = r.load
            if load.loaded:
                found.append(f"{side} {r.name} median {load.median_gap_ms:.2f} ms > {load.threshold_ms:g} ms"
                             if short else f"{side} {r.name}: {load.describe()}")
    return found


def _change(item: MetricInput, alpha: float, factor: float, gate: str, detect_alpha: float,
            notes: list[str]) -> MetricChange:
    """One metric compared: a cost by :func:`._costs.cost_change` (its note when its samples vary), else a timing."""
    if item.cost:
        change = cost_change(item.recipe, item.mode, item.metric, item.base, item.new, item.reference, alpha=alpha)
        note = varying_note(change, item.base, item.new)
        if note is not None:
            notes.append(note)
        return change
    return timing_change(item.recipe, item.mode, item.metric, item.base, item.new, alpha, factor, gate,
                         item.reference, paired=item.paired, detect_alpha=detect_alpha)


def _in_family(item: MetricInput, gate: str) -> bool:
    """Whether ``item`` will be one of the timing headlines Holm adjusts together (:func:`in_family`)."""
    return (not item.cost and item.metric in TIMING_HEADLINES and gate == "all"
            and is_gating(item.metric, item.mode, metric_direction(item.metric), item.reference))


def compare(
    base: Path | str,
    new: Path | str | None = None,
    *,
    alpha: float | None = None,
    factor: float | None = None,
    require_all: bool = False,
    cross_machine: bool = False,
    allow_incomplete: bool = False,
    skip_bad: bool = False,
    gate: str | None = None,
    timings: str | None = None,
    strict: bool | None = None,
) -> Comparison:
    """Compare two results files or directories of results (matched by recipe name), or, with ``new``
    omitted, the two sides of an A/B pairing (``perfsuite ab``'s output directory or its ``ab.json``), with
    the pairing's own thresholds unless given. A single file against a directory compares that file's recipe.
    Two separate runs compare their timings as information unless ``timings="gate"``; a pairing
    gates them (``"paired"``) unless ``timings="info"``; ``strict`` (a pairing: its recorded option unless given)
    keeps a loaded machine's timings gating and fails an inconclusive one (exit 3).
    """
    if new is None:
        return _compare_pairing(base, alpha=alpha, factor=factor, require_all=require_all,
                                cross_machine=cross_machine, allow_incomplete=allow_incomplete, gate=gate,
                                timings="paired" if timings in (None, "gate") else timings, strict=strict)
    b, skipped_b = scan_results(base, skip_bad=skip_bad)
    n, skipped_n = scan_results(new, skip_bad=skip_bad)
    if Path(base).is_dir() != Path(new).is_dir():
        recipe = (n if Path(base).is_dir() else b)[0].recipe
        b, n = [r for r in b if r.recipe == recipe], [r for r in n if r.recipe == recipe]
        for side, name in ((b, base), (n, new)):
            if not side:
                raise PerfsuiteError(f"recipe {recipe!r} is absent from {name}")
    return compare_results(
        b, n, alpha=DEFAULT_ALPHA if alpha is None else alpha, factor=DEFAULT_FACTOR if factor is None else factor,
        base_name=str(base), new_name=str(new), require_all=require_all, cross_machine=cross_machine,
        allow_incomplete=allow_incomplete, skipped=[*skipped_b, *skipped_n], gate=gate or "all",
        timings=timings or "info", strict=bool(strict),
    )


def _compare_pairing(path: Path | str, *, alpha: float | None, factor: float | None, gate: str | None,
                     timings: str, require_all: bool, cross_machine: bool, allow_incomplete: bool,
                     strict: bool | None = None) -> Comparison:
    from perfsuite.report._load import read_result

    if find_pairing(path) is None:
        raise PerfsuiteError(
            f"{path}: give BASE and NEW, or an A/B output directory (with ab.json) written by `perfsuite ab`")
    pairing = read_pairing(path)
    base = [read_result(b) for _, b, _ in pairing.pairs]
    new = [read_result(h) for _, _, h in pairing.pairs]
    names = []
    for side in ("base", "head"):
        info = pairing.side(side)
        commit = str(info.get("commit") or "")[:7] or "?"
        names.append(f"{side} {info.get('revision', side)} ({commit}{', dirty' if info.get('dirty') else ''})")
    recorded = pairing.data.get("options") or {}  # the thresholds `perfsuite ab` used: the same verdict again
    return compare_results(
        base, new, base_name=names[0], new_name=names[1], notes=pairing.notes, flags=pairing.flags,
        alpha=float(recorded.get("alpha", DEFAULT_ALPHA)) if alpha is None else alpha,
        factor=float(recorded.get("factor", DEFAULT_FACTOR)) if factor is None else factor,
        gate=str(recorded.get("gate", "all")) if gate is None else gate,
        # a pairing written before rounds were paired (no such option) keeps the verdict it had
        paired=bool(recorded.get("paired", False)), looks=int(recorded.get("looks", 1)),
        correction=str(recorded.get("correction", "none")), timings=timings, require_all=require_all,
        cross_machine=cross_machine, allow_incomplete=allow_incomplete,
        strict=bool(recorded.get("strict", False)) if strict is None else strict,
    )
