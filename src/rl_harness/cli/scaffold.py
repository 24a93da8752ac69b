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
    return parser


def main(argv: list[str]) -> int:
    from rl_harness.harness.scaffold import LEAF_MODULE, ScaffoldError, scaffold

    try:
        args = parser().parse_args(argv)
        plan = scaffold(Path(args.path), name=args.name)
    except (UsageError, ScaffoldError) as error:
        return fail(str(error))
    source = plan.library_source or "your package index (plain dependency)"
    print(f"created {plan.root} ({plan.name}); rl-harness from {source}")
    print(f"next: cd {plan.root} && uv sync && uv run rl-harness {LEAF_MODULE} --smoke")
    return EXIT_OK
