"""The names and defaults the parsers offer (choices, ``default: N`` in help) without importing the rooms.

Building the parser runs on every ``perfsuite`` start-up, ``--help`` and each subprocess the tests start; the
rooms whose values these are (:mod:`perfsuite.crash`, :mod:`perfsuite.ab`, :mod:`perfsuite.profile`) import
the engine, the harness, the cluster and the report on import, so the parser reads copies from here and a
command's handler imports its room only when it runs. This module imports nothing. Each copy names the
value it mirrors; tests/cli/test_startup.py checks that every copy equals it, in order (the help and
docs/commands.md list choices in this order), so a workload, a seeded bug or a default changed in its room
fails there, naming this file, instead of drifting from what the room accepts.
"""

from __future__ import annotations

__all__ = [
    "AB_LOOKS",
    "AB_SAMPLES",
    "CRASH_MODELS",
    "CRASH_WORKLOADS",
    "ENV_MODES",
    "INSTALLERS",
    "PROFILERS",
    "PROFILE_REPEAT",
    "SEEDED_BUGS",
]

#: :data:`perfsuite.ab.AB_SAMPLES`: rounds per look of ``ab`` and ``bisect``
AB_SAMPLES = 16
#: :data:`perfsuite.ab.AB_LOOKS`: at most this many looks while a headline stays inconclusive
AB_LOOKS = 4
#: :data:`perfsuite.ab.ENV_MODES`: ``--env``
ENV_MODES: tuple[str, ...] = ("auto", "revision", "current")
#: :data:`perfsuite.ab.INSTALLERS`: ``--installer``
INSTALLERS: tuple[str, ...] = ("auto", "uv", "pip")

#: :data:`perfsuite.profile.PROFILERS`: ``profile --profiler``
PROFILERS: tuple[str, ...] = ("py-spy", "scalene", "callgrind")
#: :data:`perfsuite.profile.DEFAULT_REPEAT`: operations per profiled batch without ``--repeat``
PROFILE_REPEAT = 10

#: :data:`perfsuite.crash.MODELS`: ``crashcheck --model``
CRASH_MODELS: tuple[str, ...] = ("atomic-rename", "split-rename")
#: the keys of :data:`perfsuite.crash.WORKLOADS`, in registration order: ``crashcheck --workload``
CRASH_WORKLOADS: tuple[str, ...] = (
    "transcript", "transcript-fsync-eio", "transcript-dirfsync-eio", "session", "session-file", "session-fault",
    "session-file-fault", "session-async", "session-group", "session-create", "session-group-fault",
    "langgraph-saver", "session-ledger-retire", "session-migrate", "session-retention", "session-sidecar-rounds",
    "session-second-owner", "session-file-second-writer", "session-file-lost-lock", "session-einval",
    "session-file-einval", "session-adopt-eio", "session-file-abandon", "session-file-damaged",
    "session-lease-fence", "session-noflock-takeover", "session-torn-tail",
)
#: the keys of :data:`perfsuite.crash.SEEDED_BUGS`, in order: ``crashcheck --seeded-bug``
SEEDED_BUGS: tuple[str, ...] = (
    "skip-dir-fsync", "head-dir-fsync-skipped", "sidecar-before-transcript", "ack-before-fdatasync",
    "head-before-base-sync", "append-after-failed-fdatasync", "mid-log-damage-as-torn", "torn-record-accepted",
    "log-named-before-dir-fsync", "stale-salt-log-accepted", "fsync-retry-ack", "no-temp-fsync", "lease-pid-zero",
    "head-lost-fallback", "mid-transcript-cut", "lease-unchecked", "pid-lock-stolen-back",
    "dir-fsync-rejected-skips-all", "ledger-dropped", "head-lost-previous", "recovery-file-unsynced",
    "partial-line-accepted", "pending-checkpoint-acked", "adopt-failure-wedges", "abandon-keeps-files",
    "retained-refs-forgotten", "group-failure-acked", "torn-tail-rezero-unsynced", "dirty-key-cleared-early",
    "ledger-forgotten-on-retire", "coalesced-into-running", "lease-checked-after-head", "takeover-in-place",
    "format1-aside-first", "saver-writes-before-fdatasync", "fused-writer-unsynced",
)
