"""perfsuite: a durable session store for agent conversations, and the suite that measures it.

The engine lives in :mod:`perfsuite.engine` and imports nothing else from perfsuite; the measuring
instruments live in :mod:`perfsuite.harness` and know nothing about sessions (SPEC section 1).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("perfsuite")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
