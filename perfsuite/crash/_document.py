"""A campaign's result document (``crashcheck --json OUT``, issue 32 item 2).

Two parts: ``answer`` is what the campaign found, identical byte for byte wherever it ran (``--jobs 2``,
a LocalCluster, a remote scheduler): states, cases and kills counted, every violation in batch order, kept
states named relative to the keep directory, and nothing that depends on time, workers or scheduling.
``run`` is how this run went: seconds, the back end, the keep directory; and for the kill campaign the
acknowledgements read and the pending publications retried, which depend on how far a child got in real
time between the kill decision and the signal.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

SCHEMA = "perfsuite-crashcheck/1"


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
        results: list[Mapping[str, Any]] = [{"kills": report.kills, "per_profile": dict(report.per_profile)}]
        timing = {"acks": report.acks, "recovered_pending": report.recovered_pending,
                  "child_seconds": round(report.child_seconds, 3),
                  "recovery_seconds": round(report.recovery_seconds, 3)}
    else:
        results = [{k: v for k, v in dataclasses.asdict(r).items() if k not in ("violations", "seconds")}
                   for r in report.results]
        timing = {"unit_seconds": [round(r.seconds, 3) for r in report.results]}
    answer = {"campaign": kind, "settings": settings, "results": results, "violations": _violations(report)}
    keep = getattr(report, "keep_dir", None) or getattr(report, "directory", None)
    return {"schema": SCHEMA, "answer": answer,
            "run": {"seconds": round(report.seconds, 3), "runner": runner, "keep_dir": keep, **timing}}
