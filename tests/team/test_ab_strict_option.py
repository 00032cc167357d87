"""`pytest --perfsuite-ab-strict`: the paired path's way to keep the earlier rule (timings gate on a loaded
machine too, an inconclusive one fails the session), as `perfsuite ab --strict`; recorded in the pairing."""

from __future__ import annotations

import subprocess
import sys


def test_the_plugin_offers_the_strict_option() -> None:
    proc = subprocess.run([sys.executable, "-m", "pytest", "--help"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert "--perfsuite-ab-strict" in text and "inconclusive one fails the session" in text
