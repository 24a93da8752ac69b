"""`rl-harness sweep TARGET... --seeds 0 1 2 [--set KEY=A,B]... [run options]`: targets x
value arms x seeds, in parallel, each run a child `rl-harness TARGET --seed S --set KEY=A`
with its full records (harness/sweep.py)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from typing import TYPE_CHECKING

from rl_harness.cli import run as run_command
from rl_harness.cli.args import EXIT_FAILED, EXIT_OK, OneLineParser, UsageError, fail

if TYPE_CHECKING:
    from rl_harness.harness.context import RunOptions
    from rl_harness.harness.sweep import Arm, SweepRun

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
            "--set KEY=A,B sweeps values as well (as Hydra's multirun): one arm per value, "
            "the product over several keys, each arm x seed a full run with its --set in its "
            "manifest; a tuple setting takes its commas as one tuple (hidden=64,64), so "
            "tuples are swept in brackets: hidden=(64,64),(128,128). "
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


def without_set(passthrough: list[str]) -> list[str]:
    """The run options but `--set` (the sweep gives each run its arm's)."""
    kept, i = [], 0
    while i < len(passthrough):
        word = passthrough[i]
        if word == "--set":
            i += 2
            continue
        if not word.startswith("--set="):
            kept.append(word)
        i += 1
    return kept


def _row(run: SweepRun, now: float) -> list[str]:
    from rl_harness.harness.console import duration_text

    elapsed = run.elapsed(now)
    return [
        run.target,
        run.arm.label,
        str(run.seed),
        run.status,
        run.run_id or "-",
        duration_text(elapsed) if elapsed is not None else "-",
    ]


HEADER = ["target", "arm", "seed", "status", "run id", "elapsed"]


class Table:
    """The live progress table: redrawn in place on a terminal, else one line per change."""

    def __init__(self, runs: list[SweepRun], live: bool) -> None:
        self.runs, self.live, self.drawn = runs, live, 0

    def update(self, run: SweepRun) -> None:
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
        arms = value_arms(args.targets, base)
        runs = sweep.plan_runs(
            args.targets,
            args.seeds,
            lambda target, seed, arm: replace(base, seed=seed, overrides=arm.overrides).checked(),
            without_set(passthrough),
            arms,
        )
        if args.then is not None:
            sweep.recipe_file(args.then)
    except (RecipeError, ValueError) as error:
        return fail(str(error), prog=PROG)

    address = args.ray_address or os.environ.get("RAY_ADDRESS") or None
    plan = sweep.Sweep(runs, cpus_per_run=args.cpus_per_run, ray_address=address)
    where = f"Ray cluster {address}" if address else "local processes"
    grid = (
        f"{len(args.targets)} x {len(arms)} arms x " if len(arms) > 1 else f"{len(args.targets)} x "
    )
    print(f"{len(runs)} runs ({grid}{len(args.seeds)} seeds) on {where}")
    table = Table(runs, live=stdout_is_terminal())
    sweep.execute(plan, table.update)
    now = time.monotonic()
    if table.live:
        print()
    else:
        print(text_table(HEADER, [_row(r, now) for r in runs]))
    failed = [r for r in runs if r.status not in (sweep.COMPLETED, sweep.DONE_BEFORE)]
    for run in failed:
        arm = f" {run.arm.label}" if run.arm.swept else ""
        print(f"{run.target}{arm} seed {run.seed}: {run.status}, console in {run.console_log}")
    if len(arms) > 1:
        print(arm_report(runs, arms[0].swept))
    if failed:
        if args.then is not None:
            print(f"not running {args.then}: {len(failed)} of {len(runs)} runs did not complete")
        return EXIT_FAILED
    if args.then is None:
        return EXIT_OK
    # The synthesis gets the run options and the settings every arm shares, not the swept ones.
    shared = [word for text in arms[0].shared for word in ("--set", text)]
    then_argv = [*without_set(passthrough), *shared]
    command = [sys.executable, "-m", "rl_harness.cli", args.then, *then_argv]
    return subprocess.run(command, env=sweep.child_environment({}), check=False).returncode


def value_arms(targets: list[str], base: RunOptions) -> list[Arm]:
    """The arms of the run options' `--set` values (harness.sweep.plan_arms), each checked
    against every target's budget before any run starts (a value its setting cannot take, a
    key it does not have: one error line). Without `--set`, one arm and no recipe import."""
    from rl_harness.harness import sweep
    from rl_harness.harness.budgets import resolve_budget
    from rl_harness.harness.recipe import load_recipe

    if not base.overrides:
        return [sweep.Arm()]
    base = base.checked()
    recipes = [load_recipe(target) for target in targets]
    # The chosen budget's fields say which settings are tuples (a bad name fails here).
    first = recipes[0]
    settings = resolve_budget(first.declared, base.budget, (), owner=first.module_name).settings
    arms = sweep.plan_arms(base.overrides, settings)
    for recipe in recipes:
        for arm in arms:
            resolve_budget(recipe.declared, base.budget, arm.overrides, owner=recipe.module_name)
    return arms


def arm_report(runs: list[SweepRun], swept: tuple[str, ...]) -> str:
    """Per arm (target and swept values): runs completed of runs planned, and how to compare
    the arms (their config.json records the budget's settings)."""
    from rl_harness.harness import sweep

    lines = ["per arm:"]
    arms: dict[tuple[str, str], list[SweepRun]] = {}
    for run in runs:
        arms.setdefault((run.target, run.arm.label), []).append(run)
    for (target, label), members in arms.items():
        done = [r for r in members if r.status in (sweep.COMPLETED, sweep.DONE_BEFORE)]
        missing = [f"seed {r.seed} {r.status}" for r in members if r not in done]
        extra = f" ({', '.join(missing)})" if missing else ""
        lines.append(f"  {target} {label}: {len(done)}/{len(members)} completed{extra}")
    folders = sorted({str(r.results_base) for r in runs})
    group = " ".join(f"--group-by budget.settings.{key}" for key in swept)
    lines.append(f"compare the arms: rl-harness compare {' '.join(folders)} {group}")
    return "\n".join(lines)
