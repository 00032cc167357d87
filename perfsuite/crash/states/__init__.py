"""The crash-state campaign, ``perfsuite crashcheck``: every crash state of every workload rebuilt, recovered
by the engine's real open path in a worker (recovery crashed too) and checked against the invariants.

A private room of :mod:`perfsuite.crash`; other packages use the facade's names.
"""
