"""E4, the select phase's sidecar part: the sidecar's change against the base as put/delete of exactly the
changed keys, a mailbox's as the ids removed and the records appended, the prompt index's as the offsets
appended; O(what changed), nothing walks the whole document."""

from __future__ import annotations

from typing import Any

from perfsuite.engine._pipeline_base import BaseView
from perfsuite.engine._pipeline_values import Batch


def mailbox_ops(name: str | None, old: list[Any], new: list[Any]) -> list[list[Any]] | None:
    """A mailbox's change as its delta, O(what changed) in bytes: records removed by id (``mdel``:
    delivered and committed, discarded, or moved) and records appended (``madd``): the longest prefix of
    the new mailbox that the old one holds in order is kept, the rest of the new one appended. None when a
    record has no id (then the whole mailbox is put). Mail records are immutable (one id, one record), so
    ids say which are the same."""
    old_ids = [r.get("id") if isinstance(r, dict) else None for r in old]
    new_ids = [r.get("id") if isinstance(r, dict) else None for r in new]
    if None in old_ids or None in new_ids or len(set(new_ids)) != len(new_ids):
        return None
    k = 0
    for rid in old_ids:  # the longest prefix of the new mailbox that is a subsequence of the old one
        if k < len(new_ids) and rid == new_ids[k]:
            k += 1
    kept = set(new_ids[:k])
    ops: list[list[Any]] = []
    removed = [i for i in old_ids if i not in kept]
    if removed:
        ops.append(["mdel", "mailboxes", name, removed])
    if k < len(new):
        ops.append(["madd", "mailboxes", name, new[k:]])
    return ops


def sidecar_ops(batch: Batch, view: BaseView) -> tuple[list[list[Any]], dict[tuple[str, str | None], Any],
                                                       tuple[int, int | None] | None]:
    """The sidecar delta: put/delete of each captured key whose value differs from the base, the root
    projection's fields and prompt-index offsets appended (a rewrite replaces the index), the checkpoint
    marker's entries. O(what changed): nothing here walks the whole document."""
    ops: list[list[Any]] = []
    values: dict[tuple[str, str | None], Any] = {}

    def put(section: str, name: str | None, value: Any) -> None:
        old = view.value(section, name)
        if section == "mailboxes" and isinstance(old, list) and isinstance(value, list):
            mail = mailbox_ops(name, old, value)
            if mail is not None:
                ops.extend(mail)
                if mail:
                    values[(section, name)] = value
                return
        if value != old:
            ops.append(["del" if value is None and section in ("agents", "mailboxes") else "put", section, name, value])
            values[(section, name)] = value

    if batch.capture is None:
        return ops, values, None
    for (section, name), value in sorted(batch.capture.values.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        put(section, name, value)
    prompt = None
    if batch.projection is not None:
        fields = {k: v for k, v in batch.projection.items() if k != "prompt_index"}
        put("root", None, fields)
        index = batch.projection.get("prompt_index", ())  # a view (OffsetsView): never copied whole here
        length, reset = view.prompt()
        if reset is not None and reset == batch.prompt_reset and len(index) >= length:
            if len(index) > length:
                ops.append(["index", "prompt_index", None, list(index[length:])])
        else:
            whole = list(index)  # a rewrite replaced the index (or nothing is known of it): O(index), rare
            if whole != view.value("prompt_index", None):
                ops.append(["put", "prompt_index", None, whole])
        prompt = (len(index), batch.prompt_reset)
    marker = batch.candidate.get("marker") or {}
    if marker:
        put("marker", "epoch", marker.get("epoch"))
        for conversation in batch.texts:
            put("marker", conversation, (marker.get("conversations") or {}).get(conversation))
    return ops, values, prompt


__all__ = ["mailbox_ops", "sidecar_ops"]
