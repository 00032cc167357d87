"""E3-E7: what the parts of a portable session share: the state ``Session.__init__`` sets and the methods one
part calls on another. The parts (``_opening``, ``_publishing``, ``_mail``, ``_warm``, ``_observing``) derive
from :class:`SessionState`, so a type checker checks each part against this one declaration; a renamed
attribute or a changed signature fails there instead of at run time. Nothing here exists at run time but
the class itself: the attributes are annotations and the methods are declared only for the type checker
(the parts and ``Session`` define them, ahead of this class in the method resolution order)."""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perfsuite.engine._buffer import ConversationBuffer
    from perfsuite.engine._clock import Clock
    from perfsuite.engine._events import Observers
    from perfsuite.engine._fs import FileSystem
    from perfsuite.engine._gate import MutationGate, Token
    from perfsuite.engine._job import PublicationJob
    from perfsuite.engine._layout import Lease, OwnerProbe
    from perfsuite.engine._logstore import LogStore
    from perfsuite.engine._logvalues import GenerationRef
    from perfsuite.engine._objects import HashMemo
    from perfsuite.engine._offload import Offload
    from perfsuite.engine._pipeline import Publication
    from perfsuite.engine._pipeline_values import Batch, PublicationReport
    from perfsuite.engine._runner import JobRunner
    from perfsuite.engine._schedulers import CheckpointTimer, Debouncer, NotificationQueue
    from perfsuite.engine._session_values import Ack, FaultHooks, PendingPublication, SessionSettings
    from perfsuite.engine._sidecar import MailRecord, Sidecar


class SessionState:
    """The state of a session and the cross-part interface (declarations only; see the module docstring)."""

    profile: str
    root: str
    fs: FileSystem
    clock: Clock
    settings: SessionSettings
    store: LogStore
    lease: Lease | None
    owner_alive: OwnerProbe
    head: GenerationRef | None
    migrated: str | None
    memos: dict[str, HashMemo | None]
    buffers: dict[str, ConversationBuffer]
    sidecar: Sidecar
    attachments: dict[str, bytes]
    _unpublished_attachments: set[str]
    pending: PendingPublication | None
    save_failed: str | None
    problems: list[str]
    reports: collections.deque[PublicationReport]
    active: Publication | None
    closed: bool
    frozen_objects: int | None
    _serial: itertools.count[int]
    id_source: Callable[[], str]
    observers: Observers
    _internal: int
    runner: JobRunner
    faults: FaultHooks | None
    gate: MutationGate
    _offload: Offload | None
    jobs: collections.deque[PublicationJob]
    transport_busy: bool
    stopping: bool
    root_live: bool
    drain_ms: list[float]
    _checkpoint_waiters: dict[str, list[Ack]]
    _observed: int
    registry_debounce: Debouncer
    notifications: NotificationQueue
    checkpoint_timer: CheckpointTimer

    if TYPE_CHECKING:
        # Defined by Session (_session)
        @property
        def epoch(self) -> int: ...
        def conversation(self, conversation: str) -> ConversationBuffer: ...
        def _input(self, operation: str, conversation: str, text: str | None = None, **detail: Any) -> None: ...
        def _enter_sync(self, token: Token | None) -> None: ...
        def _check_open(self) -> None: ...
        def save_registry(self, *, token: Token | None = None) -> PublicationReport: ...
        def checkpoint(self, conversation: str = ..., *, token: Token | None = None) -> PublicationReport: ...
        def close(self) -> None: ...

        # Opening (_opening)
        def _generation_ref(self) -> GenerationRef: ...

        # Publishing (_publishing)
        def _new_id(self, kind: str) -> str: ...
        def freeze(self, kind: str, conversations: Iterable[str] | None, *, owner: str | None = None,
                   sidecar: bool = True) -> Batch: ...
        def _needs_publish(self, conversation: str, buffer: ConversationBuffer) -> bool: ...
        def publication(self, batch: Batch) -> Publication: ...
        def publish(self, batch: Batch, acks: Iterable[Ack] = ()) -> PublicationReport: ...
        def _apply_faults(self, publication: Publication, acks: list[Ack]) -> None: ...
        def _publish_now(self, kind: str, conversations: Iterable[str] | None, *, owner: str | None = None,
                         acks: Iterable[Ack] = (), sidecar: bool = True) -> PublicationReport: ...
        def _retain(self, publication: Publication, acks: list[Ack], exc: BaseException) -> None: ...

        # Mail (_mail)
        def append_mail(self, to: str, body: str, *, sender: str = ..., kind: str = "message",
                        ack: Ack | None = None, token: Token | None = None) -> MailRecord: ...
        def _new_mail(self, to: str, sender: str, kind: str, body: str) -> MailRecord: ...

        # WarmLocal (_warm)
        def _schedule_pump(self) -> None: ...
        def _observe(self) -> None: ...

        # Observing (_observing)
        def _watch(self, publication: Publication, driver: str) -> None: ...
        def _settled(self, publication: Publication) -> None: ...
