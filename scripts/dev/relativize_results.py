"""One-off (issue 18 item 6): strip this machine's absolute paths from committed results documents.

    python scripts/dev/relativize_results.py --project /work/main --home /root --tmp /tmp results/baseline results/peers

Rewrites only ``recipe.path``, ``environment.python.executable``, ``environment.work_dir.path`` and
``fixture.path`` with :func:`perfsuite._paths.portable_path` (what new runs record), as a textual
replacement of those JSON strings so every other byte, every measurement included, stays as it was; it
checks that by parsing each document before and after. ``.pyperf.json`` and ``.hlog`` exports carry no
paths and are left alone.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from perfsuite._paths import portable_path

FIELDS = (("recipe", "path"), ("environment", "python", "executable"), ("environment", "work_dir", "path"),
          ("fixture", "path"))


def _get(doc: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys[:-1]:
        doc = doc.get(key) or {}
    return doc.get(keys[-1])


def _set(doc: dict[str, Any], keys: tuple[str, ...], value: str) -> None:
    for key in keys[:-1]:
        doc = doc[key]
    doc[keys[-1]] = value


def relativize(path: Path, roots: dict[str, str]) -> int:
    """Rewrite one document in place; returns the number of fields changed."""
    text = path.read_text(encoding="utf-8")
    before = json.loads(text)
    expected = json.loads(text)
    changed = 0
    for keys in FIELDS:
        old = _get(before, keys)
        if not isinstance(old, str) or not os.path.isabs(old):
            continue
        new = portable_path(old, **roots)
        if new == old:
            continue
        needle = f'"{keys[-1]}": {json.dumps(old)}'
        if text.count(needle) < 1:
            raise SystemExit(f"{path}: cannot find {needle}")
        text = text.replace(needle, f'"{keys[-1]}": {json.dumps(new)}', 1 if keys[0] == "recipe" else -1)
        _set(expected, keys, new)
        changed += 1
    if json.loads(text) != expected:
        raise SystemExit(f"{path}: the rewrite would change more than the path fields; left alone")
    if changed:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directories", nargs="+", type=Path)
    parser.add_argument("--project", required=True, help="the working directory of the run that wrote them")
    parser.add_argument("--home", required=True, help="that machine's home directory")
    parser.add_argument("--tmp", default="/tmp", help="that machine's temp directory (default: /tmp)")
    args = parser.parse_args(argv)
    roots = {"project": args.project, "home": args.home, "tmp": args.tmp}
    for directory in args.directories:
        for path in sorted(directory.glob("*.json")):
            if path.name.endswith(".pyperf.json"):
                continue
            print(f"{path}: {relativize(path, roots)} fields")
    return 0


if __name__ == "__main__":
    sys.exit(main())
