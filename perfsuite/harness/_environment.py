"""M6, M8: where a result was measured: the machine, Python, the file system and its directory-fsync behaviour,
the measured repository and perfsuite's own checkout (:mod:`._provenance`), and the fixture. Recorded in
every results document (``_results`` re-exports these names).
"""

from __future__ import annotations

import datetime as _dt
import errno
import functools
import hashlib
import os
import platform
import socket
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfsuite import __version__
from perfsuite._paths import portable_path
from perfsuite.harness._provenance import compat_git, measured_repository, perfsuite_checkout

#: when set, recorded as ``environment.host_label``: the machine's name in history and the results store
#: (CI runners get a new host name per job, so a workflow names its runner class here)
HOST_LABEL_ENV = "PERFSUITE_HOST_LABEL"


def now_iso() -> str:
    """UTC time as ISO 8601 with seconds."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")

# -- environment (M8) ------------------------------------------------------------------------------


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _unescape_mount(field: str) -> str:
    # /proc/mounts escapes space, tab, newline and backslash as octal
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def filesystem_of(path: Path) -> dict[str, str | None]:
    """Filesystem type, mount point and device of ``path`` from ``/proc/mounts`` (longest prefix)."""
    real = os.path.realpath(path)
    best: tuple[str, str, str] | None = None
    try:
        with open("/proc/mounts", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) < 3:
                    continue
                device, mount, fstype = _unescape_mount(parts[0]), _unescape_mount(parts[1]), parts[2]
                inside = real == mount or real.startswith(mount.rstrip("/") + "/")
                if inside and (best is None or len(mount) >= len(best[1])):
                    best = (device, mount, fstype)
    except OSError:
        pass
    if best is None:
        return {"type": None, "mount_point": None, "device": None}
    return {"type": best[2], "mount_point": best[1], "device": best[0]}


def probe_dir_fsync(directory: Path) -> str:
    """Whether ``fsync`` of a directory works in ``directory``: ``"ok"`` or the errno name it fails with."""
    try:
        probe = tempfile.mkdtemp(prefix=".perfsuite-probe-", dir=directory)
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, "error")
    try:
        fd = os.open(probe, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as exc:
        os.rmdir(probe)
        return "unsupported:" + errno.errorcode.get(exc.errno or 0, "error")
    try:
        os.fsync(fd)
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, "error")
    finally:
        os.close(fd)
        os.rmdir(probe)


def git_state() -> dict[str, Any] | None:
    """perfsuite's own checkout (commit, dirty), ``None`` from a wheel: what ``environment.perfsuite_git``
    records. It is not the code measured: see :func:`measured_repository`."""
    return perfsuite_checkout()


#: ``collect_environment(measured=RESOLVE)``: find the measured repository from the working directory
RESOLVE: Any = object()


def collect_environment(work_dir: Path, measured: Mapping[str, Any] | None = RESOLVE) -> dict[str, Any]:
    """M8: Python, OS, CPU, cores, work-dir filesystem and dir-fsync probe, the measured repository, perfsuite's
    own version and checkout, host (and its label), date.

    ``measured`` is ``environment.measured`` as :func:`measured_repository` returns it (``None``: unknown); by
    default it is found from the working directory, CI variables and ``$PERFSUITE_COMMIT``. ``git`` keeps the
    measured commit and dirty flag in the shape older readers know (before ``measured`` was recorded)."""
    if measured is RESOLVE:
        measured = measured_repository()
    try:
        affinity: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    try:
        load = list(os.getloadavg())
    except (AttributeError, OSError):
        load = None
    fs = filesystem_of(work_dir)
    label = os.environ.get(HOST_LABEL_ENV, "").strip()
    env: dict[str, Any] = {
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": portable_path(sys.executable),
            "build": " ".join(platform.python_build()),
        },
        "os": {"system": platform.system(), "release": platform.release(), "platform": platform.platform()},
        "cpu": {"model": _cpu_model(), "cores": os.cpu_count(), "affinity": affinity, "machine": platform.machine()},
        "work_dir": {
            "path": portable_path(work_dir),
            "filesystem": fs["type"],
            "mount_point": fs["mount_point"],
            "device": fs["device"],
            "dir_fsync": probe_dir_fsync(work_dir),
        },
        "measured": dict(measured) if measured is not None else None,
        "git": compat_git(measured),
        "perfsuite": __version__,
        "perfsuite_git": git_state(),
        "hostname": socket.gethostname(),
        "date": now_iso(),
        "load_avg": load,
    }
    if label:
        env["host_label"] = label
    return env


# -- fixture description (M6, M8) ----------------------------------------------------------------


def describe_fixture(path: Path | None, info: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``{"name", "digest", "files", "bytes"}`` for an opaque fixture directory (harness never looks inside).

    ``info`` (from whoever resolved the fixture) wins; missing counts are walked, and a missing digest
    is a SHA-256 over relative paths, link targets and file contents.
    """
    data: dict[str, Any] = dict(info or {})
    data.setdefault("name", None)
    if path is None:
        data.setdefault("digest", None)
        data.setdefault("files", 0)
        data.setdefault("bytes", 0)
        return data
    data["path"] = portable_path(path)  # M8 without this machine's absolute paths
    need_digest = not data.get("digest")
    files = total = 0
    h = hashlib.sha256()
    for root, dirs, names in os.walk(path):
        dirs.sort()
        for name in sorted(names):
            full = os.path.join(root, name)
            rel = os.path.relpath(full, path)
            st = os.lstat(full)
            files += 1
            if os.path.islink(full):
                target = os.readlink(full)
                total += len(os.fsencode(target))
                if need_digest:
                    h.update(b"L" + os.fsencode(rel) + b"\0" + os.fsencode(target) + b"\0")
                continue
            total += st.st_size
            if need_digest:
                h.update(b"F" + os.fsencode(rel) + b"\0" + str(st.st_size).encode() + b"\0")
                with open(full, "rb") as fh:
                    for chunk in iter(functools.partial(fh.read, 1 << 20), b""):
                        h.update(chunk)
    data.setdefault("files", files)
    data.setdefault("bytes", total)
    if need_digest:
        data["digest"] = "sha256:" + h.hexdigest()
    return data
