"""Argument parsing shared by the run tools: bad input is one line on stderr and exit code 2."""

from __future__ import annotations

import argparse

from rl_harness.harness.cliargs import EXIT_OK, EXIT_USAGE, fail
from rl_harness.harness.cliargs import OneLineParser as ToolParser
from rl_harness.harness.cliargs import UsageError as RunToolError

EXIT_DIFFERENT = 1
__all__ = ["EXIT_DIFFERENT", "EXIT_OK", "EXIT_USAGE", "RunToolError", "ToolParser", "fail"]


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0:  # also rejects nan
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value
