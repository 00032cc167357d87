"""Where the workflow `perfsuite init` writes installs perfsuite from: the running perfsuite's installation
record (PEP 610 ``direct_url.json``), fabricated here for every case, or ``--install-from``. A CI runner can
reach an index, a VCS host or an archive's URL, never a path on the machine that ran init."""

from __future__ import annotations

import json
from importlib.metadata import PathDistribution
from pathlib import Path

import pytest

from perfsuite.ab._install import Installation, installation_of, requirement_for, workflow_requirement
from perfsuite.errors import PerfsuiteError

SHA = "2de1f4b4d1553361743763b19ead336c51a08926"


def _record(**fields: object) -> str:
    return json.dumps(fields)


@pytest.mark.parametrize(("direct_url", "expected"), [
    (None, "perfsuite[report]==0.3.1"),  # from an index: no direct_url.json (PEP 610 forbids one)
    (_record(url="https://github.com/octo/perfsuite.git", vcs_info={"vcs": "git", "commit_id": SHA,
                                                                    "requested_revision": "main"}),
     f"perfsuite[report] @ git+https://github.com/octo/perfsuite.git@{SHA}"),  # the commit, not the branch
    (_record(url="ssh://git@github.com/octo/perfsuite.git", vcs_info={"vcs": "git", "commit_id": SHA}),
     f"perfsuite[report] @ git+ssh://git@github.com/octo/perfsuite.git@{SHA}"),
    (_record(url="https://github.com/octo/mono.git", subdirectory="python",
             vcs_info={"vcs": "git", "commit_id": SHA}),
     f"perfsuite[report] @ git+https://github.com/octo/mono.git@{SHA}#subdirectory=python"),
    (_record(url="https://files.example/perfsuite-0.3.1-py3-none-any.whl",
             archive_info={"hashes": {"sha256": "ab" * 32}}),
     "perfsuite[report] @ https://files.example/perfsuite-0.3.1-py3-none-any.whl"),
    (_record(url="https://github.com/octo/perfsuite/archive/refs/tags/v0.3.1.tar.gz", archive_info={}),
     "perfsuite[report] @ https://github.com/octo/perfsuite/archive/refs/tags/v0.3.1.tar.gz"),
])
def test_the_requirement_is_where_this_perfsuite_came_from(direct_url: str | None, expected: str) -> None:
    assert requirement_for(Installation("0.3.1", direct_url)) == expected


@pytest.mark.parametrize(("direct_url", "says"), [
    (_record(url="file:///home/me/perfsuite", dir_info={"editable": True}),
     "perfsuite runs from a local directory (/home/me/perfsuite)"),
    (_record(url="file:///home/me/perfsuite", dir_info={}), "perfsuite runs from a local directory"),
    (_record(url="file:///tmp/perfsuite.git", vcs_info={"vcs": "git", "commit_id": SHA}),
     "perfsuite was installed from git+file:///tmp/perfsuite.git, a path on this machine"),
    (_record(url="file:///tmp/dist/perfsuite-0.3.1-py3-none-any.whl", archive_info={}),
     "perfsuite was installed from /tmp/dist/perfsuite-0.3.1-py3-none-any.whl, a file on this machine"),
    (_record(url="https://github.com/octo/perfsuite.git", vcs_info={"vcs": "git"}), "records no commit"),
    ("{not json", "perfsuite's installation record (direct_url.json) is unreadable"),
    (_record(vcs_info={"vcs": "git", "commit_id": SHA}), "perfsuite's installation record (direct_url.json) is"),
    (_record(url="https://example.invalid/x"), "perfsuite's installation record (direct_url.json) is"),
])
def test_what_a_runner_cannot_reach_is_refused_in_one_line(direct_url: str, says: str) -> None:
    with pytest.raises(PerfsuiteError) as raised:
        requirement_for(Installation("0.3.1", direct_url))
    message = str(raised.value)
    assert says in message and "\n" not in message
    assert "--install-from SPEC" in message and message.endswith("(nothing written)")


def test_install_from_chooses_whatever_the_record_says() -> None:
    spec = "perfsuite[report] @ git+file:///tmp/perfsuite.git"
    assert workflow_requirement(spec) == spec  # even a path: the user chose it (a self-hosted runner)
    assert workflow_requirement("perfsuite[report]==0.3.1") == "perfsuite[report]==0.3.1"
    for bad, says in (("", "empty"), ("  ", "empty"), ("-e .", "not a pip option"),
                      ("perfsuite\nrm -rf /", "one line")):
        with pytest.raises(PerfsuiteError, match=f"--install-from .*{says}"):
            workflow_requirement(bad)


def _site(tmp_path: Path, *, record: bool = True, direct_url: str | None = None,
          suffix: str = ".dist-info") -> tuple[PathDistribution, Path]:
    """A site-packages holding perfsuite 0.3.1's files and its metadata directory, as an installer leaves them."""
    site = tmp_path / "site-packages"
    module = site / "perfsuite" / "__init__.py"
    module.parent.mkdir(parents=True)
    module.write_text("")
    meta = site / f"perfsuite-0.3.1{suffix}"
    meta.mkdir()
    (meta / ("METADATA" if suffix == ".dist-info" else "PKG-INFO")).write_text(
        "Metadata-Version: 2.1\nName: perfsuite\nVersion: 0.3.1\n")
    if record:
        (meta / "RECORD").write_text("perfsuite/__init__.py,,\n")
    if direct_url is not None:
        (meta / "direct_url.json").write_text(direct_url)
    return PathDistribution(meta), module


def test_the_record_read_is_the_one_of_the_perfsuite_that_runs(tmp_path: Path) -> None:
    vcs = _record(url="https://github.com/octo/perfsuite.git", vcs_info={"vcs": "git", "commit_id": SHA})
    dist, module = _site(tmp_path / "vcs", direct_url=vcs)
    assert installation_of(dist, module) == Installation("0.3.1", vcs)
    dist, module = _site(tmp_path / "index")
    assert requirement_for(installation_of(dist, module)) == "perfsuite[report]==0.3.1"
    # the same installed distribution, while this perfsuite is imported from a checkout (PYTHONPATH)
    checkout = tmp_path / "checkout" / "perfsuite" / "__init__.py"
    checkout.parent.mkdir(parents=True)
    checkout.write_text("")
    for found in (dist, None):  # or no distribution at all
        with pytest.raises(PerfsuiteError, match=f"local directory \\({checkout.parent.parent}\\)"):
            requirement_for(installation_of(found, checkout))
    # a source tree's egg-info (setup.py egg_info): metadata, never an installation (no RECORD)
    egg, module = _site(tmp_path / "egg", record=False, suffix=".egg-info")
    with pytest.raises(PerfsuiteError, match="local directory"):
        requirement_for(installation_of(egg, module))


def test_this_checkout_is_refused_without_install_from() -> None:
    """The suite runs perfsuite from its checkout (PYTHONPATH or an editable install): a local directory."""
    with pytest.raises(PerfsuiteError, match="perfsuite runs from a local directory"):
        workflow_requirement(None)
