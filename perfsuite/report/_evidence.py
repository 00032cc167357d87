"""The ADR evidence paragraph (SPEC section 5, ``perfsuite evidence``), in the style of the seed's decision history.

One Markdown paragraph: setup (fixture and size, samples per mode, heartbeat, GC policy, isolation,
filesystem and whether directory fsync works), ranges per mode, GC observations, the M7 verdict, the
idle control, the fsync floor of the same run, optional before/after ranges against a baseline, and
the limitations that the data call for.

**Every number comes from the files read** (the result, its floor, the baseline): each printed
figure is a value of those documents rounded as in :mod:`perfsuite.report._format`, a count of their
samples, or part of their date. Names and settings that contain digits (fixture names, versions,
commits, the ``compare`` thresholds) are set in code spans, which are not figures. Ratios and p-values
are derived, so they stay in ``perfsuite report`` and ``perfsuite compare``, never in the paragraph.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.errors import PerfsuiteError
from perfsuite.report._compare import DEFAULT_ALPHA, DEFAULT_FACTOR, Comparison, compare_results
from perfsuite.report._format import fmt_bytes, fmt_ms, fmt_number, plural, short_commit
from perfsuite.report._load import Floor, Result, find_floor, read_result, read_siblings
from perfsuite.report._table import NO_ACK_RATIO_RECIPES

__all__ = ["FEW_SAMPLES", "NOISY_CONTROL_PERIODS", "Evidence", "evidence", "evidence_for"]

#: fewer samples per mode than this is called "small samples"
FEW_SAMPLES = 20
#: the idle control shows a noisy machine when its worst gap exceeds this many heartbeat periods
NOISY_CONTROL_PERIODS = 2.0
#: metrics quoted before/after against a baseline (plus any other metric that changed)
BASELINE_METRICS = (("max_gap_ms", "maximum heartbeat gap"), ("submission_ms", "submission"), ("ack_ms", "ACK"))


@dataclass(frozen=True, slots=True)
class Evidence:
    """The paragraph, what it was built from, and the limitations it states."""

    markdown: str
    result: Result
    floor: Floor | None
    baseline: Result | None
    comparison: Comparison | None
    limitations: tuple[str, ...]

    @property
    def sources(self) -> tuple[Mapping[str, Any], ...]:
        """The documents every number in :attr:`markdown` comes from."""
        docs: list[Mapping[str, Any]] = [self.result.data]
        if self.floor is not None and self.floor.result is not None and self.floor.result.data is not self.result.data:
            docs.append(self.floor.result.data)
        if self.baseline is not None:
            docs.append(self.baseline.data)
        return tuple(docs)


# -- small phrasing helpers -------------------------------------------------------------------------


def _range(values: Sequence[float], fmt: Any = fmt_ms) -> str:
    lo, hi = fmt(min(values)), fmt(max(values))
    return lo if lo == hi else f"{lo}-{hi}"


def _join(parts: Sequence[str]) -> str:
    parts = [p for p in parts if p]
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def _mode_name(mode: str) -> str:
    return f"`{mode}`"


def _values(result: Result, mode: str, key: str) -> list[float]:
    return [v for v in result.values(mode).get(key, [])]


def _inline(result: Result, mode: str) -> bool:
    samples = result.samples(mode)
    return bool(samples) and all(float(s["ack_ms"]) <= float(s["submission_ms"]) for s in samples)


def _day(result: Result) -> str:
    return result.date[:10]


# -- the sentences --------------------------------------------------------------------------------


def _setup(result: Result) -> str:
    doc, r = result.data, result.data["recipe"]
    env = doc["environment"]
    fixture = doc["fixture"]
    counts = {m: len(result.samples(m)) for m in result.modes}
    if len(set(counts.values())) == 1:
        samples = f"{plural(next(iter(counts.values())), 'sample')} per mode"
    else:
        samples = _join([f"{n} {_mode_name(m)}" for m, n in counts.items()]) + " samples"
    warmups = sorted({int(body.get("warmups", 0)) for body in doc["modes"].values()})
    if len(result.modes) > 1:
        samples += " alternated (" + "/".join(_mode_name(m) for m in result.modes) + ")"
    if warmups and warmups[-1] > 0:
        samples += f" after {plural(warmups[-1], 'warm-up')} per mode"
    if fixture.get("name"):
        size = f"{plural(int(fixture['files']), 'file')}, {fmt_bytes(fixture['bytes'])} bytes"
        what = f"fixture `{fixture['name']}` ({size}"
        what += f", `{str(fixture['digest'])[:15]}`)" if fixture.get("digest") else ")"
        copy = "each on a fresh private copy"
    else:
        what, copy = "no fixture (raw calls in a scratch directory)", "each in a fresh scratch directory"
    where = "in its own worker process" if r["isolation"] == "process" else "all in one process (inline isolation)"
    where = where if r["isolation"] == "process" else ", " + where
    if r["gc"] == "collect-before":
        gc = "a full garbage collection before each sample (`collect-before`)"
    else:
        gc = "garbage collection left to run naturally (`natural`)"
    work = env["work_dir"]
    fs = f"`{work['filesystem']}`" if work.get("filesystem") else "an unknown filesystem"
    dir_fsync = work.get("dir_fsync")
    fsync = "where directory fsync works" if dir_fsync == "ok" else f"where directory fsync fails (`{dir_fsync}`)"
    commit = f"commit `{short_commit(result.commit)}`" + (" (uncommitted changes)" if result.dirty else "")
    cpu = env["cpu"]
    machine = f"`{env['python'].get('implementation', 'Python')} {env['python']['version']}` on `{env['os']['system']}`"
    machine += f" (`{cpu['model']}`" + (f", {plural(int(cpu['cores']), 'core')})" if cpu.get("cores") else ")")
    status = ""
    if doc.get("status") != "complete":
        done, total = doc["progress"]["done"], doc["progress"]["total"]
        if doc.get("status") == "failed":  # issue 14 case 9: say so, and why, never "interrupted"
            why = f" ({doc['error']})" if doc.get("error") else ""
            status = f" The run FAILED{why}: only {done} of {total} planned entries were measured."
        else:
            status = f" The run is {doc.get('status')}: {done} of {total} planned entries were measured."
    return (
        f"Measured at {commit} with {machine}: {what}, {samples}, {copy}{' ' if where[0] != ',' else ''}{where}, "
        f"a {fmt_number(r['heartbeat_ms'])} ms heartbeat from just before submission until "
        f"{fmt_number(r['window_tail_ms'])} ms after acknowledgement, and {gc}; the work directory was on {fs}, "
        f"{fsync}.{status}"
    )


def _mode_sentence(result: Result, mode: str) -> str:
    sub, ack, gap = (_values(result, mode, k) for k in ("submission_ms", "ack_ms", "max_gap_ms"))
    if not sub:
        return f"Mode {_mode_name(mode)} has no samples."
    if _inline(result, mode):
        who = "The synchronous path" if mode == "sync" else f"Mode {_mode_name(mode)}"
        text = f"{who} held the loop {_range(sub)} ms, acknowledging before it returned (heartbeat {_range(gap)} ms)"
    else:
        who = "Asynchronous submission" if mode == "async" else f"Mode {_mode_name(mode)}: submission"
        text = (
            f"{who} returned in {_range(sub)} ms and acknowledged after {_range(ack)} ms, "
            f"with a maximum heartbeat gap of {_range(gap)} ms"
        )
    drain = _values(result, mode, "drain_ms")
    if drain:
        text += f"; an explicit drain waited {_range(drain)} ms"
    return text + "."


def _details(result: Result, mode: str) -> list[str]:
    out = []
    summary = result.data["modes"][mode].get("summary", {})
    phases = [(key.split(".", 1)[1], stat["median"]) for key, stat in summary.items() if key.startswith("phases_ms.")]
    if phases:
        out.append(
            f"{_mode_name(mode)} phase medians: " + ", ".join(f"{name} {fmt_ms(v)} ms" for name, v in phases) + "."
        )
    metrics = [(k.split(".", 1)[1], v) for k, v in result.values(mode).items() if k.startswith("metrics.")]
    if metrics:
        parts = [f"`{name}` {_range(values, fmt_bytes if 'bytes' in name else fmt_number)}" for name, values in metrics]
        out.append(f"{_mode_name(mode)} per sample: " + _join(parts) + ".")
    return out


def _allocation(result: Result) -> str:
    parts = []
    tracker, per_mode = None, set()
    for mode in result.modes:
        alloc = result.data["modes"][mode].get("allocation")
        if not alloc or not alloc.get("samples"):
            continue
        tracker = alloc.get("tracker")
        per_mode.add(len(alloc["samples"]))
        v = result.values(mode)
        parts.append(
            f"{_range(v['allocation.total_bytes'], fmt_bytes)} bytes allocated "
            f"({_range(v['allocation.allocations'], fmt_bytes)} allocations, peak "
            f"{_range(v['allocation.peak_bytes'], fmt_bytes)} bytes) for {_mode_name(mode)}"
        )
    if not parts:
        return ""
    n = f"{plural(per_mode.pop(), 'sample')} per mode" if len(per_mode) == 1 else "samples per mode"
    return f"A separate, untimed allocation pass (`{tracker}`, {n}) measured " + _join(parts) + " per publication."


def _gc(result: Result) -> str:
    policy = result.data["recipe"]["gc"]
    parts, quiet = [], []
    for mode in result.modes:
        samples = result.samples(mode)
        seen = [s for s in samples if s["gc"]["collections"]]
        if not seen:
            quiet.append(_mode_name(mode))
            continue
        in_gap = sum(1 for s in seen if s["gc"]["in_max_gap"])
        parts.append(
            f"{len(seen)} of {len(samples)} {_mode_name(mode)} samples saw a collection "
            f"({_range([float(s['gc']['gc_ms']) for s in seen])} ms of GC in the window, "
            f"inside the largest gap in {in_gap})"
        )
    if policy == "collect-before":
        head = "The recipe collects garbage before each sample"
    else:
        head = "GC ran naturally and samples that saw it are kept"
    if not parts:
        return f"{head}; no sample window contained a collection."
    tail = f"; no {' or '.join(quiet)} sample collected garbage" if quiet else ""
    return f"{head}; " + "; ".join(parts) + tail + "."


def _verdict(result: Result) -> str:
    parts, target = [], None
    for mode in result.modes:
        v = result.data["modes"][mode]["verdict"]
        target = v["target_ms"]
        if v.get("met") is None:
            continue
        worst = f"worst {fmt_ms(v['worst_ms'])} ms" if v.get("worst_ms") is not None else ""
        if v["met"]:
            parts.append(f"{_mode_name(mode)} met it in all {v['samples']} samples ({worst})")
        else:
            parts.append(
                f"{_mode_name(mode)} missed it in {v['missed']} of {v['samples']} samples, "
                f"{v['missed_with_gc']} of them with GC ({worst})"
            )
    if not parts or target is None:
        return ""
    return (
        f"Against the {fmt_number(target)} ms target on the maximum heartbeat gap (met only if every sample is "
        "under it, GC samples included), " + "; ".join(parts) + "."
    )


def _control(result: Result) -> str:
    gaps = _values(result, "control", "max_gap_ms")
    if not gaps:
        return "No idle control was measured in this run."
    return (
        "The idle control, the same heartbeat with no workload measured between the samples, had maximum gaps "
        f"of {_range(gaps)} ms."
    )


def _floor(result: Result, floor: Floor | None) -> str:
    if floor is None or result.recipe in NO_ACK_RATIO_RECIPES:
        return ""
    values = [float(s["ack_ms"]) for s in floor.samples]
    if floor.result is result and floor.source != "floor section":
        return (
            f"This run is the fsync floor itself: write, fsync, `os.replace` and directory fsync acknowledged in "
            f"{_range(values)} ms (median {fmt_ms(floor.ack_ms.median)} ms)."
        )
    size = ""
    if floor.result is not None and floor.source != "floor section":
        spec = floor.result.data["recipe"]["modes"].get(floor.mode, {})
        if isinstance(spec.get("bytes"), int):
            size = f" of {fmt_bytes(spec['bytes'])} bytes"
    where = f"`{floor.source}`" if floor.source != "floor section" else "measured beside the modes"
    acks = [
        f"{fmt_ms(stat.median)} ms for {_mode_name(mode)}"
        for mode in result.modes
        if (stat := result.stat(mode, "ack_ms")) is not None
    ]
    return (
        f"The fsync floor of the same run ({where}: write, fsync, `os.replace` and directory fsync{size}) "
        f"acknowledged in {_range(values)} ms (median {fmt_ms(floor.ack_ms.median)} ms), against acknowledgement "
        f"medians of {_join(acks)}."
    )


def _baseline(result: Result, baseline: Result, comparison: Comparison) -> str:
    status = {(c.mode, c.metric): c.status for c in comparison.changes if c.recipe == result.recipe}
    gating = {(c.mode, c.metric) for c in comparison.changes if c.recipe == result.recipe and c.gating}
    clauses = []
    for mode in result.modes:
        if mode not in baseline.modes:
            clauses.append(f"{_mode_name(mode)} has no baseline")
            continue
        before, after = baseline.values(mode), result.values(mode)
        metrics = [(k, label) for k, label in BASELINE_METRICS if k in before and k in after]
        metrics += [
            (metric, f"`{metric}`")
            for (m, metric), s in status.items()
            if m == mode and s != "unchanged" and (m, metric) in gating and metric not in dict(BASELINE_METRICS)
        ]
        parts = []
        for key, label in metrics:
            fmt = fmt_bytes if "bytes" in key else fmt_ms if key.endswith("_ms") else fmt_number
            unit = " ms" if key.endswith("_ms") else ""
            parts.append(
                f"{label} {_range(before[key], fmt)}{unit} before and {_range(after[key], fmt)}{unit} after "
                f"({status.get((mode, key), 'not compared')})"
            )
        clauses.append(f"{_mode_name(mode)} " + "; ".join(parts))
    regressions = [c for c in comparison.regressions if c.recipe == result.recipe]
    unsure = [c for c in comparison.inconclusive if c.recipe == result.recipe]
    if regressions:
        verdict = "Regressions: " + _join([f"{_mode_name(c.mode)} `{c.metric}`" for c in regressions])
    elif unsure:  # issue 15: "cannot tell" is not a pass
        verdict = "Inconclusive (beyond the factor, not significant): " + _join(
            [f"{_mode_name(c.mode)} `{c.metric}`" for c in unsure])
    else:
        verdict = "No regression"
    commit = f"commit `{short_commit(baseline.commit)}`"
    return (
        f"Against the baseline `{baseline.name}` ({_day(baseline)}, {commit}), compared with "
        f"`perfsuite compare --alpha {comparison.alpha:g} --factor {comparison.factor:g}` (timings: Mann-Whitney U "
        f"and the ratio must both agree; costs: a tolerance): " + ". ".join(clauses) + f". {verdict}."
    )


def _limitations(result: Result, floor: Floor | None) -> list[str]:
    doc, r = result.data, result.data["recipe"]
    out = []
    n = min((len(result.samples(m)) for m in result.modes), default=0)
    size = f"small samples ({n} per mode)" if n < FEW_SAMPLES else f"{n} samples per mode"
    scope = "on one fixture" if doc["fixture"].get("name") else "without a fixture"
    out.append(
        f"These are in-process measurements of an asyncio heartbeat with {size} {scope}, "
        "not graphical input latency or live-session measurements"
    )
    gc_seen = any(s["gc"]["collections"] for m in result.modes for s in result.samples(m))
    if r["gc"] == "collect-before":
        out.append("garbage was collected before each sample, so they do not bound GC pauses in a live session")
    elif gc_seen:
        out.append("samples that saw GC are kept, and where a collection falls varies from run to run")
    else:
        out.append("no collection fell inside a window here; a longer run may see one")
    control = _values(result, "control", "max_gap_ms")
    if control and max(control) > NOISY_CONTROL_PERIODS * float(r["heartbeat_ms"]):
        out.append(
            f"the idle control's worst gap of {fmt_ms(max(control))} ms against a "
            f"{fmt_number(r['heartbeat_ms'])} ms period shows a noisy machine: differences in gaps below it are noise"
        )
    if r["isolation"] == "inline":
        out.append("inline isolation ran every sample in one process (shared heap, warm caches)")
    if floor is None and r["name"] not in NO_ACK_RATIO_RECIPES:
        out.append("no fsync floor from the same run was found, so acknowledgement is not set against the device")
    dir_fsync = doc["environment"]["work_dir"].get("dir_fsync")
    if dir_fsync != "ok":
        out.append("directory fsync does not work on this filesystem, so renames were not made durable there")
    if result.dirty:
        out.append("the measured tree had uncommitted changes")
    return out


def evidence(
    result: Result,
    *,
    floor: Floor | None = None,
    baseline: Result | None = None,
    alpha: float = DEFAULT_ALPHA,
    factor: float = DEFAULT_FACTOR,
) -> Evidence:
    """The evidence paragraph of ``result`` (``floor``: from :func:`find_floor`; ``baseline``: before/after)."""
    sentences = [_setup(result)]
    for mode in result.modes:
        sentences.append(_mode_sentence(result, mode))
    for mode in result.modes:
        sentences += _details(result, mode)
    sentences += [_allocation(result), _gc(result), _verdict(result), _control(result), _floor(result, floor)]
    comparison = None
    if baseline is not None:
        if baseline.recipe != result.recipe:
            raise PerfsuiteError(
                f"--baseline {baseline.name} holds recipe {baseline.recipe!r}, the result holds {result.recipe!r}"
            )
        comparison = compare_results(  # a paragraph describes what it is given; the gate is `compare`
            [baseline], [result], alpha=alpha, factor=factor, base_name=baseline.name, new_name=result.name,
            cross_machine=True, allow_incomplete=True,
        )
        sentences.append(_baseline(result, baseline, comparison))
    limitations = _limitations(result, floor)
    body = " ".join(s for s in sentences if s)
    description = result.data["recipe"].get("description")
    lead = f"- **{_day(result)} `{result.recipe}`**" + (f" ({description})" if description else "") + ": "
    text = lead + body + " " + "; ".join(limitations) + "."
    return Evidence(text + "\n", result, floor, baseline, comparison, tuple(limitations))


def evidence_for(
    path: Path | str,
    baseline: Path | str | None = None,
    *,
    alpha: float = DEFAULT_ALPHA,
    factor: float = DEFAULT_FACTOR,
) -> Evidence:
    """Read ``path`` (and ``baseline``), find the run's fsync floor beside it, and build the paragraph."""
    result = read_result(path)
    siblings = read_siblings(result.path) if result.path is not None and not result.is_floor else []
    floor = find_floor(result, siblings)
    base = read_result(baseline) if baseline is not None else None
    return evidence(result, floor=floor, baseline=base, alpha=alpha, factor=factor)
