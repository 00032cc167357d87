"""The audit-hook guard (E1: every durable byte through one interface): no file operation on a workload's directory
bypasses the engine's I/O layer (E1).

What it checks, exactly. A subprocess (so the hook, which cannot be removed, never leaks into this
process) installs ``sys.addaudithook`` and runs every registered crash workload three ways: its setup (where
only the engine's own calls are held to the rule: a setup may build a crashed tree with the crash model,
which no engine wrote), its run on the recorder (faults included, as the campaign runs it) and its
recovery of the final tree.
While a workload is armed, every audit event of these kinds is examined:

- ``open`` (``builtins.open``, ``os.open``, ``io.open``: reads *and* writes), ``os.rename`` (also raised
  by ``os.replace``), ``os.remove`` (``os.unlink``), ``os.mkdir``, ``os.rmdir``, ``os.truncate`` (also
  ``os.ftruncate``), ``os.link``, ``os.symlink``, ``os.chmod``, ``os.chown``, ``os.utime``,
  ``os.listdir``, ``os.scandir``, ``shutil.*``;
- when one of its path arguments resolves (against the current directory when relative) to the armed
  workload's directory or below, or when it names no path at all (a descriptor: ``ftruncate``,
  ``fchmod``, ``open`` of an fd, ...),
- the innermost Python frame outside the standard library (``os``, ``posixpath``, ``shutil``, frozen
  modules) must belong to ``perfsuite/engine/_fs.py``: the one module that issues the real ``os`` calls
  (``OsFileSystem``). Anything else (engine code calling ``os``/``open``/``shutil`` itself, a wrapper that
  does its own I/O) is a violation, reads included: no read-only exception was needed.

Not visible to audit hooks (so not checked): ``os.write``, ``os.fsync``, ``os.close``, ``os.stat`` and
``os.lstat`` (so ``os.path.exists``). Relative names opened through a directory descriptor
(``dir_fd=``; the E8 pinned target) are resolved against the current directory, not the descriptor;
they come from ``_fs.py`` anyway. The process offload runs steps in another process, unguarded; the
workloads use the inline and thread offloads. A self-test proves the guard fires on a bypass.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

GUARD = textwrap.dedent(
    r'''
    import contextlib, json, os, sys, sysconfig, tempfile

    import perfsuite.engine._fs as fs_module
    from perfsuite.crash import WORKLOADS
    from perfsuite.crash.model._trace import OpRecorder, WorkloadEnv
    from perfsuite.engine import OsFileSystem
    from perfsuite.engine.testing import FaultyFileSystem

    FS_FILE = os.path.realpath(fs_module.__file__)
    STDLIB = tuple(os.path.realpath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib"))
    PATH_EVENTS = {"open": (0,), "os.rename": (0, 1), "os.remove": (0,), "os.mkdir": (0,), "os.rmdir": (0,),
                   "os.truncate": (0,), "os.link": (0, 1), "os.symlink": (0, 1), "os.chmod": (0,),
                   "os.chown": (0,), "os.utime": (0,), "os.listdir": (0,), "os.scandir": (0,)}
    armed = None
    setup_phase = [False]
    ENGINE_DIR = os.path.dirname(FS_FILE) + os.sep
    checked, violations = [0], []

    def inside(path):
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str):
            return True  # a descriptor: which file is unknown, so the caller must be the I/O layer
        full = os.path.realpath(path)
        return full == armed or full.startswith(armed + os.sep)

    def caller():
        frame = sys._getframe(2)
        while frame is not None:
            name = frame.f_code.co_filename
            if not (name.startswith("<frozen") or os.path.realpath(name).startswith(STDLIB)):
                return os.path.realpath(name), frame.f_lineno
            frame = frame.f_back
        return "?", 0

    def hook(event, args):
        if armed is None:
            return
        if event in PATH_EVENTS:
            positions = PATH_EVENTS[event]
        elif event.startswith("shutil."):
            positions = tuple(range(len(args)))
        else:
            return
        paths = [args[i] for i in positions if i < len(args)]
        if not any(inside(p) for p in paths if p is not None):
            return
        checked[0] += 1
        where, line = caller()
        if setup_phase[0] and not where.startswith(ENGINE_DIR):
            return  # a setup building a crashed tree (the crash model materializing a state): not the engine
        if where != FS_FILE:
            violations.append({"event": event, "args": [str(a) for a in args[:2]],
                               "caller": f"{os.path.relpath(where)}:{line}"})

    @contextlib.contextmanager
    def arm(root):
        global armed
        armed = os.path.realpath(root)
        try:
            yield
        finally:
            armed = None

    sys.addaudithook(hook)
    names = sys.argv[1:] or sorted(WORKLOADS)
    for name in names:
        workload = WORKLOADS[name]
        root = os.path.realpath(tempfile.mkdtemp(prefix=f"audit-{name}-"))
        with arm(root):
            if workload.setup is not None:
                setup_phase[0] = True
                try:
                    workload.setup(root)
                finally:
                    setup_phase[0] = False
            inner = FaultyFileSystem(OsFileSystem(), workload.faults) if workload.faults else OsFileSystem()
            recorder = OpRecorder(inner)
            workload.run(WorkloadEnv(recorder, recorder, root))
            workload.recover(root, OsFileSystem())
    # Self-test: a bypass of the I/O layer in the armed directory is caught.
    before = len(violations)
    probe = os.path.realpath(tempfile.mkdtemp(prefix="audit-probe-"))
    with arm(probe):
        with open(os.path.join(probe, "bypass"), "w") as handle:
            handle.write("x")
        os.replace(os.path.join(probe, "bypass"), os.path.join(probe, "moved"))
    caught = len(violations) - before
    print(json.dumps({"checked": checked[0], "violations": violations[:before], "self_test": caught,
                      "workloads": names}))
    '''
)


def test_no_file_operation_on_a_session_bypasses_the_io_layer():
    proc = subprocess.run([sys.executable, "-c", GUARD], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["self_test"] == 2, "the guard did not catch a deliberate bypass"
    assert {"session", "session-file", "session-async", "transcript"} <= set(result["workloads"])
    # the hook really saw the workloads' file operations (format 2, the session log, does far fewer: its steady
    # path is a pwrite and an fdatasync on an open log, which audit hooks do not see)
    assert result["checked"] > 400
    assert result["violations"] == [], "\n".join(f"{v['event']} {v['args']} from {v['caller']}"
                                                 for v in result["violations"])
