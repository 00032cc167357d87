"""The crash workloads every campaign runs: the workload registry and the transcript workloads, the session
workloads and their oracle writer (:class:`SessionDriver`), and the scenarios for the classes of bug the
campaigns could not see before. Importing the facade registers them all.

A private room of :mod:`perfsuite.crash`; other packages use the facade's names.
"""
