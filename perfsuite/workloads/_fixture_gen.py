"""The fixture generators (SPEC M6): seeded programs that build real sessions with the engine itself.

Each generator takes a validated spec and an empty destination directory and returns what it knows
about the result (sizes, ids, settings) for the fixture info. The sessions are created with
:meth:`Session.open` on the real file system and a :class:`VirtualClock` (timestamps never depend on
the wall clock), grown through the engine's public mutations (messages, spawns, mail, checkpoints,
registry saves, attachments), retired to ``keep_generations`` and closed (no ``LEASE`` left).
Diagnostic logs are written with :class:`DiagnosticLog` (E8).

Exact sizes are reached by construction, not by luck: a transcript is grown with ordinary messages,
then finished by messages whose plain-text content is sized to the byte; the last diagnostic log of
``copied-27mb`` absorbs the remaining bytes of the directory total.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.errors import PerfsuiteError
from perfsuite.workloads._fixture_builder import AGENT_ROLES, MODELS, ROOT, Builder, open_session, write_log_exact
from perfsuite.workloads._fixture_text import TextGen, log_uniform, split_budget

__all__ = ["GENERATORS", "Generator", "Progress", "tree_stats"]

#: step description, fraction done in [0, 1]
Progress = Callable[[str, float], None]


def tree_stats(path: str | os.PathLike[str]) -> tuple[int, int]:
    """Regular files under ``path`` and their total size, as ``find DIR -type f`` plus summing st_size
    would count them (symbolic links are not followed and not counted)."""
    files = total = 0
    for directory, _dirs, names in os.walk(path):
        for name in names:
            st = os.lstat(os.path.join(directory, name))
            if stat.S_ISREG(st.st_mode):
                files += 1
                total += st.st_size
    return files, total


# -- the generators ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Generator:
    """A named generator: its version (part of the spec digest), its parameters with their defaults,
    the ``expect`` keys it understands, whether it takes SessionSettings, and the build function."""

    name: str
    version: int
    params: Mapping[str, Any]
    expect: frozenset[str]
    settings: bool
    build: Callable[[Any, Path, Progress], dict[str, Any]]
    requires: frozenset[str] = frozenset()  # ``expect`` keys the generator builds to (targets)


def _build_synthetic(spec: Any, dest: Path, progress: Progress) -> dict[str, Any]:
    """synthetic-6000 (SPEC M6): a local portable session whose root transcript holds exactly
    ``root_messages`` saved messages (user/assistant turns and delivered RESULT mail), a few agents,
    mail delivered and committed, a committed root projection, file snapshots and a small log."""
    p = spec.params
    total = int(p["root_messages"])
    text = TextGen(f"{spec.name}:{spec.seed}")
    session, clock = open_session(dest, spec.settings, float(p["wall_start"]), spec.seed)
    b = Builder(session, clock, text)
    agents = [f"agent-{text.hexid(6)}" for _ in range(int(p["agents"]))]
    per_agent = max(1, int(p["results"]) // max(1, len(agents)))
    # Event schedule keyed by the root message count (deliveries count as root messages).
    events: dict[int, list[tuple[str, Any]]] = {}
    for k, agent in enumerate(agents):
        spawn_at = int(total * (k + 1) / (len(agents) + 2))
        events.setdefault(spawn_at, []).append(("spawn", agent))
        for j in range(per_agent):
            events.setdefault(spawn_at + 40 + 90 * j, []).append(("result", (agent, j == per_agent - 1)))
    if events and max(events) >= total - 10:
        raise PerfsuiteError(f"{spec.name}: too many results for {total} root messages")
    snapshots = int(p["attachments"])
    snapshot_at = {int(total * (i + 0.5) / max(1, snapshots)): i for i in range(snapshots)}
    every = int(p["checkpoint_every"])
    low_size, high_size = p["attachment_size"]
    lo_agent, hi_agent = p["agent_messages"]
    user_lo, user_hi = p["user_chars"]
    asst_lo, asst_hi = p["assistant_chars"]
    try:
        session.set_control("goal", text.plain(200))
        session.set_control("plan", [text.plain(80) for _ in range(5)])
        session.set_control("provider", {"name": "anthropic", "model": MODELS[0]})
        last_checkpoint = 0
        next_role = "user"
        while (count := b.count(ROOT)) < total:
            for kind, arg in events.pop(count, []):
                if kind == "spawn":
                    b.wait(2.0, 10.0)
                    session.spawn_agent(arg, name=AGENT_ROLES[len(session.sidecar.agents) % len(AGENT_ROLES)],
                                        prompt=text.plain(600))
                    b.permission_pair(arg)
                    for _ in range(b.rng.randrange(lo_agent, hi_agent + 1) // 2):
                        b.exchange(arg, agent=True)
                    session.checkpoint(arg)
                    session.append_mail(arg, text.plain(400), sender=ROOT)
                    session.deliver_mail(arg)
                else:
                    agent, last = arg
                    for _ in range(b.rng.randrange(3, 9)):
                        b.exchange(agent, agent=True)
                    if last:
                        session.settle(agent, "done", result=b.result_body())
                    else:
                        session.checkpoint(agent)
                        session.publish_result(agent, b.result_body())
                    b.wait(0.2, 3.0)
                    session.deliver_mail(ROOT)  # inserted with a hidden receipt; committed by the next checkpoint
            if b.count(ROOT) >= total:
                break
            if count in snapshot_at:
                i = snapshot_at.pop(count)
                session.attach(f"snapshot-{i:03d}-{text.identifier()}.py",
                               text.code(int(log_uniform(b.rng, low_size, high_size))).encode())
                session.full_save()
            if next_role == "assistant":
                b.assistant(ROOT, asst_lo, asst_hi)
                next_role = "user"
            else:
                b.user(ROOT, user_lo, user_hi)
                next_role = "assistant"
            if b.count(ROOT) - last_checkpoint >= every:
                session.checkpoint(ROOT)
                last_checkpoint = b.count(ROOT)
                progress("root transcript", b.count(ROOT) / total)
        session.checkpoint(ROOT)
        session.save_registry()
        retired = b.retire_all()
        root_bytes = b.size(ROOT)
        root = session.conversation(ROOT)
        info = {
            "root_messages": len(root),
            "user_turns": len(root.user_lines),
            "results_delivered": len(root.receipts),
            "root_transcript_bytes": root_bytes,
            "agents": sorted(session.sidecar.agents),
            "head_seq": session.head.seq if session.head else None,
            "retired": retired,
        }
        session.close()
    except BaseException:
        if not session.closed and session.pending is None:
            session.close()
        raise
    log_bytes = int(p["log_bytes"])
    if log_bytes:
        write_log_exact(text, dest / "logs", "telemetry.jsonl", log_bytes, start=float(p["wall_start"]),
                        end=clock.wall())
    info["wall_end"] = round(clock.wall(), 3)
    return info


def _build_copied(spec: Any, dest: Path, progress: Progress) -> dict[str, Any]:
    """copied-27mb (SPEC M6): a 27 MB agent session like the seed's copied real one: many agents, file
    snapshots, retained older generations, diagnostic logs; exact file count, byte total and root
    transcript size, and a selected live agent of an exact size near 1.34 MB."""
    p, e = spec.params, spec.expect
    text = TextGen(f"{spec.name}:{spec.seed}")
    rng = text.rng
    root_target = int(e["root_transcript_bytes"])
    agent_target = int(e["agent_transcript_bytes"])
    n_agents = int(p["agents"])
    selected = int(p["selected_agent"])
    if not 0 <= selected < n_agents:
        raise PerfsuiteError(f"{spec.source}: params.selected_agent: expected 0..{n_agents - 1}, got {selected}")
    agents = [f"agent-{text.hexid(6)}" for _ in range(n_agents)]
    others = [a for i, a in enumerate(agents) if i != selected]
    lo, hi = p["agent_size"]
    sizes = dict(zip(others, split_budget(rng, len(others), int(p["agent_bytes"]), lo, hi)))
    alo, ahi = p["attachment_size"]
    snap_sizes = split_budget(rng, int(p["attachments"]), int(p["attachment_bytes"]), alo, ahi)
    n_binary = int(p["binary_attachments"])
    binary = set(range(0, len(snap_sizes), max(1, len(snap_sizes) // max(1, n_binary)))[:n_binary])
    snaps_per_round: dict[str, list[int]] = {a: [] for a in others}  # file snapshots taken in each round
    for i in range(len(snap_sizes)):
        snaps_per_round[others[i % len(others)]].append(i)
    n_live = int(p["active_agents"])
    live = {agents[selected], *(agents[len(agents) - n_live :] if n_live > 0 else ())}  # never settled
    wall_start = float(p["wall_start"])
    session, clock = open_session(dest, spec.settings, wall_start, spec.seed)
    b = Builder(session, clock, text)
    main_share = float(p["main_share"])
    try:
        session.set_control("goal", text.plain(240))
        session.set_control("plan", [text.plain(90) for _ in range(7)])
        session.set_control("provider", {"name": "anthropic", "model": MODELS[0]})
        for i, agent in enumerate(agents):
            b.grow_to(ROOT, int(root_target * main_share * (i + 0.5) / n_agents))
            session.spawn_agent(agent, name=AGENT_ROLES[i % len(AGENT_ROLES)], prompt=text.plain(900))
            session.set_activity(agent, "running")
            if agent == agents[selected]:
                b.grow_to(agent, int(agent_target * 0.3), agent=True)
                session.checkpoint(agent)
            else:
                b.grow_to(agent, int(sizes[agent] * 0.6), agent=True)
                session.checkpoint(agent)
                for s in snaps_per_round[agent]:
                    name = f"snapshot-{s:03d}-{text.identifier()}" + (".png" if s in binary else ".py")
                    size = snap_sizes[s]
                    data = text.binary(size) if s in binary else text.code(size).encode()[:size]
                    session.attach(name, data)
                session.full_save()
                b.permission_pair(agent)
                if i % 3 == 1:
                    session.append_mail(agent, text.plain(500), sender=ROOT)
                    session.deliver_mail(agent)
                b.grow_to(agent, sizes[agent], agent=True)
                session.checkpoint(agent)
            if i > selected:  # the selected agent keeps working through the session
                b.grow_to(agents[selected], int(agent_target * (0.3 + 0.6 * (i - selected) / n_agents)), agent=True)
                session.checkpoint(agents[selected])
            b.grow_to(ROOT, int(root_target * main_share * (i + 1) / n_agents))
            if agent not in live:
                session.settle(agent, "done", result=b.result_body())
                session.deliver_mail(ROOT)
            session.checkpoint(ROOT)
            progress("agents", (i + 1) / (n_agents + 3))
        # Format 2: consolidate into one log whose BASE holds every live byte, so once the last
        # rounds' generations (the retained ones) are in it, retirement deletes every older log.
        session.compact()
        # The last rounds (these generations are the retained ones): root and selected agent reach
        # their exact sizes, with registry saves between them.
        finals = list(p["final_rounds"])
        for r, share in enumerate(finals):
            last = r == len(finals) - 1
            if last:
                b.fill_exact(ROOT, root_target)
            else:
                b.grow_to(ROOT, int(root_target * share))
            session.checkpoint(ROOT)
            session.set_activity(agents[selected], "permission-blocked")
            session.save_registry()
            if last:
                b.fill_exact(agents[selected], agent_target, agent=True)
            else:
                b.grow_to(agents[selected], int(agent_target * share), agent=True)
            session.set_activity(agents[selected], "running")
            session.checkpoint(agents[selected])
            progress("agents", (n_agents + r + 1) / (n_agents + 3))
        retired = b.retire_all()
        manifest = session.manifest
        assert manifest is not None
        largest = max(others, key=lambda a: b.size(a))
        if b.size(largest) >= agent_target:  # operations pick "the agent" as the largest transcript
            raise PerfsuiteError(f"{spec.name}: agent {largest} ({b.size(largest)} bytes) is larger than the "
                                 f"selected agent ({agent_target}); lower params.agent_size")
        info: dict[str, Any] = {
            "root_transcript_bytes": manifest.artifacts["conversations/root.jsonl"].size,
            "root_messages": b.count(ROOT),
            "agent": agents[selected],
            "agent_transcript_bytes": manifest.artifacts[f"conversations/{agents[selected]}.jsonl"].size,
            "agents": len(agents),
            "live_agents": sorted(live),
            "attachments": len(snap_sizes),
            "head_seq": session.head.seq if session.head else None,
            "session_logs": session.storage().logs,
            "retired": retired,
        }
        session.close()
    except BaseException:
        if not session.closed and session.pending is None:
            session.close()
        raise
    # Diagnostic logs (E8) make up the rest: as many logs as files are missing, the first one sized
    # to the byte so the directory total is exact.
    files, nbytes = tree_stats(dest)
    want_files, want_bytes = int(e["files"]), int(e["bytes"])
    names = list(p["logs"])
    n_logs = want_files - files
    if n_logs > len(names):  # format 2 keeps a session in a few files: rotated logs fill the count
        stems = [name.removesuffix(".jsonl") for name in p["logs"]]
        names += [f"{stems[k % len(stems)]}.{2 + k // len(stems)}.jsonl" for k in range(n_logs - len(names))]
    if not 1 <= n_logs <= len(names):
        raise PerfsuiteError(f"{spec.name}: the session has {files} files; {want_files} needs {n_logs} logs "
                             f"but params.logs names {len(names)} (tune agents/attachments/logs)")
    nominal = int(p["log_bytes"])
    padding = want_bytes - nbytes - nominal * (n_logs - 1)
    if padding < int(p["min_padding_bytes"]):
        raise PerfsuiteError(f"{spec.name}: the session already holds {nbytes} bytes; only {padding} left for "
                             f"{names[0]} (reduce params.attachment_bytes or params.agent_bytes)")
    logs = dest / "logs"
    for k, name in enumerate(names[:n_logs]):
        write_log_exact(text, logs, name, padding if k == 0 else nominal, start=wall_start, end=clock.wall())
        progress("diagnostic logs", (k + 1) / n_logs)
    info["logs"] = {name: os.path.getsize(logs / name) for name in names[:n_logs]}
    info["wall_end"] = round(clock.wall(), 3)
    return info


def _build_diag_log(spec: Any, dest: Path, progress: Progress) -> dict[str, Any]:
    """diag-log-5mb (SPEC M6, E8): one diagnostic log of realistic telemetry lines, written by
    :class:`DiagnosticLog` in delta appends, exactly ``expect.bytes`` long."""
    p = spec.params
    text = TextGen(f"{spec.name}:{spec.seed}")
    start = float(p["wall_start"])
    name = str(p["log"])
    records = write_log_exact(text, dest, name, int(spec.expect["bytes"]), start=start,
                              end=start + float(p["duration_s"]))
    progress("diagnostic log", 1.0)
    return {"log": name, "records": records}


def _build_storm(spec: Any, dest: Path, progress: Progress) -> dict[str, Any]:
    """The permission storm (SPEC M6, section 6) in the trace format `perfsuite whatif` reads: the shared
    seeded generator, so the fixture and `perfsuite whatif --storm` are the same trace."""
    from perfsuite.workloads.trace_gen import StormSpec, permission_storm
    from perfsuite.workloads.traces import write_trace

    p = spec.params
    storm = StormSpec(decisions=int(spec.expect["decisions"]), minutes=int(spec.expect["duration_s"]) // 60,
                      agents=int(p.get("agents", StormSpec().agents)), seed=int(spec.seed))
    trace = permission_storm(storm)
    write_trace(trace, dest / "trace.jsonl")
    stamps = [e.time for e in trace.events]
    decisions = [e.time for e in trace.events if e.flavour == "permission-blocked"]
    progress("trace", 1.0)
    # Publication rates under a debounce are `perfsuite whatif`'s job (the engine's real schedulers).
    return {"trace": "trace.jsonl", "events": len(trace.events), "decisions": storm.decisions,
            "duration_s": trace.duration_s, "peak_decisions_per_minute": _peak_per_minute(decisions),
            "peak_events_per_minute": _peak_per_minute(stamps)}


def _peak_per_minute(times: Sequence[float]) -> int:
    """The largest number of ``times`` in any 60 s window."""
    ordered = sorted(times)
    peak = j = 0
    for i, t in enumerate(ordered):
        while ordered[j] < t - 60.0:
            j += 1
        peak = max(peak, i - j + 1)
    return peak


GENERATORS: dict[str, Generator] = {
    "synthetic-session": Generator(
        name="synthetic-session",
        version=2,  # 2: format 2, the session log
        params={"root_messages": 6000, "checkpoint_every": 250, "agents": 4, "agent_messages": [20, 60],
                "results": 12, "user_chars": [300, 1200], "assistant_chars": [300, 2000], "attachments": 6,
                "attachment_size": [2000, 40000], "log_bytes": 200_000, "wall_start": 1_790_000_000.0},
        expect=frozenset({"root_messages", "files", "bytes"}),
        settings=True,
        build=_build_synthetic,
    ),
    "copied-session": Generator(
        name="copied-session",
        version=2,  # 2: format 2, compacted into one log before the final rounds, rotated logs
        params={"agents": 22, "selected_agent": 3, "active_agents": 2, "agent_bytes": 5_000_000,
                "agent_size": [20_000, 900_000], "attachments": 44, "attachment_bytes": 12_000_000,
                "attachment_size": [2_000, 1_500_000], "binary_attachments": 6, "main_share": 0.85,
                "final_rounds": [0.95, 0.98, 1.0], "logs": ["telemetry.jsonl", "transport.jsonl", "permissions.jsonl",
                "publications.jsonl", "render.jsonl", "gc.jsonl", "transport.1.jsonl", "telemetry.1.jsonl"],
                "log_bytes": 300_000,
                "min_padding_bytes": 100_000, "wall_start": 1_792_000_000.0},
        expect=frozenset({"files", "bytes", "root_transcript_bytes", "agent_transcript_bytes"}),
        settings=True,
        build=_build_copied,
        requires=frozenset({"files", "bytes", "root_transcript_bytes", "agent_transcript_bytes"}),
    ),
    "diagnostic-log": Generator(
        name="diagnostic-log",
        version=1,
        params={"log": "telemetry.jsonl", "duration_s": 86_400.0, "wall_start": 1_792_000_000.0},
        expect=frozenset({"files", "bytes"}),
        settings=False,
        build=_build_diag_log,
        requires=frozenset({"bytes"}),
    ),
    "permission-storm": Generator(
        name="permission-storm",
        version=2,  # 2: the shared whatif trace format and generator
        params={"agents": 8},
        expect=frozenset({"decisions", "duration_s", "files", "events"}),
        settings=False,
        build=_build_storm,
        requires=frozenset({"decisions", "duration_s"}),
    ),
}
