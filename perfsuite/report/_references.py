"""By-design reference modes of a set of results, as Markdown.

``results/README.md`` explains which modes of the baseline are references (the rejected designs the other
modes are judged against) and how large the things they rewrite are. Both come from the files: the reason
from the mode's ``reference`` (the document's recipe, else the recipe file of that name for documents
written before references existed), and each size from a metric the document records
(:data:`SIZE_METRICS`), never from hand-written text. A size that is not recorded is not quoted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from perfsuite.report._format import fmt_bytes
from perfsuite.report._load import Result, latest_by_recipe

__all__ = ["SIZE_METRICS", "ReferenceMode", "reference_modes", "references_markdown"]

#: metrics that say how large the thing a mode rewrites is, and what to call it (first recorded wins)
SIZE_METRICS = (
    ("metrics.transcript_bytes", "transcript"),
    ("metrics.log_bytes", "log"),
    ("metrics.conversation_bytes", "root transcript"),
)


@dataclass(frozen=True, slots=True)
class ReferenceMode:
    """One reference mode: where, why, and the size it works on when a document records it."""

    recipe: str
    mode: str
    reason: str
    size: int | None = None
    size_of: str | None = None
    metric: str | None = None

    def markdown(self) -> str:
        """``- `recipe` `mode`: reason (a 5,200,000-byte log, `metrics.log_bytes`)``."""
        size = ""
        if self.size is not None:
            size = f" (a {fmt_bytes(self.size)}-byte {self.size_of}, from `{self.metric}`)"
        return f"- `{self.recipe}` `{self.mode}`: {self.reason}{size}"


def _recipe_reason(recipe: str, mode: str) -> str | None:
    """The reason from the recipe file of that name, for documents older than references."""
    from perfsuite.errors import PerfsuiteError
    from perfsuite.harness import load_recipe

    try:
        return load_recipe(recipe).mode(mode).reference
    except (PerfsuiteError, KeyError):
        return None


def reference_modes(results: Iterable[Result]) -> list[ReferenceMode]:
    """Every reference mode of the newest result of each recipe, with the size it works on when recorded."""
    out = []
    for recipe, result in latest_by_recipe(results).items():
        for mode in result.modes:
            reason = result.reference(mode) or _recipe_reason(recipe, mode)
            if not reason:
                continue
            values = result.values(mode)
            for metric, what in SIZE_METRICS:
                if values.get(metric):
                    out.append(ReferenceMode(recipe, mode, reason, int(max(values[metric])), what, metric))
                    break
            else:
                out.append(ReferenceMode(recipe, mode, reason))
    return out


def references_markdown(results: Iterable[Result]) -> str:
    """The Markdown list of :func:`reference_modes` (one line per mode), ending with a newline."""
    return "".join(ref.markdown() + "\n" for ref in reference_modes(results))
