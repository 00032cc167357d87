"""How the campaigns' work reaches workers (a local pool or a Dask cluster): the runner a campaign uses,
its progress events and the checkpoint of what it finished. The workloads, invariants and checks know nothing of this.

Every campaign cuts its work into batches keyed 0, 1, 2... per unit (a workload under a model, a
workload's damage cases, a profile's chain of kills), streams them with :func:`perfsuite.cluster.stream`
and folds the results in key order, so its answer does not depend on where or in which order the batches
ran. The fold's state after the first K batches is what a checkpoint records for the unit.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Executor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import perfsuite
from perfsuite.cluster import Checkpoint, PoolRunner, Runner, make_runner
from perfsuite.crash._tracefile import read_trace, write_trace
from perfsuite.crash.model._model import materialize, snapshot
from perfsuite.crash.model._trace import OpTrace
from perfsuite.crash.workloads._registry import Workload, record_workload


@dataclass(frozen=True, slots=True)
class Progress:
    """Where a campaign is: ``unit`` (``workload / model``, ``workload``, ``profile``) has ``done`` of at most
    ``total`` states (cases, kills) done; ``violations`` so far in the whole campaign."""

    unit: str
    done: int
    total: int
    violations: int


OnProgress = Callable[[Progress], None]


@dataclass(frozen=True, slots=True)
class Execution:
    """Where a campaign runs and what it resumes from: ``cluster`` (``local``) or ``scheduler`` (an
    address) pick the Dask back end (default: a local pool of the config's ``jobs``); ``checkpoint`` is the
    file recording finished batches, ``resume`` continues the campaign it holds."""

    cluster: str | None = None
    scheduler: str | None = None
    checkpoint: str | None = None
    resume: bool = False


def default_scratch() -> str | None:
    """Where workers rebuild states: RAM-backed ``/dev/shm`` when usable (recovery's fsyncs need no real
    disk, the model decides durability; about 5x faster than ext4), else the system temp directory."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None


@contextmanager
def runner_for(jobs: int, executor: Executor | None, runner: Runner | None,
               execution: Execution | None) -> Iterator[Runner]:
    """The runner of one campaign: the one given, a pool around a shared ``executor`` (tests), or one made
    from ``execution`` (closed afterwards)."""
    if runner is not None:
        yield runner
        return
    if executor is not None:
        yield PoolRunner(jobs, executor)
        return
    made = make_runner(jobs, cluster=execution.cluster if execution else None,
                       scheduler=execution.scheduler if execution else None)
    try:
        yield made
    finally:
        made.close()


def campaign_key(kind: str, config: Any, ignore: tuple[str, ...]) -> dict[str, Any]:
    """What a checkpoint must match to be resumed: the campaign kind, perfsuite's version and every config
    field that changes the answer (not ``ignore``: where it runs, how many workers, scratch space)."""
    fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name not in ignore}
    return {"kind": kind, "perfsuite": perfsuite.__version__, **fields}


def open_checkpoint(execution: Execution | None, key: Mapping[str, Any]) -> Checkpoint | None:
    """The campaign's checkpoint file, when one was asked for (refused when it belongs to another campaign,
    or exists without ``resume``)."""
    if execution is None or execution.checkpoint is None:
        return None
    return Checkpoint(os.path.abspath(execution.checkpoint), key, resume=execution.resume)


def encode(value: Any) -> Any:
    """A frozen dataclass (a violation, a result) as JSON."""
    return dataclasses.asdict(value)


def decode(cls: type, data: Mapping[str, Any]) -> Any:
    """Back from :func:`encode`: lists become the tuples the dataclass holds."""
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


def recorded(workload: Workload, root: str, bug: str | None, checkpoint: Checkpoint | None) -> OpTrace:
    """``record_workload``, once per campaign: with a checkpoint the trace (and the tree it left) is kept
    beside it (``FILE.traces/``), and a resumed campaign checks that very trace. The engine writes wall-clock
    times into its event records, so a new recording would differ from the first in those bytes."""
    if checkpoint is None:
        return record_workload(workload, root, bug)
    store = checkpoint.path.with_name(checkpoint.path.name + ".traces")
    path = store / f"{workload.name}.json"  # JSON read as data (untrusted: it may come from another machine)
    if checkpoint.resume and os.path.lexists(path):  # a FIFO or a link there is refused, never skipped
        trace, tree = read_trace(path, workload.name, bug, root)
        shutil.rmtree(trace.root, ignore_errors=True)  # (what the killed client left there; checked: its own)
        materialize(tree, trace.root)  # the corruption campaign damages copies of this tree
        return trace
    trace = record_workload(workload, root, bug)
    store.mkdir(parents=True, exist_ok=True)
    write_trace(path, trace, snapshot(trace.root))
    return trace


def forget_recorded(trace: OpTrace, root: str) -> None:
    """Remove the tree :func:`recorded` rebuilt for a resumed campaign (at the killed client's recording
    path, ``root`` being this run's), with the killed client's recording directory."""
    if os.path.realpath(trace.root) == os.path.realpath(root):
        return
    parent = os.path.dirname(trace.root)
    shutil.rmtree(parent if "-record-" in os.path.basename(parent) else trace.root, ignore_errors=True)


def with_local_scratch(fn: Callable[..., Any], at: int, *args: Any) -> Any:
    """Worker task wrapper: ``fn(*args)``, where ``args[at]`` (the scratch directory the client chose, e.g.
    its ``/dev/shm``) is replaced by this machine's default when this machine does not have it."""
    scratch = args[at]
    if scratch is not None and not os.path.isdir(scratch):
        args = (*args[:at], default_scratch(), *args[at + 1 :])
    return fn(*args)
