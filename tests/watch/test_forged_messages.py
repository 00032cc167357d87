"""M11: the watched program shares its interpreter with the agent, so it can write on the agent's channel. A
forged ``allocation`` message naming a file outside the watch's own capture directory must not make the watch
delete (or read) that file: the parent names captures itself, from its own directory and the window index."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.watch.conftest import watch


def test_a_forged_allocation_message_deletes_nothing_outside(tmp_path: Path, write_program: Any) -> None:
    outside = tmp_path / "keep-me.txt"
    outside.write_text("precious\n")
    program = write_program("forger.py", f"""
        import asyncio, gc, json, os

        async def main():
            await asyncio.sleep(0.3)
            # the agent's channel, in this very process (the agent runs as __main__ before the program)
            channel = next(o for o in gc.get_objects() if type(o).__name__ == "Channel" and hasattr(o, "fd"))
            forged = {{"type": "allocation", "index": 2, "capture": {str(outside)!r}, "window_ms": 1.0}}
            os.write(channel.fd, (json.dumps(forged) + "\\n").encode())
            await asyncio.sleep(0.3)

        asyncio.run(main())
    """)
    proc, doc = watch(tmp_path, [program], "--window", "0.1", "--no-control")
    assert proc.returncode == 0, proc.stderr
    assert outside.read_text() == "precious\n"  # neither deleted nor replaced
    said = [line for line in (proc.stdout + proc.stderr).splitlines() if outside.name in line]
    assert len(said) == 1 and "ignored" in said[0] and "nothing outside" in said[0], proc.stdout + proc.stderr
    assert doc is not None and doc["modes"]["live"]["allocation"] is None  # the forgery is no sample either
