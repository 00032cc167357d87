"""``perfsuite ab``: the CI gate's main form (SPEC section 5, issue 15). Two git revisions measured on one
runner, their samples interleaved round by round on the same fixture copies and idle control, compared as
``perfsuite compare`` does. Typical use::

    from perfsuite.ab import run_ab
    result = run_ab("origin/main", None, recipes, resolve_fixture=resolve, output_dir=Path("results/ab"))
    result.comparison.exit_status   # 0 no regression, 1 regression, 3 inconclusive (2: a PerfsuiteError)
"""

from perfsuite.ab._git import Revision
from perfsuite.ab._run import AB_LOOKS, AB_SAMPLES, CODE_UNDER_TEST, FALLBACK_CODE, AbResult, look_again, run_ab

__all__ = ["AB_LOOKS", "AB_SAMPLES", "CODE_UNDER_TEST", "FALLBACK_CODE", "AbResult", "Revision", "look_again", "run_ab"]
