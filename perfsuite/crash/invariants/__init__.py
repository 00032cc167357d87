"""The invariants of SPEC section 7, as data: the check context, the transcript and session invariants, and
the checker's own reader of the session log (independent of the engine's, so an engine bug cannot hide).

A private room of :mod:`perfsuite.crash`; other packages use the facade's names.
"""
