"""One mode of ``perfsuite profile`` under py-spy or scalene, in a worker
process (:mod:`perfsuite.profile._driver`) that prepares the batch first:

* **py-spy** attaches by pid once the batch is prepared and is stopped (SIGINT, which makes it write
  its file) as soon as the last acknowledgement arrived, so setup and cleanup are not in the profile.
  Two batches per mode: one recorded as a flame graph SVG (``--threads``: one root per thread, so
  off-loop work is told apart), one as speedscope JSON; plus a text summary of the speedscope (top
  functions by self and inclusive time per thread).
* **scalene** runs the worker (``scalene run --off``); the worker switches profiling on just before
  each ``submit`` and off after its acknowledgement. Output: scalene's JSON and a text summary (top
  lines by CPU and by allocation). scalene exits 0 and writes ``{}`` when the program ran too briefly:
  the sample count is checked.

A profile with too few samples is repeated with :data:`GROWTH` times more iterations, at most
:data:`MAX_ATTEMPTS` runs, never beyond ``max_repeat`` operations.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import perfsuite
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import Recipe
from perfsuite.profile._process import (
    _driver_error,
    _driver_records,
    _last_line,
    _program_path,
    _Worker,
    _WorkerEnded,
)
from perfsuite.profile._summary import (
    load_json,
    scalene_samples,
    scalene_summary,
    speedscope_samples,
    speedscope_summary,
    svg_ok,
)

#: how much a too-short profile's iteration count grows per retry, and how many runs are tried
GROWTH = 4
MAX_ATTEMPTS = 3
#: retries never prepare more than this many operations at once, nor more than COPY_BUDGET bytes of fixture copies
#: (every operation of a batch is prepared before the profiler starts: a private copy plus an open session)
MAX_REPEAT = 160
#: fewest samples a profile must have (below: retried with more iterations; zero after the retries: error)
MIN_SAMPLES = {"py-spy": 20, "scalene": 10}
#: py-spy sampling rate (Hz) and scalene's CPU sampling interval (s): operations last milliseconds
PYSPY_RATE = 250
SCALENE_INTERVAL_S = 0.002
#: scalene's allocation sampling window (bytes): a publication allocates about a megabyte
SCALENE_ALLOC_WINDOW = 65536

DRIVER = Path(__file__).with_name("_driver.py")

OnEvent = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class ModeProfile:
    """One mode's profile: its artifacts (kind -> path), the profiled iterations and their sample count."""

    mode: str
    artifacts: Mapping[str, Path]
    iterations: tuple[Mapping[str, Any], ...]
    samples: int
    repeat: int
    attempts: int
    summary: str
    commands: tuple[tuple[str, ...], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The mode's entry in the profile record."""
        acks = [float(r["ack_ms"]) for r in self.iterations]
        gaps = [float(r["max_gap_ms"]) for r in self.iterations]
        return {
            "artifacts": {k: str(v) for k, v in self.artifacts.items()},
            "samples": self.samples,
            "repeat": self.repeat,
            "attempts": self.attempts,
            "commands": [list(c) for c in self.commands],
            "under_profiler": {
                "ack_ms_median": statistics.median(acks) if acks else None,
                "max_gap_ms_median": statistics.median(gaps) if gaps else None,
            },
            "iterations": list(self.iterations),
        }




@dataclass
class _Context:
    recipe: Recipe
    profiler: str
    command: list[str]
    prefix: Path
    scratch: Path
    fixture: Path | None
    native: bool
    rate: int
    repeat: int
    on_event: OnEvent
    timeout_s: float
    max_repeat: int = MAX_REPEAT


def _request(ctx: _Context, mode: str, iterations: int, control: str, result: Path) -> Path:
    m = ctx.recipe.mode(mode)
    request = {
        "recipe": ctx.recipe.name,
        "mode": mode,
        "operation": m.operation,
        "params": dict(m.params),
        "fixture": str(ctx.fixture) if ctx.fixture else None,
        "work_root": str(ctx.scratch),
        "iterations": iterations,
        "control": control,
        "gc": ctx.recipe.gc,
        "heartbeat_ms": ctx.recipe.heartbeat_ms,
        "tail_ms": ctx.recipe.window_tail_ms,
        "settle_ms": ctx.recipe.settle_ms,
        "ack_timeout_s": ctx.recipe.ack_timeout_s,
        "sync_after_copy": ctx.recipe.sync_after_copy,
        "result": str(result),
        "sys_path": [p for p in sys.path if p],
    }
    path = ctx.scratch / f"request-{mode}-{control}-{iterations}-{time.monotonic_ns()}.json"
    path.write_text(json.dumps(request), encoding="utf-8")
    return path


_PYSPY_SAMPLES = re.compile(r"Samples:\s*(\d+)")


def _pyspy_batch(
    ctx: _Context, worker: _Worker, pid: int, fmt: str, out: Path, label: str
) -> tuple[int, list[str], str]:
    """Attach py-spy to the prepared worker, run the batch, stop py-spy: (samples, command, output)."""
    argv = [*ctx.command, "record", "--pid", str(pid), "-o", str(out), "-f", fmt, "--rate", str(ctx.rate)]
    if fmt == "flamegraph":
        argv.append("--threads")
    if ctx.native:
        argv.append("--native")
    try:
        spy = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except OSError as exc:
        raise PerfsuiteError(f"py-spy could not start ({ctx.command[0]}): {exc.strerror or exc}") from None
    try:
        assert spy.stdout is not None
        first = spy.stdout.readline()
        if "Sampling" not in first:  # py-spy failed to attach: its message, one line
            rest = spy.communicate(timeout=30)[0] or ""
            raise PerfsuiteError(
                f"py-spy failed (exit {spy.returncode}) attaching to {label}: {_last_line(first + rest)}"
            )
        time.sleep(0.05)  # let the first samples arrive before the batch starts
        worker.send("go")
        worker.expect("done")
        spy.send_signal(signal.SIGINT)  # py-spy writes its output on Ctrl-C
        try:
            rest = spy.communicate(timeout=60)[0] or ""
        except subprocess.TimeoutExpired:
            spy.kill()
            raise PerfsuiteError(f"py-spy did not stop within 60 s while profiling {label}") from None
    finally:
        if spy.poll() is None:
            spy.kill()
            spy.wait(timeout=30)
    output = first + rest
    if spy.returncode != 0:
        raise PerfsuiteError(f"py-spy failed (exit {spy.returncode}) profiling {label}: {_last_line(output)}")
    if not out.is_file() or out.stat().st_size == 0:
        raise PerfsuiteError(f"py-spy wrote no {fmt} for {label}: {_last_line(output)}")
    found = _PYSPY_SAMPLES.search(output)
    samples = int(found.group(1)) if found else 0
    if fmt == "speedscope":
        samples = speedscope_samples(load_json(out, f"py-spy speedscope of {label}"))
    return samples, argv, output


def _profile_pyspy(ctx: _Context, mode: str) -> ModeProfile:
    label = f"{ctx.recipe.name}/{mode}"
    base = Path(f"{ctx.prefix}.{mode}")
    outputs = {"flamegraph": Path(f"{base}.py-spy.svg"), "speedscope": Path(f"{base}.speedscope.json")}
    result_path = ctx.scratch / f"result-{mode}-py-spy.json"
    stderr_path = ctx.scratch / f"stderr-{mode}-py-spy.txt"
    request = _request(ctx, mode, ctx.repeat, "handshake", result_path)
    repeat, attempts, samples = ctx.repeat, 0, {}
    commands: list[tuple[str, ...]] = []
    with open(stderr_path, "w", encoding="utf-8") as stderr:
        worker = _Worker([sys.executable, str(DRIVER), str(request)], stderr)
        try:
            for fmt, out in outputs.items():
                while True:
                    attempts += 1
                    ctx.on_event(f"{label}: py-spy {fmt}, {repeat} iterations")
                    worker.send(f"batch {repeat}")
                    pid = int(worker.expect("ready")["pid"])
                    count, argv, _ = _pyspy_batch(ctx, worker, pid, fmt, out, label)
                    worker.send("close")
                    worker.expect("closed")
                    enough = count >= MIN_SAMPLES["py-spy"]
                    if enough or fmt != "flamegraph" or attempts >= MAX_ATTEMPTS or repeat >= ctx.max_repeat:
                        break
                    repeat = min(repeat * GROWTH, ctx.max_repeat)  # too short: more iterations in the process
                if count == 0:
                    raise PerfsuiteError(
                        f"py-spy: the {fmt} of {label} has no samples after {attempts} runs (last: {repeat} "
                        f"iterations); the operation is too short to sample: try --repeat {repeat * GROWTH}"
                    )
                samples[fmt] = count
                commands.append(tuple(argv))
            worker.send("exit")
            worker.proc.wait(timeout=ctx.timeout_s)
        except _WorkerEnded:
            raise _driver_error(result_path, stderr_path, label) from None
        finally:
            worker.stop()
    records = _driver_records(result_path, stderr_path, label)
    if not svg_ok(outputs["flamegraph"]):
        raise PerfsuiteError(f"py-spy wrote an invalid flame graph for {label}: {outputs['flamegraph']}")
    data = load_json(outputs["speedscope"], f"py-spy speedscope of {label}")
    root = str(Path(perfsuite.__file__).resolve().parent.parent)
    summary = speedscope_summary(
        data,
        title=f"py-spy profile of {label}: {len(records)} iterations over {attempts} batches, rate {ctx.rate} Hz"
        f"{', native frames' if ctx.native else ''} (idle time not sampled)",
        root=root,
    )
    summary_path = Path(f"{base}.py-spy.txt")
    summary_path.write_text(summary, encoding="utf-8")
    artifacts = {**outputs, "summary": summary_path}
    return ModeProfile(
        mode, artifacts, tuple(records), samples["speedscope"], repeat, attempts, summary, tuple(commands)
    )


def _profile_scalene(ctx: _Context, mode: str) -> ModeProfile:
    label = f"{ctx.recipe.name}/{mode}"
    base = Path(f"{ctx.prefix}.{mode}")
    out = Path(f"{base}.scalene.json")
    program, profile_all = _program_path(ctx.recipe.mode(mode).operation)
    repeat, attempts = ctx.repeat, 0
    while True:
        attempts += 1
        ctx.on_event(f"{label}: scalene, {repeat} iterations")
        result_path = ctx.scratch / f"result-{mode}-scalene-{attempts}.json"
        stderr_path = ctx.scratch / f"stderr-{mode}-scalene-{attempts}.txt"
        request = _request(ctx, mode, repeat, "scalene", result_path)
        with contextlib.suppress(FileNotFoundError):
            out.unlink()
        argv = [
            *ctx.command,
            "run",
            "-o",
            str(out),
            "--off",
            "--memory",
            "--cpu-sampling-rate",
            str(SCALENE_INTERVAL_S),
            "--allocation-sampling-window",
            str(SCALENE_ALLOC_WINDOW),
        ]
        argv += ["--profile-all"] if profile_all else ["--program-path", program]
        argv += [str(DRIVER), "---", str(request)]
        with open(stderr_path, "w", encoding="utf-8") as stderr:
            try:
                proc = subprocess.run(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=stderr,
                    stderr=subprocess.STDOUT,
                    text=True,
                    timeout=ctx.timeout_s,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                raise PerfsuiteError(f"scalene did not finish within {ctx.timeout_s:g} s profiling {label}") from None
            except OSError as exc:
                raise PerfsuiteError(f"scalene could not start ({ctx.command[0]}): {exc.strerror or exc}") from None
        if not result_path.is_file():
            tail = _last_line(stderr_path.read_text(encoding="utf-8", errors="replace"))
            raise PerfsuiteError(f"scalene failed (exit {proc.returncode}) profiling {label}: {tail}")
        records = _driver_records(result_path, stderr_path, label)
        if proc.returncode != 0:
            tail = _last_line(stderr_path.read_text(encoding="utf-8", errors="replace"))
            raise PerfsuiteError(f"scalene failed (exit {proc.returncode}) profiling {label}: {tail}")
        if not out.is_file():
            raise PerfsuiteError(f"scalene wrote no profile for {label} (expected {out})")
        data = load_json(out, f"scalene profile of {label}")
        cpu, _alloc = scalene_samples(data)
        if cpu >= MIN_SAMPLES["scalene"] or attempts >= MAX_ATTEMPTS or repeat >= ctx.max_repeat:
            break
        repeat = min(repeat * GROWTH, ctx.max_repeat)  # scalene's "did not run for long enough": more iterations
    if cpu == 0:
        raise PerfsuiteError(
            f"scalene: the profile of {label} has no samples after {attempts} runs (last: {repeat} iterations); "
            f"the operation is too short to profile: try --repeat {repeat * GROWTH} or --profiler py-spy"
        )
    root = str(Path(perfsuite.__file__).resolve().parent.parent)
    summary = scalene_summary(
        data,
        title=f"scalene profile of {label}: {len(records)} iterations (run {attempts} of {MAX_ATTEMPTS} max), "
        f"CPU sampled every {SCALENE_INTERVAL_S * 1e3:g} ms, allocations every {SCALENE_ALLOC_WINDOW // 1024} KB",
        root=root,
        skip=(os.path.join("profile", "_driver.py"),),
    )
    summary_path = Path(f"{base}.scalene.txt")
    summary_path.write_text(summary, encoding="utf-8")
    return ModeProfile(
        mode, {"scalene": out, "summary": summary_path}, tuple(records), cpu, repeat, attempts, summary, (tuple(argv),)
    )
