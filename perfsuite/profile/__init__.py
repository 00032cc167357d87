"""Where did the time go: a recipe under a profiler, and the per-phase breakdown of samples.

``perfsuite profile RECIPE --profiler py-spy|scalene|callgrind`` runs the recipe's operation (fixture resolved
and privately copied as in ``perfsuite run``) in a worker process under the profiler, with the
profiler on only while operations run (never during setup), and writes beside the results:

* py-spy: ``<recipe>-<stamp>.<mode>.py-spy.svg`` (flame graph, one root per thread),
  ``.<mode>.speedscope.json`` (open at https://www.speedscope.app) and ``.<mode>.py-spy.txt``;
* scalene: ``<recipe>-<stamp>.<mode>.scalene.json`` (``scalene view FILE``) and ``.<mode>.scalene.txt``
  (top lines by CPU and by allocation);
* callgrind: the instructions of one operation per mode by Python function
  (:mod:`perfsuite.profile._callgrind`): ``.<mode>.callgrind.txt``, ``.folded``, ``.svg`` and callgrind's
  own files; :func:`diff_profiles` (``perfsuite profile --diff A B``) names the functions that gained;
* ``<recipe>-<stamp>.<profiler>.profile.json``: what ran, the profiled iterations with their
  ``phases_ms``/``main_thread_ms``, sample counts and the profiler commands; with ``--phase`` also
  ``<recipe>-<stamp>.<profiler>.phases.png``.

Typical use::

    from perfsuite.harness import load_recipe
    from perfsuite.profile import profile_recipe
    from perfsuite.workloads.fixtures import resolve_fixture

    recipe = load_recipe("root-checkpoint")
    fixture, info = resolve_fixture(recipe.fixture)
    run = profile_recipe(recipe, "py-spy", fixture=fixture, fixture_info=info, modes=["sync"])
    print(run.modes[0].summary)

The phase breakdown of a results file is the report's (``perfsuite.report.phase_breakdown``, ``phase_table``).
Imports harness, workloads (through the CLI) and report; the engine never imports it.
"""

from perfsuite.profile._cgdiff import FunctionChange, ModeDiff, ProfileDiff, diff_profiles, load_callgrind_profile
from perfsuite.profile._run import (
    DEFAULT_REPEAT,
    GROWTH,
    MAX_ATTEMPTS,
    PROFILERS,
    ModeProfile,
    ProfileRun,
    profile_recipe,
    profiler_command,
)
from perfsuite.profile._summary import (
    scalene_samples,
    scalene_summary,
    speedscope_samples,
    speedscope_summary,
    svg_ok,
)

__all__ = [
    "DEFAULT_REPEAT",
    "GROWTH",
    "MAX_ATTEMPTS",
    "PROFILERS",
    "FunctionChange",
    "ModeDiff",
    "ModeProfile",
    "ProfileDiff",
    "ProfileRun",
    "diff_profiles",
    "load_callgrind_profile",
    "profile_recipe",
    "profiler_command",
    "scalene_samples",
    "scalene_summary",
    "speedscope_samples",
    "speedscope_summary",
    "svg_ok",
]
