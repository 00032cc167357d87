"""Reading results for the report: validated documents, directories of them, and the run's fsync floor.

A :class:`Result` wraps one results document (schema of :mod:`perfsuite.harness`) with the accessors
every report needs. Directories are searched recursively for ``*.json`` results; pyperf exports
(``*.pyperf.json``) and JSON files that are not perfsuite documents at all are skipped, while a
perfsuite document of another schema version is an error (exit 2 on the command line).

**Which fsync floor belongs to a run** (SPEC section 4: "ratio to the fsync floor measured in the same
run"), first match wins:

1. the document's own ``floor`` section (``{"samples": [...], "summary": {...}}``, the shape of
   ``control``), for recipes that measure the floor beside their modes;
2. the document itself, when it is an fsync-floor run (a mode whose operation is ``...:fsync_floor``);
3. an fsync-floor document among the candidates (``perfsuite run`` writes every recipe of one
   invocation into the same output directory) from the same run: the same ``run_id`` when both
   documents carry one; otherwise the same host and git commit, created within :data:`RUN_WINDOW_S`
   of each other, the nearest in time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

from perfsuite.errors import PerfsuiteError
from perfsuite.harness import MachineLoad, load_results, machine_load, read_json, sample_metrics, validate_results
from perfsuite.report._verdicts import checked_verdicts, mode_reference

__all__ = [
    "FLOOR_OPERATION_SUFFIX",
    "INSTRUCTION_KEYS",
    "PUBLICATION_FLOOR_SUFFIX",
    "RUN_WINDOW_S",
    "Floor",
    "Result",
    "Stat",
    "find_floor",
    "find_publication_floor",
    "latest_by_recipe",
    "mode_reference",
    "read_result",
    "read_results",
    "read_siblings",
    "scan_results",
]

#: a mode with this operation suffix measures the fsync floor (``perfsuite.workloads.basic:fsync_floor``)
FLOOR_OPERATION_SUFFIX = ":fsync_floor"
#: a mode with this operation suffix is a publication floor (``perfsuite.workloads.floors:publication_floor``)
PUBLICATION_FLOOR_SUFFIX = ":publication_floor"
#: the instruction pass's per-sample counts, flattened as ``instructions.<key>``
INSTRUCTION_KEYS = ("total", "loop_thread")
#: two documents without a ``run_id`` belong to one run when created this close (the full catalogue's budget)
RUN_WINDOW_S = 15 * 60.0


@dataclass(frozen=True, slots=True)
class Stat:
    """min / median / max (and the median's CI when known) of one metric over samples."""

    n: int
    min: float
    median: float
    max: float
    ci_low: float | None = None
    ci_high: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The ``--format json`` shape (``n``, ``median``, ``min``, ``max``, the median's CI), unrounded."""
        return {"n": self.n, "median": self.median, "min": self.min, "max": self.max, "ci_low": self.ci_low,
                "ci_high": self.ci_high}

    @classmethod
    def of(cls, summary: Mapping[str, Any]) -> Stat:
        """From a results ``summary`` entry (``{"n", "min", "median", "max", "ci_low", "ci_high"}``)."""
        return cls(
            n=int(summary.get("n", 0)),
            min=float(summary["min"]),
            median=float(summary["median"]),
            max=float(summary["max"]),
            ci_low=None if summary.get("ci_low") is None else float(summary["ci_low"]),
            ci_high=None if summary.get("ci_high") is None else float(summary["ci_high"]),
        )

    @classmethod
    def from_values(cls, values: ArrayLike) -> Stat:
        """min / median / max of raw values (numpy), without a CI."""
        import numpy as np

        arr = np.asarray(values, dtype=float)
        return cls(int(arr.size), float(arr.min()), float(np.median(arr)), float(arr.max()))


@dataclass(frozen=True, slots=True)
class Result:
    """One validated results document and where it came from."""

    path: Path | None
    data: Mapping[str, Any]

    @property
    def recipe(self) -> str:
        """The recipe's name."""
        return str(self.data["recipe"]["name"])

    @property
    def modes(self) -> list[str]:
        """Mode names in the recipe's order."""
        return list(self.data["modes"])

    @property
    def measured(self) -> Mapping[str, Any]:
        """The measured repository (``environment.measured``: commit, dirty, branch, root, source);
        a document written before it falls back to ``environment.git``, then the only record of a commit."""
        env = self.data["environment"]
        if "measured" in env:
            return env.get("measured") or {}
        git = env.get("git") or {}
        return {"commit": git.get("commit"), "dirty": git.get("dirty"), "source": "environment.git"} if git else {}

    @property
    def commit(self) -> str | None:
        """The commit of the measured repository (:attr:`measured`), if known."""
        return self.measured.get("commit") or None

    @property
    def dirty(self) -> bool:
        """Whether the measured tree had uncommitted changes (False when unknown)."""
        return bool(self.measured.get("dirty"))

    @property
    def branch(self) -> str | None:
        """The measured repository's branch, when it was known (never for documents written before the measured
        repository was recorded)."""
        return self.measured.get("branch") or None

    @property
    def load(self) -> MachineLoad:
        """How loaded the machine was, from the idle control against the heartbeat period; computed
        from the samples, so documents written before the ``load`` section get the same verdict."""
        period = float((self.data.get("recipe") or {}).get("heartbeat_ms") or 5.0)
        return machine_load((self.data.get("control") or {}).get("samples") or [], period)

    @property
    def loaded(self) -> bool:
        """Whether the run was measured on a loaded machine (:attr:`load`; False when not measured)."""
        return bool(self.load.loaded)

    @property
    def date(self) -> str:
        """ISO date of the run (``environment.date``)."""
        return str(self.data["environment"].get("date") or self.data.get("created_at") or "")

    @property
    def created_epoch(self) -> float | None:
        """When the document was created (seconds since the epoch), if recorded."""
        value = self.data.get("created_epoch")
        return float(value) if isinstance(value, int | float) else None

    @property
    def run_id(self) -> str | None:
        """The run this document belongs to, when the harness recorded one."""
        value = self.data.get("run_id")
        return str(value) if value else None

    @property
    def hostname(self) -> str:
        """The measuring host."""
        return str(self.data["environment"].get("hostname", ""))

    @property
    def name(self) -> str:
        """The file name (or the recipe name for in-memory documents)."""
        return self.path.name if self.path is not None else self.recipe

    @property
    def complete(self) -> bool:
        """Whether the run finished (``status`` is ``complete``, not ``running`` or ``interrupted``)."""
        return self.data.get("status") == "complete"

    @property
    def progress(self) -> str:
        """``running, 6 of 18 plan entries`` (for one-line messages about incomplete documents)."""
        progress = self.data.get("progress") or {}
        return f"{self.data.get('status')}, {progress.get('done', '?')} of {progress.get('total', '?')} plan entries"

    @property
    def is_floor(self) -> bool:
        """Whether this is an fsync-floor run."""
        return any(str(m.get("operation", "")).endswith(FLOOR_OPERATION_SUFFIX) for m in self.data["modes"].values())

    def reference(self, mode: str) -> str | None:
        """Why ``mode`` is a by-design reference (see :func:`mode_reference`), or ``None``."""
        return None if mode == "control" else mode_reference(self.data, mode)

    def samples(self, mode: str) -> list[Mapping[str, Any]]:
        """The latency samples of ``mode`` (``"control"`` for the idle control)."""
        if mode == "control":
            return list(self.data["control"]["samples"])
        return list(self.data["modes"][mode]["samples"])

    def values(self, mode: str) -> dict[str, list[float]]:
        """Every flattened metric of ``mode`` (harness names: ``max_gap_ms``, ``lag_us.p99``, ``metrics.x``)
        plus the allocation pass as ``allocation.total_bytes`` / ``peak_bytes`` / ``allocations`` and the
        instruction pass as ``instructions.total`` / ``instructions.loop_thread`` (absent when not measured)."""
        columns: dict[str, list[float]] = {}
        for sample in self.samples(mode):
            for key, value in sample_metrics(sample).items():
                columns.setdefault(key, []).append(value)
        if mode != "control":
            alloc = self.data["modes"][mode].get("allocation") or {}
            for sample in alloc.get("samples", []):
                for key in ("total_bytes", "peak_bytes", "allocations"):
                    if isinstance(sample.get(key), int | float):
                        columns.setdefault(f"allocation.{key}", []).append(float(sample[key]))
            for sample in (self.data["modes"][mode].get("instructions") or {}).get("samples", []):
                for key in INSTRUCTION_KEYS:
                    if isinstance(sample.get(key), int | float):
                        columns.setdefault(f"instructions.{key}", []).append(float(sample[key]))
        return columns

    def rounds(self, mode: str) -> dict[str, dict[int, float]]:
        """The latency samples' metrics by round (the sample's ``index``): ``perfsuite ab`` pairs round ``i`` of
        BASE with round ``i`` of HEAD (run back to back). Samples without an index are left out."""
        columns: dict[str, dict[int, float]] = {}
        for sample in self.samples(mode):
            index = sample.get("index")
            if not isinstance(index, int) or isinstance(index, bool):
                continue
            for key, value in sample_metrics(sample).items():
                columns.setdefault(key, {})[index] = value
        return columns

    def instructions(self, mode: str) -> Mapping[str, Any] | None:
        """The mode's instruction-pass section, ``None`` when the run did not ask for one."""
        if mode == "control":
            return None
        return self.data["modes"][mode].get("instructions")

    def stat(self, mode: str, metric: str) -> Stat | None:
        """The summary of ``metric`` in ``mode`` (from the document, else computed), or ``None``."""
        body = self.data["control"] if mode == "control" else self.data["modes"][mode]
        if metric in (body.get("summary") or {}):
            return Stat.of(body["summary"][metric])
        values = self.values(mode).get(metric)
        return Stat.from_values(values) if values else None


@dataclass(frozen=True, slots=True)
class Floor:
    """A floor acknowledgements are read against: ``kind`` ``"fsync"`` (raw write, fsync, replace and
    directory fsync of one small file, SPEC section 4) or ``"publication"`` (one generation's durable
    operations as raw os calls, a mode of the same document, SPEC section 8)."""

    source: str
    mode: str
    ack_ms: Stat
    result: Result | None
    section: Mapping[str, Any]
    kind: str = "fsync"

    @property
    def samples(self) -> list[Mapping[str, Any]]:
        """The floor's samples."""
        return list(self.section.get("samples", []))

    @property
    def name(self) -> str:
        """``fsync floor`` or ``publication floor``: how every report names it."""
        return f"{self.kind} floor"

    def to_json(self) -> dict[str, Any]:
        """`report --format json`'s ``floor``: where it was measured and its acknowledgement."""
        return {"source": str(self.source), "mode": self.mode, "ack_ms": self.ack_ms.to_json()}


def read_result(path: Path | str) -> Result:
    """Load and schema-validate one results file; one-line :class:`PerfsuiteError` otherwise."""
    path = Path(path)
    if path.is_dir():
        raise PerfsuiteError(f"{path}: is a directory, expected a results file")
    return _validated(path)


def _validated(path: Path, parsed: Any = None) -> Result:
    """The results document at ``path`` (``parsed``: as a reader already decoded it) as a :class:`Result`
    once it is this schema's and valid: a directory's readers parse each file once, not twice."""
    data = load_results(path, parsed=parsed)
    try:
        validate_results(data)
    except PerfsuiteError as exc:
        raise PerfsuiteError(f"{path}: {exc}") from None
    return Result(path, checked_verdicts(data))  # M7 as the samples say: a stored "met" is not trusted


def _looks_perfsuite(data: object) -> bool:
    return isinstance(data, dict) and "schema" in data and "recipe" in data and "modes" in data


def _candidates(directory: Path) -> list[Path]:
    return [p for p in sorted(directory.rglob("*.json"))
            if not p.name.endswith(".pyperf.json") and not p.name.startswith(".")]


_SKIP_HINT = "remove it (report, compare and bars can leave it out: --skip-bad)"


def scan_results(path: Path | str, *, skip_bad: bool = False) -> tuple[list[Result], list[str]]:
    """``(results, skipped)`` for a results file or a directory of them (recursively, sorted by path).

    In a directory, a ``*.json`` that does not parse (a torn write, a full disk) or a
    perfsuite document that does not validate is an error naming it, never silently passed over (a
    report would quietly use an older document instead); with ``skip_bad`` it is left out and described
    in ``skipped`` (one line each). Pyperf exports, hidden files and JSON that is not a perfsuite document
    (e.g. an A/B pairing) are skipped as before.
    """
    path = Path(path)
    if not path.exists():
        raise PerfsuiteError(f"{path}: no such results file or directory")
    if not path.is_dir():
        return [read_result(path)], []
    found: list[Result] = []
    skipped: list[str] = []
    for p in _candidates(path):
        try:
            data = read_json(p, "results document", follow=False)  # found by listing: never a symlink's target
        except PerfsuiteError as exc:
            problem = str(exc)
            if not skip_bad:
                raise PerfsuiteError(f"{problem}; {_SKIP_HINT}") from None
            skipped.append(problem)
            continue
        if not _looks_perfsuite(data):
            continue
        try:
            found.append(_validated(p, data))
        except PerfsuiteError as exc:
            if not skip_bad:
                raise PerfsuiteError(f"{exc}; {_SKIP_HINT}") from None
            skipped.append(str(exc))
    if not found:
        raise PerfsuiteError(f"{path}: no perfsuite results files in this directory")
    return found, skipped


def read_results(path: Path | str, *, skip_bad: bool = False) -> list[Result]:
    """A results file, or every results file under a directory (recursively, sorted by path).

    Skips pyperf exports and foreign JSON; raises :class:`PerfsuiteError` for a missing path, an empty
    directory, or a document that does not load (torn, wrong schema version, invalid) unless ``skip_bad``
    (then use :func:`scan_results` to learn what was left out).
    """
    return scan_results(path, skip_bad=skip_bad)[0]


def read_siblings(path: Path | str, *, known: Iterable[Result] = (), floors_only: bool = False,
                  on_skip: Callable[[str], None] | None = None) -> list[Result]:
    """The other results files in the directory of ``path`` (not recursive); unreadable ones are left out.

    Used to find the fsync floor of the same run, where a broken neighbour must not block a report. A
    sibling among ``known`` (results the caller has read already) is taken from there, not read again: a
    report of N documents in one directory read the directory N times, O(N^2) schema checks. Siblings are
    names found by listing, so each is read as :func:`perfsuite.harness.read_json` reads it with
    ``follow=False`` (a committed ``x.json -> /dev/zero`` or a FIFO is left out, never read) and within
    ``LIMITS["document_bytes"]``; ``on_skip`` gets one line for each left out that way or for not loading.
    ``floors_only``: only fsync-floor documents are schema-checked and returned (what a report needs of
    its neighbours; a large document beside it is parsed, bounded, but never validated).
    """
    path = Path(path)
    have = {r.path: r for r in known if r.path is not None}
    found = []
    for p in sorted(path.parent.glob("*.json")):
        if p == path or p.name.endswith(".pyperf.json") or p.name.startswith("."):
            continue
        if p in have:
            if not floors_only or have[p].is_floor:
                found.append(have[p])
            continue
        try:
            data = read_json(p, "results document", follow=False)
            if _looks_perfsuite(data) and (not floors_only or _floor_modes(data)):
                found.append(_validated(p, data))
        except PerfsuiteError as exc:
            if on_skip is not None:
                on_skip(f"{exc} (beside {path.name}, looked at for its run's fsync floor)")
            continue
    return found


def _floor_modes(data: Mapping[str, Any]) -> bool:
    """Whether decoded ``data`` has a mode measuring the fsync floor (before any schema check)."""
    modes = data.get("modes")
    return isinstance(modes, Mapping) and any(
        isinstance(body, Mapping) and str(body.get("operation", "")).endswith(FLOOR_OPERATION_SUFFIX)
        for body in modes.values())


def _order_key(result: Result) -> tuple[str, float, str]:
    return (result.date, result.created_epoch or 0.0, str(result.path or ""))


def latest_by_recipe(results: Iterable[Result]) -> dict[str, Result]:
    """The most recent result of each recipe (by date, then creation time), in recipe-name order."""
    latest: dict[str, Result] = {}
    for result in sorted(results, key=_order_key):
        latest[result.recipe] = result
    return dict(sorted(latest.items()))


def _floor_from_result(result: Result, source: str) -> Floor | None:
    for mode, body in result.data["modes"].items():
        if str(body.get("operation", "")).endswith(FLOOR_OPERATION_SUFFIX) and "ack_ms" in body.get("summary", {}):
            return Floor(source, mode, Stat.of(body["summary"]["ack_ms"]), result, body)
    return None


def _same_run(a: Result, b: Result) -> bool:
    if a.run_id is not None and b.run_id is not None:
        return a.run_id == b.run_id
    if a.hostname != b.hostname or a.commit != b.commit:
        return False
    if a.created_epoch is None or b.created_epoch is None:
        return False
    return abs(a.created_epoch - b.created_epoch) <= RUN_WINDOW_S


def find_floor(result: Result, candidates: Iterable[Result] = (), *, same_run: bool = False) -> Floor | None:
    """The fsync floor measured in the same run as ``result`` (see the module docstring), or ``None``.

    ``same_run=True`` says the caller knows every candidate comes from the same run (``perfsuite run``
    passes the documents it just wrote), so only the nearest fsync-floor document is looked for.
    """
    section = result.data.get("floor")
    if isinstance(section, Mapping) and "ack_ms" in (section.get("summary") or {}):
        return Floor("floor section", "floor", Stat.of(section["summary"]["ack_ms"]), result, section)
    if result.is_floor:
        return _floor_from_result(result, result.name)
    runs = [c for c in candidates if c.is_floor and c is not result and (same_run or _same_run(result, c))]
    if result.created_epoch is not None:
        runs.sort(key=lambda c: abs((c.created_epoch or 0.0) - (result.created_epoch or 0.0)))
    for candidate in runs:
        floor = _floor_from_result(candidate, candidate.name)
        if floor is not None:
            return floor
    return None


def find_publication_floor(document: Mapping[str, Any] | Result) -> Floor | None:
    """The publication floor measured beside the modes of ``document`` (a mode whose operation is
    ``...:publication_floor`` and that has acknowledgements), or ``None`` (older documents have none)."""
    result = document if isinstance(document, Result) else Result(None, document)
    for mode, body in result.data["modes"].items():
        if str(body.get("operation", "")).endswith(PUBLICATION_FLOOR_SUFFIX):
            stat = result.stat(mode, "ack_ms")
            if stat is not None:
                return Floor(f"mode {mode}", mode, stat, result, body, kind="publication")
    return None
