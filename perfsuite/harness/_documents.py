"""Reading the documents perfsuite is given, strictly: JSON and TOML with one-line errors.

Every file a command reads (results, resume documents, A/B pairings, costs files, trace lines, recipes,
storage profiles, fixture specs) goes through here, so the same input gets the same answer everywhere:

* text that is not UTF-8 is "not UTF-8 text", never a ``UnicodeDecodeError``;
* JSON's non-standard ``NaN``, ``Infinity`` and ``-Infinity`` are refused (perfsuite never writes them; a
  document that holds them was not written by it, and a NaN would poison every summary it reaches);
* a document nested deeper than :data:`perfsuite._limits.MAX_JSON_DEPTH` is refused before anything
  recursive meets it (a ``RecursionError`` from the parser, or later from a schema check, is not an answer);
* only a regular file is read, and only when its size is within ``LIMITS["document_bytes"]``, checked on the
  open descriptor before a byte is read: a FIFO never hangs a reader (it is opened ``O_NONBLOCK``), a
  ``/dev/zero`` or a sparse 2 GB file is one line, not a ``MemoryError``. Names a reader found by listing a
  directory (a committed ``x.json -> /dev/zero`` beside a results document) are opened ``O_NOFOLLOW``.
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
import tomllib
from collections.abc import Iterator
from typing import Any

from perfsuite._limits import LIMITS, MAX_JSON_DEPTH
from perfsuite.errors import PerfsuiteError

__all__ = [
    "bounded_lines",
    "depth_problem",
    "open_regular",
    "parse_json",
    "parse_toml",
    "read_json",
    "read_text",
    "read_toml",
]


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name}: perfsuite documents hold finite numbers only")


def depth_problem(value: Any, limit: int = MAX_JSON_DEPTH) -> str | None:
    """``"nested more than N levels deep"`` when ``value`` (decoded JSON or TOML) nests deeper than ``limit``."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return f"nested more than {limit} levels deep"
        stack.extend((child, depth + 1) for child in children)
    return None


def _finite(text: str) -> float:
    """A JSON number as a float; ``1e400`` would parse as infinity and pass every finite-number rule."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of range for a number")
    return value


def parse_json(text: str | bytes, source: str) -> Any:
    """Decode one JSON document; every problem is one :class:`PerfsuiteError` line starting with ``source``."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PerfsuiteError(f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise PerfsuiteError(f"{source}: not a usable JSON document: nested more than {MAX_JSON_DEPTH} levels "
                             "deep") from None
    except json.JSONDecodeError as exc:
        raise PerfsuiteError(f"{source}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except ValueError as exc:  # NaN / Infinity, an integer too long to convert
        raise PerfsuiteError(f"{source}: not valid JSON ({exc})") from None
    problem = depth_problem(value)
    if problem:
        raise PerfsuiteError(f"{source}: not a usable JSON document: {problem}")
    return value


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "a special file")


def open_regular(path: str | os.PathLike[str], what: str = "file", *, follow: bool = True) -> int:
    """A read-only descriptor of the regular file ``path`` whose size is within ``LIMITS["document_bytes"]``;
    anything else is one :class:`PerfsuiteError` line and nothing is read. ``follow=False`` for a name found by
    listing a directory: a symbolic link there is refused, not followed (it may point anywhere)."""
    source = os.fspath(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(source, flags)  # O_NONBLOCK: opening a FIFO without a writer returns at once
    except FileNotFoundError:
        raise PerfsuiteError(f"{source}: no such {what}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise PerfsuiteError(f"{source}: a symbolic link, not followed in a listed directory; name the file "
                                 "it points to instead") from None
        raise PerfsuiteError(f"{source}: cannot read: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise PerfsuiteError(f"{source}: is a directory, expected a {what}")
        if not stat.S_ISREG(info.st_mode):
            raise PerfsuiteError(f"{source}: {_kind(info.st_mode)}, not a regular file: expected a {what}")
        limit = int(LIMITS["document_bytes"].high)
        if info.st_size > limit:
            raise PerfsuiteError(f"{source}: {info.st_size} bytes, larger than a {what} may be (at most {limit} "
                                 "bytes, document_bytes)")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_bounded(fd: int, source: str, what: str) -> bytes:
    """Every byte of ``fd``, refusing a file that grew past the limit after its size was checked."""
    limit = int(LIMITS["document_bytes"].high)
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, min(1 << 20, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise PerfsuiteError(f"{source}: grew past {limit} bytes while being read (at most {limit} bytes for "
                                 f"a {what}, document_bytes)")


def bounded_lines(path: str | os.PathLike[str], what: str = "file", *, follow: bool = True) -> Iterator[str]:
    """The UTF-8 lines of the regular file ``path`` (as :func:`open_regular` checks it), read one at a time and
    never more than ``LIMITS["document_bytes"]`` characters in all."""
    source = os.fspath(path)
    limit = int(LIMITS["document_bytes"].high)
    fd = open_regular(source, what, follow=follow)
    with open(fd, encoding="utf-8", closefd=True) as handle:
        total = 0
        try:
            for line in handle:
                total += len(line)
                if total > limit:
                    raise PerfsuiteError(f"{source}: grew past {limit} bytes while being read (at most {limit} "
                                         f"bytes for a {what}, document_bytes)")
                yield line
        except UnicodeDecodeError as exc:
            raise PerfsuiteError(f"{source}: not UTF-8 text ({exc.reason})") from None


def read_text(path: str | os.PathLike[str], what: str = "file", *, follow: bool = True) -> str:
    """A UTF-8 text file's contents; missing, a directory, not a regular file, larger than
    ``LIMITS["document_bytes"]``, unreadable or not UTF-8 is one line (see :func:`open_regular`)."""
    source = os.fspath(path)
    fd = open_regular(source, what, follow=follow)
    try:
        data = _read_bounded(fd, source, what)
    except OSError as exc:
        raise PerfsuiteError(f"{source}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PerfsuiteError(f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_json(path: str | os.PathLike[str], what: str = "JSON file", *, follow: bool = True) -> Any:
    """:func:`read_text` then :func:`parse_json` (``follow=False``: a name found by listing a directory)."""
    return parse_json(read_text(path, what, follow=follow), os.fspath(path))


def parse_toml(text: str, source: str) -> dict[str, Any]:
    """Decode a TOML document (``inf``/``nan`` are TOML: the key's own check refuses them, naming the key)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PerfsuiteError(f"{source}: invalid TOML: {exc}") from None
    except RecursionError:
        raise PerfsuiteError(f"{source}: not a usable TOML document: nested more than {MAX_JSON_DEPTH} levels "
                             "deep") from None
    problem = depth_problem(data)
    if problem:
        raise PerfsuiteError(f"{source}: not a usable TOML document: {problem}")
    return data


def read_toml(path: str | os.PathLike[str], what: str = "TOML file") -> dict[str, Any]:
    """:func:`read_text` then :func:`parse_toml`."""
    return parse_toml(read_text(path, what), os.fspath(path))
