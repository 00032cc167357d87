"""The evidence paragraph's context sentences: the two
floors of the same run, the before/after against a baseline, and the limitations the data call for. Each
takes the paragraph's writer, so every figure still goes through its :class:`Figures` (``w.f``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from perfsuite.harness import LOADED_EXCESS_MS
from perfsuite.report._compare import Comparison
from perfsuite.report._conditions import conditions_of
from perfsuite.report._figures import Figures, metric_field, sample_field
from perfsuite.report._format import short_commit
from perfsuite.report._live import is_live, live_limitation
from perfsuite.report._load import Floor, Result
from perfsuite.report._table import NO_ACK_RATIO_RECIPES, sqlite_reference_for, sqlite_references

#: fewer samples per mode than this is called "small samples"
FEW_SAMPLES = 20
#: the idle control shows a noisy machine when its worst gap exceeds this many heartbeat periods
NOISY_CONTROL_PERIODS = 2.0
#: metrics quoted before/after against a baseline (plus any other gating metric that changed)
BASELINE_METRICS = (
    ("max_gap_ms", "maximum heartbeat gap"),
    ("stalls.longest_ms", "longest loop callback"),
    ("submission_ms", "submission"),
    ("ack_ms", "ACK"),
)
#: how the fsync floor's phases (its ``phases_ms`` keys) are named
FLOOR_PHASES = {"write": "write", "fsync": "fsync", "replace": "`os.replace`", "dir_fsync": "directory fsync"}
#: the publication floor's operation counts (its ``metrics``), singular and plural
FLOOR_COUNTS = (
    ("writes", "write", "writes"),
    ("pwrites", "pwrite", "pwrites"),
    ("fsyncs", "file fsync", "file fsyncs"),
    ("fdatasyncs", "fdatasync", "fdatasyncs"),
    ("replaces", "rename", "renames"),
    ("mkdirs", "directory creation", "directory creations"),
    ("dir_fsyncs", "directory fsync", "directory fsyncs"),
    ("removes", "removal", "removals"),
)


class _Writer(Protocol):
    """What these sentences need of the paragraph's writer (``_evidence._Writer``; a protocol, so this
    module does not import back the one that imports it)."""

    f: Figures
    result: Result
    floor: Floor | None
    baseline: Result | None
    publication: Floor | None
    doc: Mapping[str, Any]

    def rng(self, mode: str, *keys: str, fmt: str = "ms", source: str = "result") -> str: ...
    def has(self, mode: str, *keys: str, source: str = "result") -> bool: ...
    def day(self, source: str = "result") -> str: ...
    def acks(self, skip: str | None = None) -> str: ...
    def measured_stalls(self) -> bool: ...


def join_and(parts: Sequence[str]) -> str:
    """``a, b and c`` of the non-empty parts."""
    parts = [p for p in parts if p]
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def mode_code(mode: str) -> str:
    """A mode's name as a code span (names with digits are not figures)."""
    return f"`{mode}`"


def fsync_floor(w: _Writer) -> str:
    """The fsync floor of the same run against the acknowledgement medians (SPEC section 8)."""
    floor = w.floor
    if floor is None or w.result.recipe in NO_ACK_RATIO_RECIPES:
        return ""
    own = floor.source == "floor section"
    source = "result" if own or floor.result is w.result else "floor"
    path = ("floor", "samples", "[]") if own else ("modes", floor.mode, "samples", "[]")
    phases = list(dict.fromkeys(k for s in floor.samples for k in (s.get("phases_ms") or {})))
    did = join_and([FLOOR_PHASES.get(p, f"`{p}`") for p in phases]) or "its raw os calls"
    acked = (f"acknowledged in {w.f.range(source, (*path, 'ack_ms'))} ms "
             f"(median {w.f.one(source, (*path, 'ack_ms'), 'median', 'ms')} ms)")
    if floor.result is w.result and not own:
        return f"This run is the fsync floor itself: {did} {acked}."
    size = ""
    floor_mode = (floor.result.data["recipe"]["modes"].get(floor.mode) or {}) if floor.result is not None and not own \
        else {}
    if not own and isinstance(floor_mode.get("bytes"), int):
        size = " of " + w.f.one(source, ("recipe", "modes", floor.mode, "bytes"), fmt="bytes") + " bytes"
    where = f"`{floor.source}`" if not own else "measured beside the modes"
    return (f"The fsync floor of the same run ({where}: {did}{size}) {acked}, against acknowledgement medians "
            f"of {w.acks()}.")

def publication_floor(w: _Writer) -> str:
    """The publication floor beside the modes: what it did, counted from its samples, and its acks."""
    floor = w.publication
    if floor is None:
        return ""
    mode = floor.mode
    did = []
    for key, one, many in FLOOR_COUNTS:
        values = w.f.values("result", sample_field(mode, "metrics", key))
        if values and min(values) == max(values):
            did.append(w.f.count("result", sample_field(mode, "metrics", key), one, many, how="min"))
        elif values:
            did.append(f"{w.rng(mode, 'metrics', key, fmt='number')} {many}")
    if w.has(mode, "metrics", "bytes_written"):
        did.append(w.rng(mode, "metrics", "bytes_written", fmt="bytes") + " bytes")
    models = {str((s.get("labels") or {}).get("models", "")) for s in w.result.samples(mode)} - {""}
    of = f" of one `{models.pop()}` generation" if len(models) == 1 else " of one generation"
    acked = w.rng(mode, "ack_ms")
    median = w.f.one("result", sample_field(mode, "ack_ms"), "median", "ms")
    return (f"The publication floor measured beside the modes ({mode_code(mode)}: the engine's durable "
            f"operations{of} replayed as raw os calls: {join_and(did) or 'none recorded'}) acknowledged in "
            f"{acked} ms (median {median} ms), against acknowledgement medians of {w.acks(skip=mode)}.")

def sqlite_reference(w: _Writer) -> str:
    """The SQLite references beside the modes (SPEC section 8): what each committed, its acks, and the modes
    the table's ``ack/sqlite`` reads against it with their medians (both figures from the samples: a ratio is
    in no file, so it is left to the table)."""
    refs = sqlite_references(w.result)
    if not refs:
        return ""
    parts = []
    for handoff, ref in sorted(refs.items()):
        mode = ref.mode
        how = ("inline on the loop thread and acknowledged" if handoff == "inline"
               else "on one worker thread with the acknowledgement on the loop,")
        size = (w.rng(mode, "metrics", "record_bytes", fmt="bytes") + " bytes of the record"
                if w.has(mode, "metrics", "record_bytes") else "the record")
        median = w.f.one("result", sample_field(mode, "ack_ms"), "median", "ms")
        paired = [m for m in w.result.modes if w.has(m, "ack_ms")
                  and getattr(sqlite_reference_for(w.result, m), "mode", None) == mode]
        against = join_and([f"{mode_code(m)} (median {w.f.one('result', sample_field(m, 'ack_ms'), 'median', 'ms')}"
                            " ms)" for m in paired]) or "no mode"
        parts.append(f"{mode_code(mode)} committed {size} {how} in {w.rng(mode, 'ack_ms')} ms "
                     f"(median {median} ms), the reference of {against}")
    return ("The SQLite references measured beside the modes (`sqlite3`, `journal_mode=WAL`, `synchronous=FULL`, "
            "one INSERT and COMMIT of the bytes the engine wrote for the same publication, column `ack/sqlite`): "
            + "; ".join(parts) + ".")


def against_baseline(w: _Writer, comparison: Comparison) -> str:
    """Before/after ranges against a baseline, with `compare`'s statuses and verdict."""
    result, baseline = w.result, w.baseline
    assert baseline is not None
    # a change that may not gate (a timing of two separate runs) says so beside its status
    status = {(c.mode, c.metric): c.status + ("" if c.gating or c.status == "unchanged" else ", information")
              for c in comparison.changes if c.recipe == result.recipe}
    gating = {(c.mode, c.metric) for c in comparison.changes if c.recipe == result.recipe and c.gating}
    clauses = []
    for mode in result.modes:
        if mode not in baseline.modes:
            clauses.append(f"{mode_code(mode)} has no baseline")
            continue
        before, after = baseline.values(mode), result.values(mode)
        metrics = [(k, label) for k, label in BASELINE_METRICS if k in before and k in after]
        metrics += [(metric, f"`{metric}`") for (m, metric), s in status.items()
                    if m == mode and s != "unchanged" and (m, metric) in gating
                    and metric not in dict(BASELINE_METRICS)]
        parts = []
        for key, label in metrics:
            fmt = "bytes" if "bytes" in key else "ms" if key.endswith("_ms") else "number"
            unit = " ms" if key.endswith("_ms") else ""
            field = metric_field(mode, key)
            before_text = w.f.range("baseline", field, fmt)
            after_text = w.f.range("result", field, fmt)
            parts.append(f"{label} {before_text}{unit} before and {after_text}{unit} after "
                         f"({status.get((mode, key), 'not compared')})")
        clauses.append(f"{mode_code(mode)} " + "; ".join(parts))
    regressions = [c for c in comparison.regressions if c.recipe == result.recipe]
    unsure = [c for c in comparison.inconclusive if c.recipe == result.recipe]
    if regressions:
        verdict = "Regressions: " + join_and([f"{mode_code(c.mode)} `{c.metric}`" for c in regressions])
    elif unsure:  # "cannot tell" is not a pass
        verdict = "Inconclusive (beyond the factor, not significant): " + join_and(
            [f"{mode_code(c.mode)} `{c.metric}`" for c in unsure])
    else:
        verdict = "No regression"
    how = (f"compared as `perfsuite ab` compared them (`perfsuite compare DIR --alpha {comparison.alpha:g} --factor "
           f"{comparison.factor:g}` on its output directory)" if comparison.paired else
           f"compared with `perfsuite compare --alpha {comparison.alpha:g} --factor {comparison.factor:g}`")
    return (f"Against the baseline `{baseline.name}` ({w.day('baseline')}, commit "
            f"`{short_commit(baseline.commit)}`), {how} ({_rules(comparison)}): " + ". ".join(clauses)
            + f". {verdict}.")


def _rules(comparison: Comparison) -> str:
    if comparison.load_policy is not None:  # a loaded machine: the counts gated, the first line of `ab` says so
        return "the machine was loaded: timings reported, not gated; costs: a tolerance"
    if comparison.paired:  # one A/B pair: the verdicts `ab` gave
        return ("rounds paired as `perfsuite ab` ran them: the signed-rank test and the ratio must both agree, "
                "Holm over the gating timing headlines; costs: a tolerance")
    if comparison.timing_note is not None:  # two separate runs, or a loaded one
        return "timings of separate runs are information, not a gate; costs: a tolerance"
    return "timings: Mann-Whitney U and the ratio must both agree; costs: a tolerance"


def loaded_machine(w: _Writer) -> str:
    """A run on a loaded machine says so beside its idle control, with the rule and its figures."""
    if not w.result.load.loaded:
        return ""
    median = w.f.one("result", sample_field("control", "max_gap_ms"), "median", "ms")
    return (f"The machine was LOADED: the median idle-control gap of {median} ms is more than "
            f"`{LOADED_EXCESS_MS:g} ms` over the {w.f.one('result', ('recipe', 'heartbeat_ms'))} ms period, so every "
            "timing here reads high and compares only with a run measured interleaved with it (`perfsuite ab`).")

def limitations(w: _Writer) -> list[str]:
    """The limitations the data call for (sample size, GC policy, a noisy control, isolation...)."""
    doc, r, result = w.doc, w.doc["recipe"], w.result
    out = []
    n = min((len(result.samples(m)) for m in result.modes), default=0)
    count = ""
    if n:
        count = w.f.one("result", ("modes", "{}", "samples"), "min_len", "count")
        size = f"small samples ({count} per mode)" if n < FEW_SAMPLES else f"{count} samples per mode"
    else:
        size = "no samples"
    scope = "on one fixture" if doc["fixture"].get("name") else "without a fixture"
    live = is_live(doc)
    if live:  # M11: windows of a running program
        out.append(live_limitation(w, f"{count} windows per loop" if n else "no windows"))
    else:
        out.append(f"These are in-process measurements of an asyncio heartbeat with {size} {scope}, "
                   "not graphical input latency or live-session measurements")
    gc_seen = any(s["gc"]["collections"] for m in result.modes for s in result.samples(m))
    if r["gc"] == "collect-before":
        out.append("garbage was collected before each sample, so they do not bound GC pauses in a live session")
    elif gc_seen:
        out.append("samples that saw GC are kept, and where a collection falls varies from run to run")
    else:
        out.append("no collection fell inside a window here; a longer run may see one")
    control = [float(s["max_gap_ms"]) for s in result.samples("control")]
    if not result.load.loaded and control and max(control) > NOISY_CONTROL_PERIODS * float(r["heartbeat_ms"]):
        worst = w.f.one("result", sample_field("control", "max_gap_ms"), "max", "ms")
        out.append(
            f"the idle control's worst gap of {worst} ms against a "
            f"{w.f.one('result', ('recipe', 'heartbeat_ms'))} ms period shows a noisy machine: "
            "differences in gaps below it are noise")
    if not w.measured_stalls() and result.modes:
        out.append("loop stalls (every loop callback timed, M9) were not measured in this document")
    if r["isolation"] == "inline":
        out.append("inline isolation ran every sample in one process (shared heap, warm caches)")
    if w.floor is None and r["name"] not in NO_ACK_RATIO_RECIPES and not live:
        out.append("no fsync floor from the same run was found, so acknowledgement is not set against the device")
    if doc["environment"]["work_dir"].get("dir_fsync") != "ok":
        out.append("directory fsync does not work on this filesystem, so renames were not made durable there")
    if any((result.instructions(m) or {}).get("samples") for m in result.modes):
        out.append("instruction counts include the interpreter's own work, compare only between runs on the same "
                   "Python build and say nothing of waiting (I/O, fsync), which only the times show")
    if conditions_of(result).storage is not None:
        out.append("storage latency was simulated from a published profile on top of this machine's own "
                   "device, which adds its latency wherever it is slower than the profile's draw")
    if result.dirty:
        out.append("the measured tree had uncommitted changes")
    return out
