"""`rl-harness`: the command line, one layer above all others.

`rl-harness TARGET [options]` runs a recipe (run.py); plain words are tool subcommands, each
a `main(argv) -> int` here: `new` (scaffold.py), `runs`, `show`, `diff`, `reproduce`
(runs.py), `sweep` (sweep.py), `compare` (compare.py), `analyze` (analyze.py), `upload`,
`download` (storage.py),
`vast` (vast.py).
Every command parses with `args.OneLineParser`: bad input is one `PROG: error: ...` line on
stderr and exit code 2. The commands import what they run inside `main`, so `--help` stays
fast; nothing in the library imports this package.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from rl_harness.cli import analyze, compare, runs, scaffold, storage, sweep, vast
from rl_harness.cli import run as run_command

Main = Callable[[list[str]], int]

# word -> (its main, one line of help); each main takes argv and returns an exit code.
TOOLS: dict[str, tuple[Main, str]] = {
    "new": (scaffold.main, "scaffold a fresh experiment repo"),
    "runs": (runs.runs_main, "table of runs under a folder"),
    "show": (runs.show_main, "one run's provenance and metrics"),
    "diff": (runs.diff_main, "what differs between two runs"),
    "reproduce": (runs.reproduce_main, "re-run a run and compare"),
    "sweep": (sweep.main, "run arms x seeds in parallel, resuming"),
    "compare": (compare.main, "arms x seeds table of runs"),
    "analyze": (analyze.main, "run a leaf's analysis stages on finished runs"),
    "upload": (storage.upload_main, "mirror a run's artifacts to B2"),
    "download": (storage.download_main, "fetch a run's artifacts"),
    "vast": (vast.main, "rent vast.ai GPUs for recipe runs"),
}


def tools_epilog() -> str:
    return "tools:\n" + "\n".join(
        f"  rl-harness {word:<10} {text}" for word, (_, text) in TOOLS.items()
    )


def main(argv: list[str] | None = None) -> int:
    """The `rl-harness` console script (and `python -m rl_harness.cli`)."""
    process_exits = argv is None  # the console script: the process ends with this call
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] in TOOLS:
            tool, _ = TOOLS[argv[0]]
            code = int(tool(argv[1:]) or 0)
        else:
            code = run_command.main(argv, process_exits=process_exits, tools_epilog=tools_epilog())
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at exit
        return code
    except BrokenPipeError:  # `rl-harness runs | head`: the reader left; end quietly
        if not process_exits:
            raise
        # Python's recipe (signal module docs, "Note on SIGPIPE"): stdout to devnull, so the
        # interpreter's last flush cannot fail again; exit code 1, as Python's own.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
