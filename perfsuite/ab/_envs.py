"""An environment per revision for ``perfsuite ab`` when the revisions' dependencies differ.

"Did upgrading this dependency slow us down?": each revision's declared dependencies (``[project]
dependencies`` of its ``pyproject.toml``) are installed into a virtual environment of its own, built with
**uv** when it is on PATH or beside this interpreter (else ``venv`` and pip) from this interpreter's Python,
and cached by the digest of that specification (with the interpreter and the running environment it extends)
under ``$PERFSUITE_CACHE/envs`` (else ``${XDG_CACHE_HOME:-~/.cache}/perfsuite/envs``; never in git). A second run
with the same specification reuses it.

**What comes from where.** The environment's own site-packages hold the revision's dependencies; a
``.pth`` file then appends the running environment's site-packages after them, so what the revision does
not declare (perfsuite itself, its own dependencies) is the running one: both sides run the same instrument
(the harness must be the same on both sides for their samples to be comparable), and no network is needed
for perfsuite. pip sees those inherited packages, so a requirement they already satisfy is not installed
again; uv does not look through the ``.pth`` file, so it is given only the requirements the running
environment does not already satisfy (the same outcome as pip's, decided here with ``packaging``).
Offline, point the installer at local wheels: ``PIP_FIND_LINKS`` / ``PIP_NO_INDEX`` (passed on to uv as
``--find-links`` / ``--no-index`` when ``UV_FIND_LINKS`` / ``UV_NO_INDEX`` are unset).

Builds run before any sample (never inside a measured window) and their time is returned, to be shown and
recorded; a requirement that cannot be installed is one line naming it. One builder per environment at a
time (an ``flock``); an environment is used only once its marker file is written, last.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import site
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite.errors import PerfsuiteError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no lock, builds may race
    fcntl = None  # type: ignore[assignment]

__all__ = ["ENV_MODES", "INSTALLERS", "DependencySpec", "Environment", "dependency_spec", "ensure_environment",
           "envs_dir"]

#: --env: per revision when the dependencies differ (auto), always (revision), never (current)
ENV_MODES: tuple[str, ...] = ("auto", "revision", "current")
#: --installer: uv when on PATH, else venv + pip (auto); or exactly one
INSTALLERS: tuple[str, ...] = ("auto", "uv", "pip")
ENV_FORMAT = 1
MARKER = "perfsuite-env.json"
OVERLAY = "_perfsuite_overlay.pth"
BUILD_TIMEOUT_S = 1800.0


@dataclass(frozen=True, slots=True)
class DependencySpec:
    """A revision's declared dependencies (``None``: it cannot say, e.g. ``dynamic`` dependencies)."""

    requirements: tuple[str, ...] | None
    source: str

    def digest(self) -> str:
        """sha256 of the requirements, the interpreter and the running environment an environment extends."""
        payload = {"format": ENV_FORMAT, "requirements": sorted(self.requirements or ()), "python": sys.version,
                   "base": os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable),
                   "overlay": overlay_dirs()}
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Environment:
    """A built environment: its interpreter, the requirements installed, how and how long it took to build."""

    path: Path
    python: str
    digest: str
    requirements: tuple[str, ...]
    installer: str
    build_seconds: float
    cached: bool
    installed: Mapping[str, str | None] = field(default_factory=dict)  # requirement's name -> version found

    def describe(self) -> str:
        """``tinydep 1.0, built in 3.2 s with pip`` or ``..., cached (built in 3.2 s with uv)``."""
        built = f"built in {self.build_seconds:.1f} s with {self.installer}"
        versions = ", ".join(f"{k} {v or 'missing'}" for k, v in self.installed.items()) or "no dependencies"
        return f"{versions}, cached ({built})" if self.cached else f"{versions}, {built}"

    def info(self) -> dict[str, Any]:
        """The environment as the pairing and the results documents record it."""
        return {"path": str(self.path), "python": self.python, "digest": self.digest,
                "requirements": list(self.requirements), "installed": dict(self.installed),
                "installer": self.installer, "build_seconds": round(self.build_seconds, 3), "cached": self.cached}


def dependency_spec(tree: Path) -> DependencySpec:
    """``[project] dependencies`` of ``tree/pyproject.toml`` (none declared: an empty specification)."""
    path = tree / "pyproject.toml"
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        return DependencySpec((), "no pyproject.toml")
    except (OSError, tomllib.TOMLDecodeError):
        return DependencySpec(None, "pyproject.toml cannot be read")
    project = data.get("project") or {}
    if "dependencies" in (project.get("dynamic") or []):
        return DependencySpec(None, "pyproject.toml declares its dependencies dynamic")
    deps = project.get("dependencies", [])
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        return DependencySpec(None, "pyproject.toml [project] dependencies is not a list of strings")
    for dep in deps:
        check_requirement(dep, path)
    return DependencySpec(tuple(sorted(d.strip() for d in deps)), "pyproject.toml [project] dependencies")


def check_requirement(text: str, source: Path) -> str:
    """A revision's dependency as a PEP 508 requirement, never an installer option: a pull request's
    ``--report=PATH`` or ``--index-url`` would otherwise reach pip's command line as one."""
    from packaging.requirements import InvalidRequirement, Requirement

    stripped = text.strip()
    try:
        if stripped.startswith("-"):
            raise InvalidRequirement("it starts with '-'")
        Requirement(stripped)
    except InvalidRequirement as exc:
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else "not PEP 508"
        raise PerfsuiteError(f"{source}: [project] dependencies: {text!r} is not a requirement ({why}); a "
                             "revision's dependencies are installed, never passed to the installer as "
                             "options") from None
    return stripped


def envs_dir() -> Path:
    """``$PERFSUITE_CACHE/envs``, else ``${XDG_CACHE_HOME:-~/.cache}/perfsuite/envs`` (never in git)."""
    env = os.environ.get("PERFSUITE_CACHE")
    if env:
        return Path(env).expanduser() / "envs"
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "perfsuite" / "envs"


def overlay_dirs() -> list[str]:
    """The running environment's site-packages, appended after an environment's own (see the docstring)."""
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE and site.getusersitepackages() and os.path.isdir(site.getusersitepackages()):
        dirs.append(site.getusersitepackages())
    return [os.path.realpath(d) for d in dirs if os.path.isdir(d)]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One builder per environment at a time (other processes wait for it)."""
    if fcntl is None:  # pragma: no cover
        yield
        return
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _interpreter(path: Path) -> Path:
    return path / ("Scripts" if os.name == "nt" else "bin") / ("python.exe" if os.name == "nt" else "python")


def _run(argv: Sequence[str], what: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False,
                              env=env)
    except FileNotFoundError:
        raise PerfsuiteError(f"{what}: {argv[0]} not found") from None
    except subprocess.TimeoutExpired:
        raise PerfsuiteError(f"{what}: did not finish within {BUILD_TIMEOUT_S:g} s") from None


def _last_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit {proc.returncode}"


def _name(requirement: str) -> str:
    found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return re.sub(r"[-_.]+", "-", found.group(1)).lower() if found else requirement


def install_failure(output: str, requirements: Sequence[str]) -> str:
    """One line from an installer's failure output, naming the requirement it could not install."""
    lines = [ln.strip().lstrip("×╰─▶│ ").strip() for ln in output.splitlines() if ln.strip()]
    errors = [ln[len("ERROR:"):].strip() for ln in lines if ln.startswith("ERROR:")]  # pip
    because = [ln[ln.index("Because"):] for ln in lines if "Because" in ln]  # uv: "cause: Because ..."
    uv_errors = [ln[len("error:"):].strip() for ln in lines if ln.startswith("error:")]
    reason = (errors or because or uv_errors or lines or ["no output"])[0]
    normalised = re.sub(r"[-_.]+", "-", reason).lower()
    named = [r for r in requirements if re.search(rf"(?<![a-z0-9-]){re.escape(_name(r))}(?![a-z0-9])", normalised)]
    if len(reason) > 300:
        reason = reason[:300] + "..."
    return f"cannot install {named[0]}: {reason}" if named else f"cannot install its dependencies: {reason}"


def _uv_index_args() -> list[str]:
    """PIP_FIND_LINKS / PIP_NO_INDEX for uv, unless its own variables are set."""
    args: list[str] = []
    if not os.environ.get("UV_FIND_LINKS"):
        for link in (os.environ.get("PIP_FIND_LINKS") or "").split():
            # pip warns about a find-links directory that does not exist and goes on; uv refuses to run
            if "://" in link or os.path.isdir(link):
                args += ["--find-links", link]
    no_index = (os.environ.get("PIP_NO_INDEX") or "").lower() in ("1", "true", "yes", "on")
    if no_index and not os.environ.get("UV_NO_INDEX"):
        args.append("--no-index")
    return args


def find_uv() -> str | None:
    """uv on PATH, else beside this interpreter (``pip install uv`` into the running environment)."""
    found = shutil.which("uv")
    if found:
        return found
    beside = Path(sys.executable).parent / ("uv.exe" if os.name == "nt" else "uv")
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None


def choose_installer(installer: str) -> str:
    """``uv`` or ``pip`` for ``--installer`` (``auto``: uv when it is found); one line when it is missing."""
    if installer not in INSTALLERS:
        raise PerfsuiteError(f"--installer must be one of {', '.join(INSTALLERS)}, got {installer!r}")
    if installer in ("auto", "uv") and find_uv():
        return "uv"
    if installer == "uv":
        raise PerfsuiteError("--installer uv: uv is not on PATH (pip install uv, or --installer pip)")
    return "pip"


def _build(path: Path, requirements: Sequence[str], installer: str) -> None:
    python = _interpreter(path)
    own_pip = False
    if installer == "uv":
        proc = _run([str(find_uv()), "venv", "--quiet", "--python", sys.executable, str(path)], "uv venv")
    else:
        import importlib.util

        own_pip = importlib.util.find_spec("pip") is None  # no pip here to drive the new one: it gets its own
        proc = _run([sys.executable, "-m", "venv", *([] if own_pip else ["--without-pip"]), str(path)], "venv")
    if proc.returncode != 0 or not python.exists():
        raise PerfsuiteError(f"cannot create a virtual environment at {path}: {_last_line(proc)}")
    where = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], "venv")
    purelib = Path(where.stdout.strip())
    if where.returncode != 0 or not purelib.is_dir():
        raise PerfsuiteError(f"{python}: cannot find its site-packages: {_last_line(where)}")
    overlay = "import site; " + "; ".join(f"site.addsitedir({d!r})" for d in overlay_dirs())
    (purelib / OVERLAY).write_text(overlay + "\n", encoding="utf-8")
    if not requirements:
        return
    if installer == "uv":
        wanted = unsatisfied(requirements)
        if not wanted:
            return
        argv = [str(find_uv()), "pip", "install", "--quiet", "--python", str(python), *_uv_index_args(), *wanted]
    elif own_pip:
        argv = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *requirements]
    else:
        argv = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
                "--disable-pip-version-check", *requirements]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    proc = _run(argv, f"{installer} install", env)
    if proc.returncode != 0:
        raise PerfsuiteError(install_failure(proc.stderr + "\n" + proc.stdout, requirements))


def unsatisfied(requirements: Sequence[str]) -> list[str]:
    """The requirements the running environment (inherited through the ``.pth`` overlay) does not satisfy:
    what pip would install. Without ``packaging`` (or for a requirement it cannot parse), all of them."""
    try:
        import importlib.metadata as metadata

        from packaging.requirements import InvalidRequirement, Requirement
    except ImportError:
        return list(requirements)
    wanted: list[str] = []
    for text in requirements:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            wanted.append(text)
            continue
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue  # not for this interpreter: pip would skip it too
        try:
            version = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:
            wanted.append(text)
            continue
        if requirement.extras or requirement.url or not requirement.specifier.contains(version, prereleases=True):
            wanted.append(text)
    return wanted


_VERSIONS = """import importlib.metadata as m, json, sys
out = {}
for name in sys.argv[1:]:
    try:
        out[name] = m.version(name)
    except m.PackageNotFoundError:
        out[name] = None
print(json.dumps(out))
"""


def _installed(python: Path, requirements: Sequence[str]) -> dict[str, str | None]:
    """The version of each requirement the environment's interpreter finds (its own, or inherited)."""
    names = [_name(r) for r in requirements]
    if not names:
        return {}
    proc = _run([str(python), "-c", _VERSIONS, *names], "the environment's versions")
    try:
        found = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return dict.fromkeys(names)
    return {str(k): (str(v) if v is not None else None) for k, v in found.items()}


def _cached(path: Path, digest: str) -> dict[str, Any] | None:
    try:
        marker = json.loads((path / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = isinstance(marker, dict) and marker.get("digest") == digest and _interpreter(path).exists()
    return marker if ok else None


def ensure_environment(spec: DependencySpec, *, installer: str = "auto",
                       on_build: Callable[[str], None] | None = None) -> Environment:
    """The environment of ``spec``: from the cache, else built now (see the module docstring; ``on_build``
    hears the installer's name first). One-line :class:`PerfsuiteError` when it cannot be built (a
    requirement that cannot be installed is named)."""
    if spec.requirements is None:
        raise PerfsuiteError(f"cannot build an environment: {spec.source}")
    tool = choose_installer(installer)
    digest = spec.digest()
    root = envs_dir()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PerfsuiteError(f"{root}: cannot create the environments' cache: {exc.strerror or exc}") from None
    path = root / digest[:16]
    with _locked(root / f"{digest[:16]}.lock"):
        marker = _cached(path, digest)
        if marker is not None:
            return Environment(path, str(_interpreter(path)), digest, tuple(marker.get("requirements") or ()),
                               str(marker.get("installer")), float(marker.get("build_seconds") or 0.0), True,
                               dict(marker.get("installed") or {}))
        shutil.rmtree(path, ignore_errors=True)  # a build that died half-way
        if on_build is not None:
            on_build(tool)
        started = time.monotonic()
        try:
            _build(path, spec.requirements, tool)
            seconds = time.monotonic() - started
            installed = _installed(_interpreter(path), spec.requirements)
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)
            raise
        document = {"format": ENV_FORMAT, "digest": digest, "requirements": list(spec.requirements),
                    "installed": installed, "installer": tool, "build_seconds": round(seconds, 3),
                    "python": sys.version, "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        tmp = path / f".{MARKER}.tmp"
        tmp.write_text(json.dumps(document, indent=1), encoding="utf-8")
        os.replace(tmp, path / MARKER)  # last: an environment without it is rebuilt
    return Environment(path, str(_interpreter(path)), digest, spec.requirements, tool, seconds, False, installed)
