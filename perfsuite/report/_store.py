"""The results store: every sample of every run, keyed by machine, in one SQLite file (``sqlite3``).

Results documents stay the source of truth (they are what a results branch keeps in git); the store is
derived from them and can be rebuilt at any time with ``perfsuite store ingest``. It exists so that
``history``, ``compare`` and ``dashboard`` can read many runs at once and so that series never mix
machines: every run belongs to one :class:`~perfsuite.report.Machine` (:func:`machine_fingerprint`).

Tables (``PRAGMA user_version`` = :data:`STORE_SCHEMA`):

* ``machines(id, key, host, cpu_model, cores, filesystem, python)``: one row per fingerprint;
* ``runs(id, key, digest, machine_id, recipe, run_id, commit_sha, dirty, date, created_epoch, status,
  done, updated_at, source, document, branch, loaded, idle_median_ms)``: one row per results document.
  ``key`` is its identity (machine, recipe, run id, creation time, commit), so ingesting a document twice
  keeps one run; a document that progressed further (``--resume``) replaces the older copy. ``document`` is
  the zlib-compressed JSON, so every consumer sees exactly what the harness wrote. ``commit_sha`` and
  ``branch`` are the measured repository's (``environment.measured``; older documents:
  ``environment.git``); ``loaded`` (1, 0, NULL: not measured) and ``idle_median_ms`` say how loaded the
  machine was (the idle control's median max gap, :func:`perfsuite.harness.machine_load`);
* ``samples(run, mode, metric, idx, value)``: every sample of every flattened metric (the names of
  ``Result.values``: ``ack_ms``, ``lag_us.p99``, ``metrics.bytes_written``, ``allocation.total_bytes``),
  the idle control as mode ``control``. Query it directly from a notebook with plain SQL.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.errors import PerfsuiteError
from perfsuite.report._load import Result, read_results
from perfsuite.report._machine import Machine, machine_of

__all__ = [
    "DEFAULT_STORE",
    "STORE_SCHEMA",
    "IngestReport",
    "MachineSummary",
    "Store",
    "StoredRun",
    "find_machine",
    "ingest",
    "is_store",
    "open_store",
    "read_source",
    "select_runs",
]

#: the embedded default: a file under the results folder (git-ignored: it is derived, never committed)
DEFAULT_STORE = Path("results") / "perfsuite.sqlite3"
#: 2: runs gained branch, loaded and idle_median_ms (which code, and how loaded the machine was); a schema-1
#: store is migrated when opened
STORE_SCHEMA = 2
_MAGIC = b"SQLite format 3\x00"

_DDL = """
CREATE TABLE IF NOT EXISTS machines (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    host TEXT NOT NULL,
    cpu_model TEXT NOT NULL,
    cores INTEGER,
    filesystem TEXT NOT NULL,
    python TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    digest TEXT NOT NULL,
    machine_id INTEGER NOT NULL REFERENCES machines(id),
    recipe TEXT NOT NULL,
    run_id TEXT,
    commit_sha TEXT,
    dirty INTEGER NOT NULL,
    date TEXT NOT NULL,
    created_epoch REAL,
    status TEXT NOT NULL,
    done INTEGER NOT NULL,
    updated_at TEXT NOT NULL,
    source TEXT,
    document BLOB NOT NULL,
    branch TEXT,
    loaded INTEGER,
    idle_median_ms REAL
);
CREATE INDEX IF NOT EXISTS runs_series ON runs(machine_id, recipe, date, created_epoch);
CREATE TABLE IF NOT EXISTS samples (
    run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    mode TEXT NOT NULL,
    metric TEXT NOT NULL,
    idx INTEGER NOT NULL,
    value REAL NOT NULL,
    PRIMARY KEY (run, mode, metric, idx)
) WITHOUT ROWID;
"""


@dataclass(frozen=True, slots=True)
class IngestReport:
    """What one ingest did: documents added, replaced by a further-progressed copy, or already there."""

    added: int
    replaced: int
    unchanged: int
    runs: int
    machines: int


@dataclass(frozen=True, slots=True)
class StoredRun:
    """One stored results document, without its samples."""

    id: int
    machine: str
    recipe: str
    run_id: str | None
    commit: str | None
    dirty: bool
    date: str
    created_epoch: float | None
    status: str
    source: str | None
    branch: str | None = None
    loaded: bool | None = None  # measured on a loaded machine (None: no idle control)


@dataclass(frozen=True, slots=True)
class MachineSummary:
    """One machine of the store: its fingerprint and what was measured on it (``loaded``: how many of its runs
    were measured while it was loaded)."""

    machine: Machine
    runs: int
    recipes: tuple[str, ...]
    first: str
    last: str
    loaded: int = 0


def is_store(path: Path | str) -> bool:
    """Whether ``path`` is an SQLite file (a results store), judged by its header."""
    try:  # O_NONBLOCK and regular files only: a FIFO named as SOURCE must not hang the check
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and os.read(fd, len(_MAGIC)) == _MAGIC
    except OSError:
        return False
    finally:
        os.close(fd)


def _digest(data: Any) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _identity(result: Result, machine: Machine) -> str:
    """The run's key: the same document ingested twice (or resumed further) has the same one."""
    data = result.data
    created = data.get("created_epoch", data.get("created_at") or result.date)
    return _digest([machine.key, result.recipe, result.run_id, created, result.commit])


def _progress(data: Any) -> tuple[int, str]:
    progress = data.get("progress") or {}
    return int(progress.get("done") or 0), str(data.get("updated_at") or "")


class Store:
    """An open results store (see the module docstring). Use as a context manager, or call :meth:`close`."""

    def __init__(self, path: Path | str, *, create: bool = False) -> None:
        self.path = Path(path)
        if not self.path.exists():
            if not create:
                raise PerfsuiteError(f"{self.path}: no such results store (create it with `perfsuite store ingest`)")
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise PerfsuiteError(f"{self.path}: cannot create the results store: {exc.strerror}") from None
        elif not is_store(self.path):
            raise PerfsuiteError(f"{self.path}: not a results store (not an SQLite file)")
        try:
            self._db = sqlite3.connect(self.path)
            self._db.execute("PRAGMA foreign_keys = ON")
            version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
            if version > STORE_SCHEMA:
                raise PerfsuiteError(
                    f"{self.path}: results store schema {version} is newer than this perfsuite's "
                    f"({STORE_SCHEMA}); rebuild it with `perfsuite store ingest`"
                )
            if version < STORE_SCHEMA:
                with self._db:
                    self._db.executescript(_DDL)
                    if version == 1:
                        self._migrate_1()
                    self._db.execute(f"PRAGMA user_version = {STORE_SCHEMA}")
        except sqlite3.Error as exc:
            raise PerfsuiteError(f"{self.path}: unreadable results store: {exc}") from None

    def _migrate_1(self) -> None:
        """Schema 1 -> 2: add the measured branch and the machine's load, read from each stored document."""
        for column, kind in (("branch", "TEXT"), ("loaded", "INTEGER"), ("idle_median_ms", "REAL")):
            self._db.execute(f"ALTER TABLE runs ADD COLUMN {column} {kind}")
        rows = self._db.execute("SELECT id, document FROM runs").fetchall()
        for run, document in rows:
            result = Result(None, json.loads(zlib.decompress(document)))
            self._db.execute("UPDATE runs SET commit_sha = ?, branch = ?, loaded = ?, idle_median_ms = ? WHERE id = ?",
                             (result.commit, result.branch, *_load_columns(result), run))

    def close(self) -> None:
        """Close the database connection."""
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing -------------------------------------------------------------------------------------

    def _machine_id(self, machine: Machine) -> int:
        row = self._db.execute("SELECT id FROM machines WHERE key = ?", (machine.key,)).fetchone()
        if row is not None:
            return int(row[0])
        cursor = self._db.execute(
            "INSERT INTO machines (key, host, cpu_model, cores, filesystem, python) VALUES (?, ?, ?, ?, ?, ?)",
            (machine.key, machine.host, machine.cpu_model, machine.cores, machine.filesystem, machine.python),
        )
        return int(cursor.lastrowid or 0)

    def _write_samples(self, run: int, result: Result) -> None:
        rows = [
            (run, mode, metric, idx, value)
            for mode in [*result.modes, "control"]
            for metric, values in result.values(mode).items()
            for idx, value in enumerate(values)
        ]
        self._db.executemany("INSERT INTO samples (run, mode, metric, idx, value) VALUES (?, ?, ?, ?, ?)", rows)

    def ingest(self, results: Iterable[Result]) -> IngestReport:
        """Add loaded results in one transaction (all or nothing); idempotent per document."""
        added = replaced = unchanged = 0
        try:
            with self._db:
                for result in results:
                    machine = machine_of(result)
                    key, digest = _identity(result, machine), _digest(result.data)
                    done, updated = _progress(result.data)
                    row = self._db.execute(
                        "SELECT id, digest, done, updated_at FROM runs WHERE key = ?", (key,)
                    ).fetchone()
                    if row is not None and (row[1] == digest or (done, updated) <= (int(row[2]), str(row[3]))):
                        unchanged += 1
                        continue
                    values = (
                        key,
                        digest,
                        self._machine_id(machine),
                        result.recipe,
                        result.run_id,
                        result.commit,
                        int(result.dirty),
                        result.date,
                        result.created_epoch,
                        str(result.data.get("status") or ""),
                        done,
                        updated,
                        None if result.path is None else str(result.path),
                        zlib.compress(json.dumps(result.data, separators=(",", ":")).encode("utf-8"), 6),
                        result.branch,
                        *_load_columns(result),
                    )
                    columns = (
                        "key, digest, machine_id, recipe, run_id, commit_sha, dirty, date, created_epoch, status, "
                        "done, updated_at, source, document, branch, loaded, idle_median_ms"
                    )
                    if row is None:
                        cursor = self._db.execute(
                            f"INSERT INTO runs ({columns}) VALUES ({', '.join('?' * len(values))})", values
                        )
                        run = int(cursor.lastrowid or 0)
                        added += 1
                    else:
                        run = int(row[0])
                        sets = ", ".join(f"{c.strip()} = ?" for c in columns.split(","))
                        self._db.execute(f"UPDATE runs SET {sets} WHERE id = ?", (*values, run))
                        self._db.execute("DELETE FROM samples WHERE run = ?", (run,))
                        replaced += 1
                    self._write_samples(run, result)
        except sqlite3.Error as exc:
            raise PerfsuiteError(f"{self.path}: cannot write the results store: {exc}") from None
        runs, machines = self._db.execute("SELECT COUNT(*), COUNT(DISTINCT machine_id) FROM runs").fetchone()
        return IngestReport(added, replaced, unchanged, int(runs), int(machines))

    # -- reading -------------------------------------------------------------------------------------

    def machines(self) -> list[MachineSummary]:
        """Every machine with its run count, recipes and date range, most runs first."""
        out = []
        for mid, host, cpu, cores, fs, python in self._db.execute(
            "SELECT id, host, cpu_model, cores, filesystem, python FROM machines ORDER BY key"
        ):
            runs, first, last, loaded = self._db.execute(
                "SELECT COUNT(*), MIN(date), MAX(date), COALESCE(SUM(loaded), 0) FROM runs WHERE machine_id = ?",
                (mid,)).fetchone()
            recipes = tuple(
                r for (r,) in self._db.execute(
                    "SELECT DISTINCT recipe FROM runs WHERE machine_id = ? ORDER BY recipe", (mid,)
                )
            )
            machine = Machine(host, cpu, cores, fs, python)
            out.append(MachineSummary(machine, int(runs), recipes, first or "", last or "", int(loaded)))
        return sorted(out, key=lambda m: (-m.runs, m.machine.key))

    def machine(self, selector: str) -> Machine:
        """The one machine whose key, key prefix or host label is ``selector`` (one-line error otherwise)."""
        return find_machine([m.machine for m in self.machines()], selector, str(self.path))

    def _where(self, machine: Machine | str | None, recipe: str | None) -> tuple[str, list[Any]]:
        clauses, args = [], []
        if machine is not None:
            clauses.append("m.key = ?")
            args.append(machine.key if isinstance(machine, Machine) else machine)
        if recipe is not None:
            clauses.append("r.recipe = ?")
            args.append(recipe)
        return (" WHERE " + " AND ".join(clauses) if clauses else ""), args

    def runs(self, machine: Machine | str | None = None, recipe: str | None = None) -> list[StoredRun]:
        """Stored runs (optionally of one machine and recipe) in time order."""
        where, args = self._where(machine, recipe)
        query = (
            "SELECT r.id, m.key, r.recipe, r.run_id, r.commit_sha, r.dirty, r.date, r.created_epoch, r.status, "
            f"r.source, r.branch, r.loaded FROM runs r JOIN machines m ON m.id = r.machine_id{where} "
            "ORDER BY r.date, r.created_epoch, r.source"
        )
        return [
            StoredRun(int(i), k, rec, rid, c, bool(d), date, ep, st, src, br, None if ld is None else bool(ld))
            for i, k, rec, rid, c, d, date, ep, st, src, br, ld in self._db.execute(query, args)
        ]

    def results(self, machine: Machine | str | None = None, recipe: str | None = None) -> list[Result]:
        """The stored documents as :class:`Result` objects (validated at ingest), in time order."""
        where, args = self._where(machine, recipe)
        query = (
            f"SELECT r.source, r.document FROM runs r JOIN machines m ON m.id = r.machine_id{where} "
            "ORDER BY r.date, r.created_epoch, r.source"
        )
        try:
            rows = self._db.execute(query, args).fetchall()
            return [
                Result(None if src is None else Path(src), json.loads(zlib.decompress(doc))) for src, doc in rows
            ]
        except (sqlite3.Error, zlib.error, ValueError) as exc:
            raise PerfsuiteError(f"{self.path}: unreadable results store: {exc}") from None

    def sql(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of a read-only SQL query over the tables (see the module docstring), for notebooks."""
        try:
            self._db.execute("PRAGMA query_only = ON")
            return list(self._db.execute(query, params).fetchall())
        except sqlite3.Error as exc:
            raise PerfsuiteError(f"{self.path}: {exc}") from None
        finally:
            self._db.execute("PRAGMA query_only = OFF")

    def samples(
        self, machine: Machine | str, recipe: str, mode: str, metric: str
    ) -> list[tuple[StoredRun, list[float]]]:
        """One series: every run of ``recipe`` on ``machine`` (time order), its samples of ``mode``/``metric``."""
        runs = self.runs(machine, recipe)
        out = []
        for run in runs:
            values = [
                float(v)
                for (v,) in self._db.execute(
                    "SELECT value FROM samples WHERE run = ? AND mode = ? AND metric = ? ORDER BY idx",
                    (run.id, mode, metric),
                )
            ]
            if values:
                out.append((run, values))
        return out


def _load_columns(result: Result) -> tuple[int | None, float | None]:
    """``loaded`` (1, 0 or NULL when not measured) and ``idle_median_ms`` of a run."""
    load = result.load
    return (None if load.loaded is None else int(load.loaded)), load.median_gap_ms


def find_machine(machines: Iterable[Machine], selector: str, where: str) -> Machine:
    """The one machine whose key, key prefix or host label is ``selector`` (one-line error otherwise)."""
    known = sorted(set(machines), key=lambda m: m.key)
    exact = [m for m in known if selector in (m.key, m.host)]
    found = exact or [m for m in known if m.key.startswith(selector)]
    if len(found) == 1:
        return found[0]
    names = ", ".join(m.key for m in known) or "none"
    what = "matches several machines" if found else "matches no machine"
    raise PerfsuiteError(f"--machine {selector!r} {what} in {where} (machines: {names})")


def read_source(source: Path | str, *, machine: str | None = None) -> list[Result]:
    """Results from a results store (an SQLite file) or a results file or directory; only ``machine``'s
    (a key, key prefix or host label) when given."""
    if is_store(source):
        with open_store(source) as db:
            return db.results(db.machine(machine) if machine else None)
    results = read_results(source)
    if machine:
        chosen = find_machine((machine_of(r) for r in results), machine, str(source))
        results = [r for r in results if machine_of(r) == chosen]
    return results


def select_runs(results: Sequence[Result], spec: str) -> list[Result]:
    """The runs ``spec`` names among one machine's results: ``latest`` (each recipe's newest),
    ``previous`` (each recipe's one before), a run id, or a commit (a prefix of at least 4 characters)."""
    by_recipe: dict[str, list[Result]] = {}
    for r in sorted(results, key=lambda r: (r.date, r.created_epoch or 0.0, str(r.path or ""))):
        by_recipe.setdefault(r.recipe, []).append(r)
    if spec in ("latest", "previous"):
        back = 1 if spec == "latest" else 2
        chosen = [runs[-back] for runs in by_recipe.values() if len(runs) >= back]
    else:
        chosen = [r for r in results if r.run_id == spec]
        if not chosen and len(spec) >= 4:
            chosen = [r for r in results if (r.commit or "").startswith(spec.lower())]
    if not chosen:
        raise PerfsuiteError(f"no run matches {spec!r} (use latest, previous, a run id or a commit)")
    return chosen


def open_store(path: Path | str | None = None, *, create: bool = False) -> Store:
    """Open the store at ``path`` (default :data:`DEFAULT_STORE`); ``create`` makes a missing one."""
    return Store(DEFAULT_STORE if path is None else path, create=create)


def ingest(paths: Sequence[Path | str], store: Path | str | None = None) -> IngestReport:
    """Read every results document under ``paths`` (validated) and add them to the store, atomically."""
    results = [r for path in paths for r in read_results(path)]
    with open_store(store, create=True) as db:
        return db.ingest(results)
