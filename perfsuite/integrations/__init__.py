"""Integrations: the engine behind other frameworks' persistence interfaces, each in its own module with
its own extra (:mod:`perfsuite.integrations.langgraph`: LangGraph checkpointers, the ``langgraph`` extra).

This package uses the engine's public names only; the engine knows nothing about it (SPEC section 1).
Importing the package imports no framework: each module does, after saying which extra provides it.
"""

__all__: list[str] = []
