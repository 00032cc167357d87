"""Live latency (SPEC M11, M12): watch an unmodified asyncio program, and read the latency a person feels typing.

``perfsuite watch [options] -- python PROGRAM ARGS`` (or ``python -m perfsuite.watch PROGRAM ARGS``) runs the
program in its own interpreter with perfsuite's instruments in every event loop it creates (the 5 ms heartbeat
with its coordinated-omission-corrected lag histogram, M1; every loop callback timed and named, M9; every garbage
collection, M2; optionally one window in N traced by memray, M3) beside an idle control process, and writes a
results document whose samples are windows of time, so ``report``, ``evidence``, ``compare``, ``history`` and the
dashboard read it like any run. Typical use::

    from perfsuite.watch import WatchOptions, parse_command, watch_program

    run = watch_program(parse_command(["python", "app.py"]), WatchOptions(duration_s=10))
    print(run.path, run.document["modes"]["live"]["verdict"])

:func:`key_latency` reads the typing recipes' results (M12: key to frame, per mode, slow keys attributed).
Modules: ``_command`` (the program as typed), ``_agent`` and ``_loop`` (inside the watched process), ``_document``
(the results document), ``_run`` (the parent), ``_keys`` (typing latency from results).
"""

from perfsuite.watch._command import AGENT_MODULE, ProgramCommand, parse_command
from perfsuite.watch._document import CONTROL_OPERATION, LIVE_OPERATION, idle_control, live_window
from perfsuite.watch._keys import (
    NO_CALLBACK,
    Blame,
    KeyLatency,
    KeyLatencyRow,
    key_latency,
    key_latency_json,
    key_latency_table,
)
from perfsuite.watch._loop import MAIN_MODE
from perfsuite.watch._run import WatchEvent, WatchOptions, WatchRun, watch_program

__all__ = [
    "AGENT_MODULE",
    "CONTROL_OPERATION",
    "LIVE_OPERATION",
    "MAIN_MODE",
    "NO_CALLBACK",
    "Blame",
    "KeyLatency",
    "KeyLatencyRow",
    "ProgramCommand",
    "WatchEvent",
    "WatchOptions",
    "WatchRun",
    "idle_control",
    "key_latency",
    "key_latency_json",
    "key_latency_table",
    "live_window",
    "parse_command",
    "watch_program",
]
