"""Who may use a Dask cluster: addresses checked before Dask sees them, TLS through Dask's own security settings.

A Dask scheduler runs whatever its clients submit, on its workers, as the workers' user: whoever can connect
to a scheduler controls every worker. So an embedded ``LocalCluster`` (``--cluster local``) listens on the
loopback interface only and speaks TLS with mutual authentication under a self-signed certificate made for
this run and held in memory (``distributed.Security.temporary()``): another process on this machine cannot
connect to it. A running scheduler (``--scheduler``) is reached over ``tls://`` with the certificate files of
``--tls-ca/--tls-cert/--tls-key`` or the ``distributed.comm.tls`` section of Dask's configuration; plain
``tcp://`` authenticates nobody (for a network where every host is trusted). Dask's connect timeout
(``distributed.comm.timeouts.connect``) bounds how long an unreachable scheduler is tried.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from perfsuite._extras import require
from perfsuite.cluster._runner import ClusterError

__all__ = ["SCHEMES", "check_scheduler", "client_security", "connect_timeout_s", "local_security", "tls_files"]

#: the schemes ``--scheduler`` takes (a bare ``HOST:PORT`` is ``tcp://``, as Dask reads it)
SCHEMES = ("tcp", "tls")
#: where Dask's own security settings keep the client's TLS files
_TLS_KEYS = {"ca": "distributed.comm.tls.ca-file", "cert": "distributed.comm.tls.client.cert",
             "key": "distributed.comm.tls.client.key"}


def check_scheduler(address: str) -> str:
    """``--scheduler ADDRESS`` as ``SCHEME://HOST:PORT``, or one :class:`ClusterError` line saying what is wrong
    (before any connection: a malformed address used to leave a half-made Dask client behind, whose clean-up
    printed a traceback 40 s later)."""
    text = address.strip()
    if "://" not in text:
        text = f"tcp://{text}"
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise ClusterError(f"--scheduler {address}: not an address ({exc}); expected tls://HOST:PORT or "
                           "tcp://HOST:PORT") from None
    if parts.scheme not in SCHEMES:
        raise ClusterError(f"--scheduler {address}: the scheme {parts.scheme!r} is not one of "
                           f"{', '.join(s + '://' for s in SCHEMES)}")
    if not parts.hostname or port is None or parts.path not in ("", "/") or parts.query or parts.fragment \
            or parts.username is not None:
        raise ClusterError(f"--scheduler {address}: not an address; expected tls://HOST:PORT or tcp://HOST:PORT "
                           "(the scheduler's port, 8786 by default)")
    if not 0 < port < 65536:
        raise ClusterError(f"--scheduler {address}: port {port} is not in 1-65535")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}:{port}"


def _readable_file(option: str, path: str) -> str:
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise ClusterError(f"{option} {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise ClusterError(f"{option} {path}: not a regular file (a PEM certificate or key)")
    if not os.access(path, os.R_OK):
        raise ClusterError(f"{option} {path}: not readable")
    return os.path.abspath(path)


@contextlib.contextmanager
def tls_files(ca: str | None, cert: str | None, key: str | None) -> Iterator[None]:
    """While the block runs, Dask's security settings name these client TLS files (``--tls-ca``, ``--tls-cert``,
    ``--tls-key``: all three, or none, which leaves Dask's own configuration as it is)."""
    given = {"--tls-ca": ca, "--tls-cert": cert, "--tls-key": key}
    if not any(given.values()):
        yield
        return
    missing = [option for option, value in given.items() if not value]
    if missing:
        raise ClusterError(f"{', '.join(missing)}: TLS needs all three of --tls-ca, --tls-cert and --tls-key")
    require("cluster", "dask", "distributed")
    import dask

    files = {_TLS_KEYS[name]: _readable_file(option, str(value))
             for (option, value), name in zip(given.items(), ("ca", "cert", "key"))}
    with dask.config.set({**files, "distributed.comm.require-encryption": True}):
        yield


def client_security(address: str) -> Any:
    """The ``distributed.Security`` of a client of the scheduler at ``address`` (checked by
    :func:`check_scheduler`), from Dask's configuration: a ``tls://`` address needs a CA and a client
    certificate there (one line otherwise), a ``tcp://`` one a configuration that does not require encryption."""
    from distributed import Security

    security = Security()
    if address.startswith("tls://"):
        if not (getattr(security, "tls_ca_file", None) and getattr(security, "tls_client_cert", None)):
            raise ClusterError(f"--scheduler {address}: TLS needs this client's certificate: give --tls-ca, "
                               "--tls-cert and --tls-key (or set distributed.comm.tls in Dask's configuration)")
    elif security.require_encryption:
        raise ClusterError(f"--scheduler {address}: Dask's configuration requires encryption: use a tls:// address")
    return security


def local_security() -> Any:
    """TLS for an embedded LocalCluster: a self-signed certificate and key made now, kept in memory, shared by
    the client, the scheduler and its workers; nothing else holds them, so nothing else can connect."""
    require("cluster", "distributed", "cryptography")
    from distributed import Security

    return Security.temporary()


def connect_timeout_s() -> float:
    """How long a scheduler is tried and waited for (a worker to join): Dask's ``distributed.comm.timeouts.connect``
    (30 s unless configured, e.g. ``DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT=5s``)."""
    import dask
    from dask.utils import parse_timedelta

    value = parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), default="seconds")
    return float(value) if value else 30.0
