"""`rl-harness compare PATH...`: arms x seeds table of completed runs (analysis/comparison.py)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from rl_harness.analysis.comparison import (
    ALL_METRICS,
    DEFAULT_COUNT,
    LIBRARY_COMMIT_KEY,
    MAX_PANELS,
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
        "Default metrics: the HEADLINE keys the runs' recipes declare, else "
        f"{RETURN_PER_STEP} and the first pooled R²s in {PROBE_FILE} ({DEFAULT_COUNT} in "
        "all); --metrics all for every metric. A file that cannot be read (or a truncated "
        "metrics.jsonl row) is named in one warning line and the rest compared.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="run folders or study folders")
    parser.add_argument(
        "--metric",
        action="append",
        metavar="KEY",
        help=f"{RETURN_PER_STEP}, a metrics.jsonl key, or FILE.json:path/in/it (repeatable)",
    )
    parser.add_argument(
        "--metrics",
        metavar="all|KEY,KEY...",
        help="'all': every metric the runs record (HEADLINE, pooled R²s, result.json numbers, "
        "the final metrics.jsonl row); or comma-separated keys as --metric takes",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help=f"write comparison.md, .json and .png (a grid of the first {MAX_PANELS} metrics)",
    )
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
        help="only runs whose config.json has this value, e.g. lr=0.001 (repeatable); "
        f"{LIBRARY_COMMIT_KEY}=COMMIT is --library-commit",
    )
    parser.add_argument(
        "--library-commit",
        metavar="COMMIT",
        help="only runs of this library commit (a prefix, as `rl-harness runs` shows it)",
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


def chosen_metrics(metric: list[str] | None, metrics: str | None) -> list[str] | str | None:
    """`--metric KEY`... or `--metrics all|KEY,KEY`; None: the default handful."""
    if metrics is None:
        return metric
    if metric:
        raise UsageError("give --metrics or --metric, not both")
    if metrics.strip() == ALL_METRICS:
        return ALL_METRICS
    keys = [key.strip() for key in metrics.split(",")]
    if not all(keys):
        raise UsageError(f"--metrics takes 'all' or comma-separated keys, got {metrics!r}")
    return keys


def main(argv: list[str]) -> int:
    try:
        args = parser().parse_args(argv)
        comparison = compare_runs(
            args.paths,
            chosen_metrics(args.metric, args.metrics),
            allow_mixed=args.allow_mixed,
            allow_mixed_budgets=args.allow_mixed_budgets,
            group_by=args.group_by,
            where=parse_where(args.where),
            library_commit=args.library_commit,
        )
    except (UsageError, ComparisonError) as error:
        return fail(str(error))
    # Also in the notes; named on stderr, one line each, before the table.
    for line in [*comparison.unreadable, *comparison.warnings]:
        print(f"rl-harness compare: warning: {line}", file=sys.stderr)
    if args.json:
        print(json.dumps(comparison.to_dict(), indent=2))
    else:
        print(comparison_text(comparison))
    if args.out is not None:
        written = write_comparison(comparison, args.out)
        print("wrote " + ", ".join(str(p) for p in written), file=sys.stderr)
    return EXIT_OK
