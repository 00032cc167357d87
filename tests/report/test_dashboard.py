"""`perfsuite dashboard`: a static site that opens from the file system, checked in a real browser.

The browser test runs Debian's headless Chromium (``/usr/bin/chromium``; ``apt-get install -y chromium``)
and is skipped, with that reason, where it is not installed. The pages record on ``<body>`` how many
images they hold and how many failed to load; ``--dump-dom`` shows those attributes after the load event.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from perfsuite import cli
from perfsuite.report import build_dashboard, dashboard, read_results

from .conftest import SYNC_ASYNC

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--virtual-time-budget=5000",
)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("src", "href") and value is not None:
                self.refs.append((tag, value))


def _links(page: Path) -> list[tuple[str, str]]:
    parser = _Links()
    parser.feed(page.read_text())
    return parser.refs


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Eight runs of mailbox-delivery (a step in async ack at run 5) with the fsync floor of each run."""
    from .conftest import make_doc, make_floor_doc, write_doc

    root = tmp_path_factory.mktemp("dash-runs")
    for i in range(8):
        modes = {m: dict(shape) for m, shape in SYNC_ASYNC.items()}
        modes["async"]["ack_ms"] *= 1.3 if i >= 5 else 1.0
        commit = f"{i:02d}{'da5b' * 9}ab"
        date = f"2026-09-{i + 1:02d}T08:00:00+00:00"
        epoch = 1_788_000_000.0 + i * 86_400
        kwargs = {"commit": commit, "date": date, "epoch": epoch}
        write_doc(root / f"mailbox-delivery-{i}.json", make_doc(modes=modes, seed=i, gc="natural", gc_p=0.2, **kwargs))
        write_doc(root / f"fsync-floor-{i}.json", make_floor_doc(seed=50 + i, **{**kwargs, "epoch": epoch + 40}))
    return root


@pytest.fixture(scope="module")
def site(runs: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return dashboard(runs, tmp_path_factory.mktemp("site") / "out")


def test_site_layout_and_relative_links(site: Any) -> None:
    out = site.directory
    assert site.index == out / "index.html"
    assert sorted(p.name for p in site.pages) == ["fsync-floor.html", "mailbox-delivery.html"]
    assert all(p.parent == out and p.suffix == ".png" and p.stat().st_size > 5000 for p in site.images)
    for page in (site.index, *site.pages):
        refs = _links(page)
        assert refs, page
        for _tag, ref in refs:
            assert not re.match(r"^[a-z]+:|^/|\.\.", ref), (page.name, ref)  # no scheme, no absolute path
            assert (out / ref).is_file(), (page.name, ref)
        assert "data-images-broken" in page.read_text()
    names = {p.name for p in site.images}
    for kind in ("history-max_gap_ms", "history-ack_ms", "history-submission_ms", "strip", "timeline", "lag-cdf"):
        assert f"mailbox-delivery-{kind}.png" in names
    page = (out / "mailbox-delivery.html").read_text()
    assert "ack/fsync floor" in page and "fsync floor" in page
    assert re.search(r"<code>05da5bd</code></td><td>1\d\d(\.\d)?</td><td>1[34]\d(\.\d)?</td>", page)  # the step
    assert "per-tick gaps (<code>gaps_ms</code>) would give full timelines" in page


def test_tick_data_gives_gap_timelines(runs: Path, tmp_path: Path, docs: Any) -> None:
    doc = docs.make(seed=3)
    for body in doc["modes"].values():
        for s in body["samples"]:
            s["gaps_ms"] = [[5.0 * k, 5.0 + (k == 3) * (s["max_gap_ms"] - 5.0)] for k in range(12)]
    docs.write(tmp_path / "in" / "mailbox-delivery.json", doc)
    out = build_dashboard(read_results(tmp_path / "in"), tmp_path / "site")
    page = (out.directory / "mailbox-delivery.html").read_text()
    assert "would give full timelines" not in page
    assert (out.directory / "mailbox-delivery-timeline.png").stat().st_size > 5000


@pytest.fixture(scope="module")
def real_site(real_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dashboard of a real idle-control + fsync-floor run, written by the command line."""
    out = tmp_path_factory.mktemp("real-site") / "site"
    assert cli.main(["dashboard", str(real_run), "-o", str(out)]) == 0
    return out


def test_dashboard_of_a_real_run_from_the_cli(real_site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert sorted(p.name for p in real_site.glob("*.html")) == ["fsync-floor.html", "idle-control.html", "index.html"]
    idle = (real_site / "idle-control.html").read_text()
    assert "noise floor" in idle and "ack/fsync floor" not in idle  # a timer's "ack" is not set against the floor
    assert (real_site / "idle-control-lag-cdf.png").stat().st_size > 5000
    assert "No step detected over 1 run(s)." in idle
    assert cli.main(["dashboard", str(real_site / "none"), "-o", str(real_site / "x")]) == 2
    assert "no such results file or directory" in capsys.readouterr().err


def _dump_dom(page: Path, profile: Path) -> str:
    proc = subprocess.run(
        [str(CHROMIUM), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _image_counts(dom: str) -> tuple[int, int]:
    body = re.search(r"<body[^>]*>", dom)
    assert body, dom[:500]
    total = re.search(r'data-images="(\d+)"', body.group(0))
    broken = re.search(r'data-images-broken="(\d+)"', body.group(0))
    assert total and broken, body.group(0)
    return int(total.group(1)), int(broken.group(1))


@pytest.mark.slow
@pytest.mark.skipif(
    not CHROMIUM.exists(), reason="headless Chromium not installed: apt-get install -y chromium (Debian package)"
)
def test_renders_in_headless_chromium(site: Any, real_site: Path, tmp_path: Path) -> None:
    for page in (site.index, *site.pages, *sorted(real_site.glob("*.html"))):
        total, broken = _image_counts(_dump_dom(page, tmp_path / f"profile-{page.parent.name}-{page.stem}"))
        expected = len([ref for tag, ref in _links(page) if tag == "img"])
        assert (total, broken) == (expected, 0), page
        assert total > 0
    # the check is real: a missing figure is reported as broken
    copy = tmp_path / "broken"
    shutil.copytree(site.directory, copy)
    (copy / "mailbox-delivery-strip.png").unlink()
    total, broken = _image_counts(_dump_dom(copy / "mailbox-delivery.html", tmp_path / "profile-broken"))
    assert broken == 1 and total > 1
    shot = tmp_path / "mailbox-delivery.png"
    proc = subprocess.run(
        [
            str(CHROMIUM),
            *CHROMIUM_FLAGS,
            f"--user-data-dir={tmp_path / 'profile-shot'}",
            "--window-size=1100,2400",
            f"--screenshot={shot}",
            (site.directory / "mailbox-delivery.html").as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
