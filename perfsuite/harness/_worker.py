"""M4 ``process`` isolation: measure one sample in a fresh interpreter, JSON in, JSON out.

``python -m perfsuite.harness._worker`` reads ``{"kind": "sample"|"allocation", "spec": {...},
"sys_path": [...]}`` on stdin and writes one line on stdout: ``{"record": {...}}``, or
``{"error": "one line"}`` with exit status 2. Anything the operation prints goes to stderr, so it
cannot corrupt the reply.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from perfsuite.errors import PerfsuiteError


async def _serve(kind: str, spec_data: dict[str, Any]) -> dict[str, Any]:
    from perfsuite.harness._gc import GcRecorder
    from perfsuite.harness._heartbeat import Heartbeat
    from perfsuite.harness._operation import resolve_operation
    from perfsuite.harness._sample import SampleSpec, measure_sample

    spec = SampleSpec.from_dict(spec_data)
    factory = resolve_operation(spec.operation)  # import before the heartbeat starts
    if kind == "allocation":
        from perfsuite.harness._alloc import measure_allocation

        return (await measure_allocation(spec, factory)).to_dict()
    with GcRecorder() as recorder:
        async with Heartbeat(spec.heartbeat_ms) as heartbeat:
            return (await measure_sample(spec, heartbeat, recorder, factory)).to_dict()


def main() -> int:
    """Serve one request from stdin; see the module docstring."""
    reply_to = sys.stdout
    sys.stdout = sys.stderr  # the operation's prints must not corrupt the reply
    try:
        request = json.load(sys.stdin)
        for entry in reversed(request.get("sys_path", [])):
            if entry not in sys.path:
                sys.path.insert(0, entry)
        if request["kind"] == "allocation":  # M3: a plain loop, nothing of the harness's allocating
            record = asyncio.run(_serve(request["kind"], request["spec"]))
        else:
            from perfsuite.harness._stalls import run_instrumented

            record = run_instrumented(_serve(request["kind"], request["spec"]))  # M9: the harness's own loop
    except PerfsuiteError as exc:
        reply_to.write(json.dumps({"error": str(exc)}) + "\n")
        reply_to.flush()
        return exc.exit_status
    except OSError as exc:  # ENOSPC and friends: one line, never a traceback's last line (issue 14)
        where = f"{exc.filename}: " if exc.filename else ""
        reply_to.write(json.dumps({"error": f"worker: {where}{exc.strerror or exc}"}) + "\n")
        reply_to.flush()
        return 2
    reply_to.write(json.dumps({"record": record}, allow_nan=False) + "\n")
    reply_to.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
