"""Reading the documents perfsuite is given, strictly (issue 27): JSON and TOML with one-line errors.

Every file a command reads (results, resume documents, A/B pairings, costs files, trace lines, recipes,
storage profiles, fixture specs) goes through here, so the same input gets the same answer everywhere:

* text that is not UTF-8 is "not UTF-8 text", never a ``UnicodeDecodeError``;
* JSON's non-standard ``NaN``, ``Infinity`` and ``-Infinity`` are refused (perfsuite never writes them; a
  document that holds them was not written by it, and a NaN would poison every summary it reaches);
* a document nested deeper than :data:`perfsuite._limits.MAX_JSON_DEPTH` is refused before anything
  recursive meets it (a ``RecursionError`` from the parser, or later from a schema check, is not an answer).
"""

from __future__ import annotations

import json
import math
import os
import tomllib
from pathlib import Path
from typing import Any

from perfsuite._limits import MAX_JSON_DEPTH
from perfsuite.errors import PerfsuiteError

__all__ = ["depth_problem", "parse_json", "parse_toml", "read_json", "read_text", "read_toml"]


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


def read_text(path: str | os.PathLike[str], what: str = "file") -> str:
    """A UTF-8 text file's contents; missing, a directory, unreadable or not UTF-8 is one line."""
    source = os.fspath(path)
    try:
        data = Path(source).read_bytes()
    except FileNotFoundError:
        raise PerfsuiteError(f"{source}: no such {what}") from None
    except IsADirectoryError:
        raise PerfsuiteError(f"{source}: is a directory, expected a {what}") from None
    except OSError as exc:
        raise PerfsuiteError(f"{source}: cannot read: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PerfsuiteError(f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_json(path: str | os.PathLike[str], what: str = "JSON file") -> Any:
    """:func:`read_text` then :func:`parse_json`."""
    return parse_json(read_text(path, what), os.fspath(path))


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
