"""The command reference (docs/commands.md) and the README's command table are what
scripts/dev/gen_cli_reference.py renders from the argument parsers, so neither can drift from the CLI."""

from __future__ import annotations

import importlib.util
import re

from perfsuite.cli import build_parser
from tests.docs.pages import ROOT, page

_spec = importlib.util.spec_from_file_location("gen_cli_reference", ROOT / "scripts" / "dev" / "gen_cli_reference.py")
assert _spec is not None and _spec.loader is not None
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)


def test_the_committed_reference_is_what_the_parsers_give() -> None:
    assert page("commands.md") == gen.render_page(build_parser()), "run python scripts/dev/gen_cli_reference.py"


def test_the_readme_table_is_what_the_parsers_give() -> None:
    readme = page("README.md")
    assert gen.replace_table(readme, gen.render_table(build_parser())) == readme, "run scripts/dev/gen_cli_reference.py"


def test_every_command_and_option_is_in_the_reference() -> None:
    text = page("commands.md")
    for name, _help, sub in gen._subcommands(build_parser()):
        assert f"## `perfsuite {name}`" in text
        assert f"`perfsuite {name}" in page("README.md")
        for action in sub._actions:
            if gen._shown(action) and action.option_strings:
                assert f"`{', '.join(action.option_strings)}`" in text, (name, action.option_strings)


def test_the_check_fails_when_an_option_is_added_and_says_what_to_run(capsys) -> None:
    parser = build_parser()
    [run] = [sub for name, _help, sub in gen._subcommands(parser) if name == "run"]
    run.add_argument("--brand-new", metavar="N", help="an option the page does not have yet")
    changed = gen.render_page(parser)
    assert changed != page("commands.md")
    assert re.search(r"\| `--brand-new` \| `N` \|  \| an option the page does not have yet \|", changed)
    assert gen.main(["--check"]) == 0 and capsys.readouterr().err == ""
