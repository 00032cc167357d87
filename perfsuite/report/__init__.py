"""Results into answers (SPEC section 5): tables, ADR evidence, the CI comparison gate, history, dashboard.

Reads results documents through :mod:`perfsuite.harness` (never the engine) and never prints; the
command line (``perfsuite report|evidence|compare|history|dashboard``) does. Typical use::

    from perfsuite.report import compare, evidence_for, history, dashboard
    gate = compare("results/baseline", "results/local")      # gate.exit_status, gate.regressions
    print(evidence_for("results/local/mailbox-delivery-20261120T100000.json").markdown)
    steps = history("results/history").steps
    dashboard("results/history", "site")                      # site/index.html
"""

from perfsuite.report._bars import Bar, bars
from perfsuite.report._compare import (
    DEFAULT_ALPHA,
    DEFAULT_FACTOR,
    METRIC_DIRECTIONS,
    Comparison,
    MetricChange,
    compare,
    compare_markdown,
    compare_results,
    compare_table,
    metric_direction,
)
from perfsuite.report._dashboard import Dashboard, build_dashboard, dashboard
from perfsuite.report._evidence import Evidence, evidence, evidence_for
from perfsuite.report._figures import Figure
from perfsuite.report._history import History, Point, Series, Step, detect_steps, history, history_results
from perfsuite.report._load import (
    Floor,
    Result,
    Stat,
    find_floor,
    find_publication_floor,
    latest_by_recipe,
    read_result,
    read_results,
)
from perfsuite.report._references import ReferenceMode, reference_modes, references_markdown
from perfsuite.report._table import SummaryRow, summary_rows, summary_table

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_FACTOR",
    "METRIC_DIRECTIONS",
    "Bar",
    "Comparison",
    "Dashboard",
    "Evidence",
    "Figure",
    "Floor",
    "History",
    "MetricChange",
    "Point",
    "ReferenceMode",
    "Result",
    "Series",
    "Stat",
    "Step",
    "SummaryRow",
    "bars",
    "build_dashboard",
    "compare",
    "compare_markdown",
    "compare_results",
    "compare_table",
    "dashboard",
    "detect_steps",
    "evidence",
    "evidence_for",
    "find_floor",
    "find_publication_floor",
    "history",
    "history_results",
    "latest_by_recipe",
    "metric_direction",
    "read_result",
    "read_results",
    "reference_modes",
    "references_markdown",
    "summary_rows",
    "summary_table",
]
