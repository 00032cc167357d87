"""Text from results documents and the command line that ends up in links, git or numbers is data: a
``javascript:`` link, a remote that git would take as an option, a number that overflows to infinity."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfsuite.errors import PerfsuiteError
from perfsuite.harness import parse_json
from perfsuite.report._results_branch import check_remote, pull_results
from perfsuite.report._site import check_commit_url, commit_link


def test_a_commit_url_must_be_http_and_a_documents_commit_must_be_hexadecimal() -> None:
    with pytest.raises(PerfsuiteError, match="not an http"):
        check_commit_url("javascript:alert(1)//{commit}")
    assert check_commit_url("https://example.org/c/{commit}")
    assert "href" not in commit_link("javascript:alert(1)", "https://example.org/c/{commit}")
    assert "href" not in commit_link("abc1234", "javascript:alert(1)//{commit}")
    assert "href='https://example.org/c/abc1234'" in commit_link("abc1234", "https://example.org/c/{commit}")


@pytest.mark.parametrize("remote", ["--upload-pack=touch X", "-oProxyCommand=x", ""])
def test_a_remote_that_git_would_take_as_an_option_is_refused_before_git_runs(tmp_path: Path, remote: str) -> None:
    with pytest.raises(PerfsuiteError, match="not a git remote"):
        check_remote(remote)
    marker = tmp_path / "X"
    with pytest.raises(PerfsuiteError):
        pull_results(tmp_path / "into", remote=f"--upload-pack=touch {marker}", repo=tmp_path)
    assert not marker.exists()


def test_a_number_that_overflows_to_infinity_is_not_valid_json() -> None:
    with pytest.raises(PerfsuiteError, match="out of range"):
        parse_json('{"ack_ms": 1e400}', "doc.json")
    assert parse_json('{"ack_ms": 1.5e3}', "doc.json") == {"ack_ms": 1500.0}
