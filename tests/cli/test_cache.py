"""`perfsuite cache info|clear`: perfsuite's cache (per-revision environments, generated fixtures, the valgrind
client, what-if costs) under `$PERFSUITE_CACHE`, else `${XDG_CACHE_HOME:-~/.cache}/perfsuite`; one line each.
`clear` refuses, nothing removed, a directory that does not look like perfsuite's cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfsuite import cli


def _fill(cache: Path) -> None:
    for rel, size in (("envs/0123456789abcdef/bin/python", 100), ("envs/fedcba9876543210/.perfsuite-env", 20),
                      ("envs/0123456789abcdef.lock", 0), ("fixtures/small/data.bin", 1000)):
        path = cache / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_info_and_clear_under_perfsuite_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("PERFSUITE_CACHE", str(cache))
    code, out, _ = _run(capsys, "cache", "info")
    assert code == 0 and out == [f"perfsuite cache: {cache}: empty (nothing cached yet)"]
    _fill(cache)
    code, out, _ = _run(capsys, "cache", "info")
    assert code == 0 and len(out) == 1, out
    assert out[0] == f"perfsuite cache: {cache}: 3 entries, 1.1 KB (envs 2, fixtures 1)", out
    code, out, _ = _run(capsys, "cache", "clear")
    assert code == 0 and out == [f"perfsuite cache: cleared {cache}: 3 entries, 1.1 KB"], out
    assert cache.is_dir() and not any(cache.iterdir())  # the directory stays; its entries are gone


def test_the_xdg_cache_directory_is_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("PERFSUITE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    _fill(tmp_path / "xdg" / "perfsuite")
    code, out, _ = _run(capsys, "cache", "info")
    assert code == 0 and out[0].startswith(f"perfsuite cache: {tmp_path / 'xdg' / 'perfsuite'}: 3 entries")


@pytest.mark.parametrize("what", ["a home directory", "a symlink", "a file"])
def test_clear_refuses_what_is_not_perfsuites_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str], what: str) -> None:
    target = tmp_path / "target"
    if what == "a home directory":
        _fill(target)
        (target / "notes.txt").write_text("mine")  # perfsuite never writes this: not its cache
        (target / "Documents").mkdir()
    elif what == "a symlink":
        _fill(tmp_path / "real")
        target.symlink_to(tmp_path / "real")
    else:
        target.write_text("x")
    monkeypatch.setenv("PERFSUITE_CACHE", str(target))
    code, out, err = _run(capsys, "cache", "clear")
    assert code == 2 and out == [] and len(err.strip().splitlines()) == 1, (out, err)
    assert "nothing removed" in err and "Traceback" not in err
    if what == "a home directory":
        assert (target / "notes.txt").read_text() == "mine" and (target / "envs").is_dir()
    elif what == "a symlink":
        assert (tmp_path / "real" / "envs").is_dir()
