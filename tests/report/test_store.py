"""The results store (SPEC section 5): SQLite keyed by machine, idempotent ingest, every sample, CLI."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from perfsuite import cli
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import HOST_LABEL_ENV, collect_environment
from perfsuite.report import Machine, history, ingest, machine_fingerprint, open_store, read_results, select_runs
from perfsuite.report._store import is_store

from .conftest import SYNC_ASYNC


def _commit(i: int) -> str:
    return f"{i:02d}{'57e0' * 9}ab"


def _write_runs(root: Path, docs: Any, n: int, *, host: str = "box-a", ack: float = 1.0, from_run: int = 99) -> None:
    for i in range(n):
        modes = {m: dict(shape) for m, shape in SYNC_ASYNC.items()}
        modes["async"]["ack_ms"] *= ack if i >= from_run else 1.0
        doc = docs.make(modes=modes, seed=i, commit=_commit(i), hostname=host, allocation=True,
                        date=f"2026-11-{i + 1:02d}T10:00:00+00:00", epoch=1_795_000_000.0 + i * 86_400)
        doc["run_id"] = f"{host}-{i}"
        docs.write(root / host / f"mailbox-delivery-{i}.json", doc)


# -- the machine fingerprint ---------------------------------------------------------------------


def test_fingerprint_parts_and_key(docs: Any) -> None:
    env = docs.make()["environment"]
    m = machine_fingerprint(env)
    assert m == Machine("ci-runner", "Synthetic CPU", 2, "ext4", "CPython 3.11")
    assert m.key.startswith("ci-runner-") and len(m.key) == len("ci-runner-") + 10
    assert m.label == "ci-runner: Synthetic CPU x2, ext4, CPython 3.11"
    patch = {**env, "python": {**env["python"], "version": "3.11.9"}}
    assert machine_fingerprint(patch) == m  # a patch release is the same machine
    for change in ({"cpu": {**env["cpu"], "cores": 4}}, {"work_dir": {**env["work_dir"], "filesystem": "xfs"}},
                   {"python": {**env["python"], "version": "3.12.1"}}, {"hostname": "other"}):
        other = machine_fingerprint({**env, **change})
        assert other != m and other.key != m.key
    labelled = machine_fingerprint({**env, "hostname": "fv-az123-456", "host_label": "gha-ubuntu"})
    assert labelled.host == "gha-ubuntu"
    assert labelled.same_kind(m) and labelled != m  # another host of the same kind (for --cross-machine)


def test_the_harness_records_the_host_label(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(HOST_LABEL_ENV, raising=False)
    assert "host_label" not in collect_environment(tmp_path)
    monkeypatch.setenv(HOST_LABEL_ENV, "gha-ubuntu-latest")
    env = collect_environment(tmp_path)
    assert env["host_label"] == "gha-ubuntu-latest"
    assert machine_fingerprint(env).host == "gha-ubuntu-latest"


# -- ingest --------------------------------------------------------------------------------------


def test_ingest_is_idempotent_and_keeps_every_sample(tmp_path: Path, docs: Any) -> None:
    _write_runs(tmp_path / "in", docs, 3)
    store = tmp_path / "s.sqlite3"
    first = ingest([tmp_path / "in"], store)
    assert (first.added, first.replaced, first.unchanged, first.runs, first.machines) == (3, 0, 0, 3, 1)
    again = ingest([tmp_path / "in", tmp_path / "in" / "box-a" / "mailbox-delivery-1.json"], store)
    assert (again.added, again.replaced, again.unchanged, again.runs) == (0, 0, 4, 3)
    assert is_store(store) and not is_store(tmp_path / "in" / "box-a" / "mailbox-delivery-1.json")
    originals = {r.run_id: r for r in read_results(tmp_path / "in")}
    with open_store(store) as db:
        stored = db.results()
        assert [r.run_id for r in stored] == ["box-a-0", "box-a-1", "box-a-2"]  # time order
        for r in stored:
            assert r.data == originals[r.run_id].data  # the document, exactly
        expected = sum(len(v) for r in originals.values() for m in [*r.modes, "control"] for v in r.values(m).values())
        assert db.sql("SELECT COUNT(*) FROM samples") == [(expected,)]
        (machine,) = db.machines()
        series = db.samples(machine.machine, "mailbox-delivery", "async", "ack_ms")
        assert [values for _, values in series] == [originals[f"box-a-{i}"].values("async")["ack_ms"] for i in range(3)]
        alloc = db.samples(machine.machine.key, "mailbox-delivery", "sync", "allocation.total_bytes")
        assert len(alloc) == 3 and all(len(v) == 3 for _, v in alloc)
        with pytest.raises(PerfsuiteError):
            db.sql("DELETE FROM runs")  # read-only queries only
        assert db.sql("SELECT COUNT(*) FROM runs") == [(3,)]


def test_a_resumed_document_replaces_its_partial_copy(tmp_path: Path, docs: Any) -> None:
    doc = docs.make(seed=5)
    doc["run_id"] = "r1"
    partial = {**doc, "status": "interrupted", "progress": {"done": 4, "total": doc["progress"]["total"]}}
    partial["updated_at"] = "2026-11-20T10:00:01+00:00"
    docs.write(tmp_path / "partial" / "m.json", partial)
    docs.write(tmp_path / "complete" / "m.json", {**doc, "updated_at": "2026-11-20T10:05:00+00:00"})
    store = tmp_path / "s.sqlite3"
    ingest([tmp_path / "partial"], store)
    report = ingest([tmp_path / "complete"], store)
    assert (report.added, report.replaced, report.runs) == (0, 1, 1)
    stale = ingest([tmp_path / "partial"], store)  # an older copy never replaces the newer one
    assert (stale.replaced, stale.unchanged) == (0, 1)
    with open_store(store) as db:
        assert [r.status for r in db.runs()] == ["complete"]


def test_ingest_is_all_or_nothing(tmp_path: Path, docs: Any) -> None:
    _write_runs(tmp_path / "in", docs, 2)
    bad = docs.make(seed=9)
    del bad["modes"]["sync"]["verdict"]
    docs.write(tmp_path / "in" / "zz-bad.json", bad)
    store = tmp_path / "s.sqlite3"
    with pytest.raises(PerfsuiteError, match=r"zz-bad\.json"):
        ingest([tmp_path / "in"], store)
    assert not store.exists() or open_store(store).runs() == []


def test_unusable_stores_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = tmp_path / "notes.sqlite3"
    text.write_text("not a database")
    with pytest.raises(PerfsuiteError, match="not a results store"):
        open_store(text)
    with pytest.raises(PerfsuiteError, match="no such results store"):
        open_store(tmp_path / "missing.sqlite3")
    newer = tmp_path / "newer.sqlite3"
    sqlite3.connect(newer).execute("PRAGMA user_version = 99").connection.close()
    with pytest.raises(PerfsuiteError, match="newer than this perfsuite"):
        open_store(newer)
    for argv, said in (
        (["store", "info", "--store", str(text)], "not a results store"),
        (["history", "--store", str(tmp_path / "missing.sqlite3")], "no such results store"),
        (["dashboard", "--store", str(text), "-o", str(tmp_path / "site")], "not a results store"),
        (["store", "ingest", str(tmp_path / "nothing-here"), "--store", str(tmp_path / "x.sqlite3")], "no such"),
    ):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("perfsuite: error:") and err.count("\n") == 1 and said in err, err


# -- reading the store: history, compare, two machines --------------------------------------------


def test_history_and_compare_read_the_store_per_machine(
    tmp_path: Path, docs: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _write_runs(tmp_path / "in", docs, 8, host="box-a", ack=1.4, from_run=5)
    _write_runs(tmp_path / "in", docs, 8, host="box-b")
    store = tmp_path / "s.sqlite3"
    assert cli.main(["store", "ingest", str(tmp_path / "in"), "--store", str(store)]) == 0
    assert "16 added" in capsys.readouterr().out
    assert cli.main(["store", "info", "--store", str(store)]) == 0
    info = capsys.readouterr().out
    assert "box-a-" in info and "box-b-" in info and "Synthetic CPU x2" in info

    hist = history(store, metrics=["ack_ms"])
    (step,) = hist.steps
    assert step.machine.startswith("box-a-") and step.index == 5 and step.commit == _commit(5)
    assert len([s for s in hist.series if (s.mode, s.metric) == ("async", "ack_ms")]) == 2

    assert cli.main(["history", str(store), "--metric", "ack_ms"]) == 0  # a store as SOURCE
    assert f"{_commit(4)[:7]}..{_commit(5)[:7]}" in capsys.readouterr().out

    # compare inside the store: several machines need --machine; commits and latest/previous select runs
    assert cli.main(["compare", "previous", "latest", "--store", str(store)]) == 2
    assert "several machines" in capsys.readouterr().err
    argv = ["compare", _commit(4)[:8], _commit(5)[:8], "--store", str(store), "--machine", "box-a", "--markdown"]
    assert cli.main(argv) == 0  # U: two separate runs' timings are information by default
    out = capsys.readouterr().out
    assert out.startswith("### perfsuite compare: no regression [separate runs: timings are information")
    assert cli.main([*argv, "--timings", "gate"]) == 1  # on request, on two quiet runs, they gate
    out = capsys.readouterr().out
    assert "1 regression" in out and f"{_commit(5)[:8]} on box-a" in out
    assert cli.main(["compare", "previous", "latest", "--store", str(store), "--machine", "box-b"]) == 0
    assert cli.main(["compare", "nope", "latest", "--store", str(store), "--machine", "box-b"]) == 2
    assert "no run matches 'nope'" in capsys.readouterr().err


def test_select_runs(tmp_path: Path, docs: Any) -> None:
    _write_runs(tmp_path, docs, 3)
    results = read_results(tmp_path)
    assert [r.run_id for r in select_runs(results, "latest")] == ["box-a-2"]
    assert [r.run_id for r in select_runs(results, "previous")] == ["box-a-1"]
    assert [r.run_id for r in select_runs(results, "box-a-0")] == ["box-a-0"]
    assert [r.run_id for r in select_runs(results, _commit(1)[:6])] == ["box-a-1"]
    with pytest.raises(PerfsuiteError, match="no run matches"):
        select_runs(results, "abc")  # too short to be a commit


# -- U: the measured repository's commit and branch, and the machine's load ----------------------------------


_V1_RUNS = """CREATE TABLE runs (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, digest TEXT NOT NULL,
    machine_id INTEGER NOT NULL REFERENCES machines(id), recipe TEXT NOT NULL, run_id TEXT, commit_sha TEXT,
    dirty INTEGER NOT NULL, date TEXT NOT NULL, created_epoch REAL, status TEXT NOT NULL, done INTEGER NOT NULL,
    updated_at TEXT NOT NULL, source TEXT, document BLOB NOT NULL)"""


def _measured(doc: dict[str, Any], commit: str, branch: str) -> dict[str, Any]:
    doc["environment"]["measured"] = {"commit": commit, "dirty": False, "branch": branch, "root": ".",
                                      "source": "git"}
    doc["environment"]["git"] = {"commit": commit, "dirty": False}
    doc["environment"]["perfsuite_git"] = {"commit": "f" * 40, "dirty": False}  # perfsuite's own: never the key
    return doc


def test_the_store_keys_runs_by_the_measured_commit_and_says_which_were_loaded(
        tmp_path: Path, docs: Any, capsys: pytest.CaptureFixture[str]) -> None:
    quiet = _measured(docs.make(seed=1, control_gap_ms=5.3, epoch=1_795_000_000.0), _commit(1), "main")
    loaded = _measured(docs.make(seed=2, control_gap_ms=8.9, epoch=1_795_086_400.0,
                                 date="2026-11-21T10:00:00+00:00"), _commit(2), "feature")
    docs.write(tmp_path / "in" / "a.json", quiet)
    docs.write(tmp_path / "in" / "b.json", loaded)
    store = tmp_path / "s.sqlite3"
    ingest([tmp_path / "in"], store)
    with open_store(store) as db:
        runs = db.runs()
        assert [(r.commit, r.branch, r.loaded) for r in runs] == [(_commit(1), "main", False),
                                                                  (_commit(2), "feature", True)]
        (a, b) = db.sql("SELECT loaded, idle_median_ms FROM runs ORDER BY date")
        assert a[0] == 0 and 5.0 < a[1] < 6.0 and b[0] == 1 and b[1] > 8.0
        assert [r.commit for r in select_runs(db.results(), _commit(2)[:8])] == [_commit(2)]
    assert cli.main(["store", "info", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "loaded" in out.splitlines()[1] or "loaded" in out


def test_a_schema_1_store_is_migrated_when_opened(tmp_path: Path, docs: Any) -> None:
    store = tmp_path / "old.sqlite3"
    ingest([docs.write(tmp_path / "in" / "a.json", docs.make(seed=1, control_gap_ms=8.9))], store)
    with sqlite3.connect(store) as db:  # back to schema 1: the runs table as it was
        rows = db.execute("SELECT id, key, digest, machine_id, recipe, run_id, commit_sha, dirty, date, "
                          "created_epoch, status, done, updated_at, source, document FROM runs").fetchall()
        db.execute("DROP TABLE samples")
        db.execute("DROP TABLE runs")
        db.execute(_V1_RUNS)
        db.executemany(f"INSERT INTO runs VALUES ({', '.join('?' * 15)})", rows)
        db.execute("PRAGMA user_version = 1")
    with open_store(store) as db:
        (run,) = db.runs()
        assert run.loaded is True and run.commit == "0123456789abcdef0123456789abcdef01234567"
        assert db.sql("PRAGMA user_version") == [(2,)]
