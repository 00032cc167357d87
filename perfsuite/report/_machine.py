"""Which machine a result was measured on: one fingerprint for history, the store and the gate.

Timings from two machines are not one series (the variance between machines dwarfs the
changes a gate looks for), so every consumer keys results by :func:`machine_fingerprint`:

* CPU model and core count (``environment.cpu``),
* filesystem type of the work directory (``environment.work_dir.filesystem``: fsync costs differ),
* Python implementation and minor version (``CPython 3.11``: a patch release does not split a series),
* host label: ``environment.host_label`` when the run set one (``PERFSUITE_HOST_LABEL``; CI runners get
  a new host name per job, so a workflow labels its runner class), else ``environment.hostname``.

:attr:`Machine.key` names one machine (all five parts) and is safe in file names; :meth:`Machine.same_kind`
ignores the host, for gates that accept results of another host of the same kind.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from perfsuite.harness import HOST_LABEL_ENV

__all__ = ["HOST_LABEL_ENV", "Machine", "machine_fingerprint", "machine_of"]


@dataclass(frozen=True, slots=True)
class Machine:
    """The fingerprint of a measuring machine (see the module docstring for what each part is)."""

    host: str
    cpu_model: str
    cores: int | None
    filesystem: str
    python: str

    @property
    def kind(self) -> tuple[str, int | None, str, str]:
        """Everything but the host: two hosts of one kind give comparable timings."""
        return (self.cpu_model, self.cores, self.filesystem, self.python)

    @property
    def digest(self) -> str:
        """A short, stable digest of all five parts."""
        text = "\x1f".join(str(part) for part in (self.host, *self.kind))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:10]

    @property
    def key(self) -> str:
        """``<host>-<digest>``: unique per fingerprint, readable, usable as a file name."""
        host = re.sub(r"[^A-Za-z0-9_.-]+", "-", self.host).strip("-.")[:40] or "host"
        return f"{host}-{self.digest}"

    @property
    def label(self) -> str:
        """One line for people: ``vm: Intel(R) Xeon(R) Processor x2, ext4, CPython 3.11``."""
        cores = f" x{self.cores}" if self.cores else ""
        return f"{self.host}: {self.cpu_model}{cores}, {self.filesystem}, {self.python}"

    def same_kind(self, other: Machine) -> bool:
        """Same CPU model, cores, filesystem and Python (the host may differ)."""
        return self.kind == other.kind


def _python(env: Mapping[str, Any]) -> str:
    python = env.get("python") or {}
    version = str(python.get("version") or "?")
    minor = ".".join(version.split(".")[:2])
    return f"{python.get('implementation') or 'Python'} {minor}"


def machine_fingerprint(environment: Mapping[str, Any]) -> Machine:
    """The :class:`Machine` of a results document's ``environment`` section (missing parts: ``unknown``)."""
    cpu = environment.get("cpu") or {}
    work_dir = environment.get("work_dir") or {}
    cores = cpu.get("cores")
    return Machine(
        host=str(environment.get("host_label") or environment.get("hostname") or "unknown"),
        cpu_model=str(cpu.get("model") or "unknown"),
        cores=int(cores) if isinstance(cores, int) else None,
        filesystem=str(work_dir.get("filesystem") or "unknown"),
        python=_python(environment),
    )


def machine_of(result: Any) -> Machine:
    """The :class:`Machine` of a loaded result (anything with ``.data``) or of a raw document."""
    data = getattr(result, "data", result)
    return machine_fingerprint(data.get("environment") or {})
