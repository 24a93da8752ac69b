"""Argument parsing shared by the run tools: bad input is one line on stderr and exit code 2."""

from __future__ import annotations

import argparse
import sys

EXIT_OK, EXIT_DIFFERENT, EXIT_USAGE = 0, 1, 2


class RunToolError(ValueError):
    """Bad input (no such run, unreadable manifest): printed as one line, exit code 2."""


class ToolParser(argparse.ArgumentParser):
    def error(self, message: str):  # one clean line instead of usage + message
        raise RunToolError(message)


def fail(message: str) -> int:
    print(f"rl-harness: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0:  # also rejects nan
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value
