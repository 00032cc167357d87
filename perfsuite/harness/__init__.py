"""The measuring instruments (SPEC section 3, M1-M9). Imports nothing from :mod:`perfsuite.engine`.

The harness measures *callables*: a recipe mode names an operation ``"module:function"`` (see
:mod:`perfsuite.harness._operation` for the protocol); fixtures are opaque directories, copied
privately for every sample. Typical use::

    from perfsuite.harness import load_recipe, run_recipe
    result = run_recipe(load_recipe("idle-control"), output_dir="results/local")
    print(result.path, result.verdicts())

Several versions of the code under test, interleaved in one run (what ``perfsuite ab`` uses)::

    variants = [CodeVariant("base", Path("/tmp/wt-base"), ("mypkg",)), CodeVariant("head", Path("."), ("mypkg",))]
    pair = run_variants(recipe, variants, outputs={"base": Path("b.json"), "head": Path("h.json")}, seed=7)

The facade keeps what a user's code (docs/own-code.md, docs/run.md) or another package calls, and the values
those calls return or raise, so a caller can name what it holds; what only the harness uses stays in its
private modules. Its names by concern (``__all__`` below is sorted; ``tests/harness/test_facade.py`` checks
that the two agree):

- the operation protocol: ``OperationContext``, ``Operation``, ``AckCallback``, ``Param``, ``accepts``,
  ``param_value``, ``check_params``, ``declared_parameters``, ``did_you_mean``, ``resolve_operation``,
  ``create_operation``, ``call_optional``;
- recipes and their plan: ``Recipe``, ``ModeSpec``, ``load_recipe``, ``list_recipes``, ``recipe_dirs``,
  ``check_parameters``, ``resolve_factories``, ``check_conditions``, ``plan_order``, ``PlanEntry``;
- a run: ``run_recipe``, ``RunResult``, ``SampleEvent``, ``resume_run``, ``check_resumable``,
  ``new_results_path``;
- one sample on the instruments (M1, M2, M9): ``SampleSpec``, ``SampleRecord``, ``SampleFailed``,
  ``measure_sample``, ``prepare_workdir``, ``Heartbeat``, ``GapWindow``, ``GcRecorder``, ``GcEvent``,
  ``GcWindow``, ``apply_gc_policy``, ``InstrumentedLoop``, ``StallMonitor``, ``StallEntry``, ``StallWindow``,
  ``stall_monitor_of``;
- allocation (M3): ``allocation_tracker``, ``measure_allocation``, ``AllocationRecord``, ``memray_totals``;
- instructions under Valgrind: ``find_valgrind``, ``Valgrind``, ``ValgrindUnavailable``, ``build_library``,
  ``BuildFailed``, ``measure_instructions``, ``InstructionRecord``, ``instructions_section``,
  ``instructions_unavailable``;
- code variants measured interleaved (``perfsuite ab``): ``CodeVariant``, ``run_variants``, ``extend_variants``,
  ``VariantsResult``, ``probe_variant``, ``imported_modules``, ``imports_packages``;
- results documents (M8): ``ResultsWriter``, ``ResultsLock``, ``ResultsBusy``, ``SCHEMA_VERSION``,
  ``SUMMARY_METHOD``, ``HOST_LABEL_ENV``, ``load_results``, ``validate_results``, ``summarize``,
  ``summarize_samples``, ``sample_metrics``, ``verdict``, ``collect_environment``, ``describe_fixture``,
  ``now_iso``, ``write_json_atomic``, ``write_exports``;
- the machine and the code measured: ``probe_load``, ``machine_load``, ``MachineLoad``, ``LOAD_RULE``,
  ``LOADED_EXCESS_MS``, ``BASELINE_DIR_NAME``, ``measured_repository``, ``check_commit``, ``CI_VARIABLES``;
- untrusted files, read strictly: ``read_json``, ``read_text``, ``parse_json``, ``parse_toml``,
  ``bounded_lines``.
"""

from perfsuite.harness._alloc import AllocationRecord, allocation_tracker, measure_allocation, memray_totals
from perfsuite.harness._callgrind import (
    BuildFailed,
    Valgrind,
    ValgrindUnavailable,
    build_library,
    find_valgrind,
    instructions_unavailable,
)
from perfsuite.harness._documents import bounded_lines, parse_json, parse_toml, read_json, read_text
from perfsuite.harness._exports import write_exports
from perfsuite.harness._gc import GcEvent, GcRecorder, GcWindow, apply_gc_policy
from perfsuite.harness._heartbeat import GapWindow, Heartbeat
from perfsuite.harness._instructions import InstructionRecord, instructions_section, measure_instructions
from perfsuite.harness._load_probe import probe_load
from perfsuite.harness._lock import ResultsBusy, ResultsLock
from perfsuite.harness._machine_load import BASELINE_DIR_NAME, LOAD_RULE, LOADED_EXCESS_MS, MachineLoad, machine_load
from perfsuite.harness._operation import (
    AckCallback,
    Operation,
    OperationContext,
    call_optional,
    create_operation,
    resolve_operation,
)
from perfsuite.harness._params import Param, accepts, check_params, declared_parameters, did_you_mean, param_value
from perfsuite.harness._plan import PlanEntry, check_parameters, resolve_factories
from perfsuite.harness._provenance import CI_VARIABLES, check_commit, measured_repository
from perfsuite.harness._recipe import ModeSpec, Recipe, list_recipes, load_recipe, recipe_dirs
from perfsuite.harness._results import (
    HOST_LABEL_ENV,
    SCHEMA_VERSION,
    SUMMARY_METHOD,
    ResultsWriter,
    collect_environment,
    describe_fixture,
    load_results,
    now_iso,
    sample_metrics,
    summarize,
    summarize_samples,
    validate_results,
    verdict,
    write_json_atomic,
)
from perfsuite.harness._resume import check_resumable, resume_run
from perfsuite.harness._runner import RunResult, SampleEvent, check_conditions, new_results_path, plan_order, run_recipe
from perfsuite.harness._sample import SampleFailed, SampleRecord, SampleSpec, measure_sample, prepare_workdir
from perfsuite.harness._stalls import InstrumentedLoop, StallEntry, StallMonitor, StallWindow, stall_monitor_of
from perfsuite.harness._variants import (
    CodeVariant,
    VariantsResult,
    extend_variants,
    imported_modules,
    imports_packages,
    probe_variant,
    run_variants,
)

__all__ = [
    "BASELINE_DIR_NAME",
    "CI_VARIABLES",
    "HOST_LABEL_ENV",
    "LOADED_EXCESS_MS",
    "LOAD_RULE",
    "SCHEMA_VERSION",
    "SUMMARY_METHOD",
    "AckCallback",
    "AllocationRecord",
    "BuildFailed",
    "CodeVariant",
    "GapWindow",
    "GcEvent",
    "GcRecorder",
    "GcWindow",
    "Heartbeat",
    "InstructionRecord",
    "InstrumentedLoop",
    "MachineLoad",
    "ModeSpec",
    "Operation",
    "OperationContext",
    "Param",
    "PlanEntry",
    "Recipe",
    "ResultsBusy",
    "ResultsLock",
    "ResultsWriter",
    "RunResult",
    "SampleEvent",
    "SampleFailed",
    "SampleRecord",
    "SampleSpec",
    "StallEntry",
    "StallMonitor",
    "StallWindow",
    "Valgrind",
    "ValgrindUnavailable",
    "VariantsResult",
    "accepts",
    "allocation_tracker",
    "apply_gc_policy",
    "bounded_lines",
    "build_library",
    "call_optional",
    "check_commit",
    "check_conditions",
    "check_parameters",
    "check_params",
    "check_resumable",
    "collect_environment",
    "create_operation",
    "declared_parameters",
    "describe_fixture",
    "did_you_mean",
    "extend_variants",
    "find_valgrind",
    "imported_modules",
    "imports_packages",
    "instructions_section",
    "instructions_unavailable",
    "list_recipes",
    "load_recipe",
    "load_results",
    "machine_load",
    "measure_allocation",
    "measure_instructions",
    "measure_sample",
    "measured_repository",
    "memray_totals",
    "new_results_path",
    "now_iso",
    "param_value",
    "parse_json",
    "parse_toml",
    "plan_order",
    "prepare_workdir",
    "probe_load",
    "probe_variant",
    "read_json",
    "read_text",
    "recipe_dirs",
    "resolve_factories",
    "resolve_operation",
    "resume_run",
    "run_recipe",
    "run_variants",
    "sample_metrics",
    "stall_monitor_of",
    "summarize",
    "summarize_samples",
    "validate_results",
    "verdict",
    "write_exports",
    "write_json_atomic",
]
