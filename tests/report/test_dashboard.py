"""`perfsuite dashboard`: the regression story per machine, offline pages, checked in a real browser.

The browser test drives Debian's headless Chromium (``/usr/bin/chromium``; ``apt-get install -y chromium``)
over the DevTools pipe (``_browser.py``) and is skipped, with that reason, where it is not installed.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from perfsuite import cli
from perfsuite.report import dashboard, ingest, read_results
from perfsuite.report._dashboard import build_dashboard

from ._browser import CHROMIUM, Browser
from .conftest import SYNC_ASYNC, make_doc, make_floor_doc, write_doc

REASON = "the atomic rewrite the delta append replaces"


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


def _commit(i: int) -> str:
    return f"{i:02d}{'da5b' * 9}ab"


def _reference_doc(i: int, host: str, **kwargs: Any) -> dict[str, Any]:
    """diagnostic-append with a ``rewrite`` mode that misses the target by design (a declared reference)."""
    modes = {
        "delta": {"submission_ms": 0.4, "ack_ms": 3.0, "max_gap_ms": 6.0, "bytes_written": 900},
        "rewrite": {
            "submission_ms": 45.0, "ack_ms": 44.0, "max_gap_ms": 48.0, "inline": True, "bytes_written": 5_200_000,
        },
    }
    doc = make_doc("diagnostic-append", modes, seed=70 + i, hostname=host, **kwargs)
    doc["recipe"]["modes"]["rewrite"]["reference"] = REASON
    return doc


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ci-runner: 8 runs of mailbox-delivery (async ack x1.3 from run 5, sync ack x1.6 in the last run), the
    fsync floor and diagnostic-append of each run. other-box: 2 runs of mailbox-delivery."""
    root = tmp_path_factory.mktemp("dash-runs")
    for i in range(8):
        modes = {m: dict(shape) for m, shape in SYNC_ASYNC.items()}
        modes["async"]["ack_ms"] *= 1.3 if i >= 5 else 1.0
        modes["sync"]["ack_ms"] *= 1.6 if i == 7 else 1.0
        modes["sync"]["submission_ms"] *= 1.6 if i == 7 else 1.0
        epoch = 1_788_000_000.0 + i * 86_400
        kwargs = {"commit": _commit(i), "date": f"2026-09-{i + 1:02d}T08:00:00+00:00", "epoch": epoch}
        doc = make_doc(modes=modes, seed=i, gc="natural", gc_p=0.2, **kwargs)
        write_doc(root / "ci" / f"mailbox-delivery-{i}.json", doc)
        floor = make_floor_doc(seed=50 + i, **{**kwargs, "epoch": epoch + 40})
        write_doc(root / "ci" / f"fsync-floor-{i}.json", floor)
        write_doc(root / "ci" / f"diagnostic-append-{i}.json", _reference_doc(i, "ci-runner", **kwargs))
    for i in range(2):
        doc = make_doc(seed=20 + i, hostname="other-box", commit=_commit(i), date=f"2026-09-0{i + 1}T09:00:00+00:00")
        write_doc(root / "other" / f"mailbox-delivery-{i}.json", doc)
    return root


@pytest.fixture(scope="module")
def site(runs: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    store = tmp_path_factory.mktemp("store") / "s.sqlite3"
    ingest([runs], store)
    return dashboard(store, tmp_path_factory.mktemp("site") / "out")


def _machine_dir(site: Any, host: str) -> Path:
    (found,) = [p for p in site.directory.iterdir() if p.is_dir() and p.name.startswith(host + "-")]
    return found


def test_site_layout_and_relative_links(site: Any) -> None:
    out = site.directory
    assert site.index == out / "index.html"
    ci, other = _machine_dir(site, "ci-runner"), _machine_dir(site, "other-box")
    assert sorted(str(p.relative_to(out)) for p in site.pages) == sorted(
        [f"{ci.name}/diagnostic-append.html", f"{ci.name}/fsync-floor.html", f"{ci.name}/mailbox-delivery.html",
         f"{other.name}/mailbox-delivery.html"]
    )
    assert len(site.documents) == 26 and all(p.parent.name == "runs" for p in site.documents)
    for page in (site.index, *site.pages):
        text = page.read_text()
        assert "<img" not in text and "http" not in text.replace("http://www.w3.org/2000/svg", "")  # offline
        for _tag, ref in _links(page):
            assert not re.match(r"^[a-z]+:|^/", ref), (page.name, ref)
            if ref.startswith("#"):
                assert f"id='{ref[1:]}'" in text, (page.name, ref)
            else:
                assert (page.parent / ref).resolve().is_file(), (page.name, ref)


def _section(index: str, host: str) -> str:
    (part,) = [p for p in index.split("<section")[1:] if f"<h2>{host}</h2>" in p]
    return part


def test_index_tells_the_story_per_machine(site: Any) -> None:
    index = site.index.read_text()
    ci = _section(index, "ci-runner")
    story = re.search(r"<p class='story[^']*'>(.*?)</p>", ci, re.S)
    # the last run's sync submission and ack, x1.6: two separate runs, so information (U), never a
    # verdict; the async ack step of run 5 is history, not news
    assert story and "0 regressed, 0 improved" in re.sub("<[^>]+>", "", story.group(1))
    assert "the timings of two separate runs are information" in story.group(1)
    assert "1 change point(s) over up to 8 runs" in story.group(1)
    assert re.search(r"class='chip dim'[^>]*>sync ack_ms 1\.[5-7]\dx \(info\)<", ci)
    assert re.search(r"class='chip dim'[^>]*>async ack_ms (0\.9|1\.0)\dx \(info\)<", ci)
    steps = ci.split("class='steps'")[1]
    assert "<code>mailbox-delivery</code>" in steps and "<code>ack_ms</code>" in steps
    assert f"{_commit(4)[:7]}</code>..<code title='{_commit(5)}'>{_commit(5)[:7]}" in steps  # the commit range
    assert "class='spark'" in steps
    other = _section(index, "other-box")
    assert "No change point found on this machine." in other
    assert "other-box: Synthetic CPU x2, ext4, CPython 3.11" in other


def _body(page: Path) -> str:
    return page.read_text().split("</style>", 1)[1]


def test_reference_modes_are_grey_with_their_reason_never_missed(site: Any, runs: Path, tmp_path: Path) -> None:
    index = _body(site.index)
    row = re.search(r"<code>diagnostic-append</code>.*?</tr>", index, re.S)
    assert row is not None
    assert f"rewrite: <span class='reference' title='{REASON}'>reference: {REASON}</span>" in row.group(0)
    assert "missed" not in row.group(0)
    page = _body(_machine_dir(site, "ci-runner") / "diagnostic-append.html")
    assert f"reference: {REASON}" in page and "missed" not in page
    # without the declaration the same mode is a miss, shown as one
    plain = _reference_doc(0, "ci-runner")
    del plain["recipe"]["modes"]["rewrite"]["reference"]
    write_doc(tmp_path / "in" / "d.json", plain)
    other = build_dashboard(read_results(tmp_path / "in"), tmp_path / "site")
    assert "class='missed'>missed 6/6</span>" in other.index.read_text()


def test_recipe_page_leads_with_sync_vs_async_then_history(site: Any) -> None:
    folder = _machine_dir(site, "ci-runner")
    page = (folder / "mailbox-delivery.html").read_text()
    order = [page.index(marker) for marker in (
        "Latest run: modes side by side", "every sample, sync vs async", "lag CDF", "<h2>History</h2>",
        "history of max_gap_ms", "history of ack_ms", "<h3>Change points</h3>", "<h2>Latest against previous</h2>")]
    assert order == sorted(order)
    history = page[page.index("<h2>History</h2>"):page.index("<h3>Change points</h3>")]
    points = re.findall(r"<a href='(runs/[^']+)'><circle[^>]*><title>([^<]+)</title>", history)
    assert len(points) >= 8 * 2 * 3  # 8 runs x 2 modes x (max gap, submission, ack) at least
    for href, _title in points:
        assert (folder / href).is_file()
    assert any(re.match(rf"async ack_ms: 1\d\d(\.\d+)? ms \(median; .*\) at {_commit(5)[:7]}, 2026-09-06", t)
               for _, t in points)
    assert "async: regression 1.3" in history or "async: regression 1.2" in history  # the step, drawn
    short = (_machine_dir(site, "other-box") / "mailbox-delivery.html").read_text()
    assert "History charts start at 3 runs; this machine has 2 run(s)" in short
    assert "history of" not in short
    assert "lag CDF" in short and "every sample, sync vs async" in short


def test_commit_links_when_a_template_is_given(runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "site"
    url = "https://example.invalid/repo/commit/{commit}"
    assert cli.main(["dashboard", str(runs / "other"), "-o", str(out), "--commit-url", url]) == 0
    assert "1 recipe page(s), 2 results documents" in capsys.readouterr().out
    assert f"href='https://example.invalid/repo/commit/{_commit(1)}'" in (out / "index.html").read_text()
    assert cli.main(["dashboard", str(runs / "other"), "-o", str(out), "--commit-url", "https://x/"]) == 2
    assert "must contain {commit}" in capsys.readouterr().err


def test_an_interrupted_latest_run_is_shown_but_not_judged(runs: Path, tmp_path: Path) -> None:
    docs = read_results(runs / "other")
    doc = make_doc(seed=33, hostname="other-box", commit=_commit(2), date="2026-09-03T09:00:00+00:00")
    doc["status"], doc["progress"]["done"] = "interrupted", 3
    write_doc(tmp_path / "in" / "mailbox-delivery-2.json", doc)
    site = build_dashboard([*docs, *read_results(tmp_path / "in")], tmp_path / "site")
    row = re.search(r"<code>mailbox-delivery</code>.*?</tr>", site.index.read_text(), re.S)
    assert row is not None and "latest run interrupted; finished runs " in row.group(0)
    assert f"{_commit(0)[:7]}</code>..<code title='{_commit(1)}'>{_commit(1)[:7]}</code>:" in row.group(0)
    (page,) = site.pages
    assert "the last two finished runs" in page.read_text()


def test_tick_data_gives_gap_timelines(tmp_path: Path, docs: Any) -> None:
    doc = docs.make(seed=3)
    for body in doc["modes"].values():
        for s in body["samples"]:
            s["gaps_ms"] = [[5.0 * k, 5.0 + (k == 3) * (s["max_gap_ms"] - 5.0)] for k in range(12)]
    docs.write(tmp_path / "in" / "mailbox-delivery.json", doc)
    out = build_dashboard(read_results(tmp_path / "in"), tmp_path / "site")
    (page,) = out.pages
    text = page.read_text()
    assert "would give full timelines" not in text
    assert text.count("<title>heartbeat gap ") == 6  # the sync samples' long gap; async ticks are all short


@pytest.fixture(scope="module")
def real_site(real_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dashboard of a real idle-control + fsync-floor run, written by the command line."""
    out = tmp_path_factory.mktemp("real-site") / "site"
    assert cli.main(["dashboard", str(real_run), "-o", str(out)]) == 0
    return out


def test_dashboard_of_a_real_run_from_the_cli(real_site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pages = sorted(p.name for p in real_site.rglob("*.html"))
    assert pages == ["fsync-floor.html", "idle-control.html", "index.html"]
    (idle,) = real_site.rglob("idle-control.html")
    text = idle.read_text()
    assert "noise floor" in text and "ack/fsync floor" not in text  # a timer's "ack" is not set against the floor
    assert "Fewer than two finished runs of this recipe on this machine" in text
    assert "History charts start at 3 runs; this machine has 1 run(s)" in text
    assert cli.main(["dashboard", str(real_site / "none"), "-o", str(real_site / "x")]) == 2
    assert "no such results file or directory" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(
    not CHROMIUM.exists(), reason="headless Chromium not installed: apt-get install -y chromium (Debian package)"
)
def test_what_a_person_sees_in_headless_chromium(site: Any, tmp_path: Path) -> None:
    with Browser(tmp_path / "profile", height=1000) as browser:
        browser.open(site.index)
        story = browser.js("Array.from(document.querySelectorAll('.story')).map(e => e.innerText)")
        assert len(story) == 2 and "0 regressed" in story[0] and "against the previous one" in story[0]
        assert "the timings of two separate runs are information" in story[0]  # two separate runs (U)
        visible = browser.js("Array.from(document.querySelectorAll('.story, table.steps, svg.spark'))"
                             ".filter(e => e.getBoundingClientRect().width > 100 || e.matches('svg.spark')).length")
        assert visible >= 4
        browser.hover("svg.spark circle")
        assert re.match(r"async ack_ms \d", browser.js("document.getElementById('tip').innerText"))
        browser.screenshot(tmp_path / "index.png")

        page = _machine_dir(site, "ci-runner") / "mailbox-delivery.html"
        browser.open(page)
        charts = browser.js("Array.from(document.querySelectorAll('svg.chart')).map(s => "
                            "[s.getAttribute('aria-label'), Math.round(s.getBoundingClientRect().width)])")
        labels = [label for label, width in charts if width >= 800]
        assert labels[:2] == ["mailbox-delivery: every sample, sync vs async", "mailbox-delivery: lag CDF"]
        assert {"history of max_gap_ms", "history of ack_ms", "history of submission_ms"} <= set(labels)
        assert browser.js("getComputedStyle(document.getElementById('tip')).display") == "none"
        browser.hover("svg[aria-label='history of ack_ms'] a circle")
        tip = browser.js("[getComputedStyle(document.getElementById('tip')).display, "
                         "document.getElementById('tip').innerText]")
        assert tip[0] == "block" and re.match(rf"sync ack_ms: \d+(\.\d+)? ms \(median; .* at {_commit(0)[:7]}", tip[1])
        shot = browser.screenshot(tmp_path / "recipe.png")
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
        assert all(url.startswith("file://") for url in browser.requested())  # nothing from the network


def test_a_slower_latest_run_is_information_never_a_pass_or_a_verdict(tmp_path: Path) -> None:
    """The CI gate's "cannot tell" is never a pass; two separate runs (U) cannot tell at all: an
    acknowledgement 1.5x slower than the previous run's is shown as information, not as a verdict either way,
    and only the costs colour the story."""
    from .conftest import SYNC_ASYNC

    for i, scale in enumerate((1.0, 1.5)):
        modes = {m: dict(shape) for m, shape in SYNC_ASYNC.items()}
        modes["async"]["ack_ms"] *= scale
        doc = make_doc(modes=modes, n=3, seed=i, commit=_commit(i), date=f"2026-09-0{i + 1}T08:00:00+00:00",
                       epoch=1_788_000_000.0 + i * 86_400)
        write_doc(tmp_path / "runs" / f"mailbox-delivery-{i}.json", doc)
    site = dashboard(tmp_path / "runs", tmp_path / "site")
    index = site.index.read_text()
    story = re.search(r"<p class='story ([^']*)'>(.*?)</p>", index, re.S)
    assert story and "timings of two separate runs are information" in story.group(2)
    assert re.search(r"class='chip dim'[^>]*>async ack_ms 1\.[45]\dx \(info\)<", index)
    assert "inconclusive" not in re.sub("<[^>]+>", "", story.group(2))
    page = next(p for p in site.pages if p.name == "mailbox-delivery.html").read_text()
    assert "separate runs: timings are information, only costs gate" in page


def test_a_loaded_run_is_marked_on_the_index_and_its_page(tmp_path: Path) -> None:
    """M1's idle control: a run whose idle control is loaded carries a LOADED mark wherever the dashboard shows it."""
    for i, gap in enumerate((5.3, 8.9)):  # quiet, then every idle window at 8.9 ms: 2x oversubscribed
        doc = make_doc(seed=i, commit=_commit(i), control_gap_ms=gap, date=f"2026-09-0{i + 1}T08:00:00+00:00",
                       epoch=1_788_000_000.0 + i * 86_400)
        write_doc(tmp_path / "runs" / f"mailbox-delivery-{i}.json", doc)
    site = dashboard(tmp_path / "runs", tmp_path / "site")
    index = site.index.read_text()
    assert index.count("class='loaded'") == 2  # the latest run's cell, and the story's count
    assert "1 of 2 results document(s) measured on a LOADED machine" in re.sub("<[^>]+>", "", index)
    assert "title='LOADED: idle control median 8." in index
    page = next(p for p in site.pages if p.name == "mailbox-delivery.html").read_text()
    assert page.count(">LOADED<") == 2  # beside the latest run, and in the runs table (one of the two runs)
    assert ">LOADED machine<" in page  # the latest run's idle-control row
