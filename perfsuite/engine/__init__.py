"""The engine: a durable session store for agent conversations (SPEC section 2).

It imports nothing from the rest of perfsuite and has no idea it is measured.
"""

from perfsuite.engine._buffer import ConversationBuffer
from perfsuite.engine._clock import Clock, SystemClock, VirtualClock
from perfsuite.engine._diaglog import DiagnosticLog, FullRewriteLog, read_log
from perfsuite.engine._events import (
    Event,
    GateAdmitted,
    GateDrained,
    Listener,
    Observers,
    PhaseFinished,
    PhaseStarted,
    PublicationAcknowledged,
    PublicationFailed,
    PublicationSubmitted,
    SchedulerDeferred,
    SchedulerFired,
    SessionInput,
    listen,
)
from perfsuite.engine._faults import Fault, FaultyFileSystem, SimulatedCrash
from perfsuite.engine._filesession import FileSession
from perfsuite.engine._fs import (
    DelegatingFileSystem,
    DirectoryFsyncUnsupported,
    FileSystem,
    FsyncFailed,
    OsFileSystem,
)
from perfsuite.engine._generations import (
    FORMAT,
    FORMAT_VERSION,
    FormatTooNew,
    HeadRef,
    Manifest,
    NotAFile,
    OwnerConflict,
    SessionError,
    StaleHead,
    owner_alive,
    pid_alive,
)
from perfsuite.engine._job import Admission, DrainTimeout
from perfsuite.engine._latency import (
    LATENCY_OPS,
    DelayModel,
    Distribution,
    FixedDelay,
    LatencyFileSystem,
    LatencyStats,
    LogNormalDelay,
    QuantileDelay,
    UniformDelay,
)
from perfsuite.engine._logstore import GenerationRef, StorageStats
from perfsuite.engine._memfs import MemoryFileSystem
from perfsuite.engine._pipeline import PHASES, PublicationReport, SaveFailed, Step
from perfsuite.engine._profiles import repair_session
from perfsuite.engine._recording import FsOp, RecordingFileSystem
from perfsuite.engine._repair import RepairReport
from perfsuite.engine._runner import JobRunner, LoopRunner, VirtualRunner
from perfsuite.engine._schedulers import Observations
from perfsuite.engine._session import SaveAbandoned, Session, SessionSettings
from perfsuite.engine._session_values import Activity, FaultHooks, SchedulerStats, with_fault_hooks
from perfsuite.engine._sidecar import ACTIVITY_FLAVOURS, ROOT, TERMINAL, MailRecord
from perfsuite.engine._transcript import (
    TEMP_MARK,
    Message,
    Quarantined,
    TranscriptError,
    TranscriptLog,
    TurnOutcome,
    commit_turn,
    scan_lines,
)

__all__ = [
    "ACTIVITY_FLAVOURS",
    "FORMAT",
    "FORMAT_VERSION",
    "LATENCY_OPS",
    "PHASES",
    "ROOT",
    "TEMP_MARK",
    "TERMINAL",
    "Activity",
    "Admission",
    "Clock",
    "ConversationBuffer",
    "DelayModel",
    "DelegatingFileSystem",
    "DiagnosticLog",
    "DirectoryFsyncUnsupported",
    "Distribution",
    "DrainTimeout",
    "Event",
    "Fault",
    "FaultHooks",
    "FaultyFileSystem",
    "FileSession",
    "FileSystem",
    "FixedDelay",
    "FormatTooNew",
    "FsOp",
    "FsyncFailed",
    "FullRewriteLog",
    "GateAdmitted",
    "GateDrained",
    "GenerationRef",
    "HeadRef",
    "JobRunner",
    "LatencyFileSystem",
    "LatencyStats",
    "Listener",
    "LogNormalDelay",
    "LoopRunner",
    "MailRecord",
    "Manifest",
    "MemoryFileSystem",
    "Message",
    "NotAFile",
    "Observations",
    "Observers",
    "OsFileSystem",
    "OwnerConflict",
    "PhaseFinished",
    "PhaseStarted",
    "PublicationAcknowledged",
    "PublicationFailed",
    "PublicationReport",
    "PublicationSubmitted",
    "QuantileDelay",
    "Quarantined",
    "RecordingFileSystem",
    "RepairReport",
    "SaveAbandoned",
    "SaveFailed",
    "SchedulerDeferred",
    "SchedulerFired",
    "SchedulerStats",
    "Session",
    "SessionError",
    "SessionInput",
    "SessionSettings",
    "SimulatedCrash",
    "StaleHead",
    "Step",
    "StorageStats",
    "SystemClock",
    "TranscriptError",
    "TranscriptLog",
    "TurnOutcome",
    "UniformDelay",
    "VirtualClock",
    "VirtualRunner",
    "commit_turn",
    "listen",
    "owner_alive",
    "pid_alive",
    "read_log",
    "repair_session",
    "scan_lines",
    "with_fault_hooks",
]
