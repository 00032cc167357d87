"""M4 ``process`` isolation: measure one sample in a fresh interpreter, JSON in, JSON out.

``python -m perfsuite.harness._worker`` reads ``{"kind": "sample"|"allocation"|"instructions"|"probe",
"spec": {...}, "sys_path": [...], "code": {"root": DIR, "packages": [...]}}`` on stdin (``instructions``:
the worker runs under valgrind, see :mod:`perfsuite.harness._instructions`) and writes one line on stdout:
``{"record": {...}, "code": {package: file}}``, or ``{"error": "one line"}`` with exit status 2. Anything
the operation prints goes to stderr, so it cannot corrupt the reply.

``code`` (optional) is a **code variant** (:mod:`perfsuite.harness._variants`): before anything imports
them, each named package is loaded from ``root`` (an ``importlib`` spec with
``submodule_search_locations``), so its submodules come from there too while the harness, and every
other package, stay the running interpreter's (a top-level module ``name.py`` is loaded the same way).
A variant with its own environment (``code["python"]``: ``perfsuite ab`` builds one per revision
when their dependencies differ) runs this worker with that interpreter (:func:`worker_command`), and the
request's ``sys_path`` leaves out the running environment's own directories
(:func:`perfsuite.harness._syspath.worker_sys_path`), so the variant's installed packages are the ones
imported. A ``probe`` request only loads the code and imports the operations named in ``operations``: the
caller learns, before measuring, whether they import against it, (``watch``: package names) whether
importing them imported those packages at all, and (``under``: a directory) which imported modules come
from files below it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import importlib.util
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perfsuite.errors import PerfsuiteError
from perfsuite.harness._syspath import within as _within


def worker_command(code: Mapping[str, Any] | None) -> list[str]:
    """The argv of a worker for ``code``: its environment's interpreter, else the running one."""
    python = (code or {}).get("python") or sys.executable
    return [str(python), "-m", "perfsuite.harness._worker"]


def load_code(code: Mapping[str, Any]) -> dict[str, str]:
    """Import ``code["packages"]`` (dotted names, in order) from the directory ``code["root"]``; returns
    ``{package: its __init__ file}``. One-line :class:`PerfsuiteError` when a package is missing, was
    already imported (it would be the running code's), or fails to import."""
    root = Path(str(code["root"]))
    loaded: dict[str, str] = {}
    for name in code.get("packages", []):
        if name in sys.modules:
            raise PerfsuiteError(f"{name} was imported before the variant's copy from {root} could be loaded")
        directory = root.joinpath(*name.split("."))
        init = directory / "__init__.py"
        single = directory.with_name(directory.name + ".py")
        if not init.is_file() and not single.is_file():
            raise PerfsuiteError(f"{name}: no package at {directory}")
        parent_name, _, leaf = name.rpartition(".")
        parent = importlib.import_module(parent_name) if parent_name else None
        if init.is_file():
            spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(directory)])
        else:  # a module of its own (``benchops.py`` at the repository's root)
            spec = importlib.util.spec_from_file_location(name, single)
        if spec is None or spec.loader is None:  # pragma: no cover - a file location always has a loader
            raise PerfsuiteError(f"{name}: cannot load {init}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
                del sys.modules[key]
            first = (str(exc).strip().splitlines() or [""])[0]
            raise PerfsuiteError(f"{name} from {root}: import failed: {type(exc).__name__}: {first}") from None
        if parent is not None:
            setattr(parent, leaf, module)
        loaded[name] = str(module.__file__)
    return loaded


def _probe(operations: Sequence[str], watch: Sequence[str], under: str | None = None) -> dict[str, Any]:
    from perfsuite.harness._operation import resolve_operation

    for spec in operations:
        resolve_operation(spec)
    imported = {name: any(m == name or m.startswith(name + ".") for m in sys.modules) for name in watch}
    record: dict[str, Any] = {"operations": list(operations), "imported": imported}
    if under is not None:  # which imported modules come from files below ``under`` (the default
        root = [os.path.realpath(under)]  # code under test is what the operations import of the repository)
        record["modules"] = {
            name: os.path.realpath(file)
            for name, module in sorted(sys.modules.items())
            if isinstance(file := getattr(module, "__file__", None), str) and _within(file, root)
        }
    return record


async def _serve(kind: str, spec_data: dict[str, Any]) -> dict[str, Any]:
    from perfsuite.harness._gc import GcRecorder
    from perfsuite.harness._heartbeat import Heartbeat
    from perfsuite.harness._operation import resolve_operation
    from perfsuite.harness._sample import SampleSpec, measure_sample

    spec = SampleSpec.from_dict(spec_data)
    factory = resolve_operation(spec.operation)  # import before the heartbeat starts
    if kind == "allocation":
        from perfsuite.harness._alloc import measure_allocation

        return (await measure_allocation(spec, factory)).to_dict()
    with GcRecorder() as recorder:
        async with Heartbeat(spec.heartbeat_ms) as heartbeat:
            for _ in range(spec.warmups):  # M4: warm this process first (discarded, each on its own fresh copy)
                await measure_sample(dataclasses.replace(spec, kind="warmup", warmups=0), heartbeat, recorder, factory)
            return (await measure_sample(spec, heartbeat, recorder, factory)).to_dict()


def main() -> int:
    """Serve one request from stdin; see the module docstring."""
    reply_to = sys.stdout
    sys.stdout = sys.stderr  # the operation's prints must not corrupt the reply
    try:
        request = json.load(sys.stdin)
        for entry in reversed(request.get("sys_path", [])):
            if entry not in sys.path:
                sys.path.insert(0, entry)
        code = load_code(request["code"]) if request.get("code") else None
        if request["kind"] == "probe":
            record = _probe(request.get("operations", []), request.get("watch", []), request.get("under"))
        elif request["kind"] == "instructions":  # under valgrind, a plain loop (no stall monitor)
            from perfsuite.harness._instructions import serve_instructions

            record = serve_instructions(request)
        elif request["kind"] == "allocation":  # M3: a plain loop, nothing of the harness's allocating
            record = asyncio.run(_serve(request["kind"], request["spec"]))
        else:
            from perfsuite.harness._stalls import run_instrumented

            record = run_instrumented(_serve(request["kind"], request["spec"]))  # M9: the harness's own loop
    except PerfsuiteError as exc:
        reply_to.write(json.dumps({"error": str(exc)}) + "\n")
        reply_to.flush()
        return exc.exit_status
    except OSError as exc:  # ENOSPC and friends: one line, never a traceback's last line
        where = f"{exc.filename}: " if exc.filename else ""
        reply_to.write(json.dumps({"error": f"worker: {where}{exc.strerror or exc}"}) + "\n")
        reply_to.flush()
        return 2
    reply_to.write(json.dumps({"record": record, "code": code}, allow_nan=False) + "\n")
    reply_to.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
