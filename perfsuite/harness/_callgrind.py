"""Valgrind's callgrind as an instrument: find valgrind, issue its client requests, read its totals.

Three pieces, used by the instruction pass (:mod:`perfsuite.harness._instructions`) and by
``perfsuite profile --profiler callgrind``:

* :func:`find_valgrind`: ``--valgrind PATH``, else ``$PERFSUITE_VALGRIND``, else ``valgrind`` on PATH;
  a missing or unusable valgrind is :class:`ValgrindUnavailable`, one line saying why.
* the **client requests** that open and close a measured window from inside the measured process:
  ``CALLGRIND_START_INSTRUMENTATION`` + ``CALLGRIND_ZERO_STATS`` at submission and
  ``CALLGRIND_STOP_INSTRUMENTATION`` at the acknowledgement. They come from a four-line C helper built
  with the system compiler against ``<valgrind/callgrind.h>`` on first use and cached by content digest
  (:func:`build_library`), loaded with :mod:`ctypes`. Without a compiler (or the header) on x86-64, the
  same requests are issued by the instruction sequence ``valgrind.h`` expands to, placed in an
  executable page (:class:`_MachineCodeClient`); elsewhere the pass is "not measured".
* :func:`callgrind_totals`: the ``totals:`` line of each per-thread output file (``--separate-threads``).

Hazard: the requests are no-ops outside valgrind (the special instruction sequence is a no-op on the
real CPU), so the client can be loaded anywhere; :meth:`CallgrindClient.on_valgrind` tells them apart.
"""

from __future__ import annotations

import ctypes
import hashlib
import mmap
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from perfsuite.errors import PerfsuiteError

__all__ = [
    "VALGRIND_ENV",
    "BuildFailed",
    "CallgrindClient",
    "Valgrind",
    "ValgrindUnavailable",
    "build_library",
    "cache_dir",
    "callgrind_client",
    "callgrind_totals",
    "client_library",
    "find_valgrind",
    "instructions_unavailable",
    "interpreter",
]

#: environment variable naming the valgrind executable (the ``--valgrind`` option wins)
VALGRIND_ENV = "PERFSUITE_VALGRIND"

#: ``valgrind.h``: VG_USERREQ_TOOL_BASE('C','T') + n, and RUNNING_ON_VALGRIND
_CALLGRIND_BASE = (ord("C") << 24) | (ord("T") << 16)
_ZERO_STATS = _CALLGRIND_BASE + 1
_START_INSTRUMENTATION = _CALLGRIND_BASE + 4
_STOP_INSTRUMENTATION = _CALLGRIND_BASE + 5
_RUNNING_ON_VALGRIND = 0x1001

_CLIENT_SOURCE = """\
/* perfsuite: callgrind client requests for the instruction pass. */
#include <valgrind/valgrind.h>
#include <valgrind/callgrind.h>
unsigned long perfsuite_on_valgrind(void) { return RUNNING_ON_VALGRIND; }
void perfsuite_window_begin(void) { CALLGRIND_START_INSTRUMENTATION; CALLGRIND_ZERO_STATS; }
void perfsuite_window_end(void) { CALLGRIND_STOP_INSTRUMENTATION; }
"""

#: amd64 ``VALGRIND_DO_CLIENT_REQUEST_EXPR`` as a function ``unsigned long f(unsigned long args[6])``
_AMD64_REQUEST = bytes.fromhex(
    "4889f8"  # mov rax, rdi        rax = &args[0] (request code, then arguments)
    "31d2"  # xor edx, edx          rdx = 0, the result outside valgrind
    "48c1c703"  # rol rdi, 3        the special preamble: four rotations by 128 bits in all,
    "48c1c70d"  # rol rdi, 13       a no-op on the CPU that valgrind recognises
    "48c1c73d"  # rol rdi, 61
    "48c1c733"  # rol rdi, 51
    "4887db"  # xchg rbx, rbx       the request itself: rdx = result
    "4889d0"  # mov rax, rdx
    "c3"  # ret
)


class ValgrindUnavailable(PerfsuiteError):
    """Valgrind (or a way to issue its client requests) is missing: the metric is "not measured"."""


class BuildFailed(PerfsuiteError):
    """The C helper could not be compiled (no compiler, missing header, compiler error)."""


@dataclass(frozen=True, slots=True)
class Valgrind:
    """A usable valgrind: its executable and ``valgrind --version`` (e.g. ``valgrind-3.19.0``)."""

    path: str
    version: str


def _executable(text: str, origin: str) -> str:
    found = text if os.sep in text else shutil.which(text)
    if not found or not os.path.isfile(found) or not os.access(found, os.X_OK):
        raise ValgrindUnavailable(f"valgrind not found: {text} ({origin}) is not an executable file")
    return found


@cache
def _version(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ValgrindUnavailable(f"valgrind at {path} does not run: {exc}") from None
    text = out.stdout.strip()
    if out.returncode != 0 or not text.startswith("valgrind"):
        raise ValgrindUnavailable(f"{path} is not valgrind (--version said {text[:60]!r})")
    return text


def find_valgrind(path: str | None = None, origin: str = "--valgrind") -> Valgrind:
    """``path`` (given as option ``origin``), else ``$PERFSUITE_VALGRIND``, else ``valgrind`` on PATH; else
    :class:`ValgrindUnavailable` with the reason in one line."""
    if path:
        found = _executable(path, origin)
    elif os.environ.get(VALGRIND_ENV):
        found = _executable(os.environ[VALGRIND_ENV], f"${VALGRIND_ENV}")
    else:
        which = shutil.which("valgrind")
        if which is None:
            raise ValgrindUnavailable(f"valgrind not found on PATH (install valgrind, or set ${VALGRIND_ENV})")
        found = which
    return Valgrind(found, _version(found))


def interpreter(python: str | None = None) -> str:
    """The interpreter to run under valgrind: ``python`` (a code variant's own environment's), else
    ``sys.executable``, checked to lead to an ELF binary.

    Valgrind must start the real interpreter, never a wrapper script (a pyenv shim would be bash under
    valgrind). ``sys.executable`` is what runs now; in a virtualenv it is a symlink whose target
    (``os.path.realpath``) is the ELF that valgrind loads, while the link path as ``argv[0]`` lets
    the interpreter find its ``pyvenv.cfg`` (the bare target would lose the venv's site-packages).
    """
    exe = python or sys.executable
    real = os.path.realpath(exe)
    try:
        with open(real, "rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise ValgrindUnavailable(f"cannot read the interpreter {real}: {exc.strerror or exc}") from None
    if magic != b"\x7fELF":
        raise ValgrindUnavailable(f"the interpreter {exe} -> {real} is not an ELF binary (a wrapper script?)")
    return exe


# -- the C helper ---------------------------------------------------------------------------------------


def cache_dir() -> Path:
    """``$PERFSUITE_CACHE/valgrind``, else ``${XDG_CACHE_HOME:-~/.cache}/perfsuite/valgrind`` (never in git)."""
    env = os.environ.get("PERFSUITE_CACHE")
    if env:
        return Path(env) / "valgrind"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "perfsuite" / "valgrind"


def _compiler() -> str | None:
    """``$CC`` when set (and then only it, as make does), else cc, gcc or clang on PATH."""
    if os.environ.get("CC"):
        return shutil.which(os.environ["CC"].split()[0])
    for name in ("cc", "gcc", "clang"):
        found = shutil.which(name)
        if found:
            return found
    return None


def build_library(name: str, source: str, *, flags: Sequence[str] = ()) -> Path:
    """Compile ``source`` into a shared library, once: cached under :func:`cache_dir` by a digest of the
    source, flags and compiler, written atomically (concurrent builds cannot see a half-written file)."""
    cc = _compiler()
    if cc is None:
        named = f"$CC ({os.environ['CC']}) not found" if os.environ.get("CC") else "no C compiler found"
        raise BuildFailed(f"{named} (set CC, or install cc/gcc/clang)")
    argv_flags = ["-shared", "-fPIC", *flags]
    digest = hashlib.sha256("\0".join([source, cc, *argv_flags]).encode()).hexdigest()[:16]
    directory = cache_dir()
    target = directory / f"{name}-{digest}.so"
    if target.is_file():
        return target
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BuildFailed(f"cannot create the helper cache {directory}: {exc.strerror or exc}") from None
    work = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=directory))
    try:
        src = work / f"{name}.c"
        src.write_text(source, encoding="utf-8")
        out = work / "lib.so"
        try:
            proc = subprocess.run([cc, *argv_flags, "-o", str(out), str(src)], capture_output=True, text=True,
                                  timeout=300, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            raise BuildFailed(f"{cc} failed to run: {exc}") from None
        if proc.returncode != 0 or not out.is_file():
            lines = [ln for ln in (proc.stderr or proc.stdout).splitlines() if "error" in ln] or ["no output"]
            raise BuildFailed(f"{cc} could not build {name}: {lines[0].strip()}")
        os.replace(out, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def client_library() -> tuple[str | None, str]:
    """(path of the compiled client helper or ``None``, mechanism) for the worker; raises
    :class:`ValgrindUnavailable` when neither the helper nor the x86-64 machine-code fallback works."""
    try:
        return str(build_library("perfsuite-callgrind", _CLIENT_SOURCE, flags=("-O2",))), "client requests"
    except BuildFailed as exc:
        if _machine_code_supported():
            return None, "client requests (machine code)"
        raise ValgrindUnavailable(f"cannot issue callgrind client requests: {exc}") from None


def instructions_unavailable(valgrind: str | None = None) -> str | None:
    """Why the instruction pass cannot run here (one line), or ``None`` when valgrind and its client
    requests are usable. ``valgrind`` is the ``--valgrind`` path (else ``$PERFSUITE_VALGRIND``, PATH)."""
    try:
        find_valgrind(valgrind)
        client_library()
    except ValgrindUnavailable as exc:
        return str(exc)
    return None


def _machine_code_supported() -> bool:
    return sys.platform.startswith("linux") and platform.machine().lower() in ("x86_64", "amd64")


class CallgrindClient:
    """Opens and closes the measured window from inside the process valgrind runs."""

    mechanism = "client requests"

    def on_valgrind(self) -> bool:
        """Whether this process runs under valgrind (``RUNNING_ON_VALGRIND``)."""
        raise NotImplementedError

    def begin(self) -> None:
        """Start instrumenting and zero the counters: everything after this is counted, every thread."""
        raise NotImplementedError

    def end(self) -> None:
        """Stop instrumenting: nothing after this is counted (the counts stay until the final dump)."""
        raise NotImplementedError


class _LibraryClient(CallgrindClient):
    def __init__(self, path: str) -> None:
        lib = ctypes.CDLL(path)
        self._on = lib.perfsuite_on_valgrind
        self._on.restype = ctypes.c_ulong
        self._begin = lib.perfsuite_window_begin
        self._end = lib.perfsuite_window_end

    def on_valgrind(self) -> bool:
        return bool(self._on())

    def begin(self) -> None:
        self._begin()

    def end(self) -> None:
        self._end()


class _MachineCodeClient(CallgrindClient):
    """The requests without a compiler: ``valgrind.h``'s amd64 sequence in an executable page."""

    mechanism = "client requests (machine code)"

    def __init__(self) -> None:
        if not _machine_code_supported():
            raise ValgrindUnavailable("callgrind client requests without a compiler need x86-64 Linux")
        try:
            self._page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        except (OSError, ValueError) as exc:
            raise ValgrindUnavailable(f"no executable page for the client requests: {exc}") from None
        self._page.write(_AMD64_REQUEST)
        address = ctypes.addressof(ctypes.c_char.from_buffer(self._page))
        self._call = ctypes.CFUNCTYPE(ctypes.c_ulong, ctypes.POINTER(ctypes.c_ulong))(address)
        # argument blocks built in advance, so begin/end allocate nothing inside the window
        self._blocks = {code: (ctypes.c_ulong * 6)(code) for code in
                        (_RUNNING_ON_VALGRIND, _ZERO_STATS, _START_INSTRUMENTATION, _STOP_INSTRUMENTATION)}

    def _request(self, code: int) -> int:
        return int(self._call(self._blocks[code]))

    def on_valgrind(self) -> bool:
        return bool(self._request(_RUNNING_ON_VALGRIND))

    def begin(self) -> None:
        self._request(_START_INSTRUMENTATION)
        self._request(_ZERO_STATS)

    def end(self) -> None:
        self._request(_STOP_INSTRUMENTATION)


def callgrind_client(library: str | None) -> CallgrindClient:
    """The client for this process: the compiled helper at ``library``, else the machine-code fallback."""
    if library:
        try:
            return _LibraryClient(library)
        except (OSError, AttributeError) as exc:
            raise ValgrindUnavailable(f"cannot load the callgrind helper {library}: {exc}") from None
    return _MachineCodeClient()


# -- reading callgrind's output ---------------------------------------------------------------------------

_THREAD = re.compile(r"^thread:\s*(\d+)")
_TOTALS = re.compile(r"^(?:totals|summary):\s*(\d+)")


def callgrind_totals(directory: Path, stem: str = "callgrind.out") -> dict[int, int]:
    """Instructions (``Ir``) per valgrind thread id from the output files ``<stem>`` / ``<stem>-NN``.

    Thread 1 is the process's main thread. Only the final dump exists (the window never dumps), so each
    file's total is that thread's share of the window."""
    totals: dict[int, int] = {}
    pattern = re.compile(re.escape(stem) + r"(?:-(\d+))?$")
    for path in sorted(Path(directory).iterdir()):
        match = pattern.match(path.name)
        if not match:
            continue
        tid = int(match.group(1)) if match.group(1) else 1
        value: int | None = None
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if (m := _THREAD.match(line)) is not None:
                    tid = int(m.group(1))
                elif (m := _TOTALS.match(line)) is not None:
                    value = int(m.group(1))
                    if line.startswith("totals"):
                        break
        if value is not None:
            totals[tid] = totals.get(tid, 0) + value
    return totals
