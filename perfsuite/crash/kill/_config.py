"""The kill campaign's values: its configuration, a violation, and the report (``crashcheck --kill N``)."""

from __future__ import annotations

from dataclasses import dataclass

PROFILES = ("portable", "file")  # the default; "langgraph" (the LangGraph saver) runs when named
FLAVOURS = ("running", "permission-blocked", "waiting", "idle")


@dataclass(frozen=True, slots=True)
class KillConfig:
    """``kills`` SIGKILLs (split between the profiles), each after 1..``max_acks`` acknowledgements plus up
    to ``max_delay_s``; ``directory`` keeps the sessions (default: a temporary directory, removed)."""

    kills: int = 200
    seed: int = 0
    profiles: tuple[str, ...] = PROFILES
    max_acks: int = 12
    max_delay_s: float = 0.006
    directory: str | None = None
    timeout_s: float = 120.0
    seeded_bug: str | None = None  # run against a deliberately broken engine (``SeededBug.kill`` ones)
    torn_every: int = 3  # every Nth file-backed kill tears a transcript write first (0: never; E2 torn tails)
    coalesce_every: int = 3  # every Nth portable kill is a coalescing kill (E7; 0: never): see ``_child``


@dataclass(frozen=True, slots=True)
class KillViolation:
    kill: int
    profile: str
    invariant: str
    message: str
    kept: str | None = None  # a copy of the session directory as recovery found it


@dataclass(frozen=True, slots=True)
class KillReport:
    """What the campaign did: kills per profile, acknowledgements recorded (``acks``, in the children's side
    files) and the one-by-one checks of them after each reopen (``checked``; ``lost``: distinct ones found
    missing), pending publications found by recovery (and retried), violations, and how long it took."""

    kills: int
    per_profile: dict[str, int]
    acks: int
    recovered_pending: int
    violations: tuple[KillViolation, ...]
    seconds: float
    directory: str | None = None
    child_seconds: float = 0.0
    recovery_seconds: float = 0.0
    torn: int = 0  # kills whose child tore a transcript write first (E2)
    seeded_bug: str | None = None
    checked: int = 0
    lost: int = 0
    coalescing: int = 0  # coalescing kills: the child coalesced checkpoint requests, then died
    coalesced: int = 0  # coalescing steps whose requests met a running (held) checkpoint

    @property
    def caught(self) -> bool:
        """With a seeded bug: at least one violation (the bug was caught)."""
        return bool(self.violations)
