"""``perfsuite ab``: the CI gate's main form (SPEC section 5). Two git revisions of any repository
(a team's own, not only perfsuite's) measured on one runner, their samples interleaved round by round on
the same fixture copies and idle control, compared as ``perfsuite compare`` does; ``bisect`` searches a range
with it. Typical use::

    from perfsuite.ab import run_ab
    result = run_ab("origin/main", None, recipes, resolve_fixture=resolve, output_dir=Path("results/ab"))
    result.comparison.exit_status   # 0 no regression, 1 regression, 3 inconclusive (2: a PerfsuiteError)
"""

from perfsuite.ab._bisect import BISECT_FILE, BisectResult, BisectStep, bisect
from perfsuite.ab._envs import ENV_MODES, INSTALLERS, DependencySpec, Environment, dependency_spec, ensure_environment
from perfsuite.ab._git import Revision, repo_root
from perfsuite.ab._init import InitResult, init_project
from perfsuite.ab._project import CodeUnderTest, ProjectConfig, read_config
from perfsuite.ab._run import AB_LOOKS, AB_SAMPLES, AbResult, look_again, resolve_code, run_ab

__all__ = [
    "AB_LOOKS",
    "AB_SAMPLES",
    "BISECT_FILE",
    "ENV_MODES",
    "INSTALLERS",
    "AbResult",
    "BisectResult",
    "BisectStep",
    "CodeUnderTest",
    "DependencySpec",
    "Environment",
    "InitResult",
    "ProjectConfig",
    "Revision",
    "bisect",
    "dependency_spec",
    "ensure_environment",
    "init_project",
    "look_again",
    "read_config",
    "repo_root",
    "resolve_code",
    "run_ab",
]
