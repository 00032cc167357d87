"""Crash consistency: enumerate crash states from the recording I/O layer and check recovery (SPEC section 7).

``run_campaign(CrashConfig(...))`` records each workload on the recorder, replays its trace into the
page-cache model (``atomic-rename`` or ``split-rename``), enumerates crash states, recovers each in worker
processes with the engine's real open path (crashing recovery too), and checks the invariants.
``run_corrupt_campaign(CorruptConfig(...))`` damages every file and directory of each finished session
workload instead, and checks that open, recovery and retirement lose nothing silently (a damaged tree
opens whole or is refused in one line).
"""

from perfsuite.crash._document import campaign_document
from perfsuite.crash._execution import Execution, Progress
from perfsuite.crash.bugs._seeded import SEEDED_BUGS, SeededBug
from perfsuite.crash.corrupt._campaign import (
    CorruptConfig,
    CorruptReport,
    CorruptResult,
    CorruptViolation,
    run_corrupt_campaign,
    session_workloads,
)
from perfsuite.crash.corrupt._damage import KINDS as DAMAGE_KINDS
from perfsuite.crash.invariants._checks import CheckContext, Invariant, Outcome, transcript_invariants
from perfsuite.crash.kill._campaign import PROFILES, KillConfig, KillReport, KillViolation, run_kill_campaign
from perfsuite.crash.model._model import MODELS, CrashCheckError, FsState, MicroOp, Timeline, materialize, snapshot
from perfsuite.crash.model._replay import build_timeline
from perfsuite.crash.model._states import CrashSpec, CrashState, Enumeration, enumerate_states
from perfsuite.crash.model._trace import Ack, Note, OpRecorder, OpTrace, Oracle, WorkloadEnv
from perfsuite.crash.states._campaign import (
    CampaignReport,
    CrashConfig,
    CrashResult,
    Violation,
    make_executor,
    run_campaign,
)
from perfsuite.crash.workloads import (
    _group_fault,  # noqa: F401  (importing it registers session-group-fault)
    _langgraph,  # noqa: F401  (importing it registers langgraph-saver)
    _ledger_retire,  # noqa: F401  (importing it registers session-ledger-retire)
    _migration,  # noqa: F401  (importing it registers session-migrate)
    _retention,  # noqa: F401  (importing it registers session-retention)
    _sessions,  # noqa: F401  (importing it registers the session workloads)
    _sidecar_rounds,  # noqa: F401  (importing it registers session-sidecar-rounds)
    _takeover,  # noqa: F401  (importing it registers session-lease-fence, session-noflock-takeover)
    _torn_tail,  # noqa: F401  (importing it registers session-torn-tail)
)
from perfsuite.crash.workloads._bug_classes import NoFlock  # (importing it registers the blind classes' workloads)
from perfsuite.crash.workloads._driver import SessionDriver
from perfsuite.crash.workloads._registry import WORKLOADS, Workload, record_workload, register_workload

__all__ = [
    "DAMAGE_KINDS",
    "MODELS",
    "PROFILES",
    "SEEDED_BUGS",
    "WORKLOADS",
    "Ack",
    "CampaignReport",
    "CheckContext",
    "CorruptConfig",
    "CorruptReport",
    "CorruptResult",
    "CorruptViolation",
    "CrashCheckError",
    "CrashConfig",
    "CrashResult",
    "CrashSpec",
    "CrashState",
    "Enumeration",
    "Execution",
    "FsState",
    "Invariant",
    "KillConfig",
    "KillReport",
    "KillViolation",
    "MicroOp",
    "NoFlock",
    "Note",
    "OpRecorder",
    "OpTrace",
    "Oracle",
    "Outcome",
    "Progress",
    "SeededBug",
    "SessionDriver",
    "Timeline",
    "Violation",
    "Workload",
    "WorkloadEnv",
    "build_timeline",
    "campaign_document",
    "enumerate_states",
    "make_executor",
    "materialize",
    "record_workload",
    "register_workload",
    "run_campaign",
    "run_corrupt_campaign",
    "run_kill_campaign",
    "session_workloads",
    "snapshot",
    "transcript_invariants",
]
