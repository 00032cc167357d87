"""Crash consistency: enumerate crash states from the recording I/O layer and check recovery (SPEC section 7).

``run_campaign(CrashConfig(...))`` records each workload on the recorder, replays its trace into the
page-cache model (``atomic-rename`` or ``split-rename``), enumerates crash states, recovers each in worker
processes with the engine's real open path (crashing recovery too), and checks the invariants.
"""

from perfsuite.crash._bugs import SEEDED_BUGS, SeededBug
from perfsuite.crash._check import (
    CampaignReport,
    CrashConfig,
    RunResult,
    Violation,
    make_executor,
    materialize,
    run_campaign,
    snapshot,
)
from perfsuite.crash._invariants import CheckContext, Invariant, Outcome, transcript_invariants
from perfsuite.crash._kill import PROFILES, KillConfig, KillReport, KillViolation, run_kill_campaign
from perfsuite.crash._model import MODELS, CrashCheckError, FsState, MicroOp, Timeline
from perfsuite.crash._replay import build_timeline
from perfsuite.crash._sessions import SessionDriver  # (importing it registers the session workloads)
from perfsuite.crash._states import CrashSpec, CrashState, Enumeration, enumerate_states
from perfsuite.crash._trace import Ack, Note, Oracle, Trace, TraceRecorder, WorkloadEnv
from perfsuite.crash._workloads import WORKLOADS, Workload, record_workload, register_workload

__all__ = [
    "MODELS",
    "PROFILES",
    "SEEDED_BUGS",
    "WORKLOADS",
    "Ack",
    "CampaignReport",
    "CheckContext",
    "CrashCheckError",
    "CrashConfig",
    "CrashSpec",
    "CrashState",
    "Enumeration",
    "FsState",
    "Invariant",
    "KillConfig",
    "KillReport",
    "KillViolation",
    "MicroOp",
    "Note",
    "Oracle",
    "Outcome",
    "RunResult",
    "SeededBug",
    "SessionDriver",
    "Timeline",
    "Trace",
    "TraceRecorder",
    "Violation",
    "Workload",
    "WorkloadEnv",
    "build_timeline",
    "enumerate_states",
    "make_executor",
    "materialize",
    "record_workload",
    "register_workload",
    "run_campaign",
    "run_kill_campaign",
    "snapshot",
    "transcript_invariants",
]
