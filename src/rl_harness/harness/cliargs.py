"""What every `rl-harness` command shares: bad input is one line on stderr and exit code 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable

from rl_harness.harness.interrupts import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from rl_harness.harness.redaction import redact_env

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "OneLineParser", "UsageError", "fail"]


class UsageError(ValueError):
    """Bad input: printed as one `PROG: error: ...` line, no traceback, exit code 2."""


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors raise UsageError instead of printing usage and exiting."""

    def error(self, message: str):
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
