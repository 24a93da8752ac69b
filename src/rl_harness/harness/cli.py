"""`rl-harness TARGET [options]` runs a recipe; plain words are tool subcommands.

Imports stay lazy so `--help` answers at once.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path

from rl_harness.harness.cliargs import OneLineParser, UsageError, fail
from rl_harness.harness.hardware import PROFILE_NAMES as PROFILES
from rl_harness.harness.locations import is_uri
from rl_harness.harness.mirrors import LOG_TARGETS

# word -> (module, function, help); each function takes argv and returns an exit code.
TOOLS: dict[str, tuple[str, str, str]] = {
    "new": ("rl_harness.harness.scaffold", "main", "scaffold a fresh experiment repo"),
    "runs": ("rl_harness.harness.runtools", "runs_main", "table of runs under a folder"),
    "show": ("rl_harness.harness.runtools", "show_main", "one run's provenance and metrics"),
    "diff": ("rl_harness.harness.runtools", "diff_main", "what differs between two runs"),
    "reproduce": ("rl_harness.harness.runtools", "reproduce_main", "re-run a run and compare"),
    "compare": ("rl_harness.analysis.comparison", "compare_main", "arms x seeds table of runs"),
    "upload": ("rl_harness.harness.storage", "upload_main", "mirror a run's artifacts to B2"),
    "download": ("rl_harness.harness.storage", "download_main", "fetch a run's artifacts"),
    "vast": ("rl_harness.devops.vast.cli", "main", "rent vast.ai GPUs for recipe runs"),
}


def _seed(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"seed must be an integer, got {text!r}") from None
    if not 0 <= value <= 2**32 - 1:
        raise argparse.ArgumentTypeError(f"seed must be in [0, 2**32 - 1], got {value}")
    return value


def _existing_path(text: str) -> Path | str:
    if is_uri(text):  # e.g. a Tune experiment on the bucket (docs/multi_node.md): kept as text
        return text
    path = Path(text).expanduser()
    if not path.exists():
        raise argparse.ArgumentTypeError(f"resume path does not exist: {text}")
    return path.resolve()


def recipe_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="rl-harness",
        description="Run a recipe (a module or file with run(context)), with provenance.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="tools:\n"
        + "\n".join(f"  rl-harness {word:<10} {text}" for word, (_, _, text) in TOOLS.items()),
    )
    parser.add_argument(
        "target",
        metavar="TARGET",
        help="dotted module path (experiments.study.leaf.experiment) or path to an experiment.py",
    )
    parser.add_argument("--seed", type=_seed, default=42, help="root seed (default 42)")
    parser.add_argument("--smoke", action="store_true", help="tiny budget: check the recipe runs")
    parser.add_argument(
        "--resume-from",
        type=_existing_path,
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
        choices=PROFILES,
        default="cpu-local",
        metavar="NAME",
        help=f"one of {', '.join(PROFILES)} (default cpu-local)",
    )
    parser.add_argument(
        "--results-dir",
        type=Path,
        metavar="DIR",
        help="parent of results/<run-id>/ (default <leaf>/results)",
    )
    parser.add_argument(
        "--artifacts-dir",
        type=Path,
        metavar="DIR",
        help="parent of artifacts/<run-id>/ (default <leaf>/artifacts)",
    )
    parser.add_argument("--run-id", metavar="ID", help="explicit run id (default: fresh)")
    parser.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="connect to an existing Ray cluster (default: $RAY_ADDRESS, else local)",
    )
    parser.add_argument(
        "--log-to",
        action="append",
        choices=LOG_TARGETS,
        default=[],
        metavar="NAME",
        help="also mirror metrics rows to tensorboard, mlflow or wandb (offline); repeatable",
    )
    upload = parser.add_mutually_exclusive_group()
    upload.add_argument(
        "--upload-artifacts",
        dest="upload",
        action="store_const",
        const="always",
        help="mirror artifacts/ to B2 at the end (error if B2 is not configured)",
    )
    upload.add_argument(
        "--no-upload-artifacts",
        dest="upload",
        action="store_const",
        const="never",
        help="never mirror artifacts/ (default: when configured)",
    )
    parser.set_defaults(upload="auto")
    return parser


def _check_unknown_choice(message: str) -> str:
    if "--hardware-profile" in message and "invalid choice" in message:
        return message.replace("invalid choice", "unknown hardware profile")
    return message


def _run_tool(word: str, argv: list[str]) -> int:
    module_name, function, _ = TOOLS[word]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and module_name.startswith(error.name):
            return fail(f"'{word}' is not available in this installation")
        raise
    return int(getattr(module, function)(argv) or 0)


def _valid_run_id(run_id: str) -> bool:
    return bool(run_id) and all(c.isalnum() or c in "-_." for c in run_id) and run_id[0] != "."


def main(argv: list[str] | None = None) -> int:
    process_exits = argv is None  # the console script: the process ends with this call
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in TOOLS:
        return _run_tool(argv[0], argv[1:])
    parser = recipe_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as error:
        return fail(_check_unknown_choice(str(error)))
    if args.run_id is not None and not _valid_run_id(args.run_id):
        return fail(f"run id may hold letters, digits, '-', '_' and '.', got {args.run_id!r}")

    from rl_harness.harness.lifecycle import RunOptions, execute_recipe
    from rl_harness.harness.recipe import RecipeError, load_recipe

    options = RunOptions(
        seed=args.seed,
        smoke=args.smoke,
        resume_from=args.resume_from,
        hardware_profile=args.hardware_profile,
        results_dir=args.results_dir,
        artifacts_dir=args.artifacts_dir,
        run_id=args.run_id,
        ray_address=args.ray_address or os.environ.get("RAY_ADDRESS") or None,
        upload_artifacts=args.upload,
        log_to=tuple(dict.fromkeys(args.log_to)),
        verbose=args.verbose,
    )
    from rl_harness.harness.console import configure_logging

    configure_logging(verbose=args.verbose)
    if options.ray_address is None:
        from rl_harness.harness.rayinit import prefer_driver_environment

        prefer_driver_environment()  # before the recipe imports Ray
    try:
        recipe = load_recipe(args.target)
    except RecipeError as error:
        return fail(str(error))
    except Exception as error:  # the recipe module itself failed to import
        return fail(f"importing {args.target} failed: {type(error).__name__}: {error}")
    try:
        return execute_recipe(recipe, options, ["rl-harness", *argv], process_exits=process_exits)
    except (RecipeError, FileExistsError, ValueError) as error:  # options make_context refused
        return fail(str(error))


if __name__ == "__main__":
    sys.exit(main())
