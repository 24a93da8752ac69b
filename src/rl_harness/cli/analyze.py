"""`rl-harness analyze TARGET [RUN...] [--stage NAME]`: a leaf's declared analysis stages
run on its finished runs (analysis/stages.py), each stage's provenance kept in the run's
analysis_provenance.json and a current stage skipped."""

from __future__ import annotations

import sys

from rl_harness.cli.args import EXIT_OK, OneLineParser, fail, parse


def parser() -> OneLineParser:
    parser = OneLineParser(
        prog="rl-harness analyze",
        description="Run a leaf's ANALYSIS_STAGES (the functions its run() calls after "
        "training) on finished runs: each stage writes its files into the run folder and its "
        "provenance (library commit, time, the sha256 of the inputs it read) into "
        "analysis_provenance.json; a stage whose provenance is current is skipped; a stage "
        "declared on request runs only when named by --stage.",
    )
    parser.add_argument("target", help="the leaf: a dotted module path or an experiment.py")
    parser.add_argument(
        "runs",
        nargs="*",
        metavar="RUN",
        help="results/<run-id> folders or run ids of the leaf (default: every completed run)",
    )
    parser.add_argument(
        "--stage",
        default=None,
        metavar="NAME",
        help="run only this stage (the way to run one declared on request)",
    )
    parser.add_argument(
        "--force", action="store_true", help="run the stages even where they are current"
    )
    parser.add_argument(
        "--allow-changes",
        action="store_true",
        help="analyse a run whose recipe, library or budget differs from what it ran with "
        "(the differences are kept in the provenance)",
    )
    return parser


def main(argv: list[str]) -> int:
    args = parse(parser(), argv)
    if isinstance(args, int):
        return args
    prog = "rl-harness analyze"
    from rl_harness.analysis.stages import (
        StageError,
        check_checkpoints,
        leaf_runs,
        leaf_stages,
        reopen_for,
        run_stages,
        select_stages,
    )
    from rl_harness.harness.hardware import apply_torch_threads
    from rl_harness.harness.recipe import RecipeError, load_recipe

    try:
        recipe = load_recipe(args.target)
        assert recipe.module is not None
        stages = leaf_stages(recipe.module)
        selected = select_stages(stages, args.stage)
        # Every run checked before any stage runs: a bad one fails the call with no work done.
        reopened = [
            reopen_for(recipe.module, folder, allow_changes=args.allow_changes)
            for folder in leaf_runs(recipe.module, args.runs)
        ]
        for run in reopened:
            check_checkpoints(run, selected)
    except (RecipeError, StageError) as error:
        return fail(str(error), prog=prog)
    for run in reopened:
        if run.machine is not None:  # not an error: what the stages recompute may round apart
            print(f"{prog}: note: {run.record.run_id}: {run.machine}", file=sys.stderr)
    for run in reopened:
        # The torch threads the run had (its hardware plan), as the harness sets them in-run.
        apply_torch_threads(run.context.hardware)
        try:
            run_stages(
                run.context,
                stages,
                only=args.stage,
                force=args.force,
                differences=run.differences,
            )
        except StageError as error:
            return fail(str(error), prog=prog)
    return EXIT_OK
