"""E3/E4: the session's settings and the small records its parts share (acknowledgements, pending
publications, artifact names). No behaviour beyond running acknowledgements once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from perfsuite.engine._pipeline import Batch

Ack = Callable[[BaseException | None], None]
CONVERSATION_PREFIX = "conversations/"
ATTACHMENT_PREFIX = "attachments/"


class SaveAbandoned(Exception):
    """The acknowledgement's publication was explicitly abandoned: the mutation did not persist."""


@dataclass(frozen=True, slots=True)
class SessionSettings:
    """Tunables. Defaults follow the seed; the suite varies them (chunking, debounce, offload)."""

    chunk_size: int = 64 * 1024  # 0: one chunk per artifact (the seed's whole-artifact design)
    keep_generations: int = 8
    retire_slice: int = 64
    registry_debounce_s: float = 2.0
    checkpoint_interval_s: float = 30.0
    drain_limit_s: float = 30.0
    offload: str = "thread"  # where the asynchronous job's blocking steps run: thread | process | inline
    asynchronous: bool = True  # warm local portable sessions use the asynchronous job (E4)
    notify_first_s: float = 0.05
    notify_max_s: float = 0.5
    # gc.freeze() once the session is open: the loaded state (and everything the application holds by
    # then) leaves the cyclic collector, so later full collections do not traverse it (M10 mitigation)
    freeze_loaded: bool = False


def artifact_for(conversation: str) -> str:
    return f"{CONVERSATION_PREFIX}{conversation}.jsonl"


@dataclass
class PendingPublication:
    """A batch that failed before adoption: its frozen bytes are kept (in memory and under staging/),
    its acknowledgements are unresolved, and it blocks teardown until retried or abandoned (E4)."""

    batch: Batch
    phase: str
    error: str
    acks: list[Ack]
    recovered: bool = False  # found on disk after a crash rather than failed in this process


@dataclass
class AckSet:
    """Acknowledgements that run exactly once (E4 finish)."""

    callbacks: list[Ack] = field(default_factory=list)

    def resolve(self, error: BaseException | None) -> None:
        callbacks, self.callbacks = self.callbacks, []
        for callback in callbacks:
            callback(error)
