"""Where the workflow ``perfsuite init`` writes installs perfsuite from: as the running perfsuite was installed.

The installation record says it (PEP 610: ``direct_url.json`` in the distribution's metadata, absent for an
install from an index). A CI runner reaches an index, a VCS host or an archive's URL; never a path on the
machine that ran ``init`` (an editable or local-directory install, a ``file://`` URL): those are refused in one
line unless ``--install-from`` names what to install. The decision (:func:`requirement_for`) is pure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib.metadata import Distribution, PackageNotFoundError, distribution
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from perfsuite.errors import PerfsuiteError

__all__ = ["REQUIREMENT", "Installation", "installation_of", "requirement_for", "running_installation",
           "workflow_requirement"]

#: what the workflow needs: compare, the dashboard and history (the report extra)
REQUIREMENT = "perfsuite[report]"
_HOW = ("name what the workflow installs with --install-from SPEC, e.g. --install-from "
        f"'{REQUIREMENT} @ git+https://github.com/OWNER/perfsuite@COMMIT' (nothing written)")


@dataclass(frozen=True, slots=True)
class Installation:
    """The running perfsuite's installation record: its version and the text of its ``direct_url.json``
    (``None``: installed from an index, which PEP 610 says leaves no such file)."""

    version: str
    direct_url: str | None


def _local(package_dir: Path, version: str) -> Installation:
    """A perfsuite imported from a directory (a checkout), described as PEP 610 describes a directory install."""
    return Installation(version, json.dumps({"url": package_dir.parent.as_uri(), "dir_info": {}}))


def installation_of(dist: Distribution | None, module_file: Path) -> Installation:
    """The record of ``dist`` when it is the perfsuite whose ``__init__.py`` is ``module_file``, else that of
    the directory ``module_file`` is imported from.

    A record describes the running perfsuite only when its files hold that module: a source tree's egg-info
    (no RECORD: metadata, never an installation) or an installed copy shadowed by a checkout on PYTHONPATH
    would name a perfsuite that is not the one running.
    """
    module = module_file.resolve()
    version = dist.version if dist is not None else "unknown"
    if dist is None or dist.read_text("RECORD") is None:
        return _local(module.parent, version)
    if Path(str(dist.locate_file("perfsuite/__init__.py"))).resolve() != module:
        return _local(module.parent, version)
    return Installation(version, dist.read_text("direct_url.json"))


def running_installation() -> Installation:
    """The installation record of the perfsuite running now."""
    import perfsuite

    try:
        dist: Distribution | None = distribution("perfsuite")
    except PackageNotFoundError:
        dist = None
    return installation_of(dist, Path(perfsuite.__file__))


def _unreadable(why: str) -> PerfsuiteError:
    return PerfsuiteError(f"perfsuite's installation record (direct_url.json) is unreadable ({why}): {_HOW}")


def requirement_for(installation: Installation) -> str:
    """The pip requirement a CI runner installs this perfsuite with: the commit of its VCS URL, its archive's
    URL, or its version from an index. :class:`PerfsuiteError` (one line) when no runner can reach it."""
    if installation.direct_url is None:
        return f"{REQUIREMENT}=={installation.version}"
    try:
        record: Any = json.loads(installation.direct_url)
    except ValueError as exc:
        raise _unreadable(f"not JSON: {exc}") from None
    url = record.get("url") if isinstance(record, dict) else None
    if not isinstance(url, str) or not url:
        raise _unreadable("no url")
    local = urlsplit(url).scheme == "file"
    if isinstance(record.get("vcs_info"), dict):
        vcs, commit = record["vcs_info"].get("vcs"), record["vcs_info"].get("commit_id")
        if local:  # a bare clone next to the one that ran init: no runner has that path
            raise PerfsuiteError(f"perfsuite was installed from {vcs}+{url}, a path on this machine a CI runner "
                                 f"cannot reach: {_HOW}")
        if not isinstance(vcs, str) or not isinstance(commit, str) or not commit:
            raise PerfsuiteError(f"perfsuite's installation record names {url} but records no commit: {_HOW}")
        subdirectory = record.get("subdirectory")
        fragment = f"#subdirectory={subdirectory}" if isinstance(subdirectory, str) and subdirectory else ""
        return f"{REQUIREMENT} @ {vcs}+{url}@{commit}{fragment}"  # the commit, not a branch that moves on
    if "archive_info" in record:
        if local:
            raise PerfsuiteError(f"perfsuite was installed from {unquote(urlsplit(url).path)}, a file on this "
                                 f"machine a CI runner cannot reach: {_HOW}")
        return f"{REQUIREMENT} @ {url}"
    if "dir_info" in record:
        where = unquote(urlsplit(url).path) if local else url
        raise PerfsuiteError(f"perfsuite runs from a local directory ({where}), an editable or directory "
                             f"install a CI runner cannot reach: {_HOW}")
    raise _unreadable("neither vcs_info, archive_info nor dir_info")


def workflow_requirement(install_from: str | None) -> str:
    """``--install-from`` (any pip requirement or URL, checked to fit on the workflow's one line), else
    :func:`requirement_for` the running perfsuite."""
    if install_from is None:
        return requirement_for(running_installation())
    spec = install_from.strip()
    if not spec:
        raise PerfsuiteError(f"--install-from {install_from!r}: empty: a pip requirement or URL, e.g. "
                             f"'{REQUIREMENT}==0.1.0'")
    if any(ch in spec for ch in "\n\r\0"):  # the line sits in a YAML block: a newline would start a command
        raise PerfsuiteError(f"--install-from {spec!r}: a requirement fits on one line")
    if spec.startswith("-"):
        raise PerfsuiteError(f"--install-from {spec!r}: a requirement or URL, not a pip option")
    return spec
