"""What every `rl-harness` command shares: one parser class, bad input as one line on stderr
with exit code 2, and a few argument types."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import NoReturn

from rl_harness.harness.interrupts import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from rl_harness.harness.redaction import redact_env

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "OneLineParser",
    "UsageError",
    "fail",
    "parse",
    "positive_float",
]


class UsageError(ValueError):
    """Bad input: printed as one `PROG: error: ...` line, no traceback, exit code 2."""


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors raise UsageError instead of printing usage and exiting
    (its subcommand parsers are OneLineParsers too)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def fail(
    message: str,
    *,
    prog: str = "rl-harness",
    code: int = EXIT_USAGE,
    secrets: Iterable[str] = (),
) -> int:
    """Print one redacted error line and return the exit code."""
    print(f"{prog}: error: {redact_env(message, extra=secrets)}", file=sys.stderr)
    return code


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace | int:
    """The parsed arguments, or the exit code: 2 after one error line, 0 after --help."""
    try:
        return parser.parse_args(argv)
    except UsageError as error:
        return fail(str(error), prog=parser.prog)
    except SystemExit as done:  # --help (argparse prints it and exits 0)
        return int(done.code or 0)


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0:  # also rejects nan
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value
