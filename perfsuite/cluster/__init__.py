"""Where parallel campaigns run: this machine's process pool, or a Dask distributed cluster.

A campaign cuts its work into :class:`Task` objects and hands them to :func:`stream`, which runs them on a
:class:`Runner` and delivers the results in key order; :class:`Checkpoint` records what finished so a
campaign resumes after its client died. Pick a runner with :func:`make_runner`::

    from perfsuite.cluster import Task, make_runner, stream
    with make_runner(jobs=2, cluster="local") as runner:          # or scheduler="tls://host:8786"
        stream(runner, (Task(i, pow, (i, 2)) for i in range(100)), lambda task, value: print(value))

Trust: a scheduler runs whatever its clients submit on its workers, so whoever can connect to it controls
them. The embedded LocalCluster listens on 127.0.0.1 only, over TLS under a certificate made for the run;
a running scheduler is reached over ``tls://`` with Dask's security settings (:func:`tls_files` sets the
client's certificate files for a block), or over ``tcp://``, which authenticates nobody.

Safe to distribute: deterministic checks and simulations (crash, corruption and kill campaigns, what-if
grids). Timing work pins each task to one host (:attr:`Task.host`) and never spreads one measurement over
several machines; A/B rounds are not distributed at all (their samples must interleave on one machine).
"""

from perfsuite.cluster._checkpoint import Checkpoint, CheckpointError
from perfsuite.cluster._dask import DaskRunner, worker_identity
from perfsuite.cluster._pool import PoolRunner, make_pool
from perfsuite.cluster._runner import ATTEMPTS, ClusterError, Runner, Task, WorkerLost, stream
from perfsuite.cluster._security import check_scheduler, tls_files

__all__ = [
    "ATTEMPTS",
    "BACKENDS",
    "Checkpoint",
    "CheckpointError",
    "ClusterError",
    "DaskRunner",
    "PoolRunner",
    "Runner",
    "Task",
    "WorkerLost",
    "check_scheduler",
    "make_pool",
    "make_runner",
    "stream",
    "tls_files",
    "worker_identity",
]

#: ``--cluster`` choices: ``local`` embeds a Dask LocalCluster of ``--jobs`` workers
BACKENDS = ("local",)


def make_runner(jobs: int, *, cluster: str | None = None, scheduler: str | None = None) -> Runner:
    """``--scheduler ADDRESS``: that running Dask cluster; ``--cluster local``: an embedded LocalCluster
    of ``jobs`` workers; neither: a pool of ``jobs`` spawned processes (the default, see docs/cluster.md for why)."""
    if cluster is not None and scheduler is not None:
        raise ClusterError("--cluster and --scheduler are two ways to name a cluster: give one")
    if scheduler is not None:
        return DaskRunner.connect(scheduler)
    if cluster is not None:
        if cluster not in BACKENDS:
            raise ClusterError(f"--cluster: expected one of {', '.join(BACKENDS)}, got {cluster!r}")
        return DaskRunner.local(jobs)
    return PoolRunner(jobs)
