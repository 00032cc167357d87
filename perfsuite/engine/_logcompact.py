"""Compaction: the bytes a roll-over's new BASE copies in instead of referencing (a poisoned log's, a log under
half live, or every log's), the extents remapped onto the new log, and the bytes in use a log's live ratio is
measured against."""

from __future__ import annotations

from dataclasses import replace

from perfsuite.engine._layout import SessionError
from perfsuite.engine._logfile import LogFiles
from perfsuite.engine._logformat import content_end
from perfsuite.engine._logstate import THIS, ArtifactState, Extent, LogState, Piece


class LogCompaction(LogFiles):
    """What a roll-over copies into its BASE."""

    def used(self, number: int) -> int:
        """Bytes in use in a log (its records), for compaction's live ratio."""
        if self.current is not None and number == self.current.number:
            return self.current.tail
        try:
            return content_end(self.read_log(number))
        except OSError:
            return 0

    def _copied(self, state: LogState, logs: set[int], *, start: int = 0) -> tuple[LogState, bytes]:
        """``state`` with every extent in ``logs`` copied into a BASE payload (extents in log THIS), whose
        copies start at ``start``."""
        if not logs:
            return state, b""
        parts: list[bytes] = []
        size = start
        artifacts: dict[str, ArtifactState] = {}
        for name, artifact in state.artifacts.items():
            if not any(e.log in logs for p in artifact.pieces for e in p.extents):
                artifacts[name] = artifact
                continue
            pieces = []
            for piece in artifact.pieces:
                extents = []
                for extent in piece.extents:
                    if extent.log in logs:
                        data = self.read_log(extent.log)[extent.offset : extent.offset + extent.length]
                        if len(data) != extent.length:
                            raise SessionError(f"{self.log_path(extent.log)}: shorter than the state it holds")
                        parts.append(data)
                        extent = Extent(THIS, size, extent.length)
                        size += extent.length
                    extents.append(extent)
                pieces.append(Piece(piece.digest, piece.size, tuple(extents)))
            artifacts[name] = ArtifactState(artifact.size, tuple(pieces), artifact.source)
        return replace(state, artifacts=artifacts), b"".join(parts)


def _remap(artifact: ArtifactState, number: int, payload: int) -> ArtifactState:
    """Extents a BASE copied into its payload (log THIS), named by the new log's number and offset."""
    if not any(e.log == THIS for p in artifact.pieces for e in p.extents):
        return artifact
    pieces = tuple(Piece(p.digest, p.size, tuple(Extent(number, payload + e.offset, e.length) if e.log == THIS else e
                                                 for e in p.extents)) for p in artifact.pieces)
    return ArtifactState(artifact.size, pieces, artifact.source)


__all__ = ["LogCompaction"]
