"""Build hook of perfsuite-engine: the package is ``perfsuite/engine/`` of this checkout (two levels up), copied
into the wheel as it is; ``perfsuite`` itself stays an implicit namespace package, so the wheel ships no
``perfsuite/__init__.py`` and ``import perfsuite.engine`` needs nothing but the standard library."""

from __future__ import annotations

from setuptools import setup

setup(
    packages=["perfsuite.engine"],
    package_dir={"perfsuite.engine": "../../perfsuite/engine"},  # relative: setuptools refuses absolute paths
)
