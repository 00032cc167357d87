"""The phase breakdown (E4's phases, M5): which numbers stand for main-thread time, the table, the plot, --phase."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfsuite.errors import PerfsuiteError
from perfsuite.report._phases import (
    SOURCE_INLINE,
    SOURCE_MAIN,
    SOURCE_WALL,
    breakdown_from_samples,
    phase_breakdown,
    phase_table,
    sample_phases,
    write_phase_plot,
)

PHASES = {"freeze": 0.2, "stage": 3.0, "hash": 0.1, "select": 0.05, "commit": 1.5, "adopt": 2.0, "finish": 0.05}


def sample(index: int, *, sync: bool, main: dict | None = None, where: str = "top", gc_ms: float = 0.0) -> dict:
    s = {
        "index": index,
        "submission_ms": 8.0 if sync else 0.4,
        "ack_ms": 7.9 if sync else 20.0,
        "max_gap_ms": 9.0 if sync else 5.5,
        "phases_ms": dict(PHASES),
        "metrics": {"bytes_written": 100},
        "gc": {"collections": 1 if gc_ms else 0, "gc_ms": gc_ms},
    }
    if main is not None:
        if where == "top":
            s["main_thread_ms"] = main
        elif where == "metrics":
            s["metrics"]["main_thread_ms"] = main
        else:
            s["metrics"].update({f"main_thread_ms.{k}": v for k, v in main.items()})
    return s


@pytest.mark.parametrize("where", ["top", "metrics", "flat"])
def test_main_thread_ms_wins_wherever_it_is(where: str) -> None:
    phases, source = sample_phases(sample(0, sync=False, main={"freeze": 0.2, "stage": 0.3}, where=where))
    assert source == SOURCE_MAIN
    assert phases == {"freeze": 0.2, "stage": 0.3}


def test_inline_samples_use_phases_and_show_the_rest_as_other() -> None:
    phases, source = sample_phases(sample(0, sync=True))
    assert source == SOURCE_INLINE and phases == PHASES
    row = breakdown_from_samples("r", {"sync": [sample(0, sync=True)]}).rows[0]
    assert list(row.phases)[:7] == ["freeze", "stage", "hash", "select", "commit", "adopt", "finish"]
    assert row.phases["other"] == pytest.approx(8.0 - sum(PHASES.values()))
    assert row.total_ms == pytest.approx(8.0)


def test_async_without_main_thread_is_labelled_wall_time() -> None:
    _, source = sample_phases(sample(0, sync=False))
    assert source == SOURCE_WALL
    row = breakdown_from_samples("r", {"async": [sample(0, sync=False)]}).rows[0]
    assert "other" not in row.phases  # off-loop wall time: no remainder is meaningful


def test_medians_shares_gc_and_table(tmp_path: Path) -> None:
    b = breakdown_from_samples(
        "r",
        {
            "sync": [sample(0, sync=True), sample(1, sync=True, gc_ms=4.0)],
            "async": [sample(0, sync=False, main={"freeze": 0.2, "stage": 0.4}) for _ in range(3)],
        },
    )
    assert b.modes == ["sync", "async"]
    assert b.medians("sync")["GC"] == pytest.approx(2.0)
    assert sum(b.shares("sync").values()) == pytest.approx(1.0)
    assert [r.saw_gc for r in b.by_mode("sync")] == [False, True]
    assert b.sources("async") == [SOURCE_MAIN]
    from rich.console import Console

    console = Console(width=250, record=True)
    console.print(phase_table(b))
    text = console.export_text()
    assert "stage" in text and "main thread" in text and "1 saw GC" in text
    png = write_phase_plot(b, tmp_path / "deep" / "p.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads(json.dumps(b.to_dict()))["rows"][0]["mode"] == "sync"


def test_unknown_mode_is_one_line(mailbox_run: tuple[Path, object]) -> None:
    path = next(p for p in mailbox_run[0].glob("mailbox-delivery-*.json") if not p.name.endswith(".pyperf.json"))
    with pytest.raises(PerfsuiteError, match="no mode 'nope'"):
        phase_breakdown(path, modes=["nope"])


def test_run_phase_writes_the_plot_beside_the_results(mailbox_run: tuple[Path, object]) -> None:
    out, proc = mailbox_run
    results = next(p for p in out.glob("mailbox-delivery-*.json") if not p.name.endswith(".pyperf.json"))
    png = results.with_name(results.stem + ".phases.png")
    assert png.is_file() and png.stat().st_size > 0
    assert f"phases: {png}" in proc.stdout
    assert "phase breakdown" in proc.stdout and "stage" in proc.stdout
    b = phase_breakdown(results)
    assert b.modes == ["sync", "async"] and len(b.by_mode("sync")) == 2
    assert all(r.source == SOURCE_INLINE for r in b.by_mode("sync"))
    assert all(r.phases.get("stage", 0) > 0 for r in b.by_mode("sync"))


def test_report_phase_with_phase_dir(mailbox_run: tuple[Path, object], tmp_path: Path, cli) -> None:
    out, _ = mailbox_run
    proc = cli("report", str(out), "--phase", "--phase-dir", str(tmp_path / "plots"))
    assert proc.returncode == 0, proc.stderr
    pngs = sorted((tmp_path / "plots").glob("*.phases.png"))
    assert [p.name.split("-")[0] for p in pngs] == ["mailbox"]
    assert f"phases: {pngs[0]}" in proc.stdout


def test_report_phase_on_a_recipe_without_phases(tmp_path: Path, cli) -> None:
    proc = cli(
        "run",
        "idle-control",
        "--samples",
        "1",
        "--warmup",
        "0",
        "--isolation",
        "inline",
        "--output-dir",
        str(tmp_path),
        "--phase",
    )
    assert proc.returncode == 0, proc.stderr
    assert "no per-phase times in this recipe" in proc.stdout
    assert not list(tmp_path.glob("*.phases.png"))
