"""Deterministic, seeded text for the generated fixtures (SPEC M6): prose, code, tool output, telemetry.

Everything here is a pure function of a :class:`random.Random` seeded from the fixture spec, so two
builds produce identical bytes. Only ``random()``, ``randrange`` and ``getrandbits`` are used, whose
sequences are stable across CPython versions. Text is ASCII; :func:`plain` text also avoids every
character JSON would escape, so its encoded length is exactly its length (the exact-size fills need it).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

__all__ = ["TextGen", "log_uniform", "split_budget"]

_WORD_TEXT = (
    "the a an of to and in for on with as by from at is are was be this that it its we our you your "
    "session transcript agent mailbox sidecar checkpoint publication generation manifest chunk digest "
    "head lease epoch owner commit adopt freeze stage hash select finish barrier fsync directory rename "
    "replace atomic durable acknowledged pending recovery retry abandon queue gate token drain job loop "
    "timer heartbeat latency gap debounce registry activity permission blocked running waiting settled "
    "result delivery receipt ledger projection prompt index preview chapter snapshot attachment log delta "
    "append rewrite buffer editor render cache warm cold local remote worker thread process offload "
    "memory allocation garbage collection sample median range percentile target verdict baseline "
    "regression dashboard evidence decision record measurement fixture recipe mode control noise floor "
    "test failure error warning trace profile flame graph call stack function module package import "
    "config setting option default value parameter argument return raise handle check verify validate "
    "parse encode decode serialize write read open close flush sync copy move delete create update "
    "file path name size bytes line offset count number list table key field record entry item batch "
    "first last next previous older newer current new old same different whole partial torn clean "
    "before after during while until when then because so but not only also still already never "
    "should must may can could would will might need want see look find show run build install "
    "change fix add remove keep drop split merge move rename retire pin restore fork undo edit "
    "python asyncio event coroutine task future callback executor pool lock condition semaphore "
    "json jsonl toml schema version format header payload body response request client server "
    "user assistant tool model provider context window token budget summary plan goal step "
    "ext4 xfs tmpfs page inode block device kernel syscall descriptor errno eio enospc einval"
)
_WORDS = tuple(_WORD_TEXT.split())

_CODE_TEXT = (
    "session store buffer frozen batch chunk manifest head lease epoch job gate token clock timer "
    "queue record mail ledger agent root sidecar state data path name size offset digest result "
    "report phase step start end count index entry item value items total limit delay deadline"
)
_CODE_NAMES = tuple(_CODE_TEXT.split())

_TOOLS = ("read_file", "grep", "run_tests", "edit_file", "shell", "list_dir", "git_diff", "python")


def log_uniform(rng: random.Random, low: float, high: float) -> float:
    """A draw whose logarithm is uniform on [log low, log high]: many small values, a few large ones."""
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def split_budget(rng: random.Random, count: int, total: int, low: int, high: int) -> list[int]:
    """``count`` log-uniform sizes scaled so they sum to exactly ``total`` (each at least 1)."""
    if count <= 0:
        return []
    raw = [log_uniform(rng, low, high) for _ in range(count)]
    scale = total / sum(raw)
    sizes = [max(1, int(r * scale)) for r in raw]
    sizes[-1] += total - sum(sizes)
    if sizes[-1] < 1:
        raise ValueError(f"cannot split {total} bytes into {count} parts")
    return sizes


class TextGen:
    """Seeded generator of realistic-looking ASCII text."""

    def __init__(self, seed: int | str) -> None:
        self.rng = random.Random(seed)

    # -- words and sentences ---------------------------------------------------------------------
    def _words(self, n: int) -> list[str]:
        rng, words = self.rng, _WORDS
        size = len(words)
        return [words[int(rng.random() * size)] for _ in range(n)]

    def plain(self, chars: int) -> str:
        """Exactly ``chars`` characters of prose with no newlines, quotes or backslashes."""
        if chars <= 0:
            return ""
        words = self._words(chars // 5 + 8)
        out: list[str] = []
        length = 0
        start = True
        i = 0
        rng = self.rng
        while length <= chars:  # ``length`` counts a separator after every word
            if i >= len(words):
                words = self._words(chars // 5 + 8)
                i = 0
            word = words[i]
            i += 1
            if start:
                word = word.capitalize()
                start = False
            if rng.random() < 0.08:
                word += "."
                start = True
            elif rng.random() < 0.05:
                word += ","
            out.append(word)
            length += len(word) + 1
        text = " ".join(out)[:chars]
        if len(text) > 1 and text[-1] == " ":
            text = text[:-1] + "."
        return text

    def paragraphs(self, chars: int) -> str:
        """About ``chars`` characters of prose in paragraphs (with newlines)."""
        parts: list[str] = []
        left = chars
        while left > 0:
            size = min(left, self.rng.randrange(120, 700))
            parts.append(self.plain(size))
            left -= size + 2
        return "\n\n".join(parts)

    def code(self, chars: int) -> str:
        """About ``chars`` characters of Python-looking source (quotes, indentation, newlines)."""
        rng = self.rng
        lines: list[str] = []
        length = 0
        indent = 0
        while length < chars:
            a, b, c = (_CODE_NAMES[rng.randrange(len(_CODE_NAMES))] for _ in range(3))
            roll = rng.random()
            if indent == 0 or roll < 0.08:
                indent = 0
                line = f"def {a}_{b}(self, {c}: int, *, {a}: str = \"{b}\") -> None:"
                if rng.random() < 0.3:
                    lines.append("")
                    lines.append("@dataclass(frozen=True, slots=True)")
                    line = f"class {a.capitalize()}{b.capitalize()}:"
                indent = 1
            elif roll < 0.25:
                line = "    " * indent + f"if {a}.{b} is None or {c} > len({a}):"
                indent = min(indent + 1, 4)
            elif roll < 0.35 and indent > 1:
                indent -= 1
                line = "    " * indent + f"return {a}_{b}({c})"
            elif roll < 0.45:
                line = "    " * indent + f"# {self.plain(rng.randrange(20, 70))}"
            elif roll < 0.55:
                line = "    " * indent + f"for {a} in self.{b}s[{rng.randrange(100)}:]:"
                indent = min(indent + 1, 4)
            else:
                line = "    " * indent + f"{a}_{b} = self.{c}.get(\"{a}\", {rng.randrange(1 << 16)})"
            lines.append(line)
            length += len(line) + 1
        return "\n".join(lines)[:chars] + "\n"

    def tool_output(self, chars: int) -> str:
        """About ``chars`` characters of tool output: test logs, grep hits, tracebacks."""
        rng = self.rng
        lines: list[str] = []
        length = 0
        while length < chars:
            roll = rng.random()
            a, b = _CODE_NAMES[rng.randrange(len(_CODE_NAMES))], _CODE_NAMES[rng.randrange(len(_CODE_NAMES))]
            if roll < 0.4:
                line = f"perfsuite/engine/_{a}.py:{rng.randrange(1, 900)}: {self.plain(rng.randrange(30, 100))}"
            elif roll < 0.7:
                verdict = "PASSED" if rng.random() < 0.9 else "FAILED"
                line = f"tests/engine/test_{a}.py::test_{a}_{b}_{rng.randrange(99)} {verdict} [{rng.randrange(101)}%]"
            elif roll < 0.85:
                line = f"  File \"/work/perfsuite/{a}/{b}.py\", line {rng.randrange(1, 600)}, in {a}_{b}"
            else:
                line = f"{rng.randrange(1 << 20)} bytes in {rng.randrange(1, 400)} ms ({a} {b})"
            lines.append(line)
            length += len(line) + 1
        return "\n".join(lines)[:chars]

    # -- conversation pieces -------------------------------------------------------------------------
    def user_message(self, chars: int) -> str:
        return self.paragraphs(chars) if self.rng.random() < 0.4 else self.plain(chars)

    def assistant_message(self, chars: int) -> str:
        """Prose, sometimes with a list or a fenced code block, of about ``chars`` characters."""
        roll = self.rng.random()
        if roll < 0.25 and chars > 500:
            head = self.plain(chars // 3)
            body = self.code(chars - len(head) - 20)
            return f"{head}\n\n```python\n{body}```\n"
        if roll < 0.45 and chars > 300:
            items = max(2, chars // 160)
            head = self.plain(min(160, chars // 3))
            bullets = "\n".join(f"- {self.plain(max(20, (chars - len(head)) // items - 3))}" for _ in range(items))
            return f"{head}\n\n{bullets}"
        return self.paragraphs(chars)

    def tool_name(self) -> str:
        return _TOOLS[self.rng.randrange(len(_TOOLS))]

    def identifier(self, parts: Sequence[str] = _CODE_NAMES) -> str:
        return f"{parts[self.rng.randrange(len(parts))]}_{parts[self.rng.randrange(len(parts))]}"

    def hexid(self, digits: int = 8) -> str:
        return f"{self.rng.getrandbits(digits * 4):0{digits}x}"

    def binary(self, size: int) -> bytes:
        """``size`` seeded bytes (a binary file snapshot: an image, an archive)."""
        return self.rng.getrandbits(size * 8).to_bytes(size, "little") if size > 0 else b""
