"""SPEC M6: generated fixtures are real engine sessions, deterministic, exact in size, cached outside git,
and never measured in place (M6)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import textwrap
from pathlib import Path

import pytest

from perfsuite.cli import main
from perfsuite.engine import Session, read_log
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import ModeSpec, Recipe, run_recipe, validate_results
from perfsuite.workloads import fixtures as fx

COPIED = {"files": 95, "bytes": 27_795_709, "root": 1_069_346}


def find_type_f(path: Path) -> tuple[int, int]:
    """What `find DIR -type f` would list, and the sum of their st_size (independent of tree_stats)."""
    files = [p for p in path.rglob("*") if stat.S_ISREG(p.lstat().st_mode)]
    return len(files), sum(p.lstat().st_size for p in files)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One fixture cache shared by this module's tests (each fixture is built once)."""
    return tmp_path_factory.mktemp("fixture-cache")


@pytest.fixture(scope="module")
def synthetic(cache: Path) -> fx.Fixture:
    return fx.build_fixture("synthetic-6000", cache_dir=cache)


@pytest.fixture(scope="module")
def copied(cache: Path) -> fx.Fixture:
    return fx.build_fixture("copied-27mb", cache_dir=cache)


def _retained(session: Session, keep: int) -> None:
    """Format 2 (the session log): the last ``keep`` generations are still on disk (restorable) and no log that
    nothing retained needs is left (retirement ran to the end)."""
    newest = session.head.seq
    assert all(session.store.state_at(g).generation == g for g in range(newest - keep + 1, newest + 1))
    assert session.store.retirable(keep) == []


def opened_copy(fixture: fx.Fixture, tmp_path: Path) -> Session:
    """Session.open on a private copy (opening takes the lease: never do it on the cached original)."""
    copy = tmp_path / "copy"
    shutil.copytree(fixture.path, copy, symlinks=True)
    return Session.open(copy)


# -- specs ------------------------------------------------------------------------------------------------


def test_committed_specs_load_with_stable_digests() -> None:
    names = fx.list_fixtures()
    assert {"synthetic-6000", "copied-27mb", "diag-log-5mb", "permission-storm"} <= set(names)
    for name in names:
        spec = fx.load_spec(name)
        assert spec.name == name and spec.digest == fx.load_spec(name).digest
        assert spec.digest.startswith("sha256:") and spec.key == f"{name}-{spec.digest[7:19]}"
    copied = fx.load_spec("copied-27mb")
    # chosen and recorded (M6); format 2 (the session log): the engine's chunking and a small log capacity
    assert copied.settings == {"chunk_size": 65536, "keep_generations": 8, "log_capacity": 1 << 20}
    assert fx.load_spec("synthetic-6000").settings["chunk_size"] == 65536


DIAG = 'generator = "diagnostic-log"\nseed = 1\n'


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('generator = "nope"\nseed = 1', 'generator: expected one of'),
        ('generator = "diagnostic-log"\nseed = "x"', "seed: expected an integer"),
        (DIAG + "[params]\nbogus = 1", "params.bogus: unknown parameter"),
        (DIAG + '[params]\nduration_s = "long"', "params.duration_s: expected a number"),
        (DIAG + "[expect]\nbytes = 10\nfiles = -1", "expect.files: expected a non-negative"),
        (DIAG + "[expect]\nroot_messages = 1", "expect.root_messages: generator"),
        (DIAG, "expect.bytes: missing"),
        (DIAG + "[settings]\nchunk_size = 0\n[expect]\nbytes = 1", "settings: generator"),
        ('generator = "synthetic-session"\nseed = 1\n[settings]\nchunk = 0', "settings.chunk: not a SessionSettings"),
        ('generator = "synthetic-session"\nseed = 1\nextra = 2', "extra: unknown key"),
        ('generator = "synthetic-session"\nseed = 1\nname = "Bad Name"', "name: expected a lowercase name"),
        ("generator = ", "invalid TOML"),
    ],
)
def test_bad_specs_are_one_line_errors(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(body + "\n")
    with pytest.raises(PerfsuiteError) as info:
        fx.load_spec(path)
    text = str(info.value)
    assert message in text and "\n" not in text and "bad.toml" in text


def test_unknown_fixture_is_one_line_error() -> None:
    with pytest.raises(PerfsuiteError) as info:
        fx.resolve_fixture("no-such-fixture", None)
    text = str(info.value)
    assert "unknown fixture 'no-such-fixture'" in text and "copied-27mb" in text and "\n" not in text


# -- synthetic-6000 ------------------------------------------------------------------------------------------


def test_synthetic_6000_is_a_real_session_with_6000_saved_turns(synthetic: fx.Fixture, tmp_path: Path) -> None:
    info = synthetic.info
    assert info["root_messages"] == 6000 and info["digest"] == fx.load_spec("synthetic-6000").digest
    assert (info["files"], info["bytes"]) == find_type_f(synthetic.path)
    assert not (synthetic.path / "LEASE").exists()
    session = opened_copy(synthetic, tmp_path)
    try:
        assert session.problems == []
        root = session.conversation("root")
        assert len(root) == 6000 and not root.modified  # all saved: nothing past the committed bytes
        assert session.manifest is not None
        assert session.manifest.artifacts["conversations/root.jsonl"].size == root.size == info["root_transcript_bytes"]
        projection = session.sidecar.root  # the committed root projection (E7)
        assert projection["messages"] == 6000 and projection["bytes"] == root.size
        assert projection["turn_count"] == info["user_turns"] > 2500
        roles = {m.role for m in root.messages()}
        assert roles == {"user", "assistant", "mail"}
        assert len(root.receipts) == info["results_delivered"] == 12  # delivered with hidden receipts
        assert session.mailbox("root") == [] and not any(session.sidecar.ledger.values())  # and committed
        assert len(session.sidecar.agents) == 4
        assert all(a["status"] == "done" for a in session.sidecar.agents.values())
        assert len(session.attachments) == 6
        sizes = [len(m.content) for m in root.messages() if m.role in ("user", "assistant")]
        assert min(sizes) >= 250 and max(sizes) <= 2600 and len(set(sizes)) > 1000  # varied, realistic
        _retained(session, 8)  # keep_generations retained, older ones retired
    finally:
        session.close()


# -- copied-27mb --------------------------------------------------------------------------------------------


def test_copied_27mb_sizes_are_exact_and_builds_are_deterministic(
    copied: fx.Fixture, tmp_path: Path
) -> None:
    info = copied.info
    assert find_type_f(copied.path) == (COPIED["files"], COPIED["bytes"]) == (info["files"], info["bytes"])
    assert not (copied.path / "LEASE").exists()
    assert info["root_transcript_bytes"] == COPIED["root"]
    assert 1_300_000 <= info["agent_transcript_bytes"] <= 1_380_000 and info["agent"].startswith("agent-")
    assert info["settings"] == {"chunk_size": 65536, "keep_generations": 8, "log_capacity": 1 << 20}
    assert info["session_logs"] == 1  # format 2: HEAD and one compacted log; diagnostic logs make up the count

    again = fx.build_fixture("copied-27mb", cache_dir=tmp_path / "second-cache")
    assert again.built and again.path != copied.path
    assert again.info["digest"] == info["digest"]  # the spec digest: stable by construction
    assert again.info["content_digest"] == info["content_digest"]  # the bytes, random id suffixes masked
    assert find_type_f(again.path) == find_type_f(copied.path)
    for key in ("agent", "agent_transcript_bytes", "root_messages", "logs"):
        assert again.info[key] == info[key]

    first, second = opened_copy(copied, tmp_path / "a"), opened_copy(again, tmp_path / "b")
    try:
        for session in (first, second):
            assert session.problems == []
            assert session.conversation("root").size == COPIED["root"]
            assert session.conversation(info["agent"]).size == info["agent_transcript_bytes"]
            _retained(session, 8)
        assert first.conversation("root").data() == second.conversation("root").data()
        assert first.conversation(info["agent"]).data() == second.conversation(info["agent"]).data()
        assert len(first.sidecar.agents) == 22 and len(first.attachments) == 44
        largest = max((c for c in first.buffers if c != "root"), key=lambda c: first.buffers[c].size)
        assert largest == info["agent"]  # what the agent-checkpoint operation selects
        live = {a for a, r in first.sidecar.agents.items() if r["status"] == "active"}
        assert info["agent"] in live and live == set(info["live_agents"])
    finally:
        first.close()
        second.close()
    logs = sorted(os.listdir(copied.path / "logs"))
    assert logs == sorted(info["logs"]) and all(read_log(copied.path / "logs" / name) for name in logs)


# -- the other generated fixtures ---------------------------------------------------------------------------


def test_diag_log_is_exactly_5_2_mb_of_telemetry(cache: Path) -> None:
    fixture = fx.build_fixture("diag-log-5mb", cache_dir=cache)
    log = fixture.path / fixture.info["log"]
    assert os.listdir(fixture.path) == [log.name] and log.stat().st_size == 5_200_000
    records = read_log(log)
    assert len(records) == fixture.info["records"] > 10_000 and {"t", "kind", "seq"} <= set(records[0])


def test_permission_storm_trace(cache: Path) -> None:
    fixture = fx.build_fixture("permission-storm", cache_dir=cache)
    from perfsuite.workloads.traces import read_trace

    trace = read_trace(fixture.path / "trace.jsonl")  # the format `perfsuite whatif --trace` reads
    blocked = [e for e in trace.events if e.kind == "activity" and e.flavour == "permission-blocked"]
    assert len(trace.events) == 1526 and len(blocked) == 763
    assert all(0 <= e.time <= 1860 for e in trace.events)
    assert [e.time for e in trace.events] == sorted(e.time for e in trace.events)
    assert fixture.info["peak_decisions_per_minute"] >= 21


# -- the cache ------------------------------------------------------------------------------------------------


def small_spec(tmp_path: Path, size: int = 200_000) -> fx.FixtureSpec:
    path = tmp_path / "small-log.toml"
    path.write_text(f'generator = "diagnostic-log"\nseed = 3\n[expect]\nfiles = 1\nbytes = {size}\n')
    return fx.load_spec(path)


def test_cache_hits_rebuilds_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFSUITE_CACHE", str(tmp_path / "c"))
    spec = small_spec(tmp_path)
    events: list[fx.FixtureProgress] = []
    first = fx.build_fixture(spec, progress=events.append)
    assert first.built and first.path.parent.parent == tmp_path / "c" / "fixtures"
    assert first.path.parent.name == spec.key and events[0].step == "starting" and events[-1].fraction == 1.0
    assert fx.cached_fixture(spec) is not None
    second = fx.build_fixture(spec)
    assert not second.built and second.info == first.info
    with (first.path / "telemetry.jsonl").open("ab") as fh:  # someone changed the cached fixture
        fh.write(b"{}\n")
    assert fx.cached_fixture(spec) is None
    third = fx.build_fixture(spec)
    assert third.built and third.info["content_digest"] == first.info["content_digest"]
    assert fx.build_fixture(spec, force=True).built
    leftovers = [p.name for p in (tmp_path / "c" / "fixtures").iterdir() if not p.name.endswith(".lock")]
    assert leftovers == [spec.key]


def test_interrupted_build_leaves_no_half_fixture(tmp_path: Path) -> None:
    spec = small_spec(tmp_path, 3_000_000)

    def interrupt(event: fx.FixtureProgress) -> None:
        if event.step != "starting":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fx.build_fixture(spec, cache_dir=tmp_path / "c", progress=interrupt)
    assert [p.name for p in (tmp_path / "c").iterdir() if not p.name.endswith(".lock")] == []
    assert fx.cached_fixture(spec, cache_dir=tmp_path / "c") is None


# -- user sessions (--session PATH) ----------------------------------------------------------------------------


def test_user_session_is_returned_as_is_with_its_description(tmp_path: Path) -> None:
    from perfsuite.engine import Message

    path = tmp_path / "mine"
    session = Session.open(path, create=True)
    session.add_message("root", Message("user", "hello", 1.0))
    session.checkpoint()
    session.close()
    fixture, info = fx.resolve_fixture("copied-27mb", str(path))
    assert fixture == path.resolve()
    assert info["kind"] == "portable" and info["replaces"] == "copied-27mb" and info["source"] == "session"
    assert (info["files"], info["bytes"]) == find_type_f(path) and info["digest"].startswith("sha256:")
    assert fx.resolve_fixture(None, str(path))[1]["digest"] == info["digest"]


@pytest.mark.parametrize("kind", ["missing", "file", "empty"])
def test_bad_session_paths_are_one_line_errors(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "s"
    if kind == "file":
        path.write_text("x")
    elif kind == "empty":
        path.mkdir()
    with pytest.raises(PerfsuiteError) as info:
        fx.resolve_fixture("synthetic-6000", str(path))
    assert "--session" in str(info.value) and "\n" not in str(info.value)


# -- what a sample gets ---------------------------------------------------------------------------------------


PROBE = textwrap.dedent(
    """
    from perfsuite.engine import Message, Session

    SEEN = []

    class Probe:
        def __init__(self, ctx):
            SEEN.append(ctx.workdir)
            self.session = Session.open(ctx.workdir)

        def submit(self, ack):
            self.session.add_message("root", Message("tool", "r" * 4000, 1.0))
            self.session.checkpoint()
            ack(None)

        def close(self):
            self.session.close()

    def probe(ctx):
        return Probe(ctx)
    """
)


def test_samples_get_private_copies_never_the_cached_original(
    synthetic: fx.Fixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "fixture_probe_ops.py").write_text(PROBE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import fixture_probe_ops  # type: ignore[import-not-found]

    path, info = fx.resolve_fixture("synthetic-6000", None, cache_dir=synthetic.path.parent.parent)
    assert path == synthetic.path
    before = (find_type_f(path), fx.content_digest(path))
    recipe = Recipe(name="probe", fixture="synthetic-6000", modes=(ModeSpec("probe", "fixture_probe_ops:probe"),),
                    samples=2, warmup=0, isolation="inline", control_windows=1, settle_ms=5.0,
                    sync_after_copy=False)
    result = run_recipe(recipe, output_dir=tmp_path / "out", fixture=path, fixture_info=info,
                        work_root=tmp_path / "work")
    seen = [Path(p) for p in fixture_probe_ops.SEEN]
    assert len(seen) == 2 and len(set(seen)) == 2
    for workdir in seen:
        assert workdir.resolve() != path.resolve() and path.resolve() not in workdir.resolve().parents
        assert str(workdir).startswith(str(tmp_path / "work"))
    assert (find_type_f(path), fx.content_digest(path)) == before  # the original was never touched
    validate_results(json.loads(result.path.read_text()))
    recorded = result.document["fixture"]
    assert {k: recorded[k] for k in ("name", "digest", "files", "bytes")} == {
        "name": "synthetic-6000", "digest": info["digest"], "files": info["files"], "bytes": info["bytes"]}


# -- the command line ----------------------------------------------------------------------------------------


def test_run_with_missing_session_exits_2_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "idle-control", "--session", "/nonexistent/session"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "/nonexistent/session" in err


def test_fixtures_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PERFSUITE_CACHE", str(tmp_path))
    assert main(["fixtures", "build", "permission-storm"]) == 0
    out = capsys.readouterr().out
    assert "permission-storm: 1 files" in out and str(tmp_path) in out
    assert main(["fixtures", "path", "permission-storm"]) == 0
    assert Path(capsys.readouterr().out.strip()).is_dir()
    assert main(["fixtures", "list"]) == 0
    assert "synthetic-6000" in capsys.readouterr().out
    assert main(["fixtures", "info", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("perfsuite: error: unknown fixture 'nope'") and err.count("\n") == 1
