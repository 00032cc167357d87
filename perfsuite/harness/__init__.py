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
"""

from perfsuite.harness._alloc import (
    ALLOCATION_TRACKERS,
    AllocationRecord,
    allocation_tracker,
    measure_allocation,
    memray_totals,
)
from perfsuite.harness._callgrind import (
    BuildFailed,
    Valgrind,
    ValgrindUnavailable,
    build_library,
    callgrind_totals,
    find_valgrind,
    instructions_unavailable,
)
from perfsuite.harness._documents import (
    bounded_lines,
    open_regular,
    parse_json,
    parse_toml,
    read_json,
    read_text,
    read_toml,
)
from perfsuite.harness._exports import write_exports
from perfsuite.harness._gc import GcEvent, GcRecorder, GcWindow, apply_gc_policy
from perfsuite.harness._heap import LiveHeap, build_heap, probe_full_collection
from perfsuite.harness._heartbeat import GapWindow, Heartbeat, LagPercentiles
from perfsuite.harness._instructions import InstructionRecord, instructions_section, measure_instructions
from perfsuite.harness._load_probe import probe_load
from perfsuite.harness._lock import ResultsBusy, ResultsLock
from perfsuite.harness._machine_load import (
    BASELINE_DIR_NAME,
    LOAD_RULE,
    LOADED_EXCESS_MS,
    MachineLoad,
    machine_load,
)
from perfsuite.harness._operation import (
    AckCallback,
    Operation,
    OperationContext,
    call_optional,
    create_operation,
    import_roots,
    resolve_operation,
)
from perfsuite.harness._params import (
    Param,
    ReadRecorder,
    accepts,
    check_params,
    declared_parameters,
    did_you_mean,
    param_value,
    unread_keys,
)
from perfsuite.harness._plan import PlanEntry, SampleKind, check_parameters, resolve_factories
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
from perfsuite.harness._runner import (
    RunResult,
    SampleEvent,
    check_conditions,
    new_results_path,
    plan_order,
    run_recipe,
)
from perfsuite.harness._sample import (
    HEAP_SEED,
    SampleFailed,
    SampleRecord,
    SampleSpec,
    measure_sample,
    prepare_workdir,
)
from perfsuite.harness._stalls import (
    TOP_CALLBACKS,
    InstrumentedLoop,
    StallEntry,
    StallMonitor,
    StallWindow,
    run_instrumented,
    stall_monitor_of,
)
from perfsuite.harness._variants import (
    CodeVariant,
    VariantsResult,
    extend_variants,
    imported_modules,
    imports_packages,
    plan_variants,
    probe_variant,
    run_variants,
)

__all__ = [
    "ALLOCATION_TRACKERS",
    "BASELINE_DIR_NAME",
    "CI_VARIABLES",
    "HEAP_SEED",
    "HOST_LABEL_ENV",
    "LOADED_EXCESS_MS",
    "LOAD_RULE",
    "SCHEMA_VERSION",
    "SUMMARY_METHOD",
    "TOP_CALLBACKS",
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
    "LagPercentiles",
    "LiveHeap",
    "MachineLoad",
    "ModeSpec",
    "Operation",
    "OperationContext",
    "Param",
    "PlanEntry",
    "ReadRecorder",
    "Recipe",
    "ResultsBusy",
    "ResultsLock",
    "ResultsWriter",
    "RunResult",
    "SampleEvent",
    "SampleFailed",
    "SampleKind",
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
    "build_heap",
    "build_library",
    "call_optional",
    "callgrind_totals",
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
    "import_roots",
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
    "open_regular",
    "param_value",
    "parse_json",
    "parse_toml",
    "plan_order",
    "plan_variants",
    "prepare_workdir",
    "probe_full_collection",
    "probe_load",
    "probe_variant",
    "read_json",
    "read_text",
    "read_toml",
    "recipe_dirs",
    "resolve_factories",
    "resolve_operation",
    "resume_run",
    "run_instrumented",
    "run_recipe",
    "run_variants",
    "sample_metrics",
    "stall_monitor_of",
    "summarize",
    "summarize_samples",
    "unread_keys",
    "validate_results",
    "verdict",
    "write_exports",
    "write_json_atomic",
]
