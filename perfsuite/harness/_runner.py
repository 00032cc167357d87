"""M4: run a recipe: modes alternated, warm-ups discarded, idle control interleaved, results after every sample.

The plan (``order`` in the results document) is fixed when the run starts:

* ``warmup`` rounds (one sample per mode each, discarded),
* rounds of one latency sample per mode (ABAB...), each round followed by one idle-control window
  (M1: the same heartbeat with no workload, as long as the run's median sample window),
* with ``allocation = true``, the separate allocation pass (M3),
* with ``instructions = true``, the separate instruction pass under valgrind last: one
  fresh worker under callgrind per pass, whatever the isolation. Without valgrind those entries are
  recorded as "not measured" (with the reason), never as 0.

``progress.done`` counts the plan entries finished; ``--resume`` continues from there with the
recorded plan and recipe. Isolation ``process`` runs every entry in a fresh worker interpreter
(:mod:`perfsuite.harness._worker`), ``inline`` runs them all in this process on one event loop.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite import __version__
from perfsuite.errors import PerfsuiteError
from perfsuite.harness._alloc import measure_allocation
from perfsuite.harness._callgrind import Valgrind, ValgrindUnavailable, client_library, find_valgrind
from perfsuite.harness._environment import RESOLVE
from perfsuite.harness._exports import write_exports
from perfsuite.harness._fixture_guard import FixtureGuard
from perfsuite.harness._gc import GcRecorder
from perfsuite.harness._heartbeat import Heartbeat
from perfsuite.harness._instructions import instructions_section, measure_instructions
from perfsuite.harness._lock import ResultsLock, new_results_path
from perfsuite.harness._machine_load import machine_load
from perfsuite.harness._operation import CONTROL_OPERATION, OperationFactory, control_operation
from perfsuite.harness._plan import check_conditions, check_parameters, plan_order, resolve_factories, resolve_seed
from perfsuite.harness._recipe import Recipe
from perfsuite.harness._results import (
    SCHEMA_VERSION,
    SUMMARY_METHOD,
    ResultsWriter,
    collect_environment,
    describe_fixture,
    now_iso,
    summarize,
    summarize_samples,
    verdict,
    write_json_atomic,
)
from perfsuite.harness._sample import SampleSpec, measure_sample
from perfsuite.harness._stalls import run_instrumented, stall_monitor_of
from perfsuite.harness._syspath import worker_sys_path
from perfsuite.harness._worker import worker_command

__all__ = [
    "RunResult",
    "SampleEvent",
    "check_conditions",
    "new_results_path",
    "plan_order",
    "resolve_seed",
    "run_recipe",
]

#: control window length before any sample has been measured (ms, tail included)
DEFAULT_CONTROL_WINDOW_MS = 50.0


@dataclass(frozen=True, slots=True)
class SampleEvent:
    """Progress report passed to ``on_sample`` after every plan entry (the CLI draws its bar from it)."""

    recipe: str
    kind: str
    mode: str | None
    index: int
    done: int
    total: int
    path: Path
    record: Mapping[str, Any] | None = None
    variant: str | None = None  # the code variant measured (run_variants), None for a plain run

    @property
    def max_gap_ms(self) -> float | None:
        """The entry's max heartbeat gap, for latency samples and control windows."""
        if self.record is None:
            return None
        value = self.record.get("max_gap_ms")
        return float(value) if isinstance(value, int | float) else None


@dataclass(frozen=True, slots=True)
class RunResult:
    """A finished (or resumed-to-completion) run: the results file, its document and its exports."""

    path: Path
    document: Mapping[str, Any]
    exports: tuple[Path, ...] = ()

    @property
    def recipe(self) -> str:
        """The recipe's name."""
        return str(self.document["recipe"]["name"])

    def verdicts(self) -> dict[str, Mapping[str, Any]]:
        """M7 verdict per mode."""
        return {mode: body["verdict"] for mode, body in self.document["modes"].items()}


OnSample = Callable[[SampleEvent], None]


def _new_document(recipe: Recipe, fixture: Mapping[str, Any], environment: Mapping[str, Any]) -> dict[str, Any]:
    order = plan_order(recipe)
    return {
        "schema": SCHEMA_VERSION,
        "perfsuite": __version__,
        "status": "running",
        "created_at": now_iso(),
        "created_epoch": time.time(),
        "updated_at": now_iso(),
        "recipe": recipe.to_dict(),
        "environment": dict(environment),
        "fixture": dict(fixture),
        "summary_method": SUMMARY_METHOD,
        "order": order,
        "progress": {"done": 0, "total": len(order)},
        "modes": {
            m.name: {
                "operation": m.operation,
                "params": dict(m.params),
                "warmups": 0,
                "samples": [],
                "allocation": None,
                "instructions": None,
                "summary": {},
                "verdict": verdict([], recipe.target_ms, m.reference),
                **({"reference": m.reference} if m.reference else {}),
            }
            for m in recipe.modes
        },
        "control": {"operation": CONTROL_OPERATION, "samples": [], "summary": {}},
    }


class _Run:
    """One run in progress: owns the document, the temp work root and the execution of the plan."""

    def __init__(
        self,
        recipe: Recipe,
        document: dict[str, Any],
        path: Path,
        fixture: Path | None,
        work_dir: Path,
        on_sample: OnSample | None,
        writer: ResultsWriter | None = None,
        valgrind: str | None = None,
        code: Mapping[str, Any] | None = None,
    ) -> None:
        self.recipe = recipe
        self.valgrind_path = valgrind
        self._valgrind: Valgrind | None = None
        self.doc = document
        self.path = path
        self.fixture = fixture
        self.work_dir = work_dir
        self.on_sample = on_sample
        self.write: ResultsWriter = writer or write_json_atomic
        # a fixture that changes between samples (a live session) is refused, not measured
        self.guard = FixtureGuard(fixture) if fixture is not None and fixture.is_dir() else None
        self.code = code  # a code variant the worker imports first (run_variants); None: the running code
        self.last_code: Mapping[str, Any] | None = None  # what the last worker imported, and from where
        # a code variant's operations import in its worker only (the running code may lack what they need)
        self.factories: dict[str, OperationFactory] = {} if code is not None else resolve_factories(recipe)
        check_conditions(recipe, self.factories)
        check_parameters(recipe, self.factories)  # before the first sample, never during

    # -- plan bookkeeping -----------------------------------------------------------------------

    def remaining(self) -> list[dict[str, Any]]:
        return list(self.doc["order"][self.doc["progress"]["done"] :])

    def control_window_ms(self) -> float:
        windows = [s["window_ms"] for body in self.doc["modes"].values() for s in body["samples"]]
        return float(statistics.median(windows)) if windows else DEFAULT_CONTROL_WINDOW_MS

    def spec(self, entry: Mapping[str, Any]) -> SampleSpec:
        r = self.recipe
        ack_timeout_s = r.ack_timeout_s
        if entry["kind"] == "control":
            window = self.control_window_ms()
            operation, mode = CONTROL_OPERATION, "control"
            params: dict[str, Any] = {"window_ms": max(window - r.window_tail_ms, 0.0)}
            fixture = None
            # the control acknowledges after `window_ms` by design: its timeout is on top of that, so a
            # slow sample can never make the next control window time out
            ack_timeout_s = r.ack_timeout_s + params["window_ms"] / 1e3
        else:
            m = r.mode(entry["mode"])
            operation, mode, params = m.operation, m.name, dict(m.params)
            if r.storage is not None:  # M10: the operation applies the profile (check_conditions)
                params.setdefault("storage", r.storage)
            fixture = str(self.fixture) if self.fixture else None
        return SampleSpec(
            recipe=r.name,
            mode=mode,
            index=int(entry["index"]),
            kind=entry["kind"],
            operation=operation,
            params=params,
            fixture=fixture,
            work_root=str(self.work_dir),
            heartbeat_ms=r.heartbeat_ms,
            gc=r.gc,
            tail_ms=r.window_tail_ms,
            ack_timeout_s=ack_timeout_s,
            settle_ms=r.settle_ms,
            sync_after_copy=r.sync_after_copy,
            heap=r.heap if entry["kind"] == "sample" else 0,
            warmups=r.worker_warmup if entry["kind"] == "sample" and r.isolation == "process" else 0,
        )

    def before(self, entry: Mapping[str, Any]) -> None:
        """Outside every window: an entry that copies the fixture first checks it has not changed."""
        if self.guard is not None and entry["kind"] != "control":
            what = entry["kind"] if entry["kind"] != "sample" else "sample"
            self.guard.check(f"before {entry.get('mode')} {what} {entry['index']}")

    def factory(self, spec: SampleSpec) -> OperationFactory:
        return control_operation if spec.kind == "control" else self.factories[spec.mode]

    def complete(self, entry: Mapping[str, Any], record: Mapping[str, Any]) -> None:
        """Store one entry's record, refresh summaries and verdicts, write atomically, report progress."""
        kind = entry["kind"]
        doc = self.doc
        if kind == "sample":
            body = doc["modes"][entry["mode"]]
            body["samples"].append(dict(record))
            body["summary"] = summarize_samples(body["samples"])
            body["verdict"] = verdict(body["samples"], self.recipe.target_ms, self.recipe.mode(entry["mode"]).reference)
        elif kind == "warmup":
            doc["modes"][entry["mode"]]["warmups"] += 1  # M4: run, counted, discarded
        elif kind == "control":
            doc["control"]["samples"].append(dict(record))
            doc["control"]["summary"] = summarize_samples(doc["control"]["samples"])
            # how loaded the machine was, from the idle control (a warning, like pyperf check)
            doc["load"] = machine_load(doc["control"]["samples"], self.recipe.heartbeat_ms).to_dict()
        elif kind == "allocation":
            body = doc["modes"][entry["mode"]]
            tracker = record.get("tracker", "memray")
            alloc = body["allocation"] or {"tracker": tracker, "samples": []}
            if alloc["tracker"] != tracker:  # one method per section, never tracemalloc beside memray
                raise PerfsuiteError(f"{self.recipe.name}/{entry['mode']}: this run's allocation pass used "
                                     f"{alloc['tracker']}, this sample {tracker} (set PERFSUITE_ALLOCATION_TRACKER "
                                     "as it was when the run started)")
            alloc["samples"].append(dict(record))
            for key in ("total_bytes", "peak_bytes", "allocations"):
                measured = [s[key] for s in alloc["samples"] if s.get(key) is not None]
                alloc[key] = summarize(measured) if measured else None  # None: the tracker cannot measure it
            body["allocation"] = alloc
        elif kind == "instructions":
            body = doc["modes"][entry["mode"]]
            body["instructions"] = instructions_section(body.get("instructions"), record)
        doc["progress"]["done"] += 1
        doc["updated_at"] = now_iso()
        self.write(self.path, doc)  # M4/M8: after every sample
        if self.on_sample is not None:
            self.on_sample(
                SampleEvent(
                    recipe=self.recipe.name,
                    kind=kind,
                    mode=entry.get("mode"),
                    index=int(entry["index"]),
                    done=doc["progress"]["done"],
                    total=doc["progress"]["total"],
                    path=self.path,
                    record=record if kind not in ("allocation", "instructions") else None,
                )
            )

    # -- execution --------------------------------------------------------------------------------

    def execute(self, rewarm: bool) -> None:
        """Run the remaining plan entries in the recipe's isolation."""
        entries = self.remaining()
        extra = []
        if rewarm and self.recipe.isolation == "inline" and any(e["kind"] != "warmup" for e in entries):
            # a resumed inline run is a new process: warm it again (discarded, not recorded)
            extra = [{"kind": "warmup", "mode": m.name, "index": -1} for m in self.recipe.modes]
        if self.recipe.isolation == "inline":
            run_instrumented(self._inline(extra, entries))  # M9: the harness's own loop
        else:
            for entry in entries:
                self.before(entry)
                if entry["kind"] == "instructions":
                    self.complete(entry, self._instructions(entry))
                else:
                    self.complete(entry, self._in_worker(entry))

    async def _inline(self, extra: list[dict[str, Any]], entries: list[dict[str, Any]]) -> None:
        with GcRecorder() as recorder:
            heartbeat = Heartbeat(self.recipe.heartbeat_ms)
            heartbeat.start()
            try:
                for entry, count in [(e, False) for e in extra] + [(e, True) for e in entries]:
                    self.before(entry)
                    spec = self.spec(entry)
                    if entry["kind"] == "instructions":
                        heartbeat.stop()  # the pass runs in a worker under valgrind, whatever the isolation
                        record = self._instructions(entry)
                    elif entry["kind"] == "allocation":
                        heartbeat.stop()  # M3: nothing else allocating while memray traces
                        monitor = stall_monitor_of(asyncio.get_running_loop())
                        if monitor is not None:
                            monitor.enabled = False  # M3: the stall timer's wrappers would be counted
                        try:
                            record = (await measure_allocation(spec, self.factory(spec))).to_dict()
                        finally:
                            if monitor is not None:
                                monitor.enabled = True
                    else:
                        if not heartbeat.running:
                            heartbeat.start()
                        record = (await measure_sample(spec, heartbeat, recorder, self.factory(spec))).to_dict()
                    if count:
                        self.complete(entry, record)
            finally:
                heartbeat.stop()

    def _instructions(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        """One instruction pass, or a "not measured" record (with the reason) when valgrind is missing."""
        if self._valgrind is None:
            try:
                self._valgrind = find_valgrind(self.valgrind_path)
                client_library()
            except ValgrindUnavailable as exc:
                return {"not_measured": str(exc)}
        record = measure_instructions(self.spec(entry), self._valgrind, base_dir=self.work_dir.parent,
                                      pass_index=int(entry["index"]), code=self.code)
        return {**record.to_dict(), "valgrind": self._valgrind.version}

    def _in_worker(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        spec = self.spec(entry)
        code = self.code if spec.kind != "control" else None  # the idle control measures the machine, not code
        request: dict[str, Any] = {
            "kind": "allocation" if spec.kind == "allocation" else "sample",
            "spec": spec.to_dict(),
            "sys_path": worker_sys_path(code),
        }
        if code is not None:
            request["code"] = dict(code)
        timeout = self.recipe.ack_timeout_s + 120.0
        try:
            proc = subprocess.run(
                worker_command(code),  # a variant's own environment's interpreter, if it has one
                input=json.dumps(request),
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise PerfsuiteError(f"{spec.label}: worker process did not finish within {timeout:g} s") from None
        lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
        reply: dict[str, Any] | None = None
        if lines:
            try:
                reply = json.loads(lines[-1])
            except ValueError:
                reply = None
        if isinstance(reply, dict) and "error" in reply:
            raise PerfsuiteError(str(reply["error"]))
        if proc.returncode != 0 or not isinstance(reply, dict) or "record" not in reply:
            err = [ln for ln in proc.stderr.splitlines() if ln.strip()]
            last = err[-1] if err else "no output"
            if len(last) > 300:  # a traceback's last line can be a 30 KB shutil.Error list: keep it one short line
                last = last[:300] + "..."
            raise PerfsuiteError(f"{spec.label}: worker process failed (exit {proc.returncode}): {last}")
        if reply.get("code") is not None:
            self.last_code = reply["code"]
        return dict(reply["record"])

    def finish(self) -> RunResult:
        """Exports first, then ``status: complete``: a run whose exports failed (ENOSPC) is not complete,
        and ``--resume`` writes them again."""
        exports = write_exports(self.doc, self.path)
        self.doc["status"] = "complete"
        self.doc.pop("error", None)
        self.doc["finished_at"] = now_iso()
        self.doc["updated_at"] = now_iso()
        self.write(self.path, self.doc)
        return RunResult(self.path, self.doc, tuple(exports))


def _one_line(exc: BaseException) -> str:
    text = " ".join(part.strip() for part in str(exc).splitlines() if part.strip())
    return text if isinstance(exc, PerfsuiteError) and text else f"{type(exc).__name__}: {text}".rstrip(": ")


def _drive(run: _Run, rewarm: bool) -> RunResult:
    try:
        run.execute(rewarm)
        return run.finish()
    except BaseException as exc:
        # keep what was measured; mark the file so `--resume` and readers know (M4): SIGINT and SIGTERM
        # interrupt, anything else fails the run, with its one-line reason
        interrupted = isinstance(exc, KeyboardInterrupt)
        run.doc["status"] = "interrupted" if interrupted else "failed"
        if interrupted:
            run.doc.pop("error", None)
        else:
            run.doc["error"] = _one_line(exc)
        run.doc["updated_at"] = now_iso()
        try:
            run.write(run.path, run.doc)
        except OSError:
            pass  # ENOSPC again: the previous atomic write, with every sample it kept, stays on disk
        raise


def _work_dir(work_root: Path | None) -> Path:
    root = Path(work_root) if work_root is not None else Path(tempfile.gettempdir())
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="perfsuite-run-", dir=root))


def run_recipe(
    recipe: Recipe,
    *,
    output_dir: Path | str = Path("results/local"),
    output: Path | None = None,
    fixture: Path | None = None,
    fixture_info: Mapping[str, Any] | None = None,
    work_root: Path | None = None,
    on_sample: OnSample | None = None,
    run_id: str | None = None,
    writer: ResultsWriter | None = None,
    valgrind: str | None = None,
    annotations: Mapping[str, Any] | None = None,
    measured: Mapping[str, Any] | None = RESOLVE,
) -> RunResult:
    """M4: run ``recipe`` and write its results file (plus exports) under ``output_dir`` (or ``output``).
    ``run_id`` ties together the documents of one invocation (e.g. to find its fsync floor);
    ``annotations`` are extra top-level keys of the document (e.g. ``sweep``: its id and setting).

    ``fixture`` is an opaque directory copied privately for every sample (``None`` for fixture-less
    recipes); ``fixture_info`` is whatever its resolver knows (name, digest...). ``work_root`` is where
    the private copies live (default: the system temp dir). ``on_sample`` receives a
    :class:`SampleEvent` after every plan entry. Raises :class:`PerfsuiteError` on bad input or a
    failed sample; the file then keeps every sample measured before it (status ``failed``, with the
    reason in ``error``; ``interrupted`` after SIGINT/SIGTERM). The document is locked while the run
    writes it; ``writer`` replaces the atomic writer (fault injection in tests).
    ``valgrind`` is the valgrind executable for the instruction pass (default ``$PERFSUITE_VALGRIND``,
    else PATH). ``measured`` is the measured repository (``environment.measured``, see
    :func:`perfsuite.harness.measured_repository`; ``None``: unknown); by default it is found from the working
    directory, ``$PERFSUITE_COMMIT`` and the CI's variables.
    """
    if recipe.fixture and fixture is None:
        raise PerfsuiteError(f"{recipe.name}: the recipe needs fixture {recipe.fixture!r}, none was given")
    if fixture is not None and not Path(fixture).is_dir():
        raise PerfsuiteError(f"{recipe.name}: fixture directory not found: {fixture}")
    recipe = resolve_seed(recipe)
    path = Path(output) if output is not None else new_results_path(output_dir, recipe.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    with ResultsLock.acquire(path):
        info = dict(fixture_info or {})
        info.setdefault("name", recipe.fixture)
        fixture_doc = describe_fixture(Path(fixture) if fixture else None, info)
        work_dir = _work_dir(work_root)
        try:
            run = _Run(recipe, {}, path, Path(fixture) if fixture else None, work_dir, on_sample, writer, valgrind)
            run.doc = _new_document(recipe, fixture_doc, collect_environment(work_dir, measured))
            if run_id is not None:
                run.doc["run_id"] = run_id
            for key, value in (annotations or {}).items():
                if key in run.doc:
                    raise PerfsuiteError(f"annotation {key!r} would overwrite a results field")
                run.doc[key] = value
            run.write(path, run.doc)
            return _drive(run, rewarm=False)
        finally:
            shutil.rmtree(work_dir, ignore_errors=True)


