"""Execute the notebooks in place on the committed baseline and keep their outputs small (issue 18 item 6).

    python scripts/dev/execute_notebooks.py [NOTEBOOK ...]      # default: every notebooks/*.ipynb

Runs each notebook with nbclient on the ``python3`` kernel (cwd ``notebooks/``, so ``nbhelpers`` picks
``results/baseline``), in temporary HOME / IPYTHONDIR / JUPYTER_* / MPLCONFIGDIR directories, then keeps
what a reader needs: figures as PNG at 60 dpi (one image per output, no duplicate SVG or HTML), text
outputs cut at :data:`MAX_TEXT_LINES` lines, no execution timestamps, and the sandbox's temporary HOME
written ``~`` (a path printed under it names no machine: committed outputs carry no absolute paths).
Fails (exit 1) on a cell error or when a notebook ends up larger than :data:`MAX_BYTES`.
``tests/notebooks/test_notebooks.py`` checks the committed notebooks against the same limits.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
#: a committed notebook's size limit (outputs included)
MAX_BYTES = 600_000
MAX_TEXT_LINES = 40
#: the image formats kept, first found wins (the rest of a display's formats are dropped)
KEEP = ("image/png", "text/markdown", "text/plain")
DPI = 60


def _unsandbox(nb: object, home: str) -> None:
    """``home`` (the sandbox's HOME) as ``~`` in every text output: what the reader's own run would print."""
    for cell in nb.cells:  # type: ignore[attr-defined]
        for output in cell.get("outputs", []) if cell.cell_type == "code" else ():
            if "text" in output:
                output["text"] = "".join(output["text"]).replace(home, "~")
            for key, value in (output.get("data") or {}).items():
                if key.startswith("text/") and isinstance(value, (str, list)):
                    output["data"][key] = "".join(value).replace(home, "~")


def _shrink(nb: object) -> None:
    for cell in nb.cells:  # type: ignore[attr-defined]
        if cell.cell_type != "code":
            continue
        cell.metadata.pop("execution", None)
        for output in cell.get("outputs", []):
            data = output.get("data")
            if data:
                kept = next((k for k in KEEP if k in data), None)
                for key in list(data):
                    if key != kept:
                        del data[key]
            if output.get("output_type") == "stream":
                lines = "".join(output.get("text", "")).splitlines(keepends=True)
                if len(lines) > MAX_TEXT_LINES:
                    output["text"] = "".join(lines[:MAX_TEXT_LINES]) + f"[... {len(lines) - MAX_TEXT_LINES} lines]\n"


def execute(path: Path) -> int:
    """Execute ``path`` in place; returns its size in bytes."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory(prefix="perfsuite-nb-") as sandbox:
        env = {name: str(Path(sandbox) / name.lower()) for name in ("HOME", "IPYTHONDIR", "MPLCONFIGDIR",
               "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR")}
        for directory in env.values():
            Path(directory).mkdir()
        Path(env["MPLCONFIGDIR"], "matplotlibrc").write_text(f"figure.dpi: {DPI}\nsavefig.dpi: {DPI}\n")
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            client = NotebookClient(nb, timeout=600, kernel_name="python3",
                                    resources={"metadata": {"path": str(path.parent)}})
            client.extra_arguments = [f"--InlineBackend.rc={{'figure.dpi': {DPI}}}"]
            client.execute()
            _unsandbox(nb, env["HOME"])
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    _shrink(nb)
    nbformat.write(nb, path)
    return path.stat().st_size


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted(NOTEBOOKS.glob("*.ipynb"))
    status = 0
    for path in paths:
        size = execute(path)
        print(f"{path}: executed, {size:,} bytes")
        if size > MAX_BYTES:
            print(f"{path}: larger than {MAX_BYTES:,} bytes", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
