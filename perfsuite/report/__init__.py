"""Results into answers (SPEC section 5): tables, ADR evidence, the CI comparison gate, history, dashboard.

Reads results documents through :mod:`perfsuite.harness` (never the engine) and never prints; the
command line (``perfsuite report|evidence|compare|history|dashboard``) does. Typical use::

    from perfsuite.report import compare, evidence_for, history, dashboard
    gate = compare("results/baseline", "results/local")      # gate.exit_status: 0, 1 regression, 3 inconclusive
    gate = compare("results/ab")                             # the pairing written by `perfsuite ab`
    print(evidence_for("results/local/mailbox-delivery-20261120T100000.json").markdown)
    steps = history("results/history").steps
    dashboard("results/history", "site")                      # site/index.html
"""

from perfsuite.report._bars import Bar, bars
from perfsuite.report._compare import (
    DEFAULT_ALPHA,
    DEFAULT_FACTOR,
    Comparison,
    MetricChange,
    compare,
    compare_results,
)
from perfsuite.report._compare_render import compare_headline, compare_markdown, compare_table
from perfsuite.report._dashboard import Dashboard, build_dashboard, dashboard
from perfsuite.report._evidence import Evidence, evidence, evidence_for
from perfsuite.report._history import History, Point, Series, Step, detect_steps, history, history_results
from perfsuite.report._load import (
    Floor,
    Result,
    Stat,
    find_floor,
    latest_by_recipe,
    read_result,
    read_results,
    scan_results,
)
from perfsuite.report._metrics import (
    COST_METRICS,
    METRIC_DIRECTIONS,
    TIMING_HEADLINES,
    CostMetric,
    TimingHeadline,
    metric_direction,
    register_cost_metric,
    register_timing_headline,
)
from perfsuite.report._pairing import PAIRING_FILE, PAIRING_FORMAT, Pairing, read_pairing
from perfsuite.report._power import smallest_detectable_ratio
from perfsuite.report._table import SummaryRow, summary_rows, summary_table

__all__ = [
    "COST_METRICS",
    "DEFAULT_ALPHA",
    "DEFAULT_FACTOR",
    "METRIC_DIRECTIONS",
    "PAIRING_FILE",
    "PAIRING_FORMAT",
    "TIMING_HEADLINES",
    "Bar",
    "Comparison",
    "CostMetric",
    "Dashboard",
    "Evidence",
    "Floor",
    "History",
    "MetricChange",
    "Pairing",
    "Point",
    "Result",
    "Series",
    "Stat",
    "Step",
    "SummaryRow",
    "TimingHeadline",
    "bars",
    "build_dashboard",
    "compare",
    "compare_headline",
    "compare_markdown",
    "compare_results",
    "compare_table",
    "dashboard",
    "detect_steps",
    "evidence",
    "evidence_for",
    "find_floor",
    "history",
    "history_results",
    "latest_by_recipe",
    "metric_direction",
    "read_pairing",
    "read_result",
    "read_results",
    "register_cost_metric",
    "register_timing_headline",
    "scan_results",
    "smallest_detectable_ratio",
    "summary_rows",
    "summary_table",
]
