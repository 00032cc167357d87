"""What a crash can leave on disk (SPEC section 7): the recorded trace and its oracle, the page-cache model,
the replay of a trace into micro-ops and the crash states enumerated from it. Pure: no campaign, no worker.

A private room of :mod:`perfsuite.crash`; other packages use the facade's names.
"""
