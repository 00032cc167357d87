"""`perfsuite run`: one-line errors with exit 2, results files, an injected fixture resolver, SIGINT and --resume."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from perfsuite import cli
from perfsuite.harness import validate_results

IDLE = 'operation = "perfsuite.workloads.basic:idle"'


def _perfsuite(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "perfsuite", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert lines[0].startswith("perfsuite: error: ")
    return lines[0]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('samples = "six"\n[modes.a]\n' + IDLE + "\n",
         'bad.toml: samples: expected an integer from 1 to 10000, got "six"'),
        ("[modes.a]\nwindow_ms = 1\n", "bad.toml: modes.a.operation: missing"),
        ('[modes.a]\noperation = "no_such_module_q:run"\n', "unknown operation no_such_module_q:run"),
        ('[modes.a]\noperation = "perfsuite.workloads.basic:nope"\n', "has no attribute 'nope'"),
        ("this is not toml\n", "bad.toml: invalid TOML"),
    ],
)
def test_bad_recipes_exit_2_with_one_line(tmp_path: Path, text: str, fragment: str) -> None:
    (tmp_path / "bad.toml").write_text(text)
    line = _one_line_error(_perfsuite(tmp_path, "run", "bad.toml"))
    assert fragment in line
    assert not (tmp_path / "results").exists()  # nothing measured, nothing written


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["run", "no-such-recipe"], "unknown recipe 'no-such-recipe'"),
        (["run", "idle-control", "--session", "missing-dir"], "--session: no such session directory"),
        (["run", "fx.toml"], "unknown fixture 'nowhere'"),
        (["run", "idle-control", "--samples", "0"], "--samples: expected an integer from 1 to 10000, got 0"),
        (["run", "--resume", "nothing.json"], "nothing.json: no such results file"),
        (["run", "idle-control", "--resume", "x.json"], "--resume continues the recorded recipe"),
    ],
)
def test_bad_invocations_exit_2_with_one_line(tmp_path: Path, args: list[str], fragment: str) -> None:
    (tmp_path / "fx.toml").write_text(f'fixture = "nowhere"\n[modes.a]\n{IDLE}\n')
    assert fragment in _one_line_error(_perfsuite(tmp_path, *args))


def _in_process(monkeypatch: pytest.MonkeyPatch, cwd: Path, *args: str,
                services: cli.CliServices | None = None) -> int:
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return cli.main(list(args), services=services)


def test_default_run_writes_results_and_prints_verdicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    status = _in_process(
        monkeypatch,
        tmp_path,
        "run",
        "--samples",
        "1",
        "--warmup",
        "0",
        "--isolation",
        "inline",
        "--work-dir",
        str(tmp_path / "work"),
    )
    out = capsys.readouterr().out
    assert status == 0
    files = sorted((tmp_path / "results" / "local").glob("*-*[0-9].json"))
    # The main job: the quick set, on the embedded default fixtures (built on first use).
    assert sorted(f.name.split("-2")[0] for f in files) == sorted(
        ["diagnostic-append", "fsync-floor", "idle-control", "mailbox-delivery", "root-checkpoint"])
    lines = out.splitlines()
    met = missed = references = 0
    for f in files:
        assert f"results: {f.relative_to(tmp_path)}" in lines  # the path as the run named it, one plain line
        doc = json.loads(f.read_text())
        validate_results(doc)
        assert doc["recipe"]["samples"] == 1 and doc["recipe"]["isolation"] == "inline"
        assert doc["recipe"]["order"] == "random" and isinstance(doc["recipe"]["seed"], int)
        for body in doc["modes"].values():
            met += body["verdict"]["met"] is True
            missed += body["verdict"]["met"] is False
            references += "reference" in body
    assert "idle-control:" in out and "fsync-floor:" in out and "raw-os" in out and "idle control" in out
    for recipe in ("mailbox-delivery", "root-checkpoint", "diagnostic-append"):
        assert f"{recipe}:" in out
    # every mode's verdict is printed as its document records it: met, missed, or a reference (never missed)
    # the publication floors and the two SQLite references of mailbox-delivery and root-checkpoint, and
    # diagnostic-append's full rewrite
    assert references == 7 and met + missed == 7
    assert (out.count("met <= 20 ms"), out.count("missed "), out.count("reference: ")) == (met, missed, references)
    assert "ack/pub floor" in out and "publication floor " in out and "stall" in out


def test_an_injected_fixture_resolver_supplies_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture = tmp_path / "fixture"
    fixture.mkdir()
    (fixture / "data").write_text("hello")
    calls: list[tuple[Any, Any]] = []

    def resolve(name: str | None, session: str | None) -> tuple[Path | None, dict[str, Any]]:
        calls.append((name, session))
        return fixture, {"name": name, "digest": "spec:abc"}

    (tmp_path / "fx.toml").write_text(
        f'fixture = "tiny"\nsamples = 1\nwarmup = 0\nisolation = "inline"\n[modes.a]\n{IDLE}\nwindow_ms = 1\n'
    )
    assert _in_process(monkeypatch, tmp_path, "run", "fx.toml", "--output-dir", "out",
                       services=cli.CliServices(resolve_fixture=resolve)) == 0
    capsys.readouterr()
    assert calls == [("tiny", None)]
    doc = json.loads(next((tmp_path / "out").glob("fx-*[0-9].json")).read_text())
    assert doc["fixture"]["name"] == "tiny" and doc["fixture"]["digest"] == "spec:abc"
    assert doc["fixture"]["files"] == 1


HOLDING_OPERATION = """
import asyncio
from pathlib import Path


class Held:
    \"\"\"Acknowledges after 20 ms, or, while ./hold exists, only once it is removed.\"\"\"

    def __init__(self, ctx):
        self.task = None

    async def _run(self, ack):
        await asyncio.sleep(0.02)
        while Path("hold").exists():
            Path("held").touch()  # the hand-over: a sample is held now, the run is ready to be interrupted
            await asyncio.sleep(0.01)
        ack(None)

    def submit(self, ack):
        self.task = asyncio.get_running_loop().create_task(self._run(ack))
"""


def test_sigint_keeps_samples_and_resume_completes(tmp_path: Path) -> None:
    """SIGINT mid-run, without a race against the machine's speed: once two samples are written the test
    holds the next one open (a file the operation waits on), waits until the operation says it is held,
    interrupts, then releases it and resumes."""
    (tmp_path / "holding.py").write_text(HOLDING_OPERATION)
    (tmp_path / "slow.toml").write_text(
        'samples = 6\nwarmup = 0\nisolation = "inline"\ncontrol_windows = 1\nsettle_ms = 5\n'
        '[modes.idle]\noperation = "holding:Held"\n'
    )
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "perfsuite", "run", "slow.toml", "--output-dir", "out"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    path: Path | None = None
    deadline = time.monotonic() + 300  # a bound on a hang, not a timing assertion
    try:
        while time.monotonic() < deadline:
            found = sorted(out.glob("slow-*[0-9].json")) if out.exists() else []
            if found:
                path = found[0]
                try:
                    if len(json.loads(path.read_text())["modes"]["idle"]["samples"]) >= 2:
                        (tmp_path / "hold").touch()  # the run cannot finish now, however slow we are
                        break
                except (ValueError, KeyError):
                    pass
            time.sleep(0.02)
        else:
            pytest.fail("the run never wrote two samples")
        while not (tmp_path / "held").exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"no sample was held (exit {proc.poll()})")
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert path is not None
    assert proc.returncode == 130, stderr
    assert "--resume" in stderr and "Traceback" not in stderr
    doc = json.loads(path.read_text())
    kept = doc["modes"]["idle"]["samples"]
    assert 2 <= len(kept) < 6
    assert doc["status"] == "interrupted"
    validate_results(doc)

    (tmp_path / "hold").unlink()
    resumed = _perfsuite(tmp_path, "run", "--resume", str(path))
    assert resumed.returncode == 0, resumed.stderr
    final = json.loads(path.read_text())
    assert final["status"] == "complete" and final["order"] == doc["order"]
    samples = final["modes"]["idle"]["samples"]
    assert len(samples) == 6 and samples[: len(kept)] == kept
    assert f"results: {path}" in resumed.stdout.splitlines()  # the file named by --resume, as given
    validate_results(final)


def test_order_and_seed_options_are_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """M4: --order fixed keeps the recipe's order every round; --seed fixes the random one; both recorded."""
    (tmp_path / "two.toml").write_text(
        'samples = 8\nwarmup = 0\nisolation = "inline"\ncontrol_windows = 1\nsettle_ms = 1\n'
        f"[modes.a]\n{IDLE}\nwindow_ms = 1\n[modes.b]\n{IDLE}\nwindow_ms = 1\n"
    )
    assert _in_process(monkeypatch, tmp_path, "run", "two.toml", "--order", "fixed", "--output-dir", "fixed") == 0
    assert _in_process(monkeypatch, tmp_path, "run", "two.toml", "--seed", "11", "--output-dir", "seeded") == 0
    capsys.readouterr()
    fixed = json.loads(next((tmp_path / "fixed").glob("two-*[0-9].json")).read_text())
    seeded = json.loads(next((tmp_path / "seeded").glob("two-*[0-9].json")).read_text())
    assert fixed["recipe"]["order"] == "fixed"
    assert [e["mode"] for e in fixed["order"] if e["kind"] == "sample"] == ["a", "b"] * 8
    assert (seeded["recipe"]["order"], seeded["recipe"]["seed"]) == ("random", 11)
    from perfsuite.harness import Recipe, plan_order

    assert seeded["order"] == plan_order(Recipe.from_dict(seeded["recipe"]))  # reproducible from the document
    assert [e["mode"] for e in seeded["order"] if e["kind"] == "sample"] != ["a", "b"] * 8
