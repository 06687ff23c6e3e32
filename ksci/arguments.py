"""ksci's argument parsers: a bad argument is one line on stderr with exit code 2, naming the command whose
`--help` lists its options (the usage itself is printed only with --help); no option is taken by an abbreviation
(`--generation 2` is refused, not read as --generations)."""

from __future__ import annotations

import argparse
from typing import NoReturn

from ksci.commands import EXIT_BAD_INPUT


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line; its sub-commands' parsers are of this class too (argparse makes
    them of their parent's class)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """The arguments; unknown ones are refused in one line by the parser of the sub-command they were given to
    (argparse's own refusal names only the top-level command)."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        command = _subparser(parser, getattr(args, "command", None)) or parser
        command.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def _subparser(parser: argparse.ArgumentParser, name: str | None) -> argparse.ArgumentParser | None:
    for action in parser._subparsers._group_actions if parser._subparsers else []:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            return action.choices[name]
    return None
