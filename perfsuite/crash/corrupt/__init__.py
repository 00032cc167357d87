"""The corruption campaign, ``perfsuite crashcheck --corrupt``: every file and directory of a finished session
damaged in each applicable way, one case per worker, and what open, recovery and retirement make of it.

A private room of :mod:`perfsuite.crash`; other packages use the facade's names.
"""
