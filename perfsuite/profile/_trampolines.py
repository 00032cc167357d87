"""Python function names for callgrind: one C trampoline per Python code object.

Under Python 3.11 callgrind sees the interpreter's C functions, and every Python function is the same
``_PyEval_EvalFrameDefault``. This module gives each Python function its own C symbol, the way Python
3.12's perf trampoline does for ``perf``, but with symbols valgrind can read from an ELF file:

* a shared library with :data:`POOL` functions ``Q_0 .. Q_4095`` (plus ``Q_other``), each calling
  ``_PyEval_EvalFrameDefault``, built once with the system compiler and cached;
* a frame-evaluation function (PEP 523) that gives each code object the next free trampoline (kept
  in the code object's extra slot) and evaluates the frame through it; with it installed, CPython no
  longer inlines Python-to-Python calls, so every Python call passes through a trampoline;
* callgrind options that skip every function *not* named ``Q_...`` (``--fn-skip`` with wildcard
  patterns covering every other first characters): a skipped function's cost is charged to its caller,
  so each trampoline's self cost is everything its Python function did, C callees included, and
  ``--separate-callers`` contexts become Python call stacks.

The hooks (:class:`WindowHooks`) install the evaluation function just before the measured window and
write the trampoline-to-function map after it. Counts under the trampolines are a little higher than
the instruction pass's (Python calls are no longer inlined): use ``perfsuite run --instructions`` for the
figure, this for where it goes.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import sysconfig
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfsuite.errors import PerfsuiteError
from perfsuite.harness import BuildFailed, build_library

__all__ = ["OTHER", "POOL", "PREFIX", "WindowHooks", "skip_options", "trampoline_library"]

#: trampolines in the pool; code objects beyond it share ``Q_other``
POOL = 4096
#: every trampoline's name starts with this (and no other function's does: see :func:`skip_options`)
PREFIX = "Q_"
OTHER = f"{PREFIX}other"

_HEAD = r"""/* perfsuite: one trampoline per Python code object, so callgrind can name Python functions. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#define Py_BUILD_CORE 1
#include "internal/pycore_frame.h"
typedef PyObject *(*ps_eval_t)(PyThreadState *, struct _PyInterpreterFrame *, int);
/* -O0 and the empty asm keep each trampoline a real frame: no tail call, no identical-code folding. */
#define T(n) __attribute__((noinline)) PyObject *Q_##n(PyThreadState *ts, struct _PyInterpreterFrame *f, int t) \
    { PyObject *r = _PyEval_EvalFrameDefault(ts, f, t); __asm__ volatile("" ::: "memory"); return r; }
"""

_TAIL = r"""
static PyObject *codes[POOL];
static Py_ssize_t ncodes = 0;
static Py_ssize_t extra_index = -1;

static PyObject *perfsuite_eval(PyThreadState *ts, struct _PyInterpreterFrame *f, int t) {
    PyObject *co = (PyObject *)f->f_code;
    void *extra = NULL;
    if (_PyCode_GetExtra(co, extra_index, &extra) < 0) { PyErr_Clear(); extra = NULL; }
    intptr_t i = (intptr_t)extra;
    if (i == 0) {
        if (ncodes >= POOL) return Q_other(ts, f, t);
        Py_INCREF(co);
        codes[ncodes] = co;
        i = ++ncodes;
        if (_PyCode_SetExtra(co, extra_index, (void *)i) < 0) PyErr_Clear();
    }
    return table[i - 1](ts, f, t);
}

int perfsuite_install(void) {
    if (extra_index < 0) extra_index = _PyEval_RequestCodeExtraIndex(NULL);
    if (extra_index < 0) return -1;
    _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), perfsuite_eval);
    return 0;
}

void perfsuite_uninstall(void) {
    _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), _PyEval_EvalFrameDefault);
}

PyObject *perfsuite_codes(void) {
    PyObject *list = PyList_New(ncodes);
    if (list == NULL) return NULL;
    for (Py_ssize_t i = 0; i < ncodes; i++) { Py_INCREF(codes[i]); PyList_SET_ITEM(list, i, codes[i]); }
    return list;
}
"""


def _source() -> str:
    lines = [_HEAD, f"#define POOL {POOL}"]
    lines += [f"T({i})" for i in range(POOL)]
    lines.append("T(other)")
    lines.append("static const ps_eval_t table[POOL] = {" + ", ".join(f"{PREFIX}{i}" for i in range(POOL)) + "};")
    lines.append(_TAIL)
    return "\n".join(lines)


def trampoline_library() -> Path:
    """The trampoline library for this interpreter (built on first use, cached); one-line
    :class:`PerfsuiteError` when it cannot be built (another Python, no compiler, no headers)."""
    if sys.implementation.name != "cpython" or sys.version_info[:2] not in ((3, 11), (3, 12)):
        raise PerfsuiteError("the callgrind profile names Python functions with trampolines for CPython 3.11 and "
                             f"3.12; this is {sys.implementation.name} {sys.version.split()[0]}")
    include = sysconfig.get_paths()["include"]
    if not os.path.isfile(os.path.join(include, "internal", "pycore_frame.h")):
        raise PerfsuiteError(f"the callgrind profile needs Python's C headers (no {include}/internal/pycore_frame.h)")
    try:
        return build_library("perfsuite-trampolines", _source(), flags=("-O0", f"-I{include}"))
    except BuildFailed as exc:
        raise PerfsuiteError(f"the callgrind profile's trampolines: {exc}") from None


def skip_options(prefix: str = PREFIX) -> list[str]:
    """``--fn-skip`` patterns matching every function name that does not start with ``prefix``.

    callgrind patterns have ``*`` and ``?`` but no negation, so the complement is spelled out: for each
    position k of the prefix, every other printable character after its first k characters, plus the
    proper prefixes themselves as whole names."""
    chars = [chr(c) for c in range(0x20, 0x7F) if chr(c) not in "*?"]
    out = []
    for k in range(len(prefix)):
        out += [f"--fn-skip={prefix[:k]}{c}*" for c in chars if c != prefix[k]]
        if k:
            out.append(f"--fn-skip={prefix[:k]}")
    return out


def _relative(filename: str, roots: list[str]) -> str:
    """``filename`` relative to the longest import root containing it (stable across checkouts)."""
    real = os.path.realpath(filename) if filename and not filename.startswith("<") else filename
    best = ""
    for root in roots:
        if real.startswith(root + os.sep) and len(root) > len(best):
            best = root
    return real[len(best) + 1:] if best else real


class WindowHooks:
    """The instruction pass's hooks for a profile: trampolines on just before the window, and the map
    ``Q_n -> Python function`` written to ``params["map"]`` (JSON) after it."""

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.map_path = Path(str(params["map"]))
        self.lib = ctypes.PyDLL(str(params["library"]))
        self.lib.perfsuite_codes.restype = ctypes.py_object
        self.lib.perfsuite_install.restype = ctypes.c_int

    def before_window(self) -> None:
        if self.lib.perfsuite_install() != 0:
            raise PerfsuiteError("the callgrind profile could not install its frame-evaluation function")

    def after_window(self) -> None:
        self.lib.perfsuite_uninstall()
        codes = self.lib.perfsuite_codes()
        roots = sorted({os.path.realpath(p) for p in sys.path if p and os.path.isdir(p)})
        entries = [
            {"file": _relative(code.co_filename, roots), "line": code.co_firstlineno, "name": code.co_qualname}
            for code in codes
        ]
        self.map_path.write_text(json.dumps({"prefix": PREFIX, "other": OTHER, "codes": entries}), encoding="utf-8")


def window_hooks(params: Mapping[str, Any]) -> WindowHooks:
    """Hook factory named in the instruction pass's request (``perfsuite.profile._trampolines:window_hooks``)."""
    return WindowHooks(params)
