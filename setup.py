"""Build hook (issue 18 item 5): a wheel carries the built-in recipes and fixture specs.

The top-level ``recipes/`` and ``fixtures/`` stay the one editable source of truth (a checkout and an
editable install read them in place); a regular build copies their ``*.toml`` and ``README.md`` into the
wheel as ``perfsuite/_data/<kind>/``, where :func:`perfsuite._paths.builtin_dir` finds them. Everything
else is declared in ``pyproject.toml``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
KINDS = ("recipes", "fixtures")  # perfsuite._paths.BUILTIN_KINDS


class BuildPyWithData(build_py):
    """``build_py`` plus the copies of ``recipes/`` and ``fixtures/`` (not in editable mode: the checkout is read)."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for kind in KINDS:
            target = Path(self.build_lib) / "perfsuite" / "_data" / kind
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            for source in sorted((ROOT / kind).iterdir()):
                if source.suffix == ".toml" or source.name == "README.md":
                    shutil.copy2(source, target / source.name)


setup(cmdclass={"build_py": BuildPyWithData})
