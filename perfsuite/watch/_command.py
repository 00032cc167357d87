"""M11: the program to watch, as the user typed it: ``[python [interpreter options]] (PROGRAM | -m MODULE) ARGS``.

``perfsuite watch -- python app.py --port 8000`` and ``python -m perfsuite.watch app.py --port 8000`` name the same
program. The interpreter is replaced by the same interpreter running the agent (``python [options] -m
perfsuite.watch._agent app.py --port 8000``), so the program runs in its own interpreter, with its own options and
environment, unchanged. A console script (``uvicorn``, ``textual``) is a Python file with a shebang: it runs as
PROGRAM. Checked before anything runs, each problem in one line: a missing program, a file that is not Python, an
interpreter option that takes the program's place (``-c``), an interpreter that cannot import perfsuite.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from perfsuite.errors import PerfsuiteError

__all__ = ["AGENT_MODULE", "ProgramCommand", "parse_command"]

#: the module the program's interpreter runs instead of the program (it then runs the program)
AGENT_MODULE = "perfsuite.watch._agent"

_PYTHON_NAME = re.compile(r"^(python|pypy)(\d+(\.\d+)*)?(\.exe)?$")
#: interpreter options that take a value (``-X dev``, ``-W error``); the value may also be attached (``-Xdev``)
_WITH_VALUE = {"-X", "-W"}
#: interpreter options without a value that may come before the program
_FLAGS = set("bBdEhiIOPqRsSuvV")


@dataclass(frozen=True, slots=True)
class ProgramCommand:
    """A program to watch: its interpreter and options, the script path or module, its arguments."""

    python: str
    options: tuple[str, ...]
    path: str | None
    module: str | None
    args: tuple[str, ...]

    @property
    def target(self) -> list[str]:
        """``[PROGRAM]`` or ``["-m", MODULE]``: what the agent is told to run."""
        return [self.path] if self.path is not None else ["-m", str(self.module)]

    @property
    def argv(self) -> list[str]:
        """The command as ``python`` would be given it."""
        return [self.python, *self.options, *self.target, *self.args]

    def agent_argv(self) -> list[str]:
        """The command that runs the program under the agent."""
        return [self.python, *self.options, "-m", AGENT_MODULE, *self.target, *self.args]

    @property
    def display(self) -> str:
        return shlex.join(self.argv)

    @property
    def stem(self) -> str:
        """A name for the results: the script's stem or the module's dotted name, file-name safe."""
        raw = Path(self.path).stem if self.path is not None else str(self.module)
        return re.sub(r"[^A-Za-z0-9_.-]+", "-", raw).strip("-.") or "program"


def _is_python(word: str) -> bool:
    if _PYTHON_NAME.match(os.path.basename(word)):
        return True
    found = shutil.which(word) if os.sep not in word else word
    try:
        return found is not None and os.path.samefile(found, sys.executable)
    except OSError:
        return False


def _python_script(path: str) -> bool:
    """A ``.py`` file, or a file whose first line is a shebang naming Python (a console script)."""
    if path.endswith((".py", ".pyw")):
        return True
    try:
        with open(path, "rb") as fh:
            first = fh.readline(256)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def parse_command(argv: Sequence[str], *, check_python: bool = True) -> ProgramCommand:
    """``[python [options]] (PROGRAM | -m MODULE) ARGS`` -> :class:`ProgramCommand`; one-line errors."""
    words = list(argv)
    if words and words[0] == "--":
        words = words[1:]
    if not words:
        raise PerfsuiteError("watch: give the program to run, e.g. `perfsuite watch -- python app.py`")
    python = sys.executable
    if _is_python(words[0]):
        python = words.pop(0)
        if os.sep not in python:
            python = shutil.which(python) or python
    options: list[str] = []
    while words and words[0].startswith("-") and words[0] != "-m" and words[0] != "-":
        word = words.pop(0)
        if word in _WITH_VALUE:
            if not words:
                raise PerfsuiteError(f"watch: interpreter option {word} needs a value")
            options += [word, words.pop(0)]
        elif word[:2] in _WITH_VALUE or (len(word) > 1 and all(c in _FLAGS for c in word[1:])):
            options.append(word)
        elif word == "-c":
            raise PerfsuiteError("watch: `python -c CODE` cannot be watched; put the code in a file and give its path")
        else:
            raise PerfsuiteError(f"watch: unsupported interpreter option {word!r} before the program")
    if not words:
        raise PerfsuiteError("watch: give the program to run after the interpreter (PROGRAM or -m MODULE)")
    path: str | None = None
    module: str | None = None
    if words[0] == "-m":
        if len(words) < 2 or not words[1]:
            raise PerfsuiteError("watch: -m needs a module name")
        module = words[1]
        args = words[2:]
    else:
        path, args = words[0], words[1:]
        if path == "-":
            raise PerfsuiteError("watch: a program read from stdin cannot be watched; give its path")
        if not os.path.exists(path) and os.sep not in path:
            path = shutil.which(path) or path  # a console script on PATH
        if not os.path.isfile(path):
            raise PerfsuiteError(f"watch: {words[0]}: no such program file")
        if not _python_script(path):
            raise PerfsuiteError(f"watch: {words[0]}: not a Python program (a .py file or a python script)")
    command = ProgramCommand(python, tuple(options), path, module, tuple(args))
    if check_python:
        _check_interpreter(command)
    return command


def _check_interpreter(command: ProgramCommand) -> None:
    """The interpreter must exist and import the agent (the program's environment must have perfsuite)."""
    python = command.python
    try:
        if os.path.samefile(python, sys.executable):
            return
    except OSError:
        raise PerfsuiteError(f"watch: interpreter {python}: not found") from None
    try:
        probe = subprocess.run([python, "-c", f"import {AGENT_MODULE}"], capture_output=True, text=True,
                               timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PerfsuiteError(f"watch: interpreter {python}: {exc}") from None
    if probe.returncode != 0:
        raise PerfsuiteError(f"watch: {python} cannot import perfsuite (install perfsuite in that environment, or "
                             f"run the program with {sys.executable})")
