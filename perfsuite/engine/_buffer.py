"""The conversation buffer: the Python stand-in for an editor buffer (E4 freeze).

It holds the transcript as encoded JSON lines with cumulative byte offsets, a modification tick and the
earliest byte offset changed since the last commit, so freeze is O(1) and stage, hash and commit cost
grows with what changed, not with the transcript (E4, E7 prefix reuse).
"""

from __future__ import annotations

import bisect
import itertools
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

from perfsuite.engine._jsonl import Message

PREVIEW_CHARS = 120


@dataclass(frozen=True, slots=True)
class FrozenText:
    """What freeze captured of one buffer: a stable view of its first ``count`` lines (the line list is
    append-only; rewrites swap in a new list), its size, tick and earliest changed offset."""

    conversation: str
    lines: Sequence[bytes]
    ends: Sequence[int]
    count: int
    size: int
    tick: int
    dirty_from: int
    receipts: frozenset[str]

    def bytes_from(self, offset: int) -> bytes:
        """The frozen bytes from ``offset`` to the end: joins only the lines from there on."""
        if offset >= self.size:
            return b""
        first = bisect.bisect_right(self.ends, offset, 0, self.count)
        line_start = self.ends[first - 1] if first else 0
        data = b"".join(self.lines[first : self.count])
        return data[offset - line_start :]


class OffsetsView(Sequence[int]):
    """The first ``count`` entries of an append-only list (the prompt index as a freeze saw it): O(1) to
    take, never a copy (copying a 100 MB session's index at every checkpoint cost O(session));
    a rewrite replaces the buffer's list instead of changing it, so a view never changes."""

    __slots__ = ("_count", "_items")

    def __init__(self, items: list[int], count: int) -> None:
        self._items, self._count = items, count

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> list[int]: ...
    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice):
            return self._items[slice(*index.indices(self._count))]
        if not -self._count <= index < self._count:
            raise IndexError(index)
        return self._items[index % self._count]

    def __iter__(self) -> Iterator[int]:
        return itertools.islice(self._items, self._count)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, OffsetsView)):
            return len(other) == self._count and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def tolist(self) -> list[int]:
        return self._items[: self._count]

    def __repr__(self) -> str:
        return f"OffsetsView({self._count} offsets)"


class ConversationBuffer:
    """One conversation's live transcript. Not thread-safe for writers: the loop thread owns it.

    Readers on other threads may read ``lines[:count]`` of a frozen view safely: the list is only
    appended to, and every rewrite (undo, edit, reload) replaces it with a new list.
    """

    def __init__(self, conversation: str, lines: Iterable[bytes] = ()) -> None:
        self.conversation = conversation
        self._lines: list[bytes] = []
        self._ends: list[int] = []
        self.tick = 0
        self.saved_tick = 0
        self.committed_tick = 0  # tick of the newest freeze that was adopted
        self.dirty_from = 0
        self.receipts: dict[str, int] = {}
        self.user_lines: list[int] = []  # line numbers of user messages
        self.user_offsets: list[int] = []
        self.first_user_preview = ""
        self.latest_user_preview = ""
        self._edit_floor = 1 << 62  # earliest offset rewritten since the last freeze
        self.resets = 0  # how many times the line list (and the prompt index) was replaced: a rewrite
        self._reset(list(lines))
        self.dirty_from = self.size  # what was loaded is what is committed

    # -- state ------------------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return self._ends[-1] if self._ends else 0

    @property
    def ends(self) -> list[int]:
        return self._ends

    @property
    def line_list(self) -> list[bytes]:
        """The append-only line list itself (what a freeze views; a rewrite replaces it)."""
        return self._lines

    def __len__(self) -> int:
        return len(self._lines)

    @property
    def modified(self) -> bool:
        return self.tick != self.saved_tick

    def data(self) -> bytes:
        return b"".join(self._lines)

    def messages(self) -> list[Message]:
        return [Message.from_json(json.loads(line)) for line in self._lines]

    # -- edits (each bumps the tick) -------------------------------------------------------------------
    def insert(self, message: Message) -> None:
        """Append one message: O(size of message)."""
        self._add(message.encode(), message)
        self.tick += 1

    def insert_many(self, messages: Iterable[Message]) -> None:
        for message in messages:
            self._add(message.encode(), message)
        self.tick += 1

    def touch(self) -> None:
        """A property-only change: bytes unchanged, but the buffer is modified (tick moves)."""
        self.tick += 1

    def replace_messages(self, messages: Sequence[Message]) -> None:
        """A rewrite (undo, edit): new line list; the earliest changed offset is computed, not assumed."""
        new_lines = [m.encode() for m in messages]
        common = 0
        for old, new in zip(self._lines, new_lines):
            if old != new:
                break
            common += 1
        changed_at = self._ends[common - 1] if common else 0
        self._reset(new_lines)
        self.dirty_from = min(self.dirty_from, changed_at)
        self._edit_floor = min(self._edit_floor, changed_at)
        self.tick += 1

    def _reset(self, lines: list[bytes]) -> None:
        self.resets += 1
        self._lines = []
        self._ends = []
        self.receipts = {}
        self.user_lines = []
        self.user_offsets = []  # prompt index: byte offset of each user message, kept as we go
        self.first_user_preview = self.latest_user_preview = ""
        for line in lines:
            self._add(line, None)

    def _add(self, line: bytes, message: Message | None) -> None:
        if message is None:
            message = Message.from_json(json.loads(line))
        index = len(self._lines)
        self._lines.append(line)
        self._ends.append(self.size + len(line))
        if message.meta and "receipt" in message.meta:
            self.receipts[str(message.meta["receipt"])] = index
        if message.role == "user" and not message.hidden:
            self.user_lines.append(index)
            self.user_offsets.append(self._ends[-1] - len(line))
            preview = message.content[:PREVIEW_CHARS]
            if not self.first_user_preview:
                self.first_user_preview = preview
            self.latest_user_preview = preview

    # -- freeze and finish (E4 phases 1 and 7) ----------------------------------------------------------
    def freeze(self) -> FrozenText:
        """O(1): a view of the append-only line list, never a copy of the text."""
        count = len(self._lines)
        self._edit_floor = 1 << 62
        return FrozenText(self.conversation, self._lines, self._ends, count, self.size, self.tick,
                          min(self.dirty_from, self.size), frozenset(self.receipts))

    def mark_committed(self, frozen: FrozenText) -> None:
        """After adoption of ``frozen`` (E4 finish): bytes before its size are committed unless a rewrite
        since freeze changed them; modified clears only if the tick still equals the frozen one."""
        if self.tick == frozen.tick:
            self.saved_tick = frozen.tick
        self.committed_tick = max(self.committed_tick, frozen.tick)
        self.dirty_from = min(frozen.size, self._edit_floor, self.size)

    def projection(self, segment: int = 0) -> dict[str, Any]:
        """The root fields a sidecar carries as of this buffer's state (E7 committed projection)."""
        return {
            "segment": segment,
            "turn_count": len(self.user_lines),
            "messages": len(self._lines),
            "bytes": self.size,
            "prompt_index": OffsetsView(self.user_offsets, len(self.user_offsets)),
            "first_user_preview": self.first_user_preview,
            "latest_user_preview": self.latest_user_preview,
        }
