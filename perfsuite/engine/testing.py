"""Stand-ins and injectors for tests, checkers and simulations: production needs none of them.

- virtual time: :class:`VirtualClock` (timers fire on ``advance``) and :class:`VirtualRunner` (a job holds
  the gate for a modelled duration), how tests and the what-if simulator run the real schedulers;
- a disk without a disk: :class:`MemoryFileSystem` (the real pipeline, nothing durable);
- the observing and injecting I/O layers (E1): :class:`RecordingFileSystem` logs every durability
  operation as an :class:`FsOp` (syscall-order tests, the crash checker, bytes per publication);
  :class:`FaultyFileSystem` fails the :class:`Fault` it is given or raises :class:`SimulatedCrash`;
  :class:`LatencyFileSystem` tops each call up to a drawn latency from a :class:`DelayModel` (M10);
- fault hooks: :class:`FaultHooks` (``Session.open(..., faults=...)``, or on the I/O layer with
  :func:`with_fault_hooks`) build a deliberately broken engine for a checker; ``reorder_steps`` rewrites
  the publication's :class:`Step` sequence.

Each wraps or stands beside the real back ends of :mod:`perfsuite.engine` (``OsFileSystem``,
``SystemClock``, ``LoopRunner``), so they compose: ``RecordingFileSystem(FaultyFileSystem(OsFileSystem()))``.
"""

from perfsuite.engine._clock import VirtualClock
from perfsuite.engine._faults import Fault, FaultyFileSystem, SimulatedCrash
from perfsuite.engine._latency import (
    LATENCY_OPS,
    DelayModel,
    Distribution,
    FixedDelay,
    LatencyFileSystem,
    LatencyStats,
    LogNormalDelay,
    QuantileDelay,
    UniformDelay,
)
from perfsuite.engine._memfs import MemoryFileSystem
from perfsuite.engine._recording import FsOp, RecordingFileSystem
from perfsuite.engine._runner import VirtualRunner
from perfsuite.engine._session_values import FaultHooks, with_fault_hooks
from perfsuite.engine._steps import Step

__all__ = [
    "LATENCY_OPS",
    "DelayModel",
    "Distribution",
    "Fault",
    "FaultHooks",
    "FaultyFileSystem",
    "FixedDelay",
    "FsOp",
    "LatencyFileSystem",
    "LatencyStats",
    "LogNormalDelay",
    "MemoryFileSystem",
    "QuantileDelay",
    "RecordingFileSystem",
    "SimulatedCrash",
    "Step",
    "UniformDelay",
    "VirtualClock",
    "VirtualRunner",
    "with_fault_hooks",
]
