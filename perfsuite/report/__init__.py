"""Results into answers (SPEC section 5): tables, ADR evidence, the CI comparison gate, history, dashboard.

Reads results documents through :mod:`perfsuite.harness` (of the engine, only its phase names, ``PHASES``)
and never prints; the command line (``perfsuite report|evidence|compare|history|dashboard``) does. Typical
use::

    from perfsuite.report import compare, evidence_for, history, dashboard
    gate = compare("results/baseline", "results/local")      # gate.exit_status: 0, 1 regression, 3 inconclusive
    gate = compare("results/ab")                             # the pairing written by `perfsuite ab`
    print(evidence_for("results/local/mailbox-delivery-20261120T100000.json").markdown)
    steps = history("results/history").steps                  # a directory, or a results store
    ingest(["results/history"], "results/perfsuite.sqlite3")  # the store: every sample, keyed by machine
    dashboard("results/perfsuite.sqlite3", "site")            # site/index.html
"""

from perfsuite.report._bars import Bar, bars
from perfsuite.report._compare import (
    DEFAULT_ALPHA,
    DEFAULT_FACTOR,
    GATES,
    SEPARATE_NOTE,
    TIMINGS,
    Comparison,
    MetricChange,
    compare,
    compare_results,
)
from perfsuite.report._compare_render import compare_headline, compare_markdown, compare_table
from perfsuite.report._conditions import Conditions, conditions_of, stall_ms
from perfsuite.report._crossover import (
    ModeCell,
    Sweep,
    SweepRow,
    read_sweeps,
    sweep_evidence,
    sweep_figure,
    sweep_table,
    write_sweep_plot,
)
from perfsuite.report._dashboard import Dashboard, build_dashboard, dashboard
from perfsuite.report._evidence import Evidence, evidence, evidence_for
from perfsuite.report._figures import Figure
from perfsuite.report._format import fmt_level, short_commit
from perfsuite.report._history import (
    MIN_PELT_RUNS,
    History,
    LevelStep,
    Point,
    Series,
    detect_steps,
    history,
    history_results,
    order_results,
)
from perfsuite.report._load import (
    Floor,
    Result,
    Stat,
    find_floor,
    find_publication_floor,
    latest_by_recipe,
    read_result,
    read_results,
    read_siblings,
    scan_results,
)
from perfsuite.report._machine import Machine, machine_fingerprint, machine_of
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
from perfsuite.report._phases import (
    PhaseBreakdown,
    PhaseRow,
    breakdown_from_samples,
    phase_breakdown,
    phase_figure,
    phase_table,
    sample_phases,
    write_phase_plot,
)
from perfsuite.report._power import hodges_lehmann_ratio, paired_ratio, signed_rank_p, smallest_detectable_ratio
from perfsuite.report._references import ReferenceMode, reference_modes, references_markdown
from perfsuite.report._results_branch import (
    DEFAULT_BRANCH,
    PullReport,
    PushReport,
    branch_path,
    pull_results,
    push_results,
    rebuild_store,
)
from perfsuite.report._store import (
    DEFAULT_STORE,
    IngestReport,
    MachineSummary,
    Store,
    StoredRun,
    ingest,
    is_store,
    open_store,
    read_source,
    select_runs,
)
from perfsuite.report._table import SummaryRow, summary_rows, summary_table

__all__ = [
    "COST_METRICS",
    "DEFAULT_ALPHA",
    "DEFAULT_BRANCH",
    "DEFAULT_FACTOR",
    "DEFAULT_STORE",
    "GATES",
    "METRIC_DIRECTIONS",
    "MIN_PELT_RUNS",
    "PAIRING_FILE",
    "PAIRING_FORMAT",
    "SEPARATE_NOTE",
    "TIMINGS",
    "TIMING_HEADLINES",
    "Bar",
    "Comparison",
    "Conditions",
    "CostMetric",
    "Dashboard",
    "Evidence",
    "Figure",
    "Floor",
    "History",
    "IngestReport",
    "LevelStep",
    "Machine",
    "MachineSummary",
    "MetricChange",
    "ModeCell",
    "Pairing",
    "PhaseBreakdown",
    "PhaseRow",
    "Point",
    "PullReport",
    "PushReport",
    "ReferenceMode",
    "Result",
    "Series",
    "Stat",
    "Store",
    "StoredRun",
    "SummaryRow",
    "Sweep",
    "SweepRow",
    "TimingHeadline",
    "bars",
    "branch_path",
    "breakdown_from_samples",
    "build_dashboard",
    "compare",
    "compare_headline",
    "compare_markdown",
    "compare_results",
    "compare_table",
    "conditions_of",
    "dashboard",
    "detect_steps",
    "evidence",
    "evidence_for",
    "find_floor",
    "find_publication_floor",
    "fmt_level",
    "history",
    "history_results",
    "hodges_lehmann_ratio",
    "ingest",
    "is_store",
    "latest_by_recipe",
    "machine_fingerprint",
    "machine_of",
    "metric_direction",
    "open_store",
    "order_results",
    "paired_ratio",
    "phase_breakdown",
    "phase_figure",
    "phase_table",
    "pull_results",
    "push_results",
    "read_pairing",
    "read_result",
    "read_results",
    "read_siblings",
    "read_source",
    "read_sweeps",
    "rebuild_store",
    "reference_modes",
    "references_markdown",
    "register_cost_metric",
    "register_timing_headline",
    "sample_phases",
    "scan_results",
    "select_runs",
    "short_commit",
    "signed_rank_p",
    "smallest_detectable_ratio",
    "stall_ms",
    "summary_rows",
    "summary_table",
    "sweep_evidence",
    "sweep_figure",
    "sweep_table",
    "write_phase_plot",
    "write_sweep_plot",
]
