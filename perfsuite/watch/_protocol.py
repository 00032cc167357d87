"""M11: what the agent in the watched process tells the parent, and how the parent turns a raw window into a sample.

The agent does as little as it can in the program's loop: per window it copies the heartbeat's ticks overlapping
the window, reduces the loop callbacks to their count, busy time and longest few (names need the callback objects,
which only the program's process has) and copies the collections; the HDR histograms, percentiles and the GC
window (which needs the max gap) are computed here, in the parent, where nothing is measured.

Messages (JSON lines): ``hello`` {pid, python, executable, argv, idle}; ``loop`` {mode, thread, thread_id,
main_thread, loop}; ``startup`` and ``window`` {mode, index, traced, raw}; ``allocation`` {index, capture,
window_ms}; ``note`` {text}; ``bye`` {outcome, exit_status, loops, policy, policy_replaced}.

The program runs in the agent's own interpreter, so it can write on this channel too, and no secret the agent
holds is hidden from it: messages cannot be authenticated, and the parent treats them as data. It names every
file it touches itself: an allocation capture is read and deleted only as ``window-N.memray`` in the watch's
own capture directory, a regular file; any other ``capture`` is ignored with a note.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from perfsuite.harness import GcEvent, GcRecorder, Heartbeat, SampleRecord, StallEntry, StallWindow

__all__ = ["ENV_CONFIG", "ENV_FD", "window_record"]

#: the descriptor the agent writes its messages to
ENV_FD = "PERFSUITE_WATCH_FD"
#: the agent's settings (JSON): origin_ns, window_s, delay_s, period_ms, stop_file, alloc_every, alloc_dir
ENV_CONFIG = "PERFSUITE_WATCH"


def window_record(raw: Mapping[str, Any], mode: str, period_ms: float) -> dict[str, Any]:
    """A raw window from the agent as the results document's sample (M5 without submission or acknowledgement):
    M1 from its ticks (the agent closed an open last gap with its query time, as the heartbeat does), M9 from
    its callbacks, M2 from its collections, plus how much of each longest callback was a collection."""
    start, end = int(raw["start_ns"]), int(raw["end_ns"])
    gap = Heartbeat.from_ticks([int(t) for t in raw["ticks"]], period_ms).window(start, end)
    top = tuple(StallEntry(str(name), int(t0), int(d)) for name, t0, d in raw["top"])
    stalls = StallWindow(start, end, int(raw["callbacks"]), int(raw["busy_ns"]), top[0].duration_ns if top else 0, top)
    events = [GcEvent(int(g), int(t0), int(d), int(c), int(u)) for g, t0, d, c, u in raw["gc"]]
    gcw = GcRecorder.from_events(events).window(start, end, (gap.max_gap_start_ns, gap.max_gap_end_ns))
    record = SampleRecord(
        index=int(raw["index"]), mode=mode, kind="sample", started_at=float(raw["started_at"]), setup_ms=0.0,
        submission_ms=None, ack_ms=None, window_ms=(end - start) / 1e6, heartbeat=gap, gc=gcw,
        metrics={"instrument_ms": round(int(raw["instrument_ns"]) / 1e6, 3)},
        labels={"thread": str(raw["thread"]), "window": "whole" if raw["whole"] else "partial"},
        stalls=stalls,
    ).to_dict()
    for entry, item in zip(top, record["stalls"]["top"]):
        busy_end = entry.start_ns + entry.duration_ns
        gc_ms = sum(max(0, min(busy_end, e.end_ns) - max(entry.start_ns, e.start_ns)) for e in events) / 1e6
        if gc_ms > 0:  # M2 beside M9: this callback's time was (partly) a garbage collection
            item["gc_ms"] = round(gc_ms, 3)
    return record
