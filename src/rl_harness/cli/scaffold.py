"""`rl-harness new PATH`: scaffold a personal experiment repo (harness/scaffold.py)."""

from __future__ import annotations

from pathlib import Path

from rl_harness.cli.args import EXIT_OK, OneLineParser, UsageError, fail


def parser() -> OneLineParser:
    parser = OneLineParser(
        prog="rl-harness new",
        description="Scaffold a personal experiment repo at PATH (git repo, uv project, "
        "package `experiments`, example leaf), without network.",
    )
    parser.add_argument("path", metavar="PATH", help="a new or empty folder")
    parser.add_argument("--name", help="project name (default: the folder name)")
    parser.add_argument(
        "--template",
        default="cartpole",
        metavar="NAME",
        help="leaf to add beside the CartPole example: cartpole (none), hmm-probe (PPO on "
        "MESS3/Z1R/RRXOR next tokens, probe of the belief)",
    )
    return parser


def main(argv: list[str]) -> int:
    from rl_harness.harness.scaffold import ScaffoldError, scaffold

    try:
        args = parser().parse_args(argv)
        plan = scaffold(Path(args.path), name=args.name, template=args.template)
    except (UsageError, ScaffoldError) as error:
        return fail(str(error))
    source = plan.library_source or "your package index (plain dependency)"
    print(f"created {plan.root} ({plan.name}); rl-harness from {source}")
    print(f"next: cd {plan.root} && uv sync && uv run rl-harness {plan.leaf_module} --smoke")
    return EXIT_OK
