"""E2 kill tests: real child processes, real SIGKILL, then reload in this process."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from perfsuite.engine import Message, TranscriptLog

CHILD_APPENDER = textwrap.dedent(
    """
    import sys
    from perfsuite.engine import Message, TranscriptLog
    log = TranscriptLog.open(sys.argv[1])
    start = len(log)
    for i in range(start, start + 100000):
        log.append(Message("user", f"message {i} " + "y" * (1000 + (i * 37) % 3000), float(i)))
        log.write(sync=True)
        print(f"ACK {i}", flush=True)
    """
)

CHILD_REWRITE = textwrap.dedent(
    """
    import sys
    from perfsuite.engine import Message, OsFileSystem, TranscriptLog
    from perfsuite.engine.testing import Fault, FaultyFileSystem
    fs = FaultyFileSystem(OsFileSystem(), [Fault("replace", crash="before")], on_crash="kill")
    log = TranscriptLog.open(sys.argv[1], fs=fs)
    print("READY", flush=True)
    log.edit(0, Message("user", "edited", 1.0))
    print("NOT REACHED", flush=True)
    """
)


def test_sigkill_just_before_replace_leaves_old_transcript(tmp_path):
    logdir = tmp_path / "c"
    log = TranscriptLog.open(logdir)
    originals = [Message("user", f"original {i}", float(i)) for i in range(50)]
    for m in originals:
        log.append(m)
    log.write()
    log.close()
    proc = subprocess.run([sys.executable, "-c", CHILD_REWRITE, str(logdir)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert "READY" in proc.stdout and "NOT REACHED" not in proc.stdout
    assert TranscriptLog.open(logdir).messages() == originals


@pytest.mark.slow
def test_every_acknowledged_message_survives_sigkill(tmp_path):
    rng = random.Random(20261129)
    logdir = tmp_path / "c"
    acked_total = -1
    for repetition in range(20):
        proc = subprocess.Popen([sys.executable, "-c", CHILD_APPENDER, str(logdir)], stdout=subprocess.PIPE,
                                text=True)
        assert proc.stdout is not None
        wanted = rng.randint(1, 40)
        last_ack = -1
        for _ in range(wanted):
            line = proc.stdout.readline()
            assert line.startswith("ACK "), line
            last_ack = int(line.split()[1])
        time.sleep(rng.random() * 0.004)  # land the kill at varied points of the next append/barrier
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        acked_total = max(acked_total, last_ack)
        reloaded = TranscriptLog.open(logdir)
        contents = [m.content.split(" ")[1] for m in reloaded.messages()]
        reloaded.close()
        assert len(contents) >= acked_total + 1, f"repetition {repetition}: lost acknowledged messages"
        assert contents == [str(i) for i in range(len(contents))], "not a clean prefix"
