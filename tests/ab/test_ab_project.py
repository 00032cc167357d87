"""The rules behind `perfsuite ab` on any repository (U), without running a worker: the default code
under test, the ``[tool.perfsuite]`` table, dependency specifications, installer failures in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfsuite.ab import dependency_spec, read_config
from perfsuite.ab._envs import install_failure
from perfsuite.ab._project import code_layout, default_code, operation_packages
from perfsuite.errors import PerfsuiteError


def _tree(root: Path, *files: str) -> Path:
    for rel in files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("")
    return root


def test_the_default_code_is_the_repositorys_packages_the_operations_import_less_their_own(tmp_path: Path) -> None:
    root = _tree(tmp_path, "myruntime/__init__.py", "myruntime/store.py", "benchmarks/__init__.py",
                 "benchmarks/ops.py", "helpers.py")
    modules = {"myruntime": str(root / "myruntime/__init__.py"), "myruntime.store": str(root / "myruntime/store.py"),
               "benchmarks.ops": str(root / "benchmarks/ops.py"), "helpers": str(root / "helpers.py"),
               "json": "/usr/lib/python3/json/__init__.py"}
    code = default_code(root, ["benchmarks.ops:Commit"], modules)
    assert code.packages == ("helpers", "myruntime") and code.subdir == ""
    # operations inside the code under test: each revision's own are measured
    inside = default_code(root, ["myruntime.store:Commit"], {"myruntime": modules["myruntime"]})
    assert inside.packages == ("myruntime",) and "live inside it" in inside.how


def test_the_instrument_is_never_code_under_test_and_src_layouts_are_found(tmp_path: Path) -> None:
    root = _tree(tmp_path, "perfsuite/__init__.py", "perfsuite/engine/__init__.py", "src/mypkg/__init__.py")
    with pytest.raises(PerfsuiteError, match=r"import no package of .*code-under-test"):
        default_code(root, ["perfsuite.workloads.engine:x"], {"perfsuite.engine": str(root / "perfsuite/engine/x.py")})
    src = default_code(root, ["bench:x"], {"mypkg": str(root / "src/mypkg/__init__.py")})
    assert src.packages == ("mypkg",) and src.subdir == "src" and src.root(root) == root / "src"
    assert code_layout(root, ["perfsuite.engine"]) == "" and code_layout(root, ["mypkg"]) == "src"
    assert operation_packages(["perfsuite.workloads.engine:x", "benchops:Commit", "a.b.c:D"]) == (
        "a", "benchops", "perfsuite.workloads")


def test_the_tool_perfsuite_table(tmp_path: Path) -> None:
    assert read_config(tmp_path).code_under_test is None  # no pyproject.toml: the defaults
    (tmp_path / "pyproject.toml").write_text('[tool.perfsuite]\ncode-under-test = ["perfsuite"]\n')
    with pytest.raises(PerfsuiteError, match="the instrument itself"):
        read_config(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.perfsuite]\ncode-under-test = ["a.b"]\nrecipes = ["x"]\n')
    config = read_config(tmp_path)
    assert config.code_under_test == ("a.b",) and config.recipes == ("x",)
    this = read_config(Path(__file__).resolve().parents[2])  # perfsuite's own repository: one case of the rule
    assert this.code_under_test == ("perfsuite.engine",)


def test_dependency_specifications(tmp_path: Path) -> None:
    assert dependency_spec(tmp_path).requirements == ()
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["b>=2", "a==1"]\n')
    assert dependency_spec(tmp_path).requirements == ("a==1", "b>=2")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\ndynamic = ["dependencies"]\n')
    spec = dependency_spec(tmp_path)
    assert spec.requirements is None and "dynamic" in spec.source


@pytest.mark.parametrize("dep", ["--report=/tmp/x", "--no-index", " -e .", "has spaces and !!"])
def test_a_dependency_that_is_not_a_requirement_never_reaches_the_installer(tmp_path: Path, dep: str) -> None:
    """A pull request's pyproject is untrusted: an entry pip would take as an option is refused, one line."""
    (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "x"\ndependencies = [{dep!r}, "packaging"]\n'
                                             .replace("'", '"'))
    with pytest.raises(PerfsuiteError, match="is not a requirement") as caught:
        dependency_spec(tmp_path)
    assert "\n" not in str(caught.value)


PIP = """Looking in links: /tmp/w
ERROR: Could not find a version that satisfies the requirement tinydep==3.0 (from versions: 1.0, 2.0)
ERROR: No matching distribution found for tinydep==3.0
"""
UV = """error: No solution found when resolving dependencies
  cause: Because there is no version of tinydep==3.0 and you require tinydep==3.0, we can conclude that your
"""
UV_BOX = """  × No solution found when resolving dependencies:
  ╰─▶ Because Tiny_Dep was not found in the package registry and you require tiny-dep, we can conclude
"""


def test_an_installer_failure_is_one_line_naming_the_requirement() -> None:
    assert install_failure(PIP, ["other>=1", "tinydep==3.0"]) == (
        "cannot install tinydep==3.0: Could not find a version that satisfies the requirement tinydep==3.0 "
        "(from versions: 1.0, 2.0)")
    assert install_failure(UV, ["tinydep==3.0"]).startswith("cannot install tinydep==3.0: Because there is no")
    assert install_failure(UV_BOX, ["tiny-dep"]).startswith("cannot install tiny-dep: Because Tiny_Dep")
    assert install_failure("boom\n", ["x==1"]) == "cannot install its dependencies: boom"
    assert "\n" not in install_failure(PIP + UV, ["tinydep==3.0"])
