"""perfsuite: a durable session store for agent conversations, and the suite that measures it.

The engine lives in :mod:`perfsuite.engine` and imports nothing else from perfsuite; the measuring
instruments live in :mod:`perfsuite.harness` and know nothing about sessions (SPEC section 1).

``__version__`` is looked up on first use (PEP 562): :mod:`importlib.metadata` (with the email, zipfile and
csv modules it imports) is about a third of what ``perfsuite --help`` or a bad command line costs, and every
``perfsuite`` start-up imports this package.
"""

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    """``__version__``: the installed distribution's version (``0.0.0+unknown`` in a source tree without an
    install), read once and then kept as an ordinary attribute."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("perfsuite")
    except PackageNotFoundError:  # running from a source tree without an install
        found = "0.0.0+unknown"
    globals()["__version__"] = found
    return found
