"""The ADR evidence paragraph (SPEC section 5, ``perfsuite evidence``), in the style of the seed's decision history.

One Markdown paragraph: setup (fixture and size, samples per mode and their order, heartbeat, GC policy,
isolation, filesystem and whether directory fsync works), ranges per mode (loop stalls, M9, beside the
heartbeat), GC observations, the M7 verdict (by-design reference modes get none), the idle control, the
fsync floor and the publication floor of the same run, optional before/after ranges against a baseline,
and the limitations that the data call for (the context sentences are in ``_evidence_context``).

**Every number comes from a named field of the files read** (the result, its run's fsync floor, the
baseline): each printed figure goes through :class:`~perfsuite.report._figures.Figures`, which records
the document, the field, the reduction (min, max, median, count...) and the format, in
:attr:`Evidence.figures`; the tests check every figure against its own field. Wordings that describe the
data are derived from it too: what the floors did (the fsync floor's phases, the publication floor's
operation counts) and what an allocation figure is per (one publication, or an operation of several).
Names and settings with digits (fixture names, versions, commits, seeds, ``compare`` thresholds) are set
in code spans, which are not figures. Ratios and p-values are derived, so they stay in ``perfsuite
report`` and ``perfsuite compare``, never in the paragraph.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.errors import PerfsuiteError
from perfsuite.report._compare import DEFAULT_ALPHA, DEFAULT_FACTOR, Comparison, compare_results
from perfsuite.report._conditions import conditions_of
from perfsuite.report._evidence_context import (
    FEW_SAMPLES,
    NOISY_CONTROL_PERIODS,
    against_baseline,
    fsync_floor,
    join_and,
    limitations,
    loaded_machine,
    mode_code,
    publication_floor,
    sqlite_reference,
)
from perfsuite.report._evidence_pairing import paired_comparison
from perfsuite.report._figures import Figure, Figures, sample_field
from perfsuite.report._format import short_commit
from perfsuite.report._live import is_live, live_control, live_mode_sentence, live_setup
from perfsuite.report._load import Floor, Result, find_floor, find_publication_floor, read_result, read_siblings

__all__ = ["FEW_SAMPLES", "NOISY_CONTROL_PERIODS", "Evidence", "evidence", "evidence_for"]

@dataclass(frozen=True, slots=True)
class Evidence:
    """The paragraph, what it was built from, the limitations it states and where each figure came from."""

    markdown: str
    result: Result
    floor: Floor | None
    baseline: Result | None
    comparison: Comparison | None
    limitations: tuple[str, ...]
    figures: tuple[Figure, ...] = ()
    publication_floor: Floor | None = None

    @property
    def documents(self) -> dict[str, Mapping[str, Any]]:
        """The documents by the source name a :class:`Figure` gives (``result``, ``floor``, ``baseline``)."""
        docs: dict[str, Mapping[str, Any]] = {"result": self.result.data}
        if self.floor is not None and self.floor.result is not None:
            docs["floor"] = self.floor.result.data
        if self.baseline is not None:
            docs["baseline"] = self.baseline.data
        return docs

    @property
    def sources(self) -> tuple[Mapping[str, Any], ...]:
        """The documents every number in :attr:`markdown` comes from."""
        seen: list[Mapping[str, Any]] = []
        for doc in self.documents.values():
            if not any(doc is s for s in seen):
                seen.append(doc)
        return tuple(seen)


class _Writer:
    """Writes the sentences of one paragraph; every figure goes through :attr:`f`."""

    def __init__(self, result: Result, floor: Floor | None, baseline: Result | None,
                 publication: Floor | None) -> None:
        self.result, self.floor, self.baseline, self.publication = result, floor, baseline, publication
        docs: dict[str, Mapping[str, Any]] = {"result": result.data}
        if floor is not None and floor.result is not None:
            docs["floor"] = floor.result.data
        if baseline is not None:
            docs["baseline"] = baseline.data
        self.f = Figures(docs)
        self.doc = result.data

    # -- helpers -----------------------------------------------------------------------------------
    def rng(self, mode: str, *keys: str, fmt: str = "ms", source: str = "result") -> str:
        return self.f.range(source, sample_field(mode, *keys), fmt)

    def has(self, mode: str, *keys: str, source: str = "result") -> bool:
        return bool(self.f.values(source, sample_field(mode, *keys)))

    def day(self, source: str = "result") -> str:
        doc = self.f.docs[source]
        key = ("environment", "date") if doc["environment"].get("date") else ("created_at",)
        return self.f.one(source, key, "day", "day")

    def inline(self, mode: str) -> bool:
        samples = self.result.samples(mode)
        if not samples or any(s.get("ack_ms") is None or s.get("submission_ms") is None for s in samples):
            return False  # a live window (M11) has neither
        return all(float(s["ack_ms"]) <= float(s["submission_ms"]) for s in samples)

    def measured_stalls(self) -> bool:
        return any(s.get("stalls") for m in self.result.modes for s in self.result.samples(m))

    # -- the sentences ----------------------------------------------------------------------------
    def conditions(self) -> str:
        """M10, always the first sentence when a condition was in force: simulated storage, heap, freeze
        (names and settings in code spans: they are not figures)."""
        c = conditions_of(self.result)
        parts = []
        if c.storage is not None:
            source = f"`{c.storage_source}`" if c.storage_source else "source not recorded"
            parts.append(
                f"Simulated storage latency: `{c.storage}` ({source}): every fsync, directory fsync, rename and "
                "exclusive create paid a delay drawn from that profile on the thread that issued it, so these are "
                "not device measurements")
        if c.heap:
            parts.append(f"each sample held `{c.heap}` live objects shaped like loaded session state, with natural GC")
        if c.freeze:
            parts.append("sessions opened with `freeze_loaded` (`gc.freeze()` after open)")
        if not parts:
            return ""
        text = "; ".join(parts)
        return text[0].upper() + text[1:] + "."

    def heap(self) -> str:
        """M10: what one full collection cost just after each window, with the live heap still held."""
        parts = [f"{self.rng(mode, 'heap', 'full_gc_ms')} ms for {mode_code(mode)}"
                 for mode in self.result.modes if self.has(mode, "heap", "full_gc_ms")]
        if not parts:
            return ""
        return ("A full collection timed just after each window, with the live heap still held, took "
                + join_and(parts) + ".")

    def setup(self) -> str:
        if is_live(self.doc):
            return live_setup(self)
        doc, r, f = self.doc, self.doc["recipe"], self.f
        env, fixture, result = doc["environment"], doc["fixture"], self.result
        counts = {m: len(result.samples(m)) for m in result.modes}
        if len(set(counts.values())) == 1:
            first = result.modes[0]
            samples = f.count("result", ("modes", first, "samples"), "sample") + " per mode"
        else:
            samples = join_and([f.one("result", ("modes", m, "samples"), "len", "count") + f" {mode_code(m)}"
                              for m in result.modes]) + " samples"
        if len(result.modes) > 1:
            names = "/".join(mode_code(m) for m in result.modes)
            if r.get("order") == "random":  # an A/B side's order is its interleaving's, seeded by the variant
                seed = r.get("seed") if r.get("seed") is not None else (doc.get("variant") or {}).get("seed")
                seeded = f"seed `{seed}`" if seed is not None else "no seed recorded"
                samples += f" ({names}) in a seeded random order per round ({seeded})"
            else:
                samples += f" alternated ({names})"
        if max((int(b.get("warmups", 0)) for b in doc["modes"].values()), default=0) > 0:
            samples += " after " + f.count("result", ("modes", "{}", "warmups"), "warm-up", how="max") + " per mode"
        if fixture.get("name"):
            size = f.count("result", ("fixture", "files"), "file", how="value") + ", "
            size += f.one("result", ("fixture", "bytes"), fmt="bytes") + " bytes"
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
        # the measured repository's commit (and branch), never perfsuite's own checkout
        if result.commit:
            commit = (f"commit `{short_commit(result.commit)}` of the measured repository"
                      + (" (uncommitted changes)" if result.dirty else ""))
        else:  # never a guessed commit: the run named none (outside git, no --commit, no CI variable)
            commit = "commit unknown (not a git repository, and no commit given)"
        if result.branch:
            commit += f" on branch `{result.branch.replace('`', chr(39))}`"
        cpu = env["cpu"]
        python = f"{env['python'].get('implementation', 'Python')} {env['python']['version']}"
        machine = (f"perfsuite `{env['perfsuite']}` and " if env.get("perfsuite") else "") + \
            f"`{python}` on `{env['os']['system']}`"  # the instrument's version, apart from the measured commit
        machine += f" (`{cpu['model']}`" + (", " + f.count("result", ("environment", "cpu", "cores"), "core",
                                                              how="value") + ")" if cpu.get("cores") else ")")
        status = ""
        if doc.get("status") != "complete":
            done = f.one("result", ("progress", "done"))
            total = f.one("result", ("progress", "total"))
            if doc.get("status") == "failed":  # say so, and why, never "interrupted"
                # the error is the document's own text (its digits are not figures): quoted as code
                why = " (`" + str(doc["error"]).replace("`", "'") + "`)" if doc.get("error") else ""
                status = f" The run FAILED{why}: only {done} of {total} planned entries were measured."
            else:
                status = f" The run is {doc.get('status')}: {done} of {total} planned entries were measured."
        heartbeat = f.one("result", ("recipe", "heartbeat_ms"))
        tail = f.one("result", ("recipe", "window_tail_ms"))
        timed = ", with every loop callback timed" if self.measured_stalls() else ""
        return (
            f"Measured at {commit} with {machine}: {what}, {samples}, {copy}{' ' if where[0] != ',' else ''}{where}, "
            f"a {heartbeat} ms heartbeat from just before submission until {tail} ms after acknowledgement{timed}, "
            f"and {gc}; the work directory was on {fs}, {fsync}.{status}"
        )

    def mode_sentence(self, mode: str) -> str:
        if is_live(self.doc):
            return live_mode_sentence(self, mode)
        if not self.result.samples(mode):
            return f"Mode {mode_code(mode)} has no samples."
        reference = self.result.reference(mode)
        lead = f"Mode {mode_code(mode)} is a by-design reference ({reference}): " if reference else ""
        if self.inline(mode):
            who = "the synchronous path" if lead else ("The synchronous path" if mode == "sync" else
                                                        f"Mode {mode_code(mode)}")
            if lead and mode != "sync":
                who = "it"
            text = (f"{lead}{who} held the loop {self.rng(mode, 'submission_ms')} ms, acknowledging before it "
                    f"returned (heartbeat {self.rng(mode, 'max_gap_ms')} ms")
            text += self.stalls(mode, ", ") + ")"
        else:
            if lead:
                who = "submission"
            else:
                who = "Asynchronous submission" if mode == "async" else f"Mode {mode_code(mode)}: submission"
            text = (f"{lead}{who} returned in {self.rng(mode, 'submission_ms')} ms and acknowledged after "
                    f"{self.rng(mode, 'ack_ms')} ms, with a maximum heartbeat gap of {self.rng(mode, 'max_gap_ms')} ms")
            text += self.stalls(mode, " and ")
        if self.has(mode, "drain_ms"):
            text += f"; an explicit drain waited {self.rng(mode, 'drain_ms')} ms"
        return text + "."

    def stalls(self, mode: str, glue: str) -> str:
        """M9 beside the heartbeat: the longest loop callback (named) and the loop-busy time."""
        if not self.has(mode, "stalls", "longest_ms"):
            return ""
        samples = [s for s in self.result.samples(mode) if s.get("stalls")]
        worst = max(samples, key=lambda s: float(s["stalls"]["longest_ms"]))
        top = (worst["stalls"].get("top") or [{}])[0].get("name")
        named = f" (`{top}`)" if top else ""
        return (f"{glue}a longest loop callback of {self.rng(mode, 'stalls', 'longest_ms')} ms{named}, the loop "
                f"busy {self.rng(mode, 'stalls', 'busy_ms')} ms in all")

    def details(self, mode: str) -> list[str]:
        out = []
        phases = list(dict.fromkeys(k for s in self.result.samples(mode) for k in (s.get("phases_ms") or {})))
        if phases:
            parts = [f"{name} {self.f.one('result', sample_field(mode, 'phases_ms', name), 'median', 'ms')} ms"
                     for name in phases]
            out.append(f"{mode_code(mode)} phase medians: " + ", ".join(parts) + ".")
        names = list(dict.fromkeys(k for s in self.result.samples(mode) for k in (s.get("metrics") or {})))
        parts = []
        for name in names:
            values = self.f.values("result", sample_field(mode, "metrics", name))
            if not values:
                parts.append(f"`{name}` not measured")
            elif all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
                fmt = "bytes" if "bytes" in name else "number"
                parts.append(f"`{name}` {self.rng(mode, 'metrics', name, fmt=fmt)}")
        if parts:
            out.append(f"{mode_code(mode)} per sample: " + join_and(parts) + ".")
        return out

    def per_what(self, mode: str, section: str = "allocation") -> str:
        """What an allocation (or instruction) figure is per, from the data: one publication, or an
        operation of several."""
        if is_live(self.doc):
            return "per traced window"
        path = ("modes", mode, section, "samples", "[]", "metrics", "publications")
        counts = {int(v) for v in self.f.values("result", path) if isinstance(v, int | float)}
        if counts == {1}:
            return "per publication"
        if len(counts) == 1 and counts != {0}:
            return "per operation of " + self.f.count("result", path, "publication", how="value")
        if counts:
            return "per operation of " + self.f.range("result", path, "number") + " publications"
        return "per operation"

    def allocation(self) -> str:
        parts, trackers, sizes = [], set(), set()
        for mode in self.result.modes:
            alloc = self.doc["modes"][mode].get("allocation")
            if not alloc or not alloc.get("samples"):
                continue
            trackers.add(alloc.get("tracker"))
            sizes.add(len(alloc["samples"]))
            path = ("modes", mode, "allocation", "samples", "[]")
            if any(s.get("total_bytes") is None for s in alloc["samples"]):  # tracemalloc's: no sum
                parts.append(f"a peak of {self.f.range('result', (*path, 'peak_bytes'), 'bytes')} bytes above the "
                             f"start (the sum of allocations not measured) {self.per_what(mode)} for {mode_code(mode)}")
                continue
            parts.append(
                f"{self.f.range('result', (*path, 'total_bytes'), 'bytes')} bytes allocated "
                f"({self.f.range('result', (*path, 'allocations'), 'bytes')} allocations, peak "
                f"{self.f.range('result', (*path, 'peak_bytes'), 'bytes')} bytes) {self.per_what(mode)} for "
                f"{mode_code(mode)}"
            )
        if not parts:
            return ""
        first = next(m for m in self.result.modes if (self.doc["modes"][m].get("allocation") or {}).get("samples"))
        n = (self.f.count("result", ("modes", first, "allocation", "samples"), "sample") + " per mode"
             if len(sizes) == 1 else "samples per mode")
        return f"A separate, untimed allocation pass (`{trackers.pop()}`, {n}) measured " + join_and(parts) + "."

    def instructions(self) -> str:
        """The instruction pass per mode (total, and the loop thread's share), or why it is missing."""
        parts, passes, tools, reasons, first = [], set(), set(), [], None
        for mode in self.result.modes:
            section = self.result.instructions(mode)
            if section is None:
                continue
            if section.get("not_measured") or not section.get("samples"):
                reasons.append(str(section.get("not_measured") or "no pass completed"))
                continue
            first = first or mode
            passes.add(len(section["samples"]))
            tools.add(str(section.get("valgrind") or section.get("tool")))
            path = ("modes", mode, "instructions", "samples", "[]")
            total = self.f.range("result", (*path, "total"), "bytes")
            same = all(s["total"] == s["loop_thread"] for s in section["samples"])
            share = "all" if same else self.f.range("result", (*path, "loop_thread"), "bytes")
            parts.append(f"{total} {self.per_what(mode, 'instructions')} for {mode_code(mode)} "
                         f"({share} on the loop thread)")
        if first is None:
            return f"Instructions were not measured (`{reasons[0]}`)." if reasons else ""
        n = (self.f.count("result", ("modes", first, "instructions", "samples"), "pass", "passes") + " per mode"
             if len(passes) == 1 else "passes per mode")
        text = (f"A separate pass under Valgrind (`{'`, `'.join(sorted(tools))}` callgrind, {n}, each in a fresh "
                "worker with `PYTHONHASHSEED=0`) counted the instructions from submission to acknowledgement: "
                + join_and(parts) + ".")
        if reasons:
            text += f" Other modes were not measured (`{reasons[0]}`)."
        return text

    def gc(self) -> str:
        policy = self.doc["recipe"]["gc"]
        parts, quiet = [], []
        for mode in self.result.modes:
            samples = self.result.samples(mode)
            if not any(s["gc"]["collections"] for s in samples):
                quiet.append(mode_code(mode))
                continue
            f = self.f
            seen = f.one("result", sample_field(mode, "gc", "collections"), "count_nonzero", "count")
            total = f.one("result", ("modes", mode, "samples"), "len", "count")
            gc_ms = f.range("result", ("modes", mode, "samples", "[gc.collections>0]", "gc", "gc_ms"))
            in_gap = f.one("result", ("modes", mode, "samples", "[gc.in_max_gap]", "gc", "in_max_gap"), "count",
                           "count")
            parts.append(f"{seen} of {total} {mode_code(mode)} samples saw a collection ({gc_ms} ms of GC in the "
                         f"window, inside the largest gap in {in_gap})")
        head = ("The recipe collects garbage before each sample" if policy == "collect-before"
                else "GC ran naturally and samples that saw it are kept")
        if not parts:
            return f"{head}; no sample window contained a collection."
        tail = f"; no {' or '.join(quiet)} sample collected garbage" if quiet else ""
        return f"{head}; " + "; ".join(parts) + tail + "."

    def verdict(self) -> str:
        parts, target_mode = [], None
        for mode in self.result.modes:
            v = self.doc["modes"][mode]["verdict"]
            if v.get("met") is None or self.result.reference(mode):
                continue
            target_mode = target_mode or mode
            path = ("modes", mode, "verdict")
            worst = ""
            if v.get("worst_ms") is not None:
                worst = f"worst {self.f.one('result', (*path, 'worst_ms'), fmt='ms')} ms"
            if v["met"]:
                parts.append(f"{mode_code(mode)} met it in all {self.f.one('result', (*path, 'samples'))} samples "
                             f"({worst})")
            else:
                parts.append(
                    f"{mode_code(mode)} missed it in {self.f.one('result', (*path, 'missed'))} of "
                    f"{self.f.one('result', (*path, 'samples'))} samples, "
                    f"{self.f.one('result', (*path, 'missed_with_gc'))} of them with GC ({worst})"
                )
        references = [mode_code(m) for m in self.result.modes if self.result.reference(m)]
        one = len(references) == 1
        ref = (f"{join_and(references)} {'is a reference' if one else 'are references'} by design and "
               f"{'gets' if one else 'get'} no verdict") if references else ""
        if not parts or target_mode is None:
            return ref[0].upper() + ref[1:] + "." if ref else ""
        target = self.f.one("result", ("modes", target_mode, "verdict", "target_ms"))
        return (f"Against the {target} ms target on the maximum heartbeat gap (met only if every sample is under "
                "it, GC samples included), " + "; ".join(parts) + (f"; {ref}" if ref else "") + ".")

    def control(self) -> str:
        if is_live(self.doc):
            return live_control(self)
        if not self.result.samples("control"):
            return "No idle control was measured in this run."
        text = ("The idle control, the same heartbeat with no workload measured between the samples, had maximum "
                f"gaps of {self.rng('control', 'max_gap_ms')} ms")
        if self.has("control", "stalls", "longest_ms"):
            text += f" and longest loop callbacks of {self.rng('control', 'stalls', 'longest_ms')} ms"
        return text + "."

    def acks(self, skip: str | None = None) -> str:
        return join_and([f"{self.f.one('result', sample_field(m, 'ack_ms'), 'median', 'ms')} ms for {mode_code(m)}"
                      for m in self.result.modes if m != skip and self.has(m, "ack_ms")])



def evidence(
    result: Result,
    *,
    floor: Floor | None = None,
    baseline: Result | None = None,
    alpha: float | None = None,
    factor: float | None = None,
) -> Evidence:
    """The evidence paragraph of ``result`` (``floor``: from :func:`find_floor`; ``baseline``: before/after;
    the two sides of one A/B pair are compared as ``ab`` compared them, :mod:`._evidence_pairing`)."""
    if baseline is not None and baseline.recipe != result.recipe:
        raise PerfsuiteError(
            f"--baseline {baseline.name} holds recipe {baseline.recipe!r}, the result holds {result.recipe!r}"
        )
    publication = find_publication_floor(result)
    w = _Writer(result, floor, baseline, publication)
    description = result.data["recipe"].get("description")
    lead = f"- **{w.day()} `{result.recipe}`**" + (f" ({description})" if description else "") + ": "
    sentences = [w.conditions(), w.setup()]
    sentences += [w.mode_sentence(m) for m in result.modes]
    for mode in result.modes:
        sentences += w.details(mode)
    sentences += [w.allocation(), w.instructions(), w.gc(), w.heap(), w.verdict(), w.control(), loaded_machine(w),
                  fsync_floor(w), publication_floor(w), sqlite_reference(w)]
    comparison = None
    if baseline is not None:
        comparison = paired_comparison(result, baseline, alpha=alpha, factor=factor)  # one A/B pair: as `ab`
        if comparison is None:
            comparison = compare_results(  # a paragraph describes what it is given; the gate is `compare`
                [baseline], [result], alpha=DEFAULT_ALPHA if alpha is None else alpha,
                factor=DEFAULT_FACTOR if factor is None else factor, base_name=baseline.name,
                new_name=result.name, cross_machine=True, allow_incomplete=True,
                timings="info",  # two separate runs, as `compare` says
            )
        sentences.append(against_baseline(w, comparison))
    limits = limitations(w)
    text = lead + " ".join(s for s in sentences if s) + " " + "; ".join(limits) + "."
    return Evidence(text + "\n", result, floor, baseline, comparison, tuple(limits), tuple(w.f.figures),
                    publication)


def evidence_for(
    path: Path | str,
    baseline: Path | str | None = None,
    *,
    alpha: float | None = None,
    factor: float | None = None,
) -> Evidence:
    """Read ``path`` (and ``baseline``), find the run's fsync floor beside it, and build the paragraph."""
    result = read_result(path)
    floor = find_floor(result)  # its own floor section, or itself: the neighbours are read only when needed
    if floor is None and result.path is not None:
        floor = find_floor(result, read_siblings(result.path, floors_only=True))
    base = read_result(baseline) if baseline is not None else None
    return evidence(result, floor=floor, baseline=base, alpha=alpha, factor=factor)
