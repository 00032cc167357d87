"""Who may use a Dask cluster: a scheduler runs what its clients submit on its workers, so the embedded
LocalCluster listens on loopback only and admits only its own client (TLS under a per-run certificate), a
running scheduler is reached over tls:// with the client's certificate files, and a bad --scheduler value is
one line and exit 2, never a traceback (Dask's connect timeout is set short here: never a sleep)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

pytest.importorskip("distributed")
pytest.importorskip("cryptography")
from perfsuite.cluster import DaskRunner

ROOT = Path(__file__).resolve().parents[2]

_INTRUDER = textwrap.dedent("""
    import os, sys
    from distributed import Client, Security
    address = sys.argv[1]
    host_port = address.split("://", 1)[1]
    for attempt, security in ((f"tcp://{host_port}", None), (f"tls://{host_port}", Security.temporary())):
        try:
            client = Client(attempt, timeout=5, security=security, set_as_default=False)
            ran = client.run(os.getpid)
        except Exception as exc:
            print("refused", attempt, type(exc).__name__, flush=True)
        else:
            print("RAN", attempt, ran, flush=True)
            client.close()
""")


@pytest.fixture(scope="module")
def local() -> Iterator[DaskRunner]:
    runner = DaskRunner.local(1)
    yield runner
    runner.close()


def test_the_embedded_cluster_listens_on_loopback_and_admits_only_its_own_client(local: DaskRunner) -> None:
    address = local.client.scheduler.address
    assert address.startswith("tls://127.0.0.1:"), address
    assert all(urlsplit(a).hostname == "127.0.0.1" for a in local.client.scheduler_info()["workers"])
    assert local.client.run(os.getpid)  # its own client runs code on the worker
    # another process on this machine, as in the finding: plain tcp://, then TLS with a certificate of its own
    proc = subprocess.run([sys.executable, "-c", _INTRUDER, address], capture_output=True, text=True, timeout=120,
                          check=False, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    lines = proc.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("refused ") for line in lines), proc.stdout + proc.stderr[-2000:]


def _perfsuite(*args: str, timeout_s: str = "2s", cwd: Path | None = None,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT=timeout_s, **(env or {}))
    return subprocess.run([sys.executable, "-m", "perfsuite", *args], capture_output=True, text=True, timeout=300,
                          check=False, env=env, cwd=cwd)


def _closed_port() -> int:
    with socket.socket() as s:  # bound, never listening: connections to it are refused
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("address", ["not-an-address", "tcp://127.0.0.1", "udp://127.0.0.1:8786",
                                     "tcp://127.0.0.1:99999", "UNREACHABLE"])
def test_a_bad_scheduler_is_one_line_and_exit_2(address: str) -> None:
    if address == "UNREACHABLE":
        address = f"tcp://127.0.0.1:{_closed_port()}"
    proc = _perfsuite("whatif", "--storm", "--no-costs", "--debounce", "2", "--scheduler", address)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith(f"perfsuite: error: --scheduler {address}"), proc.stderr


def test_tls_options_are_checked_in_one_line(tmp_path: Path) -> None:
    pem = tmp_path / "x.pem"
    pem.write_text("not a certificate\n")
    cases = [
        (["--scheduler", "tls://127.0.0.1:8786"], "TLS needs this client's certificate"),
        (["--scheduler", "tcp://127.0.0.1:8786", "--tls-ca", str(pem), "--tls-cert", str(pem), "--tls-key", str(pem)],
         "need --scheduler tls://"),
        (["--cluster", "local", "--tls-ca", str(pem), "--tls-cert", str(pem), "--tls-key", str(pem)],
         "makes its own certificate"),
        (["--scheduler", "tls://127.0.0.1:8786", "--tls-ca", str(pem)], "--tls-cert, --tls-key: TLS needs all three"),
        (["--scheduler", "tls://127.0.0.1:8786", "--tls-ca", str(tmp_path / "missing.pem"), "--tls-cert", str(pem),
          "--tls-key", str(pem)], "missing.pem: No such file"),
    ]
    for options, said in cases:
        proc = _perfsuite("whatif", "--storm", "--no-costs", "--debounce", "2", *options)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, (options, proc.stderr)
        assert said in proc.stderr, (options, proc.stderr)


@pytest.fixture(scope="module")
def tls_scheduler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, Path]]]:
    """A running TLS cluster the client does not own, as a user would start it: ``dask scheduler`` and ``dask
    worker`` with certificate files (one self-signed certificate for every role, written from a temporary
    ``distributed.Security``), on the loopback interface, stopped afterwards."""
    from distributed import Security

    home = tmp_path_factory.mktemp("tls")
    made = Security.temporary()
    files = {"ca": home / "ca.pem", "cert": home / "cert.pem", "key": home / "key.pem"}
    files["ca"].write_text(made.tls_ca_file)
    files["cert"].write_text(made.tls_client_cert)
    files["key"].write_text(made.tls_client_key)
    tls = ["--tls-ca-file", str(files["ca"]), "--tls-cert", str(files["cert"]), "--tls-key", str(files["key"])]
    sched_file = home / "scheduler.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    common: dict[str, Any] = {"env": env, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL,
                              "start_new_session": True}
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                  "--port", "0", "--protocol", "tls", "--no-dashboard", "--scheduler-file",
                                  str(sched_file), *tls], **common)
    workers = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file",
                                str(sched_file), "--nworkers", "1", "--nthreads", "1", "--no-dashboard", "--host",
                                "127.0.0.1", "--protocol", "tls", *tls], cwd=home, **common)
    try:
        deadline = time.monotonic() + 60
        address = None
        while address is None and time.monotonic() < deadline:  # the scheduler writes its file when it listens
            try:
                address = json.loads(sched_file.read_text())["address"]
            except (OSError, ValueError, KeyError):
                time.sleep(0.1)
        assert address and address.startswith("tls://"), "the scheduler did not start"
        yield address, files
    finally:
        for proc in (workers, scheduler):
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def test_a_tls_scheduler_runs_the_grid_with_the_client_certificate(tls_scheduler: Any, tmp_path: Path) -> None:
    address, files = tls_scheduler
    grid = ["whatif", "--storm", "--no-costs", "--debounce", "0.5,2"]
    alone = _perfsuite(*grid, "--json", str(tmp_path / "alone.json"))
    assert alone.returncode == 0, alone.stderr
    remote = _perfsuite(*grid, "--scheduler", address, "--tls-ca", str(files["ca"]), "--tls-cert",
                        str(files["cert"]), "--tls-key", str(files["key"]), "--json", str(tmp_path / "remote.json"),
                        timeout_s="60s")
    assert remote.returncode == 0, remote.stderr
    # or Dask's own configuration (here its environment variables) instead of the options
    config = {"DASK_DISTRIBUTED__COMM__TLS__CA_FILE": str(files["ca"]),
              "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT": str(files["cert"]),
              "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY": str(files["key"])}
    configured = _perfsuite(*grid, "--scheduler", address, "--json", str(tmp_path / "config.json"), timeout_s="60s",
                            env=config)
    assert configured.returncode == 0, configured.stderr
    docs = [json.loads((tmp_path / n).read_text()) for n in ("alone.json", "remote.json", "config.json")]
    for doc in docs:
        doc.pop("simulate_s")
    assert docs[0] == docs[1] == docs[2] and len(docs[0]["results"]) == 2
    # without the client's certificate the same scheduler is one line; over plain tcp:// too
    for options in (["--scheduler", address], ["--scheduler", address.replace("tls://", "tcp://")]):
        proc = _perfsuite(*grid, *options)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, (options, proc.stderr)
