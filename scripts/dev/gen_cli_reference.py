"""Write the command reference (``docs/commands.md``) and the README's one-line-per-command table from the
argument parsers themselves (:func:`perfsuite.cli.build_parser`), so neither can drift from the CLI.

    python scripts/dev/gen_cli_reference.py           # rewrite docs/commands.md and the README's table
    python scripts/dev/gen_cli_reference.py --check   # exit 1 naming what differs (tests/docs/test_commands_page.py)

The page is rendered from the parsers' structure (names, metavars, choices, defaults, help), never from
``format_help()``, whose layout changes with the terminal width and the Python version.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "commands.md"
README = ROOT / "README.md"
BEGIN = "<!-- commands: scripts/dev/gen_cli_reference.py writes this table -->"
END = "<!-- /commands -->"
_PIPE = "\\|"  # GitHub's tables split a cell at a bare pipe even inside a code span
_PLAIN_GROUPS = {"positional arguments", "options", "optional arguments"}


def _cell(text: str) -> str:
    """``text`` safe in a Markdown table cell: outside code spans, pipes and angle brackets are escaped."""
    parts = re.split(r"(`[^`]*`)", " ".join(text.split()))
    out = []
    for part in parts:
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append(part)
        else:
            out.append(part.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
                       .replace("*", "\\*"))
    return "".join(out)


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """``(name, one-line help, parser)`` of each subcommand, in the order they were registered."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


def _value(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    if action.metavar is not None:
        metavar = action.metavar
        return " ".join(metavar) if isinstance(metavar, tuple) else str(metavar)
    if action.choices is not None:
        return "|".join(str(c) for c in action.choices)
    return action.dest.upper() if action.option_strings else action.dest


def _positional(action: argparse.Action) -> str:
    name = _value(action)
    return {"?": f"[{name}]", "*": f"[{name} ...]", "+": f"{name} [{name} ...]",
            argparse.REMAINDER: f"[{name} ...]"}.get(action.nargs, name)  # type: ignore[arg-type]


def _default(action: argparse.Action) -> str:
    default = action.default
    if action.nargs == 0 or default is None or default is argparse.SUPPRESS or default is False or default == []:
        return ""
    if isinstance(default, (list, tuple)):
        return ", ".join(str(d) for d in default)
    return str(default)


def _help(action: argparse.Action, prog: str) -> str:
    if not action.help:
        return ""
    try:
        return argparse.HelpFormatter(prog)._expand_help(action)
    except (KeyError, TypeError, ValueError):
        return action.help


def _shown(action: argparse.Action) -> bool:
    return not (isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))
                or action.help == argparse.SUPPRESS or action.dest == "verbosity")


def _usage(prog: str, parser: argparse.ArgumentParser) -> str:
    words = [prog]
    if any(_shown(a) and a.option_strings for a in parser._actions):
        words.append("[options]")
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            words.append(f"{action.metavar or 'COMMAND'} ...")
        elif _shown(action) and not action.option_strings:
            words.append(_positional(action))
    return " ".join(words)


def _tables(parser: argparse.ArgumentParser, prog: str) -> list[str]:
    lines: list[str] = []
    plain = [a for g in parser._action_groups if g.title in _PLAIN_GROUPS or not g.title for a in g._group_actions]
    groups = [(None, plain)] + [(g, g._group_actions) for g in parser._action_groups
                                if g.title and g.title not in _PLAIN_GROUPS]
    for group, members in groups:
        actions = [a for a in members if _shown(a)]
        if not actions:
            continue
        if group is not None:
            lines += [f"*{_cell(group.title or '')}*" + (f": {_cell(group.description)}" if group.description else ""),
                      ""]
        lines += ["| argument | value | default | what |", "|---|---|---|---|"]
        for action in actions:
            name = ", ".join(action.option_strings) or _positional(action)
            value = _value(action) if action.option_strings else ""
            required = " (required)" if action.option_strings and action.required else ""
            default = _default(action)
            lines.append(f"| `{name}` | {f'`{value}`' if value else ''} | {f'`{default}`' if default else ''} | "
                         f"{_cell(_help(action, prog))}{required} |")
        lines.append("")
    return lines


def _section(prog: str, summary: str, parser: argparse.ArgumentParser, level: int) -> list[str]:
    lines = [f"{'#' * level} `{prog}`", ""]
    if summary:
        lines += [_cell(summary[:1].upper() + summary[1:]) + ".", ""]
    if parser.description and parser.description != summary:
        lines += [_cell(parser.description), ""]
    lines += ["```text", _usage(prog, parser), "```", ""]
    lines += _tables(parser, prog)
    for name, help_text, sub in _subcommands(parser):
        lines += _section(f"{prog} {name}", help_text, sub, level + 1)
    return lines


def render_page(parser: argparse.ArgumentParser) -> str:
    """The whole of ``docs/commands.md``."""
    lines = ["# Command reference", "",
             "<!-- generated by scripts/dev/gen_cli_reference.py from perfsuite.cli.build_parser(): do not edit; "
             "tests/docs/test_commands_page.py checks it -->", "",
             "Every option of every command, read from the argument parsers (`perfsuite COMMAND --help` prints "
             "the same). What each command does, with measured examples, is in the pages on the left; the rules "
             "every command follows (bad input, limits, output formats) are in "
             "[Conventions](conventions.md).", ""]
    lines += _usage_global(parser)
    for name, help_text, sub in _subcommands(parser):
        lines += _section(f"perfsuite {name}", help_text, sub, 2)
    return "\n".join(lines).rstrip("\n") + "\n"


def _usage_global(parser: argparse.ArgumentParser) -> list[str]:
    lines = ["```text", "perfsuite [-q|-v] [--version] COMMAND ...", "```", ""]
    lines += ["| argument | what |", "|---|---|"]
    for action in parser._actions:
        if isinstance(action, (argparse._SubParsersAction, argparse._HelpAction)):
            continue
        lines.append(f"| `{', '.join(action.option_strings)}` | {_cell(_help(action, 'perfsuite'))} |")
    lines += ["", "`-q` and `-v` may also follow the command name.", ""]
    return lines


def render_table(parser: argparse.ArgumentParser) -> str:
    """The README's table: one line per command, linked to its section of the reference."""
    lines = ["| command | what it does |", "|---|---|"]
    for name, help_text, sub in _subcommands(parser):
        children = list(_subcommands(sub))
        shown = f"{name} {_PIPE.join(child for child, _, _ in children)}" if children else name
        lines.append(f"| `perfsuite {shown}` | {_cell(help_text)} |")
    return "\n".join(lines) + "\n"


def replace_table(readme: str, table: str) -> str:
    """``readme`` with the text between its commands markers replaced by ``table``."""
    head, sep, rest = readme.partition(BEGIN)
    _body, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise ValueError(f"README.md has no {BEGIN} ... {END} section")
    return f"{head}{BEGIN}\n{table}{END}{tail}"


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    from perfsuite.cli import build_parser

    parser = build_parser()
    readme = replace_table(README.read_text(encoding="utf-8"), render_table(parser))
    wanted = {PAGE: render_page(parser), README: readme}
    if "--check" in argv:
        stale = [str(path.relative_to(ROOT)) for path, text in wanted.items()
                 if not path.exists() or path.read_text(encoding="utf-8") != text]
        if stale:
            print(f"gen_cli_reference: out of date: {', '.join(stale)} (run python scripts/dev/gen_cli_reference.py)",
                  file=sys.stderr)
            return 1
        return 0
    for path, text in wanted.items():
        path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
