"""Seeded bugs: deliberately broken engines every campaign must catch (``--seeded-bug NAME``), built from
the engine's documented fault hooks and I/O layers, never by patching a class.

A private room of :mod:`perfsuite.crash`; other packages use the facade's names.
"""
