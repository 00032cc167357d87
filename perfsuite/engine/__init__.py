"""The engine: a durable session store for agent conversations (SPEC section 2).

It imports nothing from the rest of perfsuite and has no idea it is measured.
"""

from perfsuite.engine._faults import Fault, FaultyFileSystem, SimulatedCrash
from perfsuite.engine._fs import (
    DirectoryFsyncUnsupported,
    FileSystem,
    FsyncFailed,
    OsFileSystem,
)
from perfsuite.engine._recording import FsOp, RecordingFileSystem
from perfsuite.engine._transcript import (
    Message,
    TranscriptError,
    TranscriptLog,
    TurnOutcome,
    commit_turn,
)

__all__ = [
    "DirectoryFsyncUnsupported",
    "Fault",
    "FaultyFileSystem",
    "FileSystem",
    "FsOp",
    "FsyncFailed",
    "Message",
    "OsFileSystem",
    "RecordingFileSystem",
    "SimulatedCrash",
    "TranscriptError",
    "TranscriptLog",
    "TurnOutcome",
    "commit_turn",
]
