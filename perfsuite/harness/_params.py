"""Declared operation parameters: what a recipe mode may set, checked before anything runs.

An operation factory declares the parameters it accepts in a ``parameters`` attribute: a mapping of names to
:class:`Param` (a class attribute, or set on a function, e.g. by the :func:`accepts` decorator)::

    class Commit:
        parameters = {"records": Param(int, 10, "records per commit", minimum=1, maximum=10_000),
                      "fsync": Param(bool, True, "fsync each commit")}

The harness then checks every mode's parameters against the declaration before any sample is measured (an
unknown key is one line naming the known ones, with "did you mean ...?" when one is close; a wrong type or
a value out of range names the value and what is allowed). Parameters reach the factory as written in
the recipe (``ctx.params``, which is what the results record); :func:`param_value` reads one with its
declared default. A factory that declares nothing (no ``parameters`` attribute, or ``None``) gets its
parameters as written, and :class:`ReadRecorder` notes which it reads while it is built and runs: a key it
never read is a typo nobody would otherwise see (``ofload = true``), so the sample fails naming it.

The run condition ``storage`` (SPEC M10) is accepted by every operation that declares it applies it
(``conditions = {"storage"}``): it need not be declared again.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from perfsuite._limits import show_number
from perfsuite.errors import PerfsuiteError

__all__ = ["Param", "ReadRecorder", "accepts", "check_params", "declared_parameters", "did_you_mean",
           "param_value", "unread_keys"]

F = TypeVar("F", bound=Callable[..., Any])
_KINDS: dict[type, str] = {bool: "true or false", int: "an integer", float: "a number", str: "a string",
                           object: "a value"}
#: parameters every operation that applies the run condition of the same name accepts (SPEC M10)
CONDITION_PARAMS = frozenset({"storage"})
#: mode keys the results and reports read themselves (a peer comparison's labels): never an operation's typo
LABEL_KEYS = frozenset({"system", "durability"})


class ReadRecorder(Mapping[str, object]):
    """A mode's parameters as the operation sees them, noting every key it looks up; iterating over them
    (``dict(params)``, ``**params``) counts as reading them all."""

    def __init__(self, params: Mapping[str, object]) -> None:
        self._params = dict(params)
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> object:
        self.read.add(key)
        return self._params[key]

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.read.add(key)
        return key in self._params

    def __iter__(self) -> Iterator[str]:
        self.read.update(self._params)
        return iter(self._params)

    def __len__(self) -> int:
        return len(self._params)

    @property
    def given(self) -> frozenset[str]:
        """Every key the mode sets, read or not (not counted as a read)."""
        return frozenset(self._params)


def unread_keys(factory: object, params: ReadRecorder) -> list[str]:
    """The keys an operation that declares no parameters never read (its declaration is checked instead)."""
    if declared_parameters(factory) is not None:
        return []
    return sorted(params.given - params.read - LABEL_KEYS - CONDITION_PARAMS)


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter an operation accepts: its kind, default, allowed range or values, and what it does.

    ``kind`` is ``bool``, ``int``, ``float`` (an integer is accepted too), ``str`` or ``object`` (anything
    a recipe can hold, e.g. a table). ``minimum``/``maximum`` bound numbers (inclusive; NaN and infinity
    are never accepted); ``choices`` lists the allowed values. ``default`` ``None`` means "not set" (the
    operation decides).
    """

    kind: type
    default: Any = None
    doc: str = ""
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise TypeError(f"Param kind must be one of bool, int, float, str, object, not {self.kind!r}")

    def expected(self) -> str:
        """What is allowed, as the error messages say it: ``an integer from 1 to 100``, ``one of "a", "b"``."""
        if self.choices:
            return "one of " + ", ".join(_show(c) for c in self.choices)
        text = _KINDS[self.kind]
        if self.kind in (int, float):
            if self.minimum is not None and self.maximum is not None:
                return f"{text} from {show_number(self.minimum)} to {show_number(self.maximum)}"
            if self.minimum is not None:
                return f"{text} >= {show_number(self.minimum)}"
            if self.maximum is not None:
                return f"{text} <= {show_number(self.maximum)}"
        return text

    def problem(self, value: object) -> str | None:
        """Why ``value`` is not allowed (``expected ..., got ...``), or ``None``."""
        if not self._kind_ok(value):
            return f"expected {self.expected()}, got {_show(value)}"
        if self.choices and value not in self.choices:
            return f"expected {self.expected()}, got {_show(value)}"
        if self.kind in (int, float):
            assert isinstance(value, int | float)
            if isinstance(value, float) and not math.isfinite(value):
                return f"expected {self.expected()}, got {_show(value)}"
            if self.maximum is not None and value > self.maximum:
                return f"expected {self.expected()}, got {_show(value)} (at most {show_number(self.maximum)})"
            if self.minimum is not None and value < self.minimum:
                return f"expected {self.expected()}, got {_show(value)} (at least {show_number(self.minimum)})"
        return None

    def _kind_ok(self, value: object) -> bool:
        if self.kind is object:
            return True
        if self.kind is bool:
            return isinstance(value, bool)
        if isinstance(value, bool):
            return False
        if self.kind is float:
            return isinstance(value, int | float)
        return isinstance(value, self.kind)


def _show(value: object) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return show_number(value)
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return repr(value)


def accepts(**parameters: Param | type) -> Callable[[F], F]:
    """Declare a factory's parameters: ``@accepts(bytes=Param(int, 4096, minimum=1))`` sets ``parameters``.
    A bare type (``bytes=int``) is ``Param(int)``."""

    def mark(factory: F) -> F:
        factory.parameters = dict(parameters)  # type: ignore[attr-defined]
        return factory

    return mark


def declared_parameters(factory: object, spec: str = "operation") -> dict[str, Param] | None:
    """The factory's declaration (bare types made :class:`Param`), or ``None`` when it declares nothing."""
    raw = getattr(factory, "parameters", None)
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or not all(isinstance(k, str) for k in raw):
        raise PerfsuiteError(f"{spec}: parameters: expected a mapping of names to Param, got {type(raw).__name__}")
    out: dict[str, Param] = {}
    for name, param in raw.items():
        if isinstance(param, type) and param in _KINDS:
            param = Param(param)
        if not isinstance(param, Param):
            raise PerfsuiteError(f"{spec}: parameters.{name}: expected a Param (or bool, int, float, str), "
                                 f"got {param!r}")
        out[name] = param
    if "storage" in getattr(factory, "conditions", ()):  # the run condition it applies (SPEC M10)
        out.setdefault("storage", Param(object, doc="the run's storage profile (a name or a table, SPEC M10)"))
    return out


def did_you_mean(word: str, known: Any) -> str:
    """``"; did you mean window_ms?"`` when a known name is close to ``word``, else ``""``."""
    close = difflib.get_close_matches(word, sorted(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def check_params(factory: object, params: Mapping[str, Any], spec: str) -> dict[str, Param] | None:
    """Check ``params`` against the factory's declaration; the first problem is a :class:`PerfsuiteError`
    ``<key>: <why>`` (the caller prefixes where the mode is). Returns the declaration (``None``: none)."""
    declared = declared_parameters(factory, spec)
    if declared is None:
        return None
    for key, value in params.items():
        if key not in declared:
            known = ", ".join(sorted(declared)) or "none"
            raise PerfsuiteError(f"{key}: unknown parameter of {spec} (known: {known}{did_you_mean(key, declared)})")
        problem = declared[key].problem(value)
        if problem:
            raise PerfsuiteError(f"{key}: {problem}")
    return declared


def param_value(ctx: Any, declared: Mapping[str, Param], name: str) -> Any:
    """``ctx.params[name]`` checked against ``declared[name]``, or its default (checked again: an operation
    may be called directly, not only through the harness)."""
    param = declared[name]
    if name not in ctx.params:
        return param.default
    value = ctx.params[name]
    problem = param.problem(value)
    if problem:
        raise PerfsuiteError(f"mode {ctx.mode}: {name}: {problem}")
    return value
