"""Every notebook in notebooks/ runs clean with nbclient (SPEC section 5), on the committed baseline when there is one,
else on a small real run generated here (fixtures built in the sandboxed PERFSUITE_CACHE)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
REQUIRED = ("explore-results.ipynb", "tune-debounce.ipynb")


def _helpers():
    """notebooks/nbhelpers.py, imported without writing notebooks/__pycache__ (tests write only to tmp)."""
    spec = importlib.util.spec_from_file_location("nbhelpers_under_test", NOTEBOOKS / "nbhelpers.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    before, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = before
    return module


@pytest.fixture(scope="session")
def results_source(tmp_path_factory: pytest.TempPathFactory) -> str | None:
    """``None`` when the repository has a baseline the notebooks find by themselves; else a directory holding
    a real ``perfsuite run mailbox-delivery`` (2 samples, inline) for ``$PERFSUITE_NOTEBOOK_RESULTS``."""
    helpers = _helpers()
    baseline = ROOT / "results" / "baseline"
    if baseline.is_dir() and helpers._results(baseline):
        return None
    out = tmp_path_factory.mktemp("notebook-results")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "perfsuite",
            "run",
            "mailbox-delivery",
            "--samples",
            "2",
            "--warmup",
            "0",
            "--isolation",
            "inline",
            "--output-dir",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return str(out)


def test_the_required_notebooks_exist() -> None:
    names = {p.name for p in NOTEBOOKS.glob("*.ipynb")}
    assert set(REQUIRED) <= names


def test_python3_kernel_is_this_interpreter() -> None:
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec("python3")
    assert spec.language == "python"
    assert spec.argv[0] in ("python", "python3", sys.executable)  # "python" is replaced by sys.executable


@pytest.mark.parametrize("name", sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")))
def test_notebook_runs_clean(name: str, results_source: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")  # the kernel imports notebooks/nbhelpers.py
    if results_source is None:
        monkeypatch.delenv("PERFSUITE_NOTEBOOK_RESULTS", raising=False)
    else:
        monkeypatch.setenv("PERFSUITE_NOTEBOOK_RESULTS", results_source)
    for var in (
        "HOME",
        "IPYTHONDIR",
        "JUPYTER_CONFIG_DIR",
        "JUPYTER_DATA_DIR",
        "JUPYTER_RUNTIME_DIR",
        "MPLCONFIGDIR",
        "PERFSUITE_CACHE",
    ):  # tests/conftest.py put these in a temporary sandbox
        assert not os.environ[var].startswith(str(ROOT)), var
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = NotebookClient(
        nb, timeout=300, kernel_name="python3", allow_errors=False, resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors == []
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "Traceback" not in text
    images = sum(
        "image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
    )
    assert images >= 2  # the plots rendered
    assert "no measured costs" not in text  # the costs pass runs inside a kernel (whose event loop is running)


def _outputs(nb: dict) -> tuple[str, int]:
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c["outputs"]]
    return "".join("".join(o.get("text", "")) for o in outputs), sum("image/png" in o.get("data", {}) for o in outputs)


@pytest.mark.parametrize("name", REQUIRED)
def test_committed_notebooks_are_executed_on_the_baseline_and_small(name: str) -> None:
    """Committed with outputs (scripts/dev/execute_notebooks.py): every code cell ran, without errors, on the
    committed baseline; figures at low dpi keep each file under the script's limit; no machine paths."""
    import json

    path = NOTEBOOKS / name
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(c["execution_count"] for c in code), "execute it: python scripts/dev/execute_notebooks.py"
    assert not [o for c in code for o in c["outputs"] if o["output_type"] == "error"]
    text, images = _outputs(nb)
    assert images >= 2
    assert "results/baseline/" in text and "(the committed baseline)" in text
    assert str(ROOT) not in text
    assert "perfsuite-nb-" not in text  # the executing script's sandbox HOME is written ~
    assert path.stat().st_size <= 600_000  # scripts/dev/execute_notebooks.py MAX_BYTES


def test_jupyter_lab_serves_the_notebooks(tmp_path: Path) -> None:
    """The notebooks extra brings Jupyter Lab: a real server on the loopback opens both notebooks."""
    pytest.importorskip("jupyterlab")
    import json
    import secrets
    import socket
    import time
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    token = secrets.token_hex(16)
    log = (tmp_path / "lab.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={NOTEBOOKS}", "--ServerApp.port_retries=0",
         "--allow-root"],  # CI runs as root
        stdout=subprocess.DEVNULL, stderr=log, cwd=tmp_path,
    )
    base = f"http://127.0.0.1:{port}"

    def get(path: str) -> tuple[int, bytes]:
        request = urllib.request.Request(base + path, headers={"Authorization": f"token {token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()

    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if get("/api/status")[0] == 200:
                    break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise AssertionError((tmp_path / "lab.log").read_text()[-2000:]) from None
                time.sleep(0.5)
        for name in REQUIRED:
            status, body = get(f"/api/contents/{name}?content=1")
            model = json.loads(body)
            assert status == 200 and model["type"] == "notebook" and model["content"]["cells"]
            status, page = get(f"/lab/tree/{name}")
            assert status == 200 and b"JupyterLab" in page
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def test_helper_prefers_env_then_baseline_then_local(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, results_source: str | None
) -> None:
    import shutil

    helpers = _helpers()
    source_dir = Path(results_source) if results_source else ROOT / "results" / "baseline"
    sample = next(
        p
        for p in sorted(source_dir.rglob("*.json"))
        if helpers._results(p.parent) and not p.name.endswith(helpers._NOT_RESULTS)
    )
    repo = tmp_path / "repo"
    (repo / "perfsuite").mkdir(parents=True)
    (repo / "pyproject.toml").write_text("")
    monkeypatch.delenv("PERFSUITE_NOTEBOOK_RESULTS", raising=False)
    with pytest.raises(FileNotFoundError, match="no results"):
        helpers.source(repo)
    local = repo / "results" / "local"
    local.mkdir(parents=True)
    shutil.copy(sample, local / sample.name)
    assert helpers.source(repo) == (local, "the newest local run")
    baseline = repo / "results" / "baseline"
    baseline.mkdir()
    shutil.copy(sample, baseline / sample.name)
    assert helpers.source(repo) == (baseline, "the committed baseline")
    monkeypatch.setenv("PERFSUITE_NOTEBOOK_RESULTS", str(local / sample.name))
    assert helpers.source(repo) == (local / sample.name, "$PERFSUITE_NOTEBOOK_RESULTS")
    monkeypatch.setenv("PERFSUITE_NOTEBOOK_RESULTS", str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        helpers.source(repo)
