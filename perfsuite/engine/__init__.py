"""The engine: a durable session store for agent conversations (SPEC section 2).

It imports nothing from the rest of perfsuite and has no idea it is measured. This facade is the session API
and the real back ends it runs on (``OsFileSystem``, ``SystemClock``, ``LoopRunner``); two public modules hold
the rest: :mod:`perfsuite.engine.events` (what a session reports, and how to listen) and
:mod:`perfsuite.engine.testing` (virtual time, the in-memory disk, the recording, fault and latency layers,
fault hooks: stand-ins production never needs).
"""

from perfsuite.engine._buffer import ConversationBuffer
from perfsuite.engine._clock import Clock, SystemClock
from perfsuite.engine._diaglog import DiagnosticLog, FullRewriteLog, read_log
from perfsuite.engine._filesession import FileSession
from perfsuite.engine._fs import DelegatingFileSystem, DirectoryFsyncUnsupported, FileSystem, FsyncFailed, OsFileSystem
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
from perfsuite.engine._logvalues import GenerationRef, StorageStats
from perfsuite.engine._pipeline import PHASES
from perfsuite.engine._pipeline_values import PublicationReport, SaveFailed
from perfsuite.engine._profiles import repair_session
from perfsuite.engine._repair import RepairReport
from perfsuite.engine._runner import JobRunner, LoopRunner
from perfsuite.engine._schedulers import Observations
from perfsuite.engine._session import SaveAbandoned, Session, SessionSettings
from perfsuite.engine._session_values import Activity, SchedulerStats
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
    "PHASES",
    "ROOT",
    "TEMP_MARK",
    "TERMINAL",
    "Activity",
    "Admission",
    "Clock",
    "ConversationBuffer",
    "DelegatingFileSystem",
    "DiagnosticLog",
    "DirectoryFsyncUnsupported",
    "DrainTimeout",
    "FileSession",
    "FileSystem",
    "FormatTooNew",
    "FsyncFailed",
    "FullRewriteLog",
    "GenerationRef",
    "HeadRef",
    "JobRunner",
    "LoopRunner",
    "MailRecord",
    "Manifest",
    "Message",
    "NotAFile",
    "Observations",
    "OsFileSystem",
    "OwnerConflict",
    "PublicationReport",
    "Quarantined",
    "RepairReport",
    "SaveAbandoned",
    "SaveFailed",
    "SchedulerStats",
    "Session",
    "SessionError",
    "SessionSettings",
    "StaleHead",
    "StorageStats",
    "SystemClock",
    "TranscriptError",
    "TranscriptLog",
    "TurnOutcome",
    "commit_turn",
    "owner_alive",
    "pid_alive",
    "read_log",
    "repair_session",
    "scan_lines",
]
