"""A campaign's checkpoint file: what it finished, so a campaign whose client died goes on
from its last finished batch (``--checkpoint FILE --resume``).

One JSON document: the campaign it belongs to (every setting that changes the answer) and, per unit of
work (a workload under a model, say), whatever the campaign folded so far and how many batches that covers.
Because results are folded in key order (:func:`~perfsuite.cluster.stream`), "the first K batches" is all
a unit needs to record: no list of finished tasks, and the file stays as small as the answer. It is
replaced atomically (temp file, fsync, rename, fsync the directory: ``write_json_atomic``) at most every
``interval_s`` seconds and whenever a unit finishes, so a killed client loses at most that much work and
never leaves a torn checkpoint.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from perfsuite.errors import PerfsuiteError
from perfsuite.harness import write_json_atomic

__all__ = ["SCHEMA", "Checkpoint", "CheckpointError"]

SCHEMA = "perfsuite-checkpoint/1"


class CheckpointError(PerfsuiteError):
    """A checkpoint file that cannot be used for this campaign (one line, exit 2)."""


def _normal(value: Any) -> Any:
    """JSON's view of ``value`` (tuples become lists), for comparing with what a file holds."""
    return json.loads(json.dumps(value, sort_keys=True))


class Checkpoint:
    """The checkpoint at ``path`` for the campaign described by ``campaign`` (a JSON-able mapping).

    Without ``resume`` an existing file is refused (another run's progress is never overwritten); with it,
    the file must belong to the same campaign, and a missing file starts afresh."""

    def __init__(self, path: str | Path, campaign: Mapping[str, Any], *, resume: bool = False,
                 interval_s: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = Path(path)
        self.campaign = _normal(dict(campaign))
        self.interval_s = interval_s
        self.clock = clock
        self.units: dict[str, Any] = {}
        self.resume = resume
        self.resumed = False  # (a file was there to resume from)
        if self.path.exists():
            if not resume:
                raise CheckpointError(f"{self.path}: a checkpoint already exists; pass --resume to continue that "
                                      "campaign, or remove it")
            self._load()
        self._written = clock()

    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"{self.path}: not a readable checkpoint ({exc})") from None
        if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("units"), dict):
            raise CheckpointError(f"{self.path}: not a perfsuite checkpoint (schema {SCHEMA})")
        theirs = data.get("campaign") or {}
        if theirs != self.campaign:
            keys = sorted(k for k in set(theirs) | set(self.campaign) if theirs.get(k) != self.campaign.get(k))
            raise CheckpointError(f"{self.path}: it belongs to another campaign (differs in {', '.join(keys)}); "
                                  "run with the same options, or use another --checkpoint file")
        self.units = data["units"]
        self.resumed = True

    def get(self, unit: str) -> Any:
        """What :meth:`put` last stored for ``unit`` (None: nothing finished yet)."""
        return self.units.get(unit)

    def put(self, unit: str, state: Callable[[], Any], *, force: bool = False) -> None:
        """Store ``unit``'s folded state (``state()``, called only when the file is written: when ``force`` or
        ``interval_s`` has passed since the last write, so a fold may offer it after every batch)."""
        if force or self.clock() - self._written >= self.interval_s:
            self.units[unit] = _normal(state())
            self.flush()

    def flush(self) -> None:
        write_json_atomic(self.path, {"schema": SCHEMA, "campaign": self.campaign, "units": self.units})
        self._written = self.clock()
