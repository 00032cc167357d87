"""The one error type the command line turns into a one-line message and exit status 2."""


class PerfsuiteError(Exception):
    """Bad input or an unusable environment: reported as one line, never as a traceback."""

    exit_status = 2


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread the way SIGINT raises :class:`KeyboardInterrupt`.

    A subclass of :class:`KeyboardInterrupt` so every path that keeps measured samples on an interrupt
    (status ``"interrupted"``, the ``--resume`` hint) handles it too; the command exits 143 (128 + 15).
    """

    exit_status = 143
