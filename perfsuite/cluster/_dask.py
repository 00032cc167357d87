"""The Dask back end: an embedded ``LocalCluster`` (``--cluster local``: loopback only, TLS under a
per-run certificate) or a running scheduler (``--scheduler ADDRESS``: ``tls://`` with Dask's security
settings, or ``tcp://``). Needs the ``cluster`` extra (``dask[distributed]``, ``cryptography``).

Each task runs in its worker's child process (:mod:`perfsuite.cluster._child`), as a local-pool task runs
in a spawned process. The scheduler re-runs the tasks of a worker that died on another worker; a task
that kills workers again and again ends as ``KilledWorker``, which this runner reports as
:class:`~perfsuite.cluster.WorkerLost` like a broken local pool.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from collections.abc import Collection
from typing import Any
from urllib.parse import urlsplit

from perfsuite._extras import require
from perfsuite.cluster._runner import ClusterError, Runner, Task, WorkerLost
from perfsuite.cluster._security import check_scheduler, client_security, connect_timeout_s, local_security

__all__ = ["DaskRunner", "worker_identity"]

#: the only interface an embedded LocalCluster's scheduler and workers listen on
LOOPBACK = "127.0.0.1"


def worker_identity() -> dict[str, Any]:
    """What a worker says about itself: its machine and the perfsuite it imports (run on every worker
    before a campaign: a worker with another perfsuite would check another engine)."""
    import perfsuite

    return {"host": socket.gethostname(), "perfsuite": perfsuite.__version__, "python": sys.version.split()[0],
            "pid": os.getpid()}


def _host_of(address: str) -> str:
    """``tcp://10.0.0.5:40123`` -> ``10.0.0.5``: the key Dask accepts in ``workers=`` for a whole machine."""
    return urlsplit(address).hostname or address


class DaskRunner(Runner):
    """Tasks on a Dask cluster. :meth:`local` starts an embedded LocalCluster of spawned worker
    processes (closed with the runner); :meth:`connect` uses a running scheduler (left running)."""

    kind = "dask"

    def __init__(self, client: Any, cluster: Any = None, label: str = "") -> None:
        self.client = client
        self._cluster = cluster
        self.label = label
        if cluster is not None:
            self.kind = "dask-local"

    @classmethod
    def local(cls, workers: int) -> DaskRunner:
        """A LocalCluster of ``workers`` single-threaded worker processes on this machine, no dashboard: bound to
        the loopback interface only, every connection TLS under a certificate made for this run (a scheduler
        runs what its clients submit: no other process may connect, see :mod:`perfsuite.cluster._security`)."""
        require("cluster", "distributed")
        from distributed import Client, LocalCluster

        security = local_security()
        cluster = LocalCluster(n_workers=max(1, workers), threads_per_worker=1, processes=True, host=LOOPBACK,
                               protocol="tls://", security=security, dashboard_address=None,
                               silence_logs=logging.ERROR)
        client = Client(cluster, security=security, set_as_default=False)
        runner = cls(client, cluster, f"LocalCluster of {max(1, workers)} worker{'s' * (max(1, workers) != 1)}")
        runner._check_workers()
        return runner

    @classmethod
    def connect(cls, address: str, *, security: Any = None, timeout_s: float | None = None) -> DaskRunner:
        """The running scheduler at ``address`` (``tls://HOST:PORT``, or ``tcp://``, which authenticates nobody);
        one-line errors when the address is malformed, the scheduler cannot be reached or has no worker within
        ``timeout_s`` (default: Dask's connect timeout), or a worker imports another perfsuite version.
        ``security``: a ``distributed.Security`` (default: Dask's own settings, see ``tls_files``)."""
        address = check_scheduler(address)
        require("cluster", "distributed")
        from distributed import Client

        for name in ("distributed", "distributed.client", "distributed.comm"):
            logging.getLogger(name).setLevel(logging.CRITICAL)  # the one-line error below says it
        security = client_security(address) if security is None else security
        timeout_s = connect_timeout_s() if timeout_s is None else timeout_s
        try:
            client = Client(address, timeout=timeout_s, security=security, set_as_default=False)
        except (OSError, TimeoutError, ValueError, RuntimeError, TypeError) as exc:
            raise ClusterError(f"--scheduler {address}: cannot connect ({type(exc).__name__}: {exc})") from None
        runner = cls(client, None, f"scheduler {address}")
        try:
            client.wait_for_workers(1, timeout=timeout_s)
        except (TimeoutError, OSError) as exc:
            client.close()
            raise ClusterError(f"--scheduler {address}: no worker joined within {timeout_s:g} s ({exc})") from None
        runner._check_workers()
        return runner

    def _check_workers(self) -> None:
        import perfsuite

        identities = self.client.run(worker_identity)
        other = {a: i["perfsuite"] for a, i in identities.items() if i["perfsuite"] != perfsuite.__version__}
        if other:
            self.close()
            raise ClusterError(f"{self.label}: workers import another perfsuite ({other}; this is "
                               f"{perfsuite.__version__}): install the same version on every worker")

    @property
    def slots(self) -> int:
        return max(1, sum(self.client.nthreads().values()))

    def hosts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for address, threads in sorted(self.client.nthreads().items()):
            host = _host_of(address)
            out[host] = out.get(host, 0) + int(threads)
        return out

    def worker_pids(self) -> dict[str, int]:
        """Worker address -> process id (the tests kill one mid-campaign)."""
        return {a: i["pid"] for a, i in self.client.run(worker_identity).items()}

    def submit(self, task: Task) -> Any:
        from perfsuite.cluster._child import call_in_child

        where = {"workers": [task.host], "allow_other_workers": False} if task.host else {}
        return self.client.submit(call_in_child, task.fn, task.args, pure=False, **where)

    def wait(self, handles: Collection[Any]) -> set[Any]:
        from distributed import wait

        with self.client.as_current():  # (``wait`` looks for the current client; ours is not the default)
            return set(wait(list(handles), return_when="FIRST_COMPLETED").done)

    def result(self, handle: Any) -> Any:
        from distributed import CancelledError, KilledWorker

        try:
            return handle.result()
        except KilledWorker as exc:
            raise WorkerLost(f"the task killed its worker repeatedly: {exc}") from None
        except CancelledError as exc:
            raise WorkerLost(f"the scheduler lost the task: {exc}") from None
        finally:
            handle.release()

    def cancel(self, handles: Any) -> None:
        handles = list(handles)
        if handles:
            self.client.cancel(handles)

    def describe(self) -> str:
        hosts = self.hosts()
        threads = f"{self.slots} worker thread{'s' * (self.slots != 1)}"
        return f"{self.label}: {threads} on {len(hosts)} host{'s' * (len(hosts) != 1)}"

    def close(self) -> None:
        try:
            self.client.close()
        finally:
            if self._cluster is not None:
                self._cluster.close()
