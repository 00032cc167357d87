"""Optional extras: the core install runs `perfsuite run` and its table; the rest is opt-in.

=============  ============================================  ==========================================
extra          packages                                      what needs them
=============  ============================================  ==========================================
(core)         pyperf, numpy, hdrhistogram, rich             run, report, bars, fixtures, crashcheck,
                                                             whatif (table, CSV, JSON), demo; the M3
                                                             allocation pass on tracemalloc (stdlib)
``report``     matplotlib, scipy, ruptures                   compare, history, dashboard, evidence
                                                             --baseline, --phase plots, whatif --plot
``profile``    scalene, py-spy                               profile
``notebooks``  jupyterlab, nbclient, ipykernel (+ report)    notebooks/
``peers``      gptme, langgraph-checkpoint-sqlite            the peer recipes
``langgraph``  langgraph, langgraph-checkpoint               perfsuite.integrations.langgraph (the
                                                             engine's LangGraph checkpointers)
``cluster``    dask[distributed], cryptography               --cluster local (TLS under a per-run
                                                             certificate), --scheduler ADDRESS
                                                             (crashcheck, sweep, whatif)
``ui``         textual                                       the typing recipes (typing-*, M12)
``alloc``      memray                                        PERFSUITE_ALLOCATION_TRACKER=memray (the
                                                             sum of every allocation, native ones too);
                                                             watch --allocation-every
``validate``   jsonschema                                    the reference JSON Schema validator (the
                                                             core checks results with its own subset)
=============  ============================================  ==========================================

Every import site of an optional package calls :func:`require` first, so a missing extra is one line
naming the extra and how to install it (exit 2), never a traceback.
"""

from __future__ import annotations

import importlib
from functools import cache
from pathlib import Path

from perfsuite.errors import PerfsuiteError

__all__ = ["EXTRAS", "install_hint", "require"]

#: the optional extras of pyproject.toml and the top-level modules each one provides
EXTRAS: dict[str, tuple[str, ...]] = {
    "report": ("matplotlib", "scipy", "ruptures"),
    "profile": ("scalene",),
    "notebooks": ("jupyterlab", "nbclient", "nbformat", "ipykernel"),
    "peers": ("gptme", "langgraph", "aiosqlite"),
    "langgraph": ("langgraph",),
    "cluster": ("dask", "distributed", "cryptography"),
    "ui": ("textual",),
    "alloc": ("memray",),
    "validate": ("jsonschema",),
}


@cache
def _source_root() -> Path | None:
    """The checkout perfsuite runs from (a ``pyproject.toml`` naming it beside the package), if any."""
    import perfsuite

    root = Path(perfsuite.__file__).resolve().parent.parent
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    return root if 'name = "perfsuite"' in text else None


def install_hint(extra: str) -> str:
    """The pip command that installs ``extra``: editable from the checkout perfsuite runs from (its absolute
    path, so the hint is right from any working directory), else by distribution name."""
    root = _source_root()
    if root is None:
        return f"pip install 'perfsuite[{extra}]'"
    return f"pip install -e '{root}[{extra}]'"


def require(extra: str, *modules: str) -> None:
    """Import ``modules`` or raise one :class:`PerfsuiteError` line naming ``extra`` and its install command.

    Call it just before the import statement that needs the extra (the import then stays as written).
    """
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}")
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            missing = getattr(exc, "name", None) or module
            raise PerfsuiteError(
                f"{missing} is not installed: this needs perfsuite's {extra} extra ({install_hint(extra)})"
            ) from None
