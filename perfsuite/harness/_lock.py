"""M4/M8: result names nobody else can take, and one writer per results document.

The hazard: two runs of one recipe started in the same second compute the same ``<recipe>-<stamp>.json``,
so one document would be lost and the ``.json`` and ``.pyperf.json`` would come from different runs. So a
name is *reserved* by creating its hidden sidecar ``.<name>.json.lock`` with ``O_EXCL`` (only one process can),
and a run or a ``--resume`` *holds* an exclusive ``flock`` on that sidecar while it writes the document
and its exports (same stem, so they always come from one run). The kernel drops the flock when the
holder dies, so a killed run's document can be resumed; a live one's cannot (:class:`ResultsBusy`).
The sidecar is removed when its holder releases it; a name stays taken by its ``.json`` (or any
``<stem>.*`` export) from then on.
"""

from __future__ import annotations

import glob
import os
import time
from pathlib import Path
from types import TracebackType

from perfsuite.errors import PerfsuiteError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: reservation by O_EXCL only, no liveness lock
    fcntl = None  # type: ignore[assignment]

__all__ = ["ResultsBusy", "ResultsLock", "lock_path", "new_results_path"]


class ResultsBusy(PerfsuiteError):
    """Another live process holds the document's lock (a second writer is refused, in one line)."""


def lock_path(results: Path) -> Path:
    """The hidden sidecar of a results document: ``<dir>/.<name>.json.lock``."""
    results = Path(results)
    return results.parent / f".{results.name}.lock"


def _holder(lock: Path) -> str:
    try:
        text = lock.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return "another process"
    return f"pid {text}" if text.isdigit() else "another process"


def _same_file(fd: int, path: Path) -> bool:
    try:
        now = os.stat(path)
    except FileNotFoundError:
        return False
    st = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (now.st_dev, now.st_ino)


class ResultsLock:
    """An exclusive lock on one results document, held while a run or a ``--resume`` writes it."""

    __slots__ = ("_fd", "lock", "results")

    def __init__(self, results: Path, lock: Path, fd: int) -> None:
        self.results = results
        self.lock = lock
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, results: Path | str) -> ResultsLock:
        """Lock ``results`` now, or raise :class:`ResultsBusy` naming the live holder (never waits)."""
        results = Path(results)
        lock = lock_path(results)
        while True:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                if fcntl is not None:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        raise ResultsBusy(
                            f"{results}: being written by {_holder(lock)} (a run or --resume still in progress); "
                            "wait for it to finish or stop it, then --resume"
                        ) from None
                if not _same_file(fd, lock):  # its last holder removed it between our open and our flock
                    os.close(fd)
                    continue
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            except BaseException:
                os.close(fd)
                raise
            return cls(results, lock, fd)

    @property
    def held(self) -> bool:
        """Whether this object still holds the lock."""
        return self._fd is not None

    def release(self) -> None:
        """Remove the sidecar and drop the lock (idempotent)."""
        if self._fd is None:
            return
        try:
            if _same_file(self._fd, self.lock):
                os.unlink(self.lock)
        except OSError:
            pass  # a read-only directory by now: the stale sidecar holds no lock and does no harm
        finally:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> ResultsLock:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


def check_not_busy(results: Path | str) -> None:
    """Raise :class:`ResultsBusy` when a live process holds ``results``' lock (a probe; takes nothing)."""
    lock = lock_path(Path(results))
    if fcntl is None or not lock.exists():
        return
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ResultsBusy(
                f"{results}: being written by {_holder(lock)} (a run or --resume still in progress); "
                "wait for it to finish or stop it, then --resume"
            ) from None
    finally:
        os.close(fd)


def _taken(output_dir: Path, stem: str) -> bool:
    if (output_dir / f"{stem}.json").exists():
        return True
    return any(True for _ in output_dir.glob(f"{glob.escape(stem)}.*"))


def new_results_path(output_dir: Path | str, recipe: str, *, stamp: str | None = None) -> Path:
    """Reserve a fresh ``<output_dir>/<recipe>-<stamp>[-N].json`` (creates ``output_dir``).

    The reservation is the sidecar lock file created with ``O_EXCL``: no other process can be handed
    the same name, even in the same second. A name whose ``.json`` or any
    ``<stem>.*`` export exists is never reused. :func:`~perfsuite.harness.run_recipe` given this path
    takes the lock and removes the sidecar when it is done.
    """
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    stamp = stamp or time.strftime("%Y%m%dT%H%M%S")
    n = 1
    while True:
        stem = f"{recipe}-{stamp}" if n == 1 else f"{recipe}-{stamp}-{n}"
        n += 1
        if _taken(output_dir, stem):
            continue
        path = output_dir / f"{stem}.json"
        lock = lock_path(path)
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue  # reserved by a live (or killed) run: never share its name
        os.close(fd)
        if _taken(output_dir, stem):  # a run finished and released this name between our check and now
            os.unlink(lock)
            continue
        return path
