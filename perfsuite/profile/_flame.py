"""Flame graphs from folded stacks, as standalone SVG: one profile, or the difference of two.

Input is the folded-stack form Brendan Gregg's ``flamegraph.pl`` reads (``root;caller;callee value``),
so the ``.folded`` files written beside an SVG also open in any flame-graph tool (speedscope, inferno).
Frames are drawn root at the bottom, widths proportional to instructions; each frame's tooltip
(``<title>``) carries its exact count. A difference graph is drawn with the new profile's widths and
coloured by each frame's change against the base (red: more instructions, blue: fewer), like
``difffolded.pl``.
"""

from __future__ import annotations

import html
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["folded_lines", "read_folded", "write_flame_graph"]

WIDTH = 1200
FRAME_H = 16
FONT_PX = 11
CHAR_PX = 6.4  # average advance of an 11 px sans-serif character
MIN_PX = 0.3  # narrower frames are not drawn (their cost stays in the parent's width)

Stacks = Mapping[tuple[str, ...], int]


@dataclass
class _Node:
    name: str
    value: int = 0
    base: int = 0
    children: dict[str, _Node] = field(default_factory=dict)


def folded_lines(stacks: Stacks) -> list[str]:
    """``a;b;c 123`` lines, sorted (the folded format)."""
    return [f"{';'.join(stack)} {value}" for stack, value in sorted(stacks.items()) if value]


def read_folded(path: Path) -> dict[tuple[str, ...], int]:
    """The stacks of a ``.folded`` file."""
    out: dict[tuple[str, ...], int] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        stack, _, value = line.rpartition(" ")
        if stack and value.isdigit():
            key = tuple(stack.split(";"))
            out[key] = out.get(key, 0) + int(value)
    return out


def _tree(stacks: Stacks, base: Stacks | None) -> _Node:
    root = _Node("all")
    for source, is_base in ((stacks, False), (base or {}, True)):
        for stack, value in source.items():
            path = [root]
            for name in stack:
                path.append(path[-1].children.setdefault(name, _Node(name)))
            for node in path:  # plain attributes, no setattr: the no-patching scan reads every setattr
                if is_base:
                    node.base += value
                else:
                    node.value += value
    return root


def _colour(name: str, node: _Node, diff: bool) -> str:
    if diff:
        if node.base == node.value:
            return "rgb(235,235,235)"
        change = (node.value - node.base) / max(node.base, node.value, 1)
        level = int(235 - min(1.0, abs(change) * 4) * 175)  # 4x: a 25% change is fully saturated
        return f"rgb(255,{level},{level})" if change > 0 else f"rgb({level},{level},255)"
    h = zlib.crc32(name.encode())  # stable colours across runs: the same function keeps its colour
    return f"rgb({205 + h % 50},{80 + (h >> 8) % 120},{(h >> 16) % 60})"


def _label(name: str, width: float) -> str:
    fits = int((width - 4) / CHAR_PX)
    if fits < 3:
        return ""
    return name if len(name) <= fits else name[: fits - 2] + ".."


def write_flame_graph(path: Path, stacks: Stacks, *, title: str, base: Stacks | None = None,
                      unit: str = "instructions") -> Path:
    """Write the flame graph of ``stacks`` (with ``base``: coloured by the change against it) to ``path``."""
    root = _tree(stacks, base)
    diff = base is not None
    depth = 0

    def measure(node: _Node, level: int) -> None:
        nonlocal depth
        depth = max(depth, level)
        for child in node.children.values():
            measure(child, level + 1)

    measure(root, 0)
    top = 2 * FRAME_H + 8
    height = top + (depth + 1) * FRAME_H + FRAME_H
    scale = (WIDTH - 20) / max(root.value, 1)
    rects: list[str] = []

    def draw(node: _Node, level: int, x: float) -> None:
        width = node.value * scale
        if width < MIN_PX:
            return
        y = height - FRAME_H - (level + 1) * FRAME_H
        share = node.value / max(root.value, 1)
        tip = f"{node.name} ({node.value:,} {unit}, {share:.2%})"
        if diff:
            tip += f"; base {node.base:,}, change {node.value - node.base:+,}"
        rects.append(
            f'<g><title>{html.escape(tip)}</title><rect x="{10 + x:.2f}" y="{y}" width="{width:.2f}" '
            f'height="{FRAME_H - 1}" fill="{_colour(node.name, node, diff)}" rx="2"/>'
            f'<text x="{13 + x:.2f}" y="{y + FRAME_H - 4}">{html.escape(_label(node.name, width))}</text></g>'
        )
        offset = x
        for child in sorted(node.children.values(), key=lambda c: c.name):
            draw(child, level + 1, offset)
            offset += child.value * scale

    draw(root, 0, 0.0)
    subtitle = f"{root.value:,} {unit}" + (f" (base {root.base:,}, change {root.value - root.base:+,})" if diff else "")
    svg = (
        f'<?xml version="1.0" encoding="utf-8"?>\n'
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="Verdana, sans-serif" font-size="{FONT_PX}">\n'
        f'<rect width="100%" height="100%" fill="#fafafa"/>\n'
        f'<text x="{WIDTH / 2}" y="{FRAME_H + 2}" text-anchor="middle" font-size="14">{html.escape(title)}</text>\n'
        f'<text x="{WIDTH / 2}" y="{2 * FRAME_H + 4}" text-anchor="middle" fill="#555">{html.escape(subtitle)}</text>\n'
        + "\n".join(rects)
        + "\n</svg>\n"
    )
    path = Path(path)
    path.write_text(svg, encoding="utf-8")
    return path
