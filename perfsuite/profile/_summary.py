"""Reading profiler output: sample counts (is the profile usable?) and short text summaries.

* scalene 2.x JSON: ``files -> {path: {"lines": [...], "functions": [...]}}``; each line carries
  ``cpu_samples_list`` (one timestamp per CPU sample), ``n_cpu_percent_python``/``_c``,
  ``n_sys_percent`` and allocation figures (``n_malloc_mb``, ``n_mallocs``, ``n_peak_mb``). A run too
  short to profile leaves ``{}`` (and exit status 0): :func:`scalene_samples` is then 0.
* speedscope JSON as py-spy writes it: ``shared.frames`` plus one ``sampled`` profile per thread
  (``samples`` = stacks of frame indices, root first; ``weights`` in seconds).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perfsuite.errors import PerfsuiteError

__all__ = [
    "load_json",
    "scalene_samples",
    "scalene_summary",
    "speedscope_samples",
    "speedscope_summary",
    "svg_ok",
]

#: frames that only carry the driver, the event loop or thread plumbing (left out of "inclusive" lists)
_PLUMBING = frozenset(
    {
        "<module>",
        "main",
        "run",
        "Runner.run",
        "BaseEventLoop.run_until_complete",
        "BaseEventLoop.run_forever",
        "BaseEventLoop._run_once",
        "Handle._run",
        "Thread._bootstrap",
        "Thread._bootstrap_inner",
        "Thread.run",
        "_serve",
        "_batch",
        "_iteration",
        "_worker",
        "_WorkItem.run",
    }
)


#: leaf frames that are waits: the event loop's select, condition/event waits, the handshake read
_IDLE_LEAVES = frozenset(
    {
        "EpollSelector.select",
        "KqueueSelector.select",
        "PollSelector.select",
        "select",
        "Condition.wait",
        "Event.wait",
        "_listen",
        "sleep",
    }
)


def load_json(path: Path, what: str) -> Any:
    """A profiler's JSON output; one-line :class:`PerfsuiteError` when missing or not JSON."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PerfsuiteError(f"{what}: the profiler wrote no output file ({path})") from None
    except (OSError, ValueError) as exc:
        raise PerfsuiteError(f"{what}: unreadable output {path}: {exc}") from None


def _short(path: str, root: str | None) -> str:
    """``path`` relative to the repository, the standard library or site-packages, when inside one."""
    import sysconfig

    bases = [root] if root else []
    bases += [sysconfig.get_path("purelib"), sysconfig.get_path("stdlib")]
    for base in bases:
        if not base:
            continue
        try:
            rel = os.path.relpath(path, base)
        except ValueError:
            continue
        if not rel.startswith(".."):
            return rel
    return path


# -- scalene -------------------------------------------------------------------------------------------


def _scalene_lines(data: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    files = data.get("files") if isinstance(data, Mapping) else None
    if not isinstance(files, Mapping):
        return []
    out = []
    for name, body in files.items():
        for line in (body or {}).get("lines", []) if isinstance(body, Mapping) else []:
            if isinstance(line, Mapping):
                out.append((str(name), line))
    return out


def scalene_samples(data: Any) -> tuple[int, int]:
    """(CPU samples, allocation samples) in a scalene JSON document; (0, 0) for ``{}``."""
    cpu = sum(len(line.get("cpu_samples_list") or ()) for _, line in _scalene_lines(data))
    alloc = data.get("alloc_samples", 0) if isinstance(data, Mapping) else 0
    return cpu, int(alloc) if isinstance(alloc, int | float) else 0


def _cpu(line: Mapping[str, Any]) -> float:
    return (
        float(line.get("n_cpu_percent_python", 0.0))
        + float(line.get("n_cpu_percent_c", 0.0))
        + float(line.get("n_sys_percent", 0.0))
    )


def _code(line: Mapping[str, Any]) -> str:
    text = str(line.get("line", "")).strip()
    for escaped, char in (("\\u003c", "<"), ("\\u003e", ">"), ("\\u0026", "&")):
        text = text.replace(escaped, char)
    return text[:70]


def scalene_summary(data: Any, *, title: str, root: str | None = None, top: int = 12, skip: Sequence[str] = ()) -> str:
    """The top lines by CPU (python + native + system %) and by allocation (sampled MB), as text.

    Lines of files whose path ends with one of ``skip`` (the profiling driver: its ``await`` of the
    acknowledgement is where an asynchronous operation's event-loop waiting lands) are left out of
    the lists and reported as one total."""
    every = _scalene_lines(data)
    lines = [(n, ln) for n, ln in every if not any(n.endswith(s) for s in skip)]
    skipped = sum(_cpu(ln) for n, ln in every if any(n.endswith(s) for s in skip))
    cpu_samples, alloc_samples = scalene_samples(data)
    elapsed = data.get("elapsed_time_sec", 0.0) if isinstance(data, Mapping) else 0.0
    out = [
        title,
        f"scalene elapsed {float(elapsed):.3f} s, {cpu_samples} CPU samples, {alloc_samples} allocation samples",
    ]
    if skipped > 0:
        out.append(
            f"profiling driver lines left out: {skipped:.1f}% of CPU (mostly the event loop waiting for an "
            "acknowledgement while off-loop work runs)"
        )
    out += [
        "",
        f"Top {top} lines by CPU (% of profiled time: python + native + system):",
        f"{'total':>6} {'py':>5} {'c':>5} {'sys':>5}  {'where':<48} code",
    ]
    by_cpu = sorted((ln for ln in lines if _cpu(ln[1]) > 0), key=lambda ln: -_cpu(ln[1]))[:top]
    for name, line in by_cpu:
        where = f"{_short(name, root)}:{line.get('lineno')}"
        out.append(
            f"{_cpu(line):6.1f} {float(line.get('n_cpu_percent_python', 0)):5.1f} "
            f"{float(line.get('n_cpu_percent_c', 0)):5.1f} {float(line.get('n_sys_percent', 0)):5.1f}  "
            f"{where:<48} {_code(line)}"
        )
    if not by_cpu:
        out.append("  (no CPU samples)")
    out += ["", f"Top {top} lines by allocation (sampled; MB allocated, allocation count, peak MB):"]
    by_alloc = sorted(
        (ln for ln in lines if float(ln[1].get("n_malloc_mb", 0.0)) > 0), key=lambda ln: -float(ln[1]["n_malloc_mb"])
    )[:top]
    out.append(f"{'MB':>8} {'count':>6} {'peak':>7}  {'where':<48} code")
    for name, line in by_alloc:
        where = f"{_short(name, root)}:{line.get('lineno')}"
        out.append(
            f"{float(line['n_malloc_mb']):8.3f} {int(line.get('n_mallocs', 0)):6d} "
            f"{float(line.get('n_peak_mb', 0)):7.3f}  {where:<48} {_code(line)}"
        )
    if not by_alloc:
        out.append("  (no allocation samples: allocations below scalene's sampling window)")
    return "\n".join(out) + "\n"


# -- speedscope (py-spy) ---------------------------------------------------------------------------------


def _profiles(data: Any) -> list[Mapping[str, Any]]:
    if not isinstance(data, Mapping):
        return []
    profiles = data.get("profiles")
    return [p for p in profiles if isinstance(p, Mapping)] if isinstance(profiles, list) else []


def speedscope_samples(data: Any) -> int:
    """Samples over every thread of a speedscope document (0 when it has none or is not one)."""
    return sum(len(p.get("samples") or ()) for p in _profiles(data))


def _idle_leaf(frame: Mapping[str, Any]) -> bool:
    """A leaf frame that is a wait, not work (py-spy's idle detection misses some of these)."""
    name, file = str(frame.get("name", "")), str(frame.get("file", ""))
    if name in _IDLE_LEAVES:
        return True
    return name == "_worker" and file.endswith(os.path.join("concurrent", "futures", "thread.py"))


def speedscope_summary(data: Any, *, title: str, root: str | None = None, top: int = 10) -> str:
    """Per thread name (threads of one name merged): sampled time, the top functions by self time and
    by inclusive time. Samples whose leaf is a wait (event-loop select, a pool thread waiting for work)
    are counted apart and left out of the lists; driver and event-loop plumbing frames are left out of
    the inclusive list."""
    frames = (data.get("shared") or {}).get("frames") or [] if isinstance(data, Mapping) else []

    def frame(i: int) -> Mapping[str, Any]:
        return frames[i] if 0 <= i < len(frames) and isinstance(frames[i], Mapping) else {}

    def label(i: int) -> str:
        f = frame(i)
        where = _short(str(f.get("file") or "?"), root)
        return f"{f.get('name', '?')} ({where}:{f.get('line')})" if f.get("line") else f"{f.get('name', '?')} ({where})"

    groups: dict[str, list[Mapping[str, Any]]] = {}
    for profile in _profiles(data):
        name = re.sub(r"^Thread \d+\s*", "", str(profile.get("name", ""))).strip('"') or "(unnamed threads)"
        groups.setdefault(name, []).append(profile)
    out = [title]
    for name, profiles in groups.items():
        own: Counter[str] = Counter()
        incl: Counter[str] = Counter()
        count = idle = busy = 0.0
        unit = str(profiles[0].get("unit", "seconds"))
        for profile in profiles:
            samples = profile.get("samples") or []
            weights = profile.get("weights") or [1.0] * len(samples)
            for stack, weight in zip(samples, weights):
                if not stack:
                    continue
                count += 1
                if _idle_leaf(frame(stack[-1])):
                    idle += weight
                    continue
                busy += weight
                own[label(stack[-1])] += weight
                for item in {label(i) for i in stack if frame(i).get("name") not in _PLUMBING}:
                    incl[item] += weight
        if not count:
            continue
        scale, suffix = (1e3, "ms") if unit == "seconds" else (1.0, unit)
        threads = f" ({len(profiles)} threads)" if len(profiles) > 1 else ""
        out += [
            "",
            f"{name}{threads}: {int(count)} samples, {busy * scale:.1f} {suffix} busy"
            f" + {idle * scale:.1f} {suffix} waiting (left out below)",
        ]
        if busy <= 0:
            continue
        out.append(f"  top {top} by self time (% of busy):")
        for item, weight in own.most_common(top):
            out.append(f"    {100 * weight / busy:5.1f}%  {weight * scale:8.1f} {suffix}  {item}")
        out.append(f"  top {top} by inclusive time (driver and event-loop plumbing left out):")
        for item, weight in incl.most_common(top):
            out.append(f"    {100 * weight / busy:5.1f}%  {weight * scale:8.1f} {suffix}  {item}")
    if len(out) == 1:
        out.append("  (no samples)")
    return "\n".join(out) + "\n"


def svg_ok(path: Path) -> bool:
    """Whether ``path`` is a non-empty, well-formed SVG document."""
    import xml.etree.ElementTree as ET

    try:
        if Path(path).stat().st_size == 0:
            return False
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return False
    return root.tag.endswith("svg")
