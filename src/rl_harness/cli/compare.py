"""`rl-harness compare PATH...`: arms x seeds table of completed runs (analysis/comparison.py)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from rl_harness.analysis.comparison import (
    PROBE_FILE,
    RETURN_PER_STEP,
    ComparisonError,
    compare_runs,
    comparison_text,
    write_comparison,
)
from rl_harness.cli.args import EXIT_OK, OneLineParser, UsageError, fail


def parse_where(items: Sequence[str]) -> dict[str, str]:
    """`KEY=VALUE` texts -> {KEY: VALUE}; UsageError for one without `=`."""
    where = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--where takes KEY=VALUE (a config.json key), got {item!r}")
        where[key] = value
    return where


def parser() -> OneLineParser:
    parser = OneLineParser(
        prog="rl-harness compare",
        description="Compare the completed runs under run or study folders: one row per "
        "experiment leaf (arm), mean and 95% interval across runs (seeds) per metric. "
        f"Default metrics: {RETURN_PER_STEP} and every pooled R² in {PROBE_FILE}.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="run folders or study folders")
    parser.add_argument(
        "--metric",
        action="append",
        metavar="KEY",
        help=f"{RETURN_PER_STEP}, a metrics.jsonl key, or FILE.json:path/in/it (repeatable)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--out", type=Path, metavar="DIR", help="write Markdown, JSON and PNG")
    parser.add_argument(
        "--group-by",
        action="append",
        default=[],
        metavar="KEY",
        help="split each arm by a config.json key, e.g. lr or env_config.episode_length",
    )
    parser.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only runs whose config.json has this value, e.g. lr=0.001 (repeatable)",
    )
    parser.add_argument(
        "--allow-mixed",
        action="store_true",
        help="compare runs of different library commits (budgets: --allow-mixed-budgets)",
    )
    parser.add_argument(
        "--allow-mixed-budgets",
        action="store_true",
        help="pool runs of different budgets (smoke with non-smoke too); refused by default",
    )
    return parser


def main(argv: list[str]) -> int:
    try:
        args = parser().parse_args(argv)
        comparison = compare_runs(
            args.paths,
            args.metric,
            allow_mixed=args.allow_mixed,
            allow_mixed_budgets=args.allow_mixed_budgets,
            group_by=args.group_by,
            where=parse_where(args.where),
        )
    except (UsageError, ComparisonError) as error:
        return fail(str(error))
    for line in comparison.unreadable:  # also in the notes; named on stderr as they happen
        print(f"rl-harness compare: warning: {line}", file=sys.stderr)
    if args.json:
        print(json.dumps(comparison.to_dict(), indent=2))
    else:
        print(comparison_text(comparison))
    if args.out is not None:
        written = write_comparison(comparison, args.out)
        print("wrote " + ", ".join(str(p) for p in written), file=sys.stderr)
    return EXIT_OK
