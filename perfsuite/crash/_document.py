"""A campaign's result document (``crashcheck --json OUT``: the same answer wherever it ran).

Two parts: ``answer`` is what the campaign found, identical byte for byte wherever it ran (``--jobs 2``,
a LocalCluster, a remote scheduler): states, cases and kills counted, every violation in batch order, kept
states named relative to the keep directory, and nothing that depends on time, workers or scheduling.
``run`` is how this run went: seconds, the back end, the keep directory; and for the kill campaign the
acknowledgements read and the pending publications retried, which depend on how far a child got in real
time between the kill decision and the signal. Temp-file names in violations are numbered by first
appearance (:func:`canonical_temps`): the process that recorded the workload put its pid in them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping
from typing import Any

SCHEMA = "perfsuite-crashcheck/1"
#: the engine's temp-file names carry the recording process's pid and a per-process serial (E1's atomic
#: replace), which differ between two runs of one campaign; the document numbers them by first appearance
_TEMP = re.compile(r"\.tmp-\d+-\d+")


def canonical_temps(value: Any) -> Any:
    """``value`` (JSON) with every ``.tmp-PID-SERIAL`` renamed ``.tmp-N`` in order of first appearance."""
    names: dict[str, str] = {}

    def rename(match: re.Match[str]) -> str:
        return names.setdefault(match.group(0), f".tmp-{len(names) + 1}")

    return json.loads(_TEMP.sub(rename, json.dumps(value)))


def _rel(path: str | None, root: str | None) -> str | None:
    if path is None:
        return None
    return os.path.relpath(path, root) if root else os.path.basename(path)


def _violations(report: Any) -> list[dict[str, Any]]:
    out = []
    for v in report.violations:
        record = dataclasses.asdict(v)
        record["kept"] = _rel(v.kept, getattr(report, "keep_dir", None) or getattr(report, "directory", None))
        out.append(record)
    return out


def campaign_document(kind: str, report: Any, config: Any, runner: str) -> dict[str, Any]:
    """The document of a crash (``crash``), corruption (``corrupt``) or kill (``kill``) campaign report."""
    settings = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)
                if f.name not in ("jobs", "keep_dir", "scratch_dir", "directory")}
    if kind == "kill":
        results: list[Mapping[str, Any]] = [{"kills": report.kills, "per_profile": dict(report.per_profile),
                                             "torn": report.torn, "coalescing": report.coalescing}]
        timing = {"acks": report.acks, "checked": report.checked, "lost": report.lost,
                  "coalesced": report.coalesced, "recovered_pending": report.recovered_pending,
                  "child_seconds": round(report.child_seconds, 3),
                  "recovery_seconds": round(report.recovery_seconds, 3)}
    else:
        results = [{k: v for k, v in dataclasses.asdict(r).items() if k not in ("violations", "seconds")}
                   for r in report.results]
        timing = {"unit_seconds": [round(r.seconds, 3) for r in report.results]}
    answer = canonical_temps({"campaign": kind, "settings": settings, "results": results,
                              "violations": _violations(report)})
    keep = getattr(report, "keep_dir", None) or getattr(report, "directory", None)
    return {"schema": SCHEMA, "answer": answer,
            "run": {"seconds": round(report.seconds, 3), "runner": runner, "keep_dir": keep, **timing}}
