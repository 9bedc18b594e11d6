"""The command line's synopsis: `pmutop --help` and the README's usage block are made from the same parsers and
list every command and option (pmutop.app.usage)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from pmutop.app import usage
from pmutop.app.main import main
from pmutop.app.options import run_parser

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_usage_block_is_the_parsers_synopsis() -> None:
    text = README.read_text(encoding="utf-8")
    start, end = text.index(usage.README_START), text.index(usage.README_END) + len(usage.README_END)
    # On a difference: `python -m pmutop.app.usage --readme README.md` writes the current block.
    assert text[start:end] == usage.readme_block()


def test_the_synopsis_lists_every_command_and_option() -> None:
    text = usage.synopsis()
    lines = [line for line in text.splitlines() if line.startswith("pmutop ")]
    commands = [line.split()[1] for line in lines]
    assert commands == ["[-h]", "[options]", "serve", "info", "events", "selftest", "replay", "diff", "restore"]
    main_block = text.split("pmutop [options]")[0]
    for option in ("--pid", "--tasks", "--cgroups", "--cgroup", "--top", "--prometheus", "--connect", "--record"):
        assert f"[{option} " in main_block or f"[{option}]" in main_block, option
    assert "pmutop [options] -- COMMAND [ARGS]" in lines
    assert all(len(line) <= usage.WIDTH for line in text.splitlines())
    for make in (run_parser, *usage.COMMANDS):
        parser = make()
        block = usage.usage_of(parser)
        for action in parser._actions:
            if action.option_strings:  # argparse's usage names an option by its first spelling (-h, not --help)
                assert action.option_strings[0] in block, (parser.prog, action.option_strings)


def test_help_ends_with_the_same_synopsis(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", str(usage.WIDTH + 2))  # argparse wraps at the terminal's width - 2
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert usage.commands_synopsis() in out
    assert " ".join(out.split("\n\n")[0].split()) == "usage: " + " ".join(usage.usage_of(run_parser()).split())


def test_the_block_is_rewritten_in_place(tmp_path: Path) -> None:
    stale = f"intro\n{usage.README_START}\n```\npmutop [--old]\n```\n{usage.README_END}\nrest\n"
    readme = tmp_path / "README.md"
    readme.write_text(stale)
    assert usage.main(["--readme", str(readme)]) == 0
    assert readme.read_text() == f"intro\n{usage.readme_block()}\nrest\n"
    with pytest.raises(ValueError, match="no usage block"):
        usage.replace_block("no block here")


def test_help_parses_as_the_options_do() -> None:
    assert isinstance(usage.main_parser(), argparse.ArgumentParser)
    assert usage.main_parser().parse_args(["--demo", "--batch"]).demo
