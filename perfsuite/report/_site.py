"""What every dashboard page shares: the HTML frame, styles, the tooltip script, verdict and reference cells.

The pages are self-contained (inline CSS, inline SVG, one small inline script: no CDN, no server) so the
site opens from ``file://`` or a CI artifact. The script turns each chart mark's ``<title>`` into a
tooltip that follows the pointer (the ``<title>`` is the fallback without scripts).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping
from typing import Any

from perfsuite.errors import PerfsuiteError
from perfsuite.report._format import short_commit
from perfsuite.report._load import Result

__all__ = [
    "CSS",
    "SCRIPT",
    "commit_href",
    "commit_link",
    "e",
    "load_badge",
    "page",
    "reference_reason",
    "references",
    "slug",
    "verdict_html",
]

CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1060px; color: #222; padding: 0 1em; }
h1 { font-size: 1.45em; } h2 { font-size: 1.2em; margin-top: 1.8em; border-bottom: 1px solid #ddd; }
h3 { font-size: 1.02em; margin: 1.3em 0 .3em; }
table { border-collapse: collapse; margin: .5em 0; font-size: .88em; }
th, td { padding: .25em .6em; border-bottom: 1px solid #eee; text-align: right; vertical-align: top; }
th:first-child, td:first-child, td.text, th.text { text-align: left; }
code { background: #f4f4f4; padding: 0 .2em; } .note { color: #555; font-size: .9em; }
.met, .improved { color: #1a7f37; } .missed, .regressed { color: #cf222e; font-weight: 600; }
.inconclusive, .changed { color: #9a6700; } .unchanged, .dim { color: #888; }
.reference { color: #888; font-style: italic; } .loaded { color: #9a6700; font-weight: 600; }
.story { font-size: 1.05em; background: #f6f8fa; border-left: 4px solid #888; padding: .5em .8em; }
.story.bad { border-color: #cf222e; } .story.good { border-color: #1a7f37; } .story.unsure { border-color: #9a6700; }
.synthetic { background: #fff8c5; border: 1px solid #d4a72c; padding: .4em .8em; }
.chip { display: inline-block; margin: 0 .6em .15em 0; white-space: nowrap; }
nav a { margin-right: 1em; } tr:target { background: #fff8c5; }
svg { display: block; margin: .3em 0 1em; overflow: visible; } svg.spark { display: inline; margin: 0; }
svg .grid { stroke: #eee; } svg .tick { font-size: 10px; fill: #555; } svg .label { font-size: 11px; fill: #333; }
svg .target { stroke: #cf222e; stroke-dasharray: 6 3; opacity: .7; } svg .step { stroke-dasharray: 4 3; }
svg .note { font-size: 10px; } svg .pt:hover { stroke: #000; stroke-width: 1.5; } svg a .commit { fill: #0969da; }
#tip { position: absolute; display: none; background: #222; color: #fff; padding: 3px 7px; font-size: 12px;
       border-radius: 3px; pointer-events: none; z-index: 10; max-width: 460px; }
"""

SCRIPT = """
<div id="tip" role="tooltip"></div>
<script>
(function () {
  var tip = document.getElementById("tip");
  Array.prototype.forEach.call(document.querySelectorAll("svg title"), function (t) {
    t.parentNode.setAttribute("data-tip", t.textContent);
    t.parentNode.removeChild(t);
  });
  function place(ev) { tip.style.left = (ev.pageX + 12) + "px"; tip.style.top = (ev.pageY + 14) + "px"; }
  document.addEventListener("mouseover", function (ev) {
    var t = ev.target.closest ? ev.target.closest("[data-tip]") : null;
    if (!t) { tip.style.display = "none"; return; }
    tip.textContent = t.getAttribute("data-tip");
    tip.style.display = "block";
    place(ev);
  });
  document.addEventListener("mousemove", function (ev) { if (tip.style.display === "block") { place(ev); } });
})();
</script>
"""


def e(text: object) -> str:
    """HTML-escaped text (attributes too)."""
    return html.escape(str(text), quote=True)


def slug(name: str) -> str:
    """A file-name-safe form of a recipe or machine name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "x"


def page(title: str, body: str) -> str:
    """A complete HTML page with the shared styles and tooltip script."""
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{e(title)}</title><style>{CSS}</style></head>\n<body>\n{body}\n{SCRIPT}</body></html>\n"
    )


_COMMIT_URL_EXAMPLE = "e.g. https://github.com/OWNER/REPO/commit/{commit}"


def check_commit_url(template: str) -> str:
    """A commit URL template (``--commit-url``): text with ``{commit}`` and no other replacement field
    (``{{``/``}}`` are literal braces). Anything else is one line naming the template (a
    positional or unknown field used to fail while the site was being written)."""
    import string

    try:
        fields = [(name, spec, conv) for _, name, spec, conv in string.Formatter().parse(template)
                  if name is not None]
    except ValueError as exc:
        raise PerfsuiteError(f"--commit-url {template!r}: not a URL template ({exc}); expected text with "
                             f"{{commit}}, {_COMMIT_URL_EXAMPLE}") from None
    for name, spec, conv in fields:
        if name != "commit" or spec or conv:
            shown = "{" + name + (f"!{conv}" if conv else "") + (f":{spec}" if spec else "") + "}"
            raise PerfsuiteError(f"--commit-url {template!r}: field {shown} is not allowed: the only field is "
                                 f"{{commit}} ({_COMMIT_URL_EXAMPLE})")
    if not fields:
        raise PerfsuiteError(f"--commit-url must contain {{commit}}, got {template!r} ({_COMMIT_URL_EXAMPLE})")
    if not template.lower().startswith(("https://", "http://")):  # a javascript: link runs script when clicked
        raise PerfsuiteError(f"--commit-url {template!r}: not an http(s) URL ({_COMMIT_URL_EXAMPLE})")
    return template


_HEX_COMMIT = re.compile(r"[0-9a-f]{4,64}")


def commit_address(commit: str | None, commit_url: str | None) -> str | None:
    """The commit's page, only for an http(s) template and a hexadecimal commit: a document's commit is
    untrusted text, and a ``javascript:`` link would run script when clicked."""
    if not commit or not commit_url or not _HEX_COMMIT.fullmatch(commit):
        return None
    url = commit_url.format(commit=commit)
    return url if url.lower().startswith(("https://", "http://")) else None


def commit_link(commit: str | None, commit_url: str | None) -> str:
    """``<code>abc1234</code>``, linked when a URL template (``...{commit}``) is known."""
    text = f"<code title='{e(commit or 'unknown commit')}'>{e(short_commit(commit))}</code>"
    url = commit_address(commit, commit_url)
    return f"<a href='{e(url)}'>{text}</a>" if url else text


def commit_href(commit_url: str | None) -> Callable[[str | None], str | None]:
    """A commit -> URL function for charts (``None`` without a template)."""
    return lambda commit: commit_address(commit, commit_url)


def load_badge(result: Result) -> str:
    """`` LOADED`` (with the idle-control figures on hover) for a run measured on a loaded machine;
    empty for a quiet one."""
    load = result.load
    return f" <span class='loaded' title='{e(load.describe())}'>LOADED</span>" if load.loaded else ""


def reference_reason(result: Result, mode: str) -> str | None:
    """Why ``mode`` is a by-design reference (a recipe mode's ``reference = "why"``), else ``None``.

    Read from the results document: the mode's own ``reference``, its verdict's, or the resolved recipe's.
    """
    data = result.data
    body: Mapping[str, Any] = (data.get("modes") or {}).get(mode) or {}
    recipe_mode: Mapping[str, Any] = ((data.get("recipe") or {}).get("modes") or {}).get(mode) or {}
    for value in (body.get("reference"), (body.get("verdict") or {}).get("reference"), recipe_mode.get("reference")):
        if isinstance(value, str) and value.strip():
            return value.strip()
        if value is True:
            return "a reference by design"
    return None


def references(result: Result) -> dict[str, str]:
    """Every reference mode of a run with its reason."""
    return {m: r for m in result.modes if (r := reference_reason(result, m)) is not None}


def verdict_html(result: Result, mode: str) -> str:
    """The M7 verdict of one mode as HTML: met (green), missed (red), or the reference reason (grey)."""
    reason = reference_reason(result, mode)
    if reason is not None:
        return f"<span class='reference' title='{e(reason)}'>reference: {e(reason)}</span>"
    v = result.data["modes"][mode]["verdict"]
    if v.get("met") is None:
        return "<span class='dim'>no verdict</span>"
    if v["met"]:
        return f"<span class='met'>met &le; {v['target_ms']:g} ms</span>"
    return f"<span class='missed'>missed {v['missed']}/{v.get('samples', '?')}</span>"
