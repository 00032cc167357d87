"""The kill campaign, ``perfsuite crashcheck --kill N``: real child processes on the real file system, killed
with SIGKILL at seeded points, each recovered by the next and checked against what it acknowledged.

A private room of :mod:`perfsuite.crash`; other packages use the facade's names.
"""
