"""The kill campaign's ``langgraph`` profile: a child drives the LangGraph saver until SIGKILL.

The child (``python -m perfsuite.crash.kill._child DIR langgraph SEED TAG ...``) opens an ``EngineSaver`` on the
chain's session (its open breaks the dead predecessor's lease and drops a torn tail) and loops over the
crash workload's saver steps (``SaverSteps``): on one of three threads (and a child namespace), a put whose
``messages`` list is the list ``get_tuple`` read plus one item (a tail across every child of the chain) and
the task's ``put_writes``; now and then a ``delete_thread`` or a ``prune``. Every third kill of the chain the
child SIGKILLs itself right after a ``put_writes`` acknowledgement (the plan's ``coalesce`` count of turns:
an acknowledgement that outran its fdatasync is lost there, without timing). Every note and acknowledgement
goes to the side file first, fdatasynced (``_ledger``), then to stdout. After each kill the parent reopens
the saver and checks invariant S against every record of every child so far: each acknowledged checkpoint
id with its values, metadata and parent, each acknowledged task's writes (L counts those missing); then
reopens it again (6: nothing changes on disk, the same read back).
"""

from __future__ import annotations

import json
import os
import random
import signal
from collections.abc import Iterator
from typing import Any

from perfsuite.crash.invariants._langgraph import (
    CHECKPOINT,
    PUT,
    REMOVE,
    WRITES,
    WRITTEN,
    build_model,
    checkpoint_key,
    excused,
    saver_problems,
    writes_key,
)
from perfsuite.crash.kill._ledger import AckLedger
from perfsuite.crash.model._model import snapshot
from perfsuite.crash.model._trace import Ack, Note

LANGGRAPH = "langgraph"
THREADS = ("t0", "t1", "t2")
REMOVE_SHARE = 0.05  # of the steps: a delete_thread or a prune (keep_latest), half each


def saver_child(directory: str, seed: int, tag: str, bug: str | None, ledger: str | None, die_after: int = 0) -> int:
    """The child's loop (module doc); runs until it is killed, or (``die_after`` > 0) SIGKILLs itself right
    after that many turns' ``put_writes`` acknowledgement (every record is in the side file already): the
    window a write acknowledged before its fdatasync is lost in, hit without timing. Checkpoint ids start with
    the kill's index, so they sort in put order along the chain."""
    from perfsuite.crash.kill._layer import layer
    from perfsuite.crash.workloads._driver import settings
    from perfsuite.crash.workloads._langgraph import SaverSteps, saver_faults
    from perfsuite.integrations.langgraph import EngineSaver

    side = AckLedger(ledger)
    fs, _faults = layer(bug)
    saver = EngineSaver(directory, create=False, fs=fs, settings=settings(), faults=saver_faults(fs))
    rng = random.Random(seed)

    def record(label: str, kind: str, detail: dict[str, Any]) -> None:
        what = "NOTE" if kind in (PUT, WRITES, REMOVE) else "ACK"
        line = f"{what} {json.dumps({'kind': kind, **detail}, sort_keys=True)}"
        side.record(line)  # durable outside the session before anyone sees it
        print(line, flush=True)

    print(f"READY {json.dumps({'pid': os.getpid()})}", flush=True)
    steps = SaverSteps(saver, record, prefix=f"{int(tag.lstrip('k')):05d}-")
    turns = 0
    while True:
        thread = rng.choice(THREADS)
        if rng.random() < REMOVE_SHARE:
            steps.remove(thread, prune=rng.random() < 0.5)
            continue
        steps.turn(thread, ns=rng.choice(("", "", "", "child")))
        turns += 1
        if turns == die_after:
            os.kill(os.getpid(), signal.SIGKILL)


def lost_saver_acks(view: dict[str, Any], acks: list[Ack], notes: list[Note]) -> list[Ack]:
    """Each acknowledged put or put_writes the model still holds (no acknowledged removal took it) that the
    reopened saver does not read back."""
    model = build_model(acks, notes)
    landed, _problems = excused(model, view)  # (what a removal under way at a kill took is not lost)
    lost = []
    for ack in acks:
        key = checkpoint_key(ack.detail) if ack.kind == CHECKPOINT else writes_key(ack.detail) \
            if ack.kind == WRITTEN else None
        if key is None or key in landed:
            continue
        if ack.kind == CHECKPOINT and key in model.checkpoints:
            missing = key not in view["checkpoints"]
        elif ack.kind == WRITTEN and key in model.writes:
            missing = key not in view["writes"]
        else:
            continue
        if missing:
            lost.append(ack)
    return lost


def check_saver_recovered(directory: str, acks: list[Ack], notes: list[Note], bug: str | None = None,
                          lost: list[int] | None = None) -> Iterator[tuple[str, str]]:
    """(invariant, message) for one reopen of a killed child's saver: L (acknowledged checkpoints and writes,
    one by one), S (values, nothing half there; ``_langgraph`` invariants), 6 (a second reopen changes
    nothing)."""
    from perfsuite.crash.kill._layer import layer
    from perfsuite.crash.workloads._langgraph import reopen_saver

    fs, _faults = layer(bug)
    view = reopen_saver(directory, fs)
    missing = lost_saver_acks(view, acks, notes)
    if missing:
        if lost is not None:
            lost.extend(ack.at for ack in missing)
        shown = ", ".join(f"{a.label} (op #{a.at})" for a in missing[:4]) + (", ..." if len(missing) > 4 else "")
        checked = sum(a.kind in (CHECKPOINT, WRITTEN) for a in acks)
        yield "L", (f"{len(missing)} of {checked} recorded acknowledgements (puts, writes) are missing after "
                    f"reopen: {shown}")
    yield from (("S", m) for m in saver_problems(view, acks, notes))
    before = snapshot(directory)
    again = reopen_saver(directory, fs)
    if snapshot(directory).digest != before.digest:
        yield "6", "a second reopen changed the session directory"
    elif again != view:
        yield "6", "a second reopen read back a different state"
