"""Results into answers (SPEC section 5): tables, ADR evidence, the CI comparison gate, history, dashboard.

Reads results documents through :mod:`perfsuite.harness` (of the engine, only its phase names, ``PHASES``)
and never prints; the command line (``perfsuite report|evidence|compare|history|dashboard``) does. Typical
use::

    from perfsuite.report import compare, dashboard, evidence_for, history, ingest
    gate = compare("results/baseline", "results/local")      # gate.exit_status: 0, 1 regression, 3 inconclusive
    gate = compare("results/ab")                             # the pairing written by `perfsuite ab`
    print(evidence_for("results/local/mailbox-delivery-20261120T100000.json").markdown)
    steps = history("results/history").steps                  # a directory, or a results store
    ingest(["results/history"], "results/perfsuite.sqlite3")  # the store: every sample, keyed by machine
    dashboard("results/perfsuite.sqlite3", "site")            # site/index.html

Its names by concern (``__all__`` below is sorted; ``tests/report/test_api.py`` checks that the two agree):

- reading results: ``Result``, ``Stat``, ``Floor``, ``read_result``, ``read_results``, ``read_siblings``,
  ``scan_results``, ``latest_by_recipe``, ``find_floor``, ``order_results``;
- tables: ``SummaryRow``, ``summary_rows``, ``summary_table``, ``Bar``, ``bars``, ``fmt_level``, ``short_commit``;
  names from documents in Markdown: ``md_text``, ``md_code``;
- the phase breakdown: ``PhaseBreakdown``, ``PhaseRow``, ``phase_breakdown``, ``breakdown_from_samples``,
  ``sample_phases``, ``phase_table``, ``phase_figure``, ``write_phase_plot``;
- the CI gate: ``Comparison``, ``MetricChange``, ``compare``, ``compare_results``, ``compare_headline``,
  ``compare_markdown``, ``compare_table``, ``DEFAULT_ALPHA``, ``DEFAULT_FACTOR``, ``GATES``, ``PAIRING_FILE``,
  ``PAIRING_FORMAT``, ``find_pairing``, ``read_pairing``;
- paired statistics: ``paired_ratio``, ``hodges_lehmann_ratio``, ``signed_rank_p``;
- what the gate judges: ``CostMetric``, ``TimingHeadline``, ``TIMING_HEADLINES``, ``register_cost_metric``,
  ``register_timing_headline``;
- ADR evidence: ``Evidence``, ``Figure``, ``evidence_for``, ``references_markdown``;
- sweeps: ``Sweep``, ``read_sweeps``, ``sweep_table``, ``sweep_evidence``, ``write_sweep_plot``;
- history: ``History``, ``Series``, ``LevelStep``, ``history``, ``MIN_PELT_RUNS``;
- machines: ``Machine``, ``machine_fingerprint``, ``machine_of``;
- the store and the results branch: ``Store``, ``IngestReport``, ``DEFAULT_STORE``, ``open_store``, ``ingest``,
  ``select_runs``, ``PullReport``, ``PushReport``, ``pull_results``, ``push_results``, ``rebuild_store``;
- the dashboard: ``Dashboard``, ``dashboard``.
"""

from perfsuite.report._bars import Bar, bars
from perfsuite.report._compare import (
    DEFAULT_ALPHA,
    DEFAULT_FACTOR,
    GATES,
    Comparison,
    MetricChange,
    compare,
    compare_results,
)
from perfsuite.report._compare_render import compare_headline, compare_markdown, compare_table
from perfsuite.report._crossover import Sweep, read_sweeps, sweep_evidence, sweep_table, write_sweep_plot
from perfsuite.report._dashboard import Dashboard, dashboard
from perfsuite.report._evidence import Evidence, evidence_for
from perfsuite.report._figures import Figure
from perfsuite.report._format import fmt_level, md_code, md_text, short_commit
from perfsuite.report._history import MIN_PELT_RUNS, History, LevelStep, Series, history, order_results
from perfsuite.report._load import (
    Floor,
    Result,
    Stat,
    find_floor,
    latest_by_recipe,
    read_result,
    read_results,
    read_siblings,
    scan_results,
)
from perfsuite.report._machine import Machine, machine_fingerprint, machine_of
from perfsuite.report._metrics import (
    TIMING_HEADLINES,
    CostMetric,
    TimingHeadline,
    register_cost_metric,
    register_timing_headline,
)
from perfsuite.report._pairing import PAIRING_FILE, PAIRING_FORMAT, find_pairing, read_pairing
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
from perfsuite.report._power import hodges_lehmann_ratio, paired_ratio, signed_rank_p
from perfsuite.report._references import references_markdown
from perfsuite.report._results_branch import PullReport, PushReport, pull_results, push_results, rebuild_store
from perfsuite.report._store import DEFAULT_STORE, IngestReport, Store, ingest, open_store, select_runs
from perfsuite.report._table import SummaryRow, summary_rows, summary_table

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_FACTOR",
    "DEFAULT_STORE",
    "GATES",
    "MIN_PELT_RUNS",
    "PAIRING_FILE",
    "PAIRING_FORMAT",
    "TIMING_HEADLINES",
    "Bar",
    "Comparison",
    "CostMetric",
    "Dashboard",
    "Evidence",
    "Figure",
    "Floor",
    "History",
    "IngestReport",
    "LevelStep",
    "Machine",
    "MetricChange",
    "PhaseBreakdown",
    "PhaseRow",
    "PullReport",
    "PushReport",
    "Result",
    "Series",
    "Stat",
    "Store",
    "SummaryRow",
    "Sweep",
    "TimingHeadline",
    "bars",
    "breakdown_from_samples",
    "compare",
    "compare_headline",
    "compare_markdown",
    "compare_results",
    "compare_table",
    "dashboard",
    "evidence_for",
    "find_floor",
    "find_pairing",
    "fmt_level",
    "history",
    "hodges_lehmann_ratio",
    "ingest",
    "latest_by_recipe",
    "machine_fingerprint",
    "machine_of",
    "md_code",
    "md_text",
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
    "read_sweeps",
    "rebuild_store",
    "references_markdown",
    "register_cost_metric",
    "register_timing_headline",
    "sample_phases",
    "scan_results",
    "select_runs",
    "short_commit",
    "signed_rank_p",
    "summary_rows",
    "summary_table",
    "sweep_evidence",
    "sweep_table",
    "write_phase_plot",
    "write_sweep_plot",
]
