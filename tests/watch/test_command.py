"""M11: the program to watch, parsed as typed; every problem one line, before anything runs."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from perfsuite.errors import PerfsuiteError
from perfsuite.watch import AGENT_MODULE, parse_command


def test_forms_of_the_same_program(tmp_path: Path) -> None:
    prog = tmp_path / "app.py"
    prog.write_text("print(1)\n")
    plain = parse_command([sys.executable, str(prog), "--port", "8"])
    assert plain.argv == [sys.executable, str(prog), "--port", "8"]
    assert plain.agent_argv() == [sys.executable, "-m", AGENT_MODULE, str(prog), "--port", "8"]
    assert parse_command(["--", str(prog), "--port", "8"]).argv == plain.argv  # no interpreter: this one
    flags = parse_command([sys.executable, "-X", "dev", "-u", "-Wignore", str(prog)])
    assert flags.options == ("-X", "dev", "-u", "-Wignore") and flags.path == str(prog)
    assert flags.agent_argv()[:6] == [sys.executable, "-X", "dev", "-u", "-Wignore", "-m"]
    module = parse_command([sys.executable, "-m", "pkg.server", "-v"])
    assert module.module == "pkg.server" and module.args == ("-v",) and module.stem == "pkg.server"
    assert module.agent_argv()[-4:] == [AGENT_MODULE, "-m", "pkg.server", "-v"]


def test_a_console_script_runs_as_the_program(tmp_path: Path) -> None:
    script = tmp_path / "serve"
    script.write_text(f"#!{sys.executable}\nprint(1)\n")
    assert parse_command([str(script)]).path == str(script)


@pytest.mark.parametrize(("argv", "message"), [
    ([], "give the program to run"),
    ([sys.executable], "give the program to run after the interpreter"),
    ([sys.executable, "-c", "print(1)"], "cannot be watched; put the code in a file"),
    ([sys.executable, "--frobnicate", "x.py"], "unsupported interpreter option '--frobnicate'"),
    ([sys.executable, "-m"], "-m needs a module name"),
    ([sys.executable, "no-such-file.py"], "no-such-file.py: no such program file"),
    ([sys.executable, "-X"], "-X needs a value"),
])
def test_bad_commands_are_one_line(argv: list[str], message: str) -> None:
    with pytest.raises(PerfsuiteError, match=message.replace("(", r"\(")):
        parse_command(argv)


def test_a_file_that_is_not_python_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data.bin"
    data.write_bytes(b"\x00\x01")
    with pytest.raises(PerfsuiteError, match="not a Python program"):
        parse_command([sys.executable, str(data)])


def test_an_interpreter_without_perfsuite_is_refused(tmp_path: Path) -> None:
    """A `python3` that cannot import the agent (another environment) is named, with what to do."""
    fake = tmp_path / "python3"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    prog = tmp_path / "app.py"
    prog.write_text("print(1)\n")
    with pytest.raises(PerfsuiteError, match="cannot import perfsuite"):
        parse_command([str(fake), str(prog)])
    assert os.path.exists(prog)
