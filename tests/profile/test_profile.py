"""perfsuite profile (SPEC section 5): real py-spy and scalene artifacts for root-checkpoint, too-short scalene runs
repeated then refused, and one-line errors (exit 2) for a missing or failing profiler."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from perfsuite.profile import scalene_samples, speedscope_samples, svg_ok
from perfsuite.profile._modes import GROWTH, MAX_ATTEMPTS, MIN_SAMPLES

pytestmark = pytest.mark.slow


def _artifacts(stdout: str) -> list[Path]:
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("profile: "))
    return [Path(lines[start][len("profile: ") :])] + [Path(line.strip()) for line in lines[start + 1 :]]


def _one_line_error(proc) -> str:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("perfsuite: error: ")]
    assert len(errors) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return errors[0]


def test_scalene_profile_of_root_checkpoint_has_samples(tmp_path: Path, cli) -> None:
    proc = cli(
        "profile",
        "root-checkpoint",
        "--profiler",
        "scalene",
        "--mode",
        "sync",
        "--repeat",
        "4",
        "--output-dir",
        str(tmp_path),
        "--phase",
    )
    assert proc.returncode == 0, proc.stderr
    files = _artifacts(proc.stdout)
    record = json.loads(files[0].read_text())
    assert record["kind"] == "perfsuite-profile" and record["profiler"] == "scalene"
    body = record["modes"]["sync"]
    scalene_json = Path(body["artifacts"]["scalene"])
    assert scalene_json in files and scalene_json.parent == tmp_path
    cpu, _ = scalene_samples(json.loads(scalene_json.read_text()))
    assert cpu > 0 and body["samples"] == cpu
    # the retry rule, whatever this machine's speed: each attempt multiplies the iterations by GROWTH (up to
    # a cap), and a run stops before MAX_ATTEMPTS only when it has enough samples or hit the cap
    attempts, repeat = body["attempts"], body["repeat"]
    assert 1 <= attempts <= MAX_ATTEMPTS and repeat <= 4 * GROWTH ** (attempts - 1)
    if attempts < MAX_ATTEMPTS and repeat == 4 * GROWTH ** (attempts - 1):
        assert cpu >= MIN_SAMPLES["scalene"]
    summary = Path(body["artifacts"]["summary"]).read_text()
    assert "Top 12 lines by CPU" in summary and "Top 12 lines by allocation" in summary
    assert "perfsuite/engine/" in summary  # the engine's lines are profiled, not only the driver's
    assert len(body["iterations"]) == body["repeat"] >= 4
    assert all(it["phases_ms"].get("stage", 0) > 0 for it in body["iterations"])
    assert Path(record["phases_png"]).is_file() and "phase breakdown" in proc.stdout


def test_pyspy_profile_of_root_checkpoint_flamegraph_and_speedscope(tmp_path: Path, cli) -> None:
    proc = cli(
        "profile",
        "root-checkpoint",
        "--profiler",
        "py-spy",
        "--mode",
        "async",
        "--repeat",
        "8",
        "--rate",
        "1000",  # dense sampling: both threads are seen even on a loaded machine (a CI run missed one at 250 Hz)
        "--output-dir",
        str(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr
    record = json.loads(_artifacts(proc.stdout)[0].read_text())
    body = record["modes"]["async"]
    svg = Path(body["artifacts"]["flamegraph"])
    assert svg.stat().st_size > 0 and svg_ok(svg)
    speedscope = json.loads(Path(body["artifacts"]["speedscope"]).read_text())
    assert speedscope["$schema"].startswith("https://www.speedscope.app/")
    assert speedscope_samples(speedscope) > 0 and speedscope_samples(speedscope) == body["samples"]
    threads = {str(p["name"]) for p in speedscope["profiles"]}
    assert any("MainThread" in t for t in threads) and any("MainThread" not in t for t in threads)  # off-loop work
    summary = Path(body["artifacts"]["summary"]).read_text()
    assert "MainThread" in summary and "top 10 by self time" in summary
    main = [it["main_thread_ms"] for it in body["iterations"]]
    assert all(m and "stage" in m for m in main)  # asynchronous jobs report loop-thread time per phase


def _fake(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_missing_profiler_binary_is_one_line(tmp_path: Path, cli) -> None:
    line = _one_line_error(
        cli("profile", "idle-control", "--profiler", "py-spy", "--profiler-path", str(tmp_path / "no" / "py-spy"))
    )
    assert "py-spy not found" in line
    env = {**os.environ, "PERFSUITE_SCALENE": str(tmp_path / "bogus-scalene")}
    line = _one_line_error(cli("profile", "idle-control", "--profiler", "scalene", env=env))
    assert "scalene not found" in line and "PERFSUITE_SCALENE" in line


def test_missing_pyspy_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from perfsuite.errors import PerfsuiteError
    from perfsuite.profile import profiler_command

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("PERFSUITE_PY_SPY", raising=False)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))  # nothing beside it either
    with pytest.raises(PerfsuiteError, match="py-spy not found on PATH"):
        profiler_command("py-spy")


def test_failing_profilers_are_one_line(tmp_path: Path, cli) -> None:
    spy = _fake(tmp_path, "py-spy", "import sys\nprint('Error: Operation not permitted (os error 1)')\nsys.exit(1)\n")
    line = _one_line_error(
        cli(
            "profile",
            "fsync-floor",
            "--profiler",
            "py-spy",
            "--profiler-path",
            str(spy),
            "--repeat",
            "1",
            "--output-dir",
            str(tmp_path / "out"),
        )
    )
    assert "py-spy failed (exit 1)" in line and "Operation not permitted" in line
    scalene = _fake(tmp_path, "scalene", "import sys\nprint('scalene: boom', file=sys.stderr)\nsys.exit(3)\n")
    line = _one_line_error(
        cli(
            "profile",
            "fsync-floor",
            "--profiler",
            "scalene",
            "--profiler-path",
            str(scalene),
            "--repeat",
            "1",
            "--output-dir",
            str(tmp_path / "out"),
        )
    )
    assert "scalene failed (exit 3)" in line and "scalene: boom" in line


def test_too_short_scalene_runs_are_repeated_then_refused(tmp_path: Path, cli) -> None:
    """scalene 2.x exits 0 and writes ``{}`` when the program ran too briefly: more iterations, then an error."""
    log = tmp_path / "calls.log"
    scalene = _fake(
        tmp_path,
        "scalene",
        f"""import json, sys
args = sys.argv[1:]
out = args[args.index("-o") + 1]
request = json.load(open(args[args.index("---") + 1]))
with open({str(log)!r}, "a") as fh:
    fh.write(str(request["iterations"]) + "\\n")
json.dump({{"iterations": []}}, open(request["result"], "w"))
open(out, "w").write("{{}}")
""",
    )
    line = _one_line_error(
        cli(
            "profile",
            "fsync-floor",
            "--profiler",
            "scalene",
            "--profiler-path",
            str(scalene),
            "--repeat",
            "2",
            "--output-dir",
            str(tmp_path / "out"),
        )
    )
    assert "has no samples after 3 runs" in line and "too short to profile" in line
    assert [int(n) for n in log.read_text().split()] == [2 * GROWTH**k for k in range(MAX_ATTEMPTS)]


def test_scalene_stops_repeating_once_it_has_enough_samples(tmp_path: Path, cli) -> None:
    """The other half of the retry rule, deterministic: a (fake) scalene with too few samples on the first
    run and enough on the second is run exactly twice, with GROWTH times more iterations the second time."""
    log = tmp_path / "calls.log"
    scalene = _fake(
        tmp_path,
        "scalene",
        f"""import json, sys
args = sys.argv[1:]
out = args[args.index("-o") + 1]
request = json.load(open(args[args.index("---") + 1]))
with open({str(log)!r}, "a") as fh:
    fh.write(str(request["iterations"]) + "\\n")
runs = len(open({str(log)!r}).read().split())
records = [{{"ack_ms": 1.0, "submission_ms": 1.0, "max_gap_ms": 5.0, "phases_ms": {{}}}}
           for _ in range(request["iterations"])]
json.dump({{"iterations": records}}, open(request["result"], "w"))
samples = 3 if runs == 1 else {MIN_SAMPLES["scalene"]}
line = {{"lineno": 1, "line": "x = 1", "cpu_samples_list": [0.1] * samples, "n_cpu_percent_python": 50.0}}
json.dump({{"files": {{"x.py": {{"lines": [line]}}}}, "alloc_samples": 0}}, open(out, "w"))
""",
    )
    proc = cli("profile", "fsync-floor", "--profiler", "scalene", "--profiler-path", str(scalene), "--repeat", "2",
               "--output-dir", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    record = json.loads(_artifacts(proc.stdout)[0].read_text())
    body = record["modes"]["raw-os"]
    assert (body["attempts"], body["repeat"], body["samples"]) == (2, 2 * GROWTH, MIN_SAMPLES["scalene"])
    assert [int(n) for n in log.read_text().split()] == [2, 2 * GROWTH]


def test_bad_options_are_one_line(cli) -> None:
    assert "no mode 'nope'" in _one_line_error(cli("profile", "fsync-floor", "--profiler", "py-spy", "--mode", "nope"))
    assert "--repeat" in _one_line_error(cli("profile", "fsync-floor", "--profiler", "py-spy", "--repeat", "0"))
    assert "--native is a py-spy option" in _one_line_error(
        cli("profile", "fsync-floor", "--profiler", "scalene", "--native")
    )
