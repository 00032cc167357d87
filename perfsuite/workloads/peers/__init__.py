"""Peers: the systems our users would otherwise pick, driven as operations on the same work.

A benchmark that only measures its own engine convinces no one, so two peers run beside the engine in
the same recipes, on the same bytes:

* :mod:`perfsuite.workloads.peers.gptme_log`: gptme's real ``LogManager`` (the reference implementation
  of seed 000's transcript contract), against our transcript log (E2) in ``recipes/peer-transcript.toml``;
* :mod:`perfsuite.workloads.peers.langgraph_sqlite`: LangGraph's SQLite checkpointers (``SqliteSaver``
  and ``AsyncSqliteSaver``) storing our root checkpoints, against our publication pipeline (E4) in
  ``recipes/peer-checkpoint.toml``;
* :mod:`perfsuite.workloads.peers.langgraph_graph`: a real LangGraph graph invoked on a long thread with
  our savers (:mod:`perfsuite.integrations.langgraph`) and LangGraph's own, in
  ``recipes/peer-langgraph-graph.toml``.

The peer packages are the optional ``peers`` extra (``pip install -e '.[peers]'``). Modules here import
without them; a peer operation then fails with a one-line :class:`~perfsuite.errors.PerfsuiteError`
naming the missing package, and every peer factory carries an ``unavailable()`` hook that says why
(``None`` when the peer is installed) so ``perfsuite run`` can skip the recipe before measuring.
"""

from perfsuite.workloads.peers._common import (
    INSTALL_HINT,
    PEER_PINS,
    PeerFactory,
    missing_reason,
    peer_version,
    require,
    requires,
)

__all__ = ["INSTALL_HINT", "PEER_PINS", "PeerFactory", "missing_reason", "peer_version", "require", "requires"]
