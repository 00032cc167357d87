"""The one error type the command line turns into a one-line message and exit status 2."""


class PerfsuiteError(Exception):
    """Bad input or an unusable environment: reported as one line, never as a traceback."""

    exit_status = 2
