"""M12: the latency a person feels while typing into a real editor as the engine publishes in the same process.

The editor is Textual's ``TextArea`` (a UI toolkit no one here wrote), run headless by Textual's own test harness
(``App.run_test``) in the sample's event loop, which is the harness's instrumented loop (M1 heartbeat, M9 stall
monitor). Keys are typed at a steady rate (``key_interval_ms``, 100 by default: a fast typist, 10 keys a second)
by an input thread, the way Textual's Linux driver hands over what it reads from the terminal:
``Driver.process_message(Key)`` from a thread. While the keys arrive, the mode publishes ``publications`` times
(3; a root or agent checkpoint of one more streamed turn, a mailbox delivery; synchronous writer or asynchronous
job, the same engine calls as the recipes of SPEC section 4), spread over the typing, each at a seeded random
phase between two keys (stratified: the j-th in the j-th third of the interval), as checkpoints land while a
person types; or nothing (the idle editor: the floor),
or a planted synchronous step (``publish = "plant"``: a busy-wait of ``plant_ms`` on the loop, 1 ms before every
``plant_every``-th key: the instrument's check).

**The two instants of a key's latency.** It starts at the instant the key was *due* on the typing schedule, which
is when the person pressed it: the input thread hands the key event to the app (``Driver.process_message``) at
that instant, or later when it cannot get the GIL, and then the latency still starts at the due instant (counting
from the late hand-over would hide exactly the delay a person feels: coordinated omission). It ends at the
driver's ``write()`` of the first frame rendered after the ``TextArea`` holds the character: the instant the frame
that shows it leaves the app for the terminal. :class:`FrameDriver` is Textual's headless driver with rendering
on (``is_headless`` false, so every frame is composed into terminal sequences exactly as for a real terminal,
then discarded). Not included: the operating system's input path before the driver, and the terminal emulator,
compositor and display after it (Typometer's keypress-to-photon); those are outside the process and outside
what a persistence change can move.

**Slow keys are attributed** to what held them: for every key slower than ``slow_key_ms`` (10), the stall
monitor's five longest callbacks between the key's due instant and its frame (M9, named; read just after the
callback that wrote the frame, so that one is in) and the garbage collections in that span (M2), in
``labels.slow_keys_detail`` (JSON). Per sample: ``metrics.keys``, ``key_p50_ms``, ``key_p99_ms``,
``key_max_ms``, ``keys_over_target``, ``slow_keys``, ``publication_ack_ms`` and ``publication_ack_max_ms`` (a
publication's call to its acknowledgement, median and worst; null without one), ``key_send_late_max_ms`` (how
late the input thread handed a key over), with a plant ``plants_missed`` and ``labels.planted_keys`` (the keys
a step held: not framed when it started), and ``labels.key_hdr``: every key's latency in an HDR histogram
(integer microseconds), so :func:`perfsuite.watch.key_latency` reads p50/p99/max over all keys of a mode.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import json
import random
import threading
import time
from collections.abc import Mapping
from typing import Any

from perfsuite._extras import require
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import AckCallback, GcRecorder, Operation, OperationContext, stall_monitor_of

__all__ = ["TARGET_MS", "planted_step", "typing"]

#: the target a key's latency is read against (the same 20 ms as the heartbeat's, M7)
TARGET_MS = 20.0
#: characters typed: lowercase letters except h, l and m, which terminal escape sequences contain
ALPHABET = "abcdefgijknopqrstuvwxyz"
_PUBLISH = ("none", "checkpoint", "mailbox_delivery", "plant")
#: how long after the last key is due its frame may take before the sample fails
FRAME_TIMEOUT_S = 10.0

#: the longest callbacks of a slow key's span recorded: on a loaded machine a preempted callback can read
#: longer than what really held the key, so the culprit is among these, not always the first (M9)
BLAMED = 5


def planted_step(ms: float) -> None:
    """The planted synchronous step: hold the loop's thread ``ms`` milliseconds (named in the stall record)."""
    end = time.perf_counter_ns() + int(ms * 1e6)
    while time.perf_counter_ns() < end:
        pass


def _param(ctx: OperationContext, key: str, default: Any, kind: type | tuple[type, ...]) -> Any:
    value = ctx.params.get(key, default)
    if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
        raise PerfsuiteError(f"mode {ctx.mode}: {key}: expected {getattr(kind, '__name__', kind)}, got {value!r}")
    return value


def _textual() -> Any:
    require("ui", "textual")
    import textual.app
    import textual.drivers.headless_driver
    import textual.events
    import textual.widgets

    return textual


class _Keys:
    """Every key of one sample: due, handed over and framed instants (ns), and the attribution of slow ones."""

    def __init__(self, n: int) -> None:
        self.due = [0] * n
        self.sent = [0] * n
        self.framed = [0] * n
        self.next = 0  # the first key without a frame
        self.slow: list[dict[str, Any]] = []
        self.done: asyncio.Future[None] | None = None

    def latencies_ms(self) -> list[float]:
        return [(f - d) / 1e6 for d, f in zip(self.due, self.framed) if f]


def _editor_class() -> Any:
    """The app and its driver, built once Textual is known to be installed (the ``ui`` extra)."""
    textual = _textual()
    HeadlessDriver = textual.drivers.headless_driver.HeadlessDriver

    class FrameDriver(HeadlessDriver):  # type: ignore[misc, valid-type]
        """Textual's headless driver with rendering on: every frame is composed into terminal sequences as for a
        real terminal, and each ``write`` is reported to the app (the instant a frame leaves it), then dropped."""

        def __init__(self, app: Any, **kwargs: Any) -> None:
            super().__init__(app, **kwargs)
            app.frame_driver = self  # the typist hands keys to this driver, as the terminal's input thread would

        @property
        def is_headless(self) -> bool:
            return False

        def write(self, data: str) -> None:
            hook = getattr(self._app, "frame_written", None)
            if hook is not None:
                hook(data)

    class Editor(textual.app.App):  # type: ignore[misc, name-defined]
        """One ``TextArea`` holding a file's worth of text, typed into at the end of its first line."""

        def __init__(self, text: str) -> None:
            super().__init__(driver_class=FrameDriver)
            self._text = text
            self.area: Any = None
            self.on_frame: Any = None
            self.frame_driver: Any = None

        def compose(self) -> Any:
            self.area = textual.widgets.TextArea(self._text, id="editor")
            yield self.area

        def frame_written(self, data: str) -> None:
            if self.on_frame is not None and not data.startswith("\x1b[?2026"):  # not the sync start/end marks
                self.on_frame(data)

    return Editor, FrameDriver


def __getattr__(name: str) -> Any:
    """``FrameDriver`` (built on first use: it needs Textual): Textual's headless driver with rendering on, also for
    any Textual app without a terminal, ``TEXTUAL_DRIVER=perfsuite.workloads.typing:FrameDriver``."""
    if name == "FrameDriver":
        return _editor_class()[1]
    raise AttributeError(name)


class _Publication:
    """One publication of the mode, run in its own loop callback; ``__wrapped__`` names the engine's method in the
    stall record (M9), so a slow key reads "Session.checkpoint", not this class. A checkpoint after the first one
    first streams another turn into the conversation (the edit a checkpoint publishes), in the same callback."""

    __slots__ = ("__wrapped__", "ack_ns", "error", "inner", "n", "start_ns")

    def __init__(self, inner: Any, name_of: Any, n: int) -> None:
        self.inner, self.__wrapped__, self.n = inner, name_of, n
        self.start_ns = self.ack_ns = 0
        self.error: BaseException | None = None

    def _ack(self, error: BaseException | None) -> None:
        self.ack_ns = time.perf_counter_ns()
        self.error = error

    def __call__(self) -> None:
        self.start_ns = time.perf_counter_ns()
        if self.n and hasattr(self.inner, "_edit"):
            self.inner._edit(self.n)  # a checkpoint operation of this package: the next streamed turn
        self.inner.submit(self._ack)

    @property
    def ack_ms(self) -> float | None:
        return (self.ack_ns - self.start_ns) / 1e6 if self.ack_ns else None


class _Typing(Operation):
    def __init__(self, ctx: OperationContext) -> None:
        self.ctx = ctx
        self.publish = _param(ctx, "publish", "none", str)
        if self.publish not in _PUBLISH:
            raise PerfsuiteError(f"mode {ctx.mode}: publish: expected one of {', '.join(_PUBLISH)}, "
                                 f"got {self.publish!r}")
        self.n = _param(ctx, "keys", 20, int)
        if self.n < 1:
            raise PerfsuiteError(f"mode {ctx.mode}: keys: expected at least 1, got {self.n}")
        self.interval_ns = round(float(_param(ctx, "key_interval_ms", 100, (int, float))) * 1e6)
        self.publish_at = _param(ctx, "publish_at_key", 5, int) % self.n
        self.count = max(1, _param(ctx, "publications", 3, int))
        self.slow_ms = float(_param(ctx, "slow_key_ms", 10, (int, float)))
        self.plant_ms = float(_param(ctx, "plant_ms", 10, (int, float)))
        self.plant_every = max(1, _param(ctx, "plant_every", 10, int))
        self.rng = random.Random(3000 + ctx.sample)
        phase = ctx.params.get("publish_phase", "random")
        # stratified: publication j at a uniform phase within the j-th of `count` equal parts of the key interval,
        # so each phase is uniform over the samples and the phases of one sample never bunch up (variance down)
        fixed = None if phase == "random" else float(phase)  # type: ignore[arg-type]
        self.phases = [(j + self.rng.random()) / self.count if fixed is None else fixed for j in range(self.count)]
        self.text_lines = _param(ctx, "text_lines", 400, int)
        self.freeze = _param(ctx, "freeze", False, bool)
        self.inner: Any = None
        self.app: Any = None
        self._running: Any = None
        self.pilot: Any = None
        self.keys = _Keys(self.n)
        self.publications: list[_Publication] = []
        self.start_col = 0
        self.missed_plants = 0
        self.held_keys: list[int] = []
        self._finisher: asyncio.Task[None] | None = None
        self.recorder = GcRecorder(capacity=1024)  # M2 for slow keys (the harness's own recorder sees the window)

    async def open(self) -> _Typing:
        if self.publish in ("checkpoint", "mailbox_delivery") or (self.publish == "none" and self.ctx.workdir):
            from perfsuite.workloads.engine import checkpoint, mailbox_delivery

            # the idle editor of a publication recipe holds the same open session (the same heap for the
            # collector) and publishes nothing
            self.inner = (mailbox_delivery if self.publish == "mailbox_delivery" else checkpoint)(self.ctx)
        editor, _driver = _editor_class()
        words = ["session", "agent", "result", "publish", "durable", "frame", "key", "loop", "editor"]
        text = "\n".join(" ".join(self.rng.choice(words) for _ in range(10)) for _ in range(self.text_lines))
        self.app = editor(text)
        self._running = self.app.run_test(headless=False, size=(100, 30))
        self.pilot = await self._running.__aenter__()
        self.app.area.focus()
        self.app.area.cursor_location = (0, len(text.split("\n", 1)[0]))
        await self.pilot.pause()
        self.start_col = self.app.area.cursor_location[1]
        if self.freeze:  # M10's mitigation: what the editor (and the session) hold now is out of the collector's scans
            gc.freeze()
        return self

    async def wait_idle(self) -> None:
        if self.inner is not None:
            await self.inner.wait_idle()
        await self.pilot.pause()

    # -- the sample ----------------------------------------------------------------------------------

    def _engine_call(self) -> Any:
        session = self.inner.session
        if self.publish == "checkpoint":
            return session.request_checkpoint if self.inner.asynchronous else session.checkpoint
        return session.deliver_background if self.inner.asynchronous else session.append_mail

    def submit(self, ack: AckCallback) -> None:
        loop = asyncio.get_running_loop()
        keys = self.keys
        keys.done = loop.create_future()
        monitor = stall_monitor_of(loop)
        area = self.app.area
        start_col = self.start_col
        slow_ns = int(self.slow_ms * 1e6)

        recorder = self.recorder

        def attribute(i: int, framed: int) -> None:
            # runs just after the callback that wrote the frame, so that callback is recorded too (M9); a
            # collection inside the key's span is named beside them (M2)
            due = keys.due[i]
            blamed = monitor.since(due, until_ns=framed, top=BLAMED) if monitor is not None else ()
            gcw = recorder.window(due, framed)
            keys.slow.append({"key": i, "ms": round((framed - due) / 1e6, 3),
                              "at_ms": round((due - keys.due[0]) / 1e6, 3),
                              "callbacks": [{"name": e.name, "ms": round(e.duration_ns / 1e6, 3)} for e in blamed],
                              "gc_ms": round(gcw.gc_ms, 3),
                              "gc_generation": max((e.generation for e in gcw.events), default=None)})

        def on_frame(data: str) -> None:  # in the loop thread, inside Textual's display of a frame
            now = time.perf_counter_ns()
            typed = area.cursor_location[1] - start_col
            while keys.next < min(typed, self.n) and keys.sent[keys.next]:
                i = keys.next
                keys.framed[i] = now
                keys.next += 1
                if now - keys.due[i] > slow_ns:
                    loop.call_soon(attribute, i, now)
            finished = keys.done
            if keys.next >= self.n and finished is not None and not finished.done():
                loop.call_soon(finished.set_result, None)  # after the last attribution

        self.app.on_frame = on_frame
        recorder.install()
        first_due = time.perf_counter_ns() + self.interval_ns
        for i in range(self.n):
            keys.due[i] = first_due + i * self.interval_ns
        self._schedule_work(loop, first_due, ack)
        driver = self.app.frame_driver
        Key = _textual().events.Key
        chars = [self.rng.choice(ALPHABET) for _ in range(self.n)]

        def typist() -> None:  # the input thread, as Textual's Linux driver's: keys handed over from a thread
            for i in range(self.n):
                while True:
                    left = keys.due[i] - time.perf_counter_ns()
                    if left <= 0:
                        break
                    time.sleep(max(left / 1e9 - 2e-4, 0) if left > 1_000_000 else 0)
                keys.sent[i] = time.perf_counter_ns()
                driver.process_message(Key(chars[i], chars[i]))

        threading.Thread(target=typist, name="perfsuite-typist", daemon=True).start()
        self._finisher = loop.create_task(self._finish(ack))

    def _schedule_work(self, loop: asyncio.AbstractEventLoop, first_due: int, ack: AckCallback) -> None:
        to_loop = loop.time() - time.perf_counter_ns() / 1e9  # perf_counter ns -> loop.time()
        if self.publish == "plant":
            lead = 1_000_000  # the step starts 1 ms before its key is due: the key arrives while the loop is held
            for i in range(self.publish_at % self.plant_every, self.n, self.plant_every):
                when = (self.keys.due[i] - lead) / 1e9 + to_loop
                loop.call_at(when, functools.partial(self._planted_step, i))
        elif self.inner is not None and self.publish != "none":
            spacing = max(1, self.n // self.count)  # the publications spread over the typing, one per stretch
            for j, phase in enumerate(self.phases):
                publication = _Publication(self.inner, self._engine_call(), j)
                self.publications.append(publication)
                key = min(self.publish_at + j * spacing, self.n - 1)
                at = self.keys.due[key] + round(phase * self.interval_ns)
                loop.call_at(at / 1e9 + to_loop, publication)

    def _planted_step(self, key: int) -> None:
        """The planted synchronous step (``publish = "plant"``), named so in the stall record."""
        if self.keys.framed[key]:
            self.missed_plants += 1  # the loop reached the step after the key's frame: it delayed nothing
        else:
            self.held_keys.append(key)  # not framed yet: its frame comes after the step, so it was held
        planted_step(self.plant_ms)

    async def _finish(self, ack: AckCallback) -> None:
        keys = self.keys
        assert keys.done is not None
        timeout = (keys.due[-1] - time.perf_counter_ns()) / 1e9 + FRAME_TIMEOUT_S
        try:
            await asyncio.wait_for(asyncio.shield(keys.done), timeout)
        except TimeoutError:
            self.recorder.uninstall()
            ack(PerfsuiteError(f"mode {self.ctx.mode}: key {keys.next} of {self.n} never reached a frame"))
            return
        self.recorder.uninstall()
        while any(not p.ack_ns for p in self.publications):
            await asyncio.sleep(0.005)
        ack(next((p.error for p in self.publications if p.error is not None), None))

    def metrics(self) -> Mapping[str, Any]:
        out: dict[str, Any] = dict(self.inner.metrics()) if self.inner is not None else {}
        lat = sorted(self.keys.latencies_ms())
        out.update(_key_metrics(lat))
        out["slow_keys"] = len(self.keys.slow)
        out["keys_over_target"] = sum(1 for v in lat if v > TARGET_MS)
        late = [(s - d) / 1e6 for s, d in zip(self.keys.sent, self.keys.due) if s]
        out["key_send_late_max_ms"] = round(max(late), 3) if late else None
        acks = sorted(p.ack_ms for p in self.publications if p.ack_ms is not None)
        out["publication_ack_ms"] = round(acks[len(acks) // 2], 3) if acks else None  # their median; null: none
        out["publication_ack_max_ms"] = round(acks[-1], 3) if acks else None
        if self.publish == "plant":
            out["plants_missed"] = self.missed_plants
            out["planted_keys"] = json.dumps(self.held_keys)  # the keys each planted step held
        out["key_hdr"] = _hdr(lat)
        out["slow_keys_detail"] = json.dumps(self.keys.slow, separators=(",", ":"))
        out["publish"] = self.publish
        return out

    async def close(self) -> None:
        self.recorder.uninstall()
        try:
            if self._running is not None:
                self.app.on_frame = None
                await self._running.__aexit__(None, None, None)
        finally:
            if self.inner is not None:
                self.inner.close()


def _key_metrics(lat: list[float]) -> dict[str, Any]:
    import numpy as np

    if not lat:
        return {"keys": 0, "key_p50_ms": None, "key_p99_ms": None, "key_max_ms": None}
    arr = np.asarray(lat)
    return {"keys": len(lat), "key_p50_ms": round(float(np.percentile(arr, 50)), 3),
            "key_p99_ms": round(float(np.percentile(arr, 99)), 3), "key_max_ms": round(float(arr.max()), 3)}


def _hdr(lat: list[float]) -> str:
    from hdrh.histogram import HdrHistogram

    hist = HdrHistogram(1, 600_000_000, 3)  # integer microseconds, as the heartbeat's lag histograms
    for ms in lat:
        hist.record_value(max(1, min(int(ms * 1000), 600_000_000)))
    return hist.encode().decode("ascii")


async def typing(ctx: OperationContext) -> Operation:
    """Keys typed into Textual's TextArea while the mode publishes (see the module docstring). Params:
    ``publish`` "none" (the idle editor: the floor), "checkpoint", "mailbox_delivery" (with the engine operation's
    own params: ``path`` "sync"/"async", ``conversation``, ``result_chars``...) or "plant" (``plant_ms``, 10, every
    ``plant_every``-th key, 10); ``keys`` (20), ``key_interval_ms`` (100), ``publications`` (3), ``publish_at_key``
    (5: the first publication's key; the others follow every ``keys // publications`` keys),
    ``publish_phase`` ("random": seeded by the sample, stratified over the publications; or a fraction of the
    interval), ``slow_key_ms`` (10), ``freeze`` (false; true: ``gc.freeze()`` once the editor is up, M10),
    ``text_lines`` (400 lines in the editor)."""
    return await _Typing(ctx).open()


def _unavailable() -> str | None:
    """Why the typing recipes cannot run here (``perfsuite run`` skips them with this line), or ``None``."""
    try:
        require("ui", "textual")
    except PerfsuiteError as exc:
        return str(exc)
    return None


typing.conditions = frozenset({"storage"})  # type: ignore[attr-defined]  # passed on to the engine operation
typing.unavailable = _unavailable  # type: ignore[attr-defined]
