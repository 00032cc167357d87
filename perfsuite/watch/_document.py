"""M11: the results document of a live watch, built from the agents' messages (schema of :mod:`perfsuite.harness`).

One recipe-shaped document, so ``report``, ``evidence``, ``compare``, ``history``, ``bars``, the store and the
dashboard read it like any run: ``recipe.name`` is ``watch-<program>`` (or ``--name``), one mode per instrumented
loop (``live`` for the main thread's, ``live@<thread>`` for others), every sample one window of time (its
``submission_ms`` and ``ack_ms`` are null: nothing is submitted), the idle control process's windows in
``control``, the traced windows' allocation (M3) in the ``live`` mode's ``allocation``, and a ``live`` section
for what only a watch has: the command, the window clock, how it stopped, each loop and its startup stretch.
"""

from __future__ import annotations

import os
import shlex
import stat
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfsuite import __version__
from perfsuite._paths import portable_path
from perfsuite.harness import (
    SCHEMA_VERSION,
    SUMMARY_METHOD,
    ModeSpec,
    Recipe,
    collect_environment,
    describe_fixture,
    memray_totals,
    now_iso,
    summarize,
    summarize_samples,
    verdict,
)
from perfsuite.watch._command import ProgramCommand
from perfsuite.watch._loop import MAIN_MODE
from perfsuite.watch._protocol import window_record

__all__ = ["CONTROL_OPERATION", "LIVE_OPERATION", "LiveDocument", "idle_control", "live_window"]

#: what a live window's mode records as its operation (the watch, not a callable the harness runs)
LIVE_OPERATION = "perfsuite.watch:live_window"
#: the idle control process's operation
CONTROL_OPERATION = "perfsuite.watch:idle_control"


def _startup_summary(record: Mapping[str, Any]) -> dict[str, Any]:
    stalls = record.get("stalls") or {}
    return {"window_ms": record.get("window_ms"), "max_gap_ms": record.get("max_gap_ms"),
            "stalls": stalls, "gc": record.get("gc")}


class LiveDocument:
    """The document of one watch, updated message by message; :attr:`doc` is what gets written."""

    def __init__(self, *, name: str, command: ProgramCommand, window_s: float, delay_s: float, period_ms: float,
                 target_ms: float, duration_s: float | None, control: bool, alloc_every: int, cwd: Path,
                 capture_dir: Path | None = None) -> None:
        # results name no machine's absolute paths: the interpreter, the program, the directories
        target = ([portable_path(command.path) or command.path] if command.path is not None
                  else ["-m", str(command.module)])
        argv = [portable_path(command.python) or command.python, *command.options, *target, *command.args]
        recipe = Recipe(
            name=name, modes=(ModeSpec(MAIN_MODE, LIVE_OPERATION),),
            description=f"live watch of `{shlex.join(argv)}` in windows of {window_s:g} s",
            fixture=None, samples=1, warmup=0, heartbeat_ms=period_ms, gc="natural", isolation="process",
            target_ms=target_ms, allocation=alloc_every > 0, window_tail_ms=0.0, ack_timeout_s=window_s,
            settle_ms=0.0, control_windows=1, order="fixed", catalogue=False,
        ).to_dict()
        self.target_ms = target_ms
        self.period_ms = period_ms
        # the watch's own directory of memray captures: the only place an allocation message's capture is
        # read from and deleted (None: no allocation windows are accepted)
        self.capture_dir = capture_dir
        self.last: dict[str, Any] = {}  # the latest sample (progress lines)
        self.doc: dict[str, Any] = {
            "schema": SCHEMA_VERSION,
            "perfsuite": __version__,
            "status": "running",
            "created_at": now_iso(),
            "created_epoch": time.time(),
            "updated_at": now_iso(),
            "recipe": recipe,
            "environment": collect_environment(cwd),
            "fixture": describe_fixture(None, {"name": None}),
            "summary_method": SUMMARY_METHOD,
            "order": [],
            "progress": {"done": 0, "total": 0},
            "modes": {MAIN_MODE: self._mode_body()},
            "control": {"operation": CONTROL_OPERATION, "samples": [], "summary": {}},
            "live": {
                "command": argv,
                "program": argv[1 + len(command.options)] if command.path is not None else f"-m {command.module}",
                "cwd": portable_path(cwd),
                "window_s": window_s,
                "delay_s": delay_s,
                "duration_s": duration_s,
                "idle_control": "a separate process alongside, same agent and windows" if control else None,
                "allocation_every": alloc_every or None,
                "loops": [],
                "control": None,
                "traced_windows": 0,
                "stop": None,
                "outcome": None,
                "exit_status": None,
                "notes": [],
            },
        }

    def _mode_body(self) -> dict[str, Any]:
        return {"operation": LIVE_OPERATION, "params": {}, "warmups": 0, "samples": [], "allocation": None,
                "instructions": None, "summary": {}, "verdict": verdict([], self.target_ms)}

    @property
    def live(self) -> dict[str, Any]:
        return self.doc["live"]

    # -- messages --------------------------------------------------------------------------------------

    def program(self, message: Mapping[str, Any]) -> bool:
        """Apply one message of the program's agent; True when a sample was added (time to write)."""
        kind = message.get("type")
        live = self.live
        if kind == "hello":
            live.update(pid=message.get("pid"), python=message.get("python"),
                        executable=portable_path(message.get("executable")))
        elif kind == "loop":
            mode = str(message["mode"])
            modes = self.doc["modes"]
            if mode not in modes:
                modes[mode] = self._mode_body()
                self.doc["recipe"]["modes"][mode] = {"operation": LIVE_OPERATION}
            modes[mode]["params"] = {"thread": message.get("thread")}
            live["loops"].append({"mode": mode, "thread": message.get("thread"),
                                  "main_thread": message.get("main_thread"), "loop": message.get("loop"),
                                  "startup": None})
        elif kind == "startup":
            mode = str(message["mode"])
            for loop in reversed(live["loops"]):
                if loop["mode"] == mode and loop["startup"] is None:
                    loop["startup"] = _startup_summary(window_record(message["raw"], mode, self.period_ms))
                    break
        elif kind == "window":
            if message.get("traced"):
                live["traced_windows"] += 1  # M3: a traced window is never a latency sample
                return False
            mode = str(message["mode"])
            self._sample(mode, window_record(message["raw"], mode, self.period_ms))
            return True
        elif kind == "allocation":
            return self._allocation(message)
        elif kind == "note":
            live["notes"].append(str(message.get("text")))
        elif kind == "bye":
            # stretches too short to be a window (under two heartbeat periods: e.g. asyncio.run's shutdown runs)
            live.update(outcome=message.get("outcome"), exit_status=message.get("exit_status"),
                        short_runs_ms=message.get("short_runs_ms") or {})
            if message.get("policy_replaced"):
                live["notes"].append(f"the program replaced the event loop policy ({message.get('policy')}): loops "
                                     "it created after that were not instrumented")
        return False

    def control(self, message: Mapping[str, Any]) -> bool:
        """Apply one message of the idle control's agent."""
        kind = message.get("type")
        if kind == "hello":
            self.live["control"] = {"pid": message.get("pid"), "python": message.get("python")}
        elif kind == "window":
            record = window_record(message["raw"], "control", self.period_ms)
            record["kind"] = "control"
            self.last = record
            samples = self.doc["control"]["samples"]
            samples.append(record)
            self.doc["control"]["summary"] = summarize_samples(samples)
            self._order("control", None, int(record["index"]))
            return True
        elif kind == "note":
            self.live["notes"].append("idle control: " + str(message.get("text")))
        return False

    def _order(self, kind: str, mode: str | None, index: int) -> None:
        self.doc["order"].append({"kind": kind, "mode": mode, "index": index})
        n = len(self.doc["order"])
        self.doc["progress"] = {"done": n, "total": n}

    def _sample(self, mode: str, record: Mapping[str, Any]) -> None:
        body = self.doc["modes"].setdefault(mode, self._mode_body())
        body["samples"].append(dict(record))
        self.last = dict(record)
        body["summary"] = summarize_samples(body["samples"])
        body["verdict"] = verdict(body["samples"], self.target_ms)
        self.doc["recipe"]["samples"] = max(1, max(len(b["samples"]) for b in self.doc["modes"].values()))
        self._order("sample", mode, int(record["index"]))

    def _allocation(self, message: Mapping[str, Any]) -> bool:
        capture = self._capture_of(message)
        if capture is None:
            return False
        try:
            total, count, peak = memray_totals(capture)
        except Exception as exc:  # a capture cut short by a killed program
            self.live["notes"].append(f"allocation window {message.get('index')} not read: {exc}")
            return False
        finally:
            try:
                os.unlink(capture)  # the watch's own directory only (_capture_of)
            except OSError:
                pass
        body = self.doc["modes"][MAIN_MODE]
        section = body["allocation"] or {"tracker": "memray", "samples": []}
        section["samples"].append({"index": int(message["index"]), "total_bytes": total, "allocations": count,
                                   "peak_bytes": peak, "ack_ms_traced": round(float(message.get("window_ms", 0)), 6),
                                   "tracker": "memray", "phases_ms": {},
                                   "metrics": {"window_ms": round(float(message.get("window_ms", 0)), 6)}})
        for key in ("total_bytes", "peak_bytes", "allocations"):
            section[key] = summarize([s[key] for s in section["samples"]])
        body["allocation"] = section
        self._order("allocation", MAIN_MODE, int(message["index"]))
        return True

    def _capture_of(self, message: Mapping[str, Any]) -> Path | None:
        """Where window ``index``'s capture is, named by the watch itself: ``capture_dir/window-N.memray``.
        The program shares its interpreter (and so the agent's channel and anything the agent knows) with the
        agent, so no message can be authenticated against it; a message is data, and its ``capture`` must be
        exactly that path, a regular file (no symlink, no FIFO), or it is ignored with a note: a forged message
        never makes the watch read or delete a file elsewhere (untrusted input stays data)."""
        index = message.get("index")
        named = message.get("capture")
        notes = self.live["notes"]
        if self.capture_dir is None or not isinstance(index, int) or isinstance(index, bool) or index < 0:
            notes.append(f"allocation message for window {index!r} ignored: no such traced window")
            return None
        expected = self.capture_dir / f"window-{index}.memray"
        if not isinstance(named, str) or os.path.abspath(named) != os.path.abspath(expected):
            notes.append(f"allocation message for window {index} ignored: its capture {named!r} is not the "
                         f"watch's own ({expected}); nothing outside it is read or deleted")
            return None
        try:
            regular = stat.S_ISREG(os.lstat(expected).st_mode)
        except OSError:
            regular = False
        if not regular:
            notes.append(f"allocation message for window {index} ignored: {expected} is not a regular file")
            return None
        return expected

    # -- the end -----------------------------------------------------------------------------------------

    def finish(self, status: str, stop: str, error: str | None = None) -> None:
        modes = self.doc["modes"]
        if not modes[MAIN_MODE]["samples"] and len(modes) > 1 and not any(
                loop["mode"] == MAIN_MODE for loop in self.live["loops"]):
            del modes[MAIN_MODE]  # the program ran its loops in other threads only
            self.doc["recipe"]["modes"].pop(MAIN_MODE, None)
        self.doc["status"] = status
        self.live["stop"] = stop
        if error:
            self.doc["error"] = error
        else:
            self.doc.pop("error", None)
        self.doc["finished_at"] = now_iso()
        self.doc["updated_at"] = now_iso()

    def touch(self) -> None:
        self.doc["updated_at"] = now_iso()

    @property
    def samples(self) -> int:
        return sum(len(body["samples"]) for body in self.doc["modes"].values())


def live_window(ctx: object) -> None:
    """What :data:`LIVE_OPERATION` names: a window of a live program is measured by ``perfsuite watch``; no
    recipe can run it (a watch document cannot be resumed or re-run with ``perfsuite run``)."""
    from perfsuite.errors import PerfsuiteError

    raise PerfsuiteError("a live window is measured by `perfsuite watch -- python PROGRAM`, not run as an operation")


def idle_control(ctx: object) -> None:
    """What :data:`CONTROL_OPERATION` names: the watch's idle control is a process, not an operation."""
    live_window(ctx)
