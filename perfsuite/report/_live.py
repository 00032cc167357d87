"""The evidence paragraph of a live watch (``perfsuite watch``, SPEC M11): windows of a running program, not samples
of a submitted operation. A live document has a ``live`` section; its samples have no submission or
acknowledgement (null), so these sentences say what was watched, how it was cut into windows, what each loop's
windows held and what the idle control process beside it saw. Every figure still goes through the paragraph's
:class:`~perfsuite.report._figures.Figures` (``w.f``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from perfsuite.report._figures import Figures
from perfsuite.report._format import short_commit
from perfsuite.report._load import Result

__all__ = ["is_live", "live_control", "live_limitation", "live_mode_sentence", "live_setup"]


class _Writer(Protocol):
    f: Figures
    result: Result
    doc: Mapping[str, Any]

    def rng(self, mode: str, *keys: str, fmt: str = "ms", source: str = "result") -> str: ...
    def has(self, mode: str, *keys: str, source: str = "result") -> bool: ...


def is_live(document: Mapping[str, Any]) -> bool:
    """Whether ``document`` is a live watch (its samples are windows of time)."""
    return isinstance(document.get("live"), Mapping)


_STOPS = {
    "duration": "perfsuite stopped it after `--duration`",
    "exited": "it exited by itself",
    "interrupted": "the watch was interrupted (SIGINT); every window measured until then is kept",
    "terminated": "the watch was terminated (SIGTERM); every window measured until then is kept",
}


def live_setup(w: _Writer) -> str:
    """What was watched, on what, and how its time was cut into windows."""
    doc, f, result = w.doc, w.f, w.result
    live, env = doc["live"], doc["environment"]
    command = " ".join(str(part) for part in live.get("command") or [])
    # the application's repository (where the watch ran), never perfsuite's: its version is said apart
    commit = (f"the application's commit `{short_commit(result.commit)}`" if result.commit else
              "an unknown commit (not a git repository)") + (" (uncommitted changes)" if result.dirty else "")
    program_git = live.get("program_git") or {}
    if program_git.get("commit") and program_git.get("commit") != result.commit:
        commit += f", the program's commit `{short_commit(program_git['commit'])}`"
    if env.get("perfsuite"):
        commit += f", perfsuite `{env['perfsuite']}`"
    python = f"{env['python'].get('implementation', 'Python')} {live.get('python') or env['python']['version']}"
    cpu = env["cpu"]
    machine = f"`{python}` on `{env['os']['system']}` (`{cpu['model']}`"
    machine += (", " + f.count("result", ("environment", "cpu", "cores"), "core", how="value") + ")"
                if cpu.get("cores") else ")")
    window = f.one("result", ("live", "window_s"))
    modes = [m for m in result.modes if result.samples(m)]
    per_mode = ", ".join(f"{f.count('result', ('modes', m, 'samples'), 'window')} of `{m}`" for m in modes)
    heartbeat = f.one("result", ("recipe", "heartbeat_ms"))
    delay = ""
    if f.values("result", ("live", "delay_s")) and float(live.get("delay_s") or 0) > 0:
        delay = f", leaving each loop's first {f.one('result', ('live', 'delay_s'))} s out"
    stop = _STOPS.get(str(live.get("stop")), f"it stopped ({live.get('stop')})")
    status = live.get("exit_status")
    exit_text = f" with status `{status}`" if status is not None and live.get("stop") == "exited" else ""
    threads = [loop.get("thread") for loop in live.get("loops") or []]
    loops = ("one asyncio loop" if len(threads) == 1 else
             f"{f.count('result', ('live', 'loops'), 'asyncio loop')}, each reported by its thread")
    return (f"Watched `{command}` live at {commit} with {machine}: {loops}, instrumented from the program's first "
            f"line by an event loop policy (the program unchanged), cut into windows of {window} s aligned to one "
            f"clock{delay} (each loop's stretch before its first boundary is startup, not a window): {per_mode}, "
            f"with a {heartbeat} ms heartbeat and every loop callback timed in the program's own loop and every "
            f"garbage collection recorded; {stop}{exit_text}.")


def live_mode_sentence(w: _Writer, mode: str) -> str:
    """One loop's windows: max gap, the longest callback (named), busy time, p99 lag."""
    result = w.result
    if not result.samples(mode):
        return f"Loop `{mode}` has no windows."
    thread = ((result.data["modes"][mode].get("params") or {}).get("thread")) or mode
    text = (f"Thread `{thread}` (`{mode}`): per window, maximum heartbeat gaps of {w.rng(mode, 'max_gap_ms')} ms")
    if w.has(mode, "stalls", "longest_ms"):
        samples = [s for s in result.samples(mode) if s.get("stalls")]
        worst = max(samples, key=lambda s: float(s["stalls"]["longest_ms"]))
        top = (worst["stalls"].get("top") or [{}])[0]
        named = f" (`{top['name']}`)" if top.get("name") else ""
        text += (f", a longest loop callback of {w.rng(mode, 'stalls', 'longest_ms')} ms{named}, the loop busy "
                 f"{w.rng(mode, 'stalls', 'busy_ms')} ms per window")
    if w.has(mode, "lag_us", "p99"):
        text += f", p99 lag (coordinated-omission corrected) {w.rng(mode, 'lag_us', 'p99', fmt='number')} us"
    return text + "."


def live_control(w: _Writer) -> str:
    if not w.result.samples("control"):
        return "No idle control process ran beside the program (`--no-control`)."
    text = ("The idle control, the same agent on an empty asyncio loop in its own process alongside the program, "
            f"windows aligned with the program's, had maximum gaps of {w.rng('control', 'max_gap_ms')} ms")
    if w.has("control", "stalls", "longest_ms"):
        text += f" and longest loop callbacks of {w.rng('control', 'stalls', 'longest_ms')} ms"
    return text + "."


def live_limitation(w: _Writer, size: str) -> str:
    return (f"These are windows of a live program's own loop ({size}), what it did in those seconds rather than a "
            "controlled comparison, measured by an in-process asyncio heartbeat, not graphical input latency")
