"""Instructions per operation under Valgrind: a separate pass, never inside a latency sample (M3).

Time on a shared runner moves by tens of percent between identical runs; the number of instructions an
operation executes does not. Each pass runs the operation once, in a fresh worker under
``valgrind --tool=callgrind``, and counts the instructions (``Ir``) executed from submission to
acknowledgement, in total and per thread; thread 1 is the worker's main thread, the one running the
event loop (its share is what blocks an editor; the rest is offloaded work).

**Mechanism: callgrind's instrumentation toggles, as client requests issued by the measured process.**
Valgrind starts with ``--instr-atstart=no``: interpreter start-up, imports, the fixture copy, the
operation's setup and the idle wait run uninstrumented (uncounted, and only a few times slower than
native). Just before ``submit`` the worker issues ``CALLGRIND_START_INSTRUMENTATION`` and
``CALLGRIND_ZERO_STATS``; the acknowledgement callback's first act is ``CALLGRIND_STOP_INSTRUMENTATION``.
Nothing is instrumented after that, so the final dump (one file per thread, ``--separate-threads=yes``)
holds exactly the window. Why this one:

* accuracy: the edges are the operation's own (submit, the ack call), in every thread. The
  alternatives miss work: ``CALLGRIND_TOGGLE_COLLECT`` and ``CALLGRIND_DUMP_STATS_AT`` act on the
  calling thread only (measured: an offloaded job's 6.9 M instructions vanished from the window), and
  ``callgrind_control`` is asynchronous (valgrind polls for its commands), so its edges drift;
  differencing runs of N and N+k operations puts everything else's noise into the difference and cannot
  split threads.
* repeatability: everything measured to move the count is pinned (:mod:`perfsuite.harness._pinning`):
  the hash seed, the work directory and the code's paths, the operation's context (every pass is
  sample 0: the same payload), the start-up (outside the window), the environment, the request's size,
  glibc's allocator, symbol binding and bytecode compilation. Threads are scheduled with
  ``--fair-sched=yes`` (valgrind runs one thread at a time; its ticket lock hands over in a steadier
  order). Ten passes of mailbox-delivery then spread by 0.012% (sync), 0.18% (async, all threads) and
  0.75% (async, loop thread). What stays is thread interleaving (how many event-loop turns the loop
  thread takes while offloaded work runs) and heap layout: any change to the code under test moves
  later addresses, and ``memcpy``'s count with them (a loop planted in a function that runs after the
  sidecar's JSON encoding moved that encoding by 0.5-0.65%). Figures and the gate use the median of the
  passes (3 per mode by default).
* cost: one valgrind process per pass; only the window runs at callgrind's full cost (roughly 50-100x).

The client requests come from a C helper built on first use (:mod:`perfsuite.harness._callgrind`).
Without valgrind the pass is "not measured" (``None``), never 0.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from perfsuite.errors import PerfsuiteError
from perfsuite.harness._callgrind import (
    CallgrindClient,
    Valgrind,
    callgrind_client,
    callgrind_totals,
    client_library,
    interpreter,
)
from perfsuite.harness._gc import apply_gc_policy
from perfsuite.harness._operation import OperationFactory, call_optional, resolve_operation
from perfsuite.harness._pinning import (
    HASH_SEED,
    code_links,
    code_roots,
    fixed_root,
    mapped_sys_path,
    padded_request,
    pinned_code,
    pinned_environment,
    precompile,
)
from perfsuite.harness._results import summarize
from perfsuite.harness._sample import SampleSpec, _Ack, _fail, open_operation, prepare_workdir, split_metrics, wait_ack
from perfsuite.harness._syspath import worker_sys_path

__all__ = [
    "LOOP_THREAD",
    "VALGRIND_SLOWDOWN",
    "InstructionRecord",
    "callgrind_argv",
    "instructions_section",
    "measure_instructions",
    "window_instructions",
]

#: valgrind's thread id of the worker's main thread, where the event loop runs
LOOP_THREAD = 1
#: the acknowledgement timeout is multiplied by this under callgrind
VALGRIND_SLOWDOWN = 100
#: wall-clock budget for a pass's start-up and setup under valgrind (s), beyond the scaled ack timeout
SETUP_BUDGET_S = 900.0
@dataclass(frozen=True, slots=True)
class InstructionRecord:
    """One pass: instructions from submission to acknowledgement, in total and on the loop thread."""

    index: int
    total: int
    loop_thread: int
    threads: Mapping[str, int]
    ack_ms_valgrind: float
    mechanism: str
    tool: str = "callgrind"
    metrics: Mapping[str, float | bool] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The ``instructions.samples[]`` entry of the results document."""
        return {
            "index": self.index,
            "total": self.total,
            "loop_thread": self.loop_thread,
            "threads": dict(self.threads),
            "ack_ms_valgrind": round(self.ack_ms_valgrind, 3),
            "mechanism": self.mechanism,
            "tool": self.tool,
            "metrics": dict(self.metrics),
        }


def callgrind_argv(valgrind: Valgrind, out_dir: Path, extra: Sequence[str] = (),
                   python: str | None = None) -> list[str]:
    """valgrind's command line for a pass: callgrind, instrumentation off until the window, one output
    file per thread in ``out_dir``, valgrind's own messages in ``out_dir/valgrind.log``; ``python`` is the
    interpreter (a code variant's own environment's; default the running one)."""
    return [
        valgrind.path,
        "--tool=callgrind",
        "--instr-atstart=no",
        "--separate-threads=yes",
        "--fair-sched=yes",
        "--dump-line=no",
        f"--callgrind-out-file={out_dir / 'callgrind.out'}",
        f"--log-file={out_dir / 'valgrind.log'}",
        *extra,
        interpreter(python),
        "-m",
        "perfsuite.harness._worker",
    ]


# -- inside the worker (under valgrind) ---------------------------------------------------------------


async def window_instructions(spec: SampleSpec, factory: OperationFactory, client: CallgrindClient,
                              hooks: Any = None) -> dict[str, Any]:
    """Run the operation once with the window open from ``submit`` to its acknowledgement.

    ``spec.work_root`` is the pass's fixed, empty directory. ``hooks`` (optional) has ``before_window()``
    and ``after_window()``, called just outside the window (the callgrind profile installs its
    trampolines there). Returns the acknowledgement time under valgrind and ``metrics()``."""
    if not client.on_valgrind():
        raise PerfsuiteError(f"{spec.label}: the instruction pass must run under valgrind")
    if threading.current_thread() is not threading.main_thread():
        raise PerfsuiteError(f"{spec.label}: the instruction pass must run its loop on the main thread")
    root = Path(str(spec.work_root))
    fixture = Path(spec.fixture) if spec.fixture else None
    workdir, scratch = prepare_workdir(fixture, root, spec.sync_after_copy)
    op = await open_operation(spec, factory, workdir, scratch, "instructions")
    try:
        await call_optional(op, "wait_idle")
        await apply_gc_policy(spec.gc, spec.settle_ms / 1e3)
        inner = _Ack(asyncio.get_running_loop())
        stop = client.end

        def ack(exc: BaseException | None = None) -> None:
            stop()  # the window ends at the acknowledgement call, in every thread
            inner(exc)

        if hooks is not None:
            hooks.before_window()
        t0 = time.perf_counter_ns()
        client.begin()
        try:
            op.submit(ack)
        except Exception as exc:
            client.end()
            raise _fail(spec, "submit()", exc) from exc
        try:
            await wait_ack(spec, inner)
        finally:
            client.end()
            if hooks is not None:
                hooks.after_window()
        raw = await call_optional(op, "metrics")
        _phases, _drain, numbers, _labels = split_metrics(raw if isinstance(raw, Mapping) else None)
        return {"ack_ms_valgrind": (inner.ns - t0) / 1e6, "metrics": numbers, "mechanism": client.mechanism}
    finally:
        await call_optional(op, "close")


def serve_instructions(request: Mapping[str, Any]) -> dict[str, Any]:
    """The worker's side of a pass (``kind = "instructions"``): see :func:`window_instructions`."""
    spec = SampleSpec.from_dict(request["spec"])
    factory = resolve_operation(spec.operation)  # imported before the window, uninstrumented
    client = callgrind_client(request.get("library"))
    hooks = None
    if request.get("hooks"):
        # the resolver imports any "module:function"; a hooks factory takes the hooks' params, not a context
        hook_factory = cast("Callable[[dict[str, Any]], Any]", resolve_operation(str(request["hooks"]["factory"])))
        hooks = hook_factory(dict(request["hooks"].get("params") or {}))
    return asyncio.run(window_instructions(spec, factory, client, hooks))


# -- the parent's side ------------------------------------------------------------------------------------


_VALGRIND_PROBLEM = re.compile(r"Assertion|impossible|Process terminating|out of memory|[Ff]atal|valgrind: ")


def _last_line(path: Path) -> str:
    """The line of valgrind's log that says what went wrong (an assertion, a fatal signal), else its last."""
    try:
        lines = [ln.strip() for ln in path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no output"
    problems = [ln for ln in lines if _VALGRIND_PROBLEM.search(ln)]
    return (problems or lines or ["no output"])[0 if problems else -1]


def measure_instructions(
    spec: SampleSpec,
    valgrind: Valgrind,
    *,
    base_dir: Path,
    pass_index: int = 0,
    out_dir: Path | None = None,
    hooks: Mapping[str, Any] | None = None,
    extra_args: Sequence[str] = (),
    code: Mapping[str, Any] | None = None,
) -> InstructionRecord:
    """One instruction pass of ``spec``'s operation (kind ``instructions``) in a worker under callgrind.

    ``base_dir`` holds the fixed work directory; ``out_dir`` keeps callgrind's output files (default: a
    temporary directory, removed). ``hooks`` / ``extra_args`` are for the callgrind profile. ``code`` is a
    code variant the worker loads first (``perfsuite ab``: ``{"root": DIR, "packages": [...]}``), imported
    through a fixed link (:func:`~perfsuite.harness._pinning.pinned_code`). Raises :class:`PerfsuiteError`
    (one line) when the pass fails."""
    library, mechanism = client_library()
    keep = out_dir is not None
    out = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix="perfsuite-callgrind-"))
    out.mkdir(parents=True, exist_ok=True)
    try:
        with fixed_root(Path(base_dir)) as root:
            pinned = replace(spec, index=0, kind="instructions", work_root=str(root))  # same context every pass
            links = code_links(Path(base_dir), code_roots(spec.operation))
            precompile(spec.operation, code)
            request: dict[str, Any] = {
                "kind": "instructions",
                "spec": replace(pinned, ack_timeout_s=spec.ack_timeout_s * VALGRIND_SLOWDOWN).to_dict(),
                # a variant with its own environment: without the running environment's site-packages,
                # which would shadow the variant's installed dependencies (as in a latency sample)
                "sys_path": mapped_sys_path(worker_sys_path(code), links),
                "library": library,
                "hooks": dict(hooks) if hooks else None,
            }
            if code is not None:  # the worker loads it before anything imports it (perfsuite ab)
                request["code"] = pinned_code(Path(base_dir), code)
            timeout = spec.ack_timeout_s * VALGRIND_SLOWDOWN + SETUP_BUDGET_S
            try:
                python = str(code["python"]) if code is not None and code.get("python") else None
                proc = subprocess.run(callgrind_argv(valgrind, out, extra_args, python), input=padded_request(request),
                                      capture_output=True, text=True, timeout=timeout,
                                      env=pinned_environment(paths=links),
                                      cwd=root, check=False)
            except subprocess.TimeoutExpired:
                raise PerfsuiteError(f"{spec.label}: the instruction pass took over {timeout:g} s") from None
            except OSError as exc:
                raise PerfsuiteError(f"{spec.label}: valgrind could not start: {exc.strerror or exc}") from None
        reply = _reply(proc.stdout)
        if isinstance(reply, dict) and "error" in reply:
            raise PerfsuiteError(str(reply["error"]))
        if proc.returncode != 0 or not isinstance(reply, dict) or "record" not in reply:
            err = [ln for ln in proc.stderr.splitlines() if ln.strip()]
            log = _last_line(out / "valgrind.log")
            last = log if log != "no output" and _VALGRIND_PROBLEM.search(log) else (err[-1] if err else log)
            raise PerfsuiteError(f"{spec.label}: the instruction pass failed (exit {proc.returncode}): {last}")
        threads = callgrind_totals(out)
        if not threads:
            raise PerfsuiteError(f"{spec.label}: callgrind wrote no counts ({_last_line(out / 'valgrind.log')})")
        record = reply["record"]
        return InstructionRecord(
            index=pass_index,
            total=sum(threads.values()),
            loop_thread=threads.get(LOOP_THREAD, 0),
            threads={str(t): n for t, n in sorted(threads.items()) if n},
            ack_ms_valgrind=float(record["ack_ms_valgrind"]),
            mechanism=str(record.get("mechanism") or mechanism),
            metrics=dict(record.get("metrics") or {}),
        )
    finally:
        if not keep:
            shutil.rmtree(out, ignore_errors=True)


def instructions_section(section: Mapping[str, Any] | None, record: Mapping[str, Any]) -> dict[str, Any]:
    """The mode's ``instructions`` section of the results document with one more pass, or, for a record
    ``{"not_measured": reason}``, the section that says so (counts ``None``, never 0)."""
    if "not_measured" in record:
        return {"tool": "callgrind", "valgrind": None, "not_measured": record["not_measured"], "samples": [],
                "total": None, "loop_thread": None}
    out = dict(section or {})
    out.pop("not_measured", None)
    sample = {k: v for k, v in record.items() if k != "valgrind"}
    samples = [*out.get("samples", []), sample]
    out.update({
        "tool": "callgrind",
        "valgrind": record.get("valgrind"),
        "mechanism": record.get("mechanism"),
        "window": "submit to acknowledgement",
        "loop_thread_id": LOOP_THREAD,
        "hash_seed": int(HASH_SEED),
        "samples": samples,
        "total": summarize([s["total"] for s in samples]),
        "loop_thread": summarize([s["loop_thread"] for s in samples]),
    })
    return out


def _reply(stdout: str) -> Any:
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    if not lines:
        return None
    try:
        return json.loads(lines[-1])
    except ValueError:
        return None
