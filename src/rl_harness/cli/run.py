"""`rl-harness TARGET [options]`: run a recipe with provenance (harness/lifecycle.py).

The parser only parses: each flag fills the `RunOptions` field of its name (unset flags keep
the record's defaults), and `make_context` checks them all at once. Imports of the harness's
run machinery stay inside `main`, so `--help` answers at once.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import fields
from pathlib import Path

from rl_harness.cli.args import OneLineParser, UsageError, fail
from rl_harness.harness.context import DEFAULT_PROFILE, DEFAULT_SEED, RunOptions
from rl_harness.harness.hardware import PROFILE_NAMES
from rl_harness.harness.mirrors import LOG_TARGETS

PROG = "rl-harness"
_OPTIONS = {f.name for f in fields(RunOptions)}


def seed_number(text: str) -> int:
    """A seed as written: an integer (its range is checked with the other options)."""
    try:
        return int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"seed must be an integer, got {text!r}") from None


def parser(tools_epilog: str = "") -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=PROG,
        description="Run a recipe (a module or file with run(context)), with provenance.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=tools_epilog,
        argument_default=argparse.SUPPRESS,  # unset: RunOptions' default
    )
    parser.add_argument(
        "target",
        metavar="TARGET",
        help="dotted module path (experiments.study.leaf.experiment) or path to an experiment.py",
    )
    parser.add_argument(
        "--seed", type=seed_number, help=f"root seed in [0, 2**32 - 1] (default {DEFAULT_SEED})"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="tiny budget: check the recipe runs (--budget smoke)"
    )
    parser.add_argument(
        "--budget",
        metavar="NAME",
        help="one of the recipe's BUDGETS (default: its DEFAULT_BUDGET; see --show-settings)",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        metavar="KEY=VALUE",
        help="change one setting of the chosen budget, parsed by its type (repeatable)",
    )
    parser.add_argument(
        "--show-settings",
        dest="show_settings",
        action="store_true",
        help="list the recipe's budgets and their settings, then exit (starts nothing)",
    )
    parser.add_argument(
        "--resume-from",
        dest="resume_from",
        metavar="PATH",
        help="checkpoint (direct runner) or Tune experiment folder (or its s3:// URI) to continue",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show Ray's start-up notices and worker output, and debug lines",
    )
    parser.add_argument(
        "--hardware-profile",
        dest="hardware_profile",
        metavar="NAME",
        help=f"one of {', '.join(PROFILE_NAMES)} (default {DEFAULT_PROFILE})",
    )
    parser.add_argument(
        "--torch-threads",
        dest="torch_threads",
        type=int,
        metavar="N",
        help="torch's intra-op threads in the driver (default: one per core the hardware plan "
        "gives it; also $RL_HARNESS_TORCH_THREADS)",
    )
    parser.add_argument(
        "--results-dir",
        dest="results_dir",
        type=Path,
        metavar="DIR",
        help="parent of results/<run-id>/ (default <leaf>/results)",
    )
    parser.add_argument(
        "--artifacts-dir",
        dest="artifacts_dir",
        type=Path,
        metavar="DIR",
        help="parent of artifacts/<run-id>/ (default <leaf>/artifacts)",
    )
    parser.add_argument(
        "--run-id", dest="run_id", metavar="ID", help="explicit run id (default: fresh)"
    )
    parser.add_argument(
        "--ray-address",
        dest="ray_address",
        metavar="ADDR",
        help="connect to an existing Ray cluster (default: $RAY_ADDRESS, else local)",
    )
    parser.add_argument(
        "--log-to",
        dest="log_to",
        action="append",
        metavar="NAME",
        help=f"also mirror metrics rows to {', '.join(LOG_TARGETS)} (offline); repeatable",
    )
    upload = parser.add_mutually_exclusive_group()
    upload.add_argument(
        "--upload-artifacts",
        dest="upload_artifacts",
        action="store_const",
        const="always",
        help="mirror artifacts/ to B2 at the end (error if B2 is not configured)",
    )
    upload.add_argument(
        "--no-upload-artifacts",
        dest="upload_artifacts",
        action="store_const",
        const="never",
        help="never mirror artifacts/ (default: when configured)",
    )
    return parser


def options_of(args: argparse.Namespace) -> RunOptions:
    """The `RunOptions` the flags ask for; `$RAY_ADDRESS` when no --ray-address is given."""
    given = {name: value for name, value in vars(args).items() if name in _OPTIONS}
    for name in ("log_to", "overrides"):
        if name in given:
            given[name] = tuple(given[name])
    given.setdefault("ray_address", os.environ.get("RAY_ADDRESS") or None)
    return RunOptions(**given)


def show_settings(target: str, options: RunOptions) -> int:
    """`--show-settings`: the recipe's budgets and settings (and the chosen one's, with
    `--budget`/`--set` checked as a run would), printed; no folder, no Ray, no torch."""
    from rl_harness.harness.lifecycle import settings_for_show

    print(settings_for_show(target, options))
    return 0


def main(argv: list[str], *, process_exits: bool = False, tools_epilog: str = "") -> int:
    """Parse, load the recipe, run it (lifecycle.py); returns the exit code."""
    try:
        args = parser(tools_epilog).parse_args(argv)
    except UsageError as error:
        return fail(str(error))
    options = options_of(args)

    from rl_harness.harness.console import configure_logging
    from rl_harness.harness.lifecycle import execute_recipe
    from rl_harness.harness.recipe import RecipeError

    configure_logging(verbose=options.verbose)
    try:
        if getattr(args, "show_settings", False):
            return show_settings(args.target, options)
        return execute_recipe(args.target, options, [PROG, *argv], process_exits=process_exits)
    except (RecipeError, FileExistsError, ValueError) as error:  # bad target or options
        return fail(str(error))
