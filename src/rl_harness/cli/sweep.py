"""`rl-harness sweep TARGET... --seeds 0 1 2 [run options]`: arms x seeds, in parallel, each
run a child `rl-harness TARGET --seed S` with its full records (harness/sweep.py)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from rl_harness.cli import run as run_command
from rl_harness.cli.args import EXIT_FAILED, EXIT_OK, OneLineParser, UsageError, fail

PROG = "rl-harness sweep"
# The sweep's own options and how many values each takes; every other option is a run
# option, checked by the run parser and passed to each run verbatim.
OWN = {"--seeds": "+", "--cpus-per-run": 1, "--ray-address": 1, "--then": 1}
PER_RUN = ("--seed", "--run-id", "--resume-from")  # the sweep sets or forbids these per run


def parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=PROG,
        description=(
            "Run each TARGET at each seed, in parallel, each run with the records of a run "
            "made alone (its own process and Ray). Runs already completed with the same "
            "recipe, seed and options are skipped, so rerunning does only what is missing. "
            "Any other option (--smoke, --hardware-profile, --results-dir, ...) is passed "
            "to every run."
        ),
    )
    parser.add_argument("targets", nargs="+", metavar="TARGET", help="recipes (the arms)")
    parser.add_argument(
        "--seeds", nargs="+", type=run_command.seed_number, required=True, help="root seeds"
    )
    parser.add_argument(
        "--cpus-per-run",
        dest="cpus_per_run",
        type=float,
        default=1.0,
        metavar="N",
        help="CPUs each run declares: runs at a time = CPUs / N (default 1)",
    )
    parser.add_argument(
        "--ray-address",
        dest="ray_address",
        metavar="ADDR",
        help="schedule the runs as Ray tasks on this cluster (default $RAY_ADDRESS, else "
        "local processes)",
    )
    parser.add_argument(
        "--then", metavar="TARGET", help="run this recipe (a synthesis leaf) once all completed"
    )
    return parser


def split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """(the sweep's own arguments and the targets, the run options to pass through)."""
    run_options = run_command.parser()._option_string_actions  # argparse has no public map
    own: list[str] = []
    passthrough: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        name = word.split("=", 1)[0]
        i += 1
        if name in OWN or name in ("-h", "--help"):
            own.append(word)
            if "=" in word or name in ("-h", "--help"):
                continue
            if OWN[name] == "+":
                while i < len(argv) and not argv[i].startswith("-"):
                    own.append(argv[i])
                    i += 1
            elif i < len(argv):
                own.append(argv[i])
                i += 1
        elif word.startswith("-"):
            if name in PER_RUN:
                raise UsageError(f"{name} is not a sweep option (the sweep sets each run's)")
            action = run_options.get(name)
            if action is None:
                raise UsageError(f"unrecognized option {word} (not a sweep or run option)")
            passthrough.append(word)
            if "=" not in word and action.nargs != 0 and i < len(argv):
                passthrough.append(argv[i])
                i += 1
        else:
            own.append(word)
    return own, passthrough


def _row(run, now: float) -> list[str]:
    from rl_harness.harness.console import duration_text

    elapsed = run.elapsed(now)
    return [
        run.target,
        str(run.seed),
        run.status,
        run.run_id or "-",
        duration_text(elapsed) if elapsed is not None else "-",
    ]


HEADER = ["target", "seed", "status", "run id", "elapsed"]


class Table:
    """The live progress table: redrawn in place on a terminal, else one line per change."""

    def __init__(self, runs, live: bool) -> None:
        self.runs, self.live, self.drawn = runs, live, 0

    def update(self, run) -> None:
        from rl_harness.harness.console import text_table

        now = time.monotonic()
        if not self.live:
            print("  ".join(_row(run, now)), flush=True)
            return
        text = text_table(HEADER, [_row(r, now) for r in self.runs])
        up = f"\x1b[{self.drawn}F\x1b[J" if self.drawn else ""
        sys.stdout.write(up + text + "\n")
        sys.stdout.flush()
        self.drawn = text.count("\n") + 1


def main(argv: list[str]) -> int:
    try:
        own, passthrough = split_argv(argv)
        args = parser().parse_args(own)
        if not args.cpus_per_run > 0:
            raise UsageError(f"--cpus-per-run must be > 0, got {args.cpus_per_run}")
        run_parser = run_command.parser()
        checked = run_parser.parse_args([args.targets[0], *passthrough])
    except UsageError as error:
        return fail(str(error), prog=PROG)
    except SystemExit as done:  # --help
        return int(done.code or 0)

    from dataclasses import replace

    from rl_harness.harness import sweep
    from rl_harness.harness.console import stdout_is_terminal, text_table
    from rl_harness.harness.context import validate_seed
    from rl_harness.harness.recipe import RecipeError

    base = run_command.options_of(checked)
    try:
        for seed in args.seeds:
            validate_seed(seed)
        runs = sweep.plan_runs(
            args.targets,
            args.seeds,
            lambda target, seed: replace(base, seed=seed).checked(),
            passthrough,
        )
        if args.then is not None:
            sweep.recipe_file(args.then)
    except (RecipeError, ValueError) as error:
        return fail(str(error), prog=PROG)

    address = args.ray_address or os.environ.get("RAY_ADDRESS") or None
    plan = sweep.Sweep(runs, cpus_per_run=args.cpus_per_run, ray_address=address)
    where = f"Ray cluster {address}" if address else "local processes"
    print(f"{len(runs)} runs ({len(args.targets)} x {len(args.seeds)} seeds) on {where}")
    table = Table(runs, live=stdout_is_terminal())
    sweep.execute(plan, table.update)
    now = time.monotonic()
    if table.live:
        print()
    else:
        print(text_table(HEADER, [_row(r, now) for r in runs]))
    failed = [r for r in runs if r.status not in (sweep.COMPLETED, sweep.DONE_BEFORE)]
    for run in failed:
        print(f"{run.target} seed {run.seed}: {run.status}, console in {run.console_log}")
    if failed:
        if args.then is not None:
            print(f"not running {args.then}: {len(failed)} of {len(runs)} runs did not complete")
        return EXIT_FAILED
    if args.then is None:
        return EXIT_OK
    command = [sys.executable, "-m", "rl_harness.cli", args.then, *passthrough]
    return subprocess.run(command, env=sweep.child_environment({}), check=False).returncode
