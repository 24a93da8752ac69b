"""`rl-harness runs | show | diff | reproduce`: read, compare and re-run recorded runs
(harness/runtools/).

Each `*_main(argv)` returns the exit code: 0 success, 1 a difference was found (diff) or the
reproduction did not match, 2 bad input (one `rl-harness: error:` line on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from rl_harness.cli.args import EXIT_OK, OneLineParser, UsageError, fail, positive_float
from rl_harness.harness.liveness import mark_crashed
from rl_harness.harness.manifest import manifest_path
from rl_harness.harness.runtools.compare import compare_metrics
from rl_harness.harness.runtools.diff import diff_runs, diff_text
from rl_harness.harness.runtools.filters import STATUSES, RunFilter, select_runs
from rl_harness.harness.runtools.records import (
    RunRecord,
    RunToolError,
    Unreadable,
    find_runs,
    load_run,
    resolve_run,
)
from rl_harness.harness.runtools.reproduce import check_code, plan_reproduction, run_reproduction
from rl_harness.harness.runtools.show import runs_table, show_json, show_text

EXIT_DIFFERENT = 1  # diff found a difference; reproduce did not match (or the run failed)

__all__ = ["diff_main", "reproduce_main", "runs_main", "show_main"]
RUN_HELP = (
    "a results/<run-id> folder, or a run id (or unique prefix) found under the current folder"
)


def warn_unreadable(unreadable: Sequence[Unreadable], prog: str) -> None:
    """One stderr line per run folder a reader could not read, naming it and why."""
    for folder in unreadable:
        print(f"{prog}: warning: {folder}", file=sys.stderr)


def add_run_filters(parser: OneLineParser) -> None:
    """`runs`'s filters (harness/runtools/filters.py), each repeatable."""
    parser.add_argument(
        "--status",
        dest="statuses",
        action="append",
        default=[],
        metavar="STATUS",
        help=f"only runs with this status ({', '.join(STATUSES)})",
    )
    parser.add_argument(
        "--budget",
        dest="budgets",
        action="append",
        default=[],
        metavar="NAME",
        help="only runs of this recipe budget (smoke, cpu, ...; - for none recorded)",
    )
    parser.add_argument(
        "--library-commit",
        dest="library_commits",
        action="append",
        default=[],
        metavar="COMMIT",
        help="only runs made by this library commit (a prefix, as git abbreviates it)",
    )


def run_filter(args: argparse.Namespace) -> RunFilter:
    return RunFilter(
        tuple(args.statuses), tuple(args.budgets), tuple(args.library_commits)
    ).checked()


def warn_problems(records: Sequence[RunRecord], prog: str) -> None:
    """One stderr line per file the (lenient) readers could not read, or read in part (a
    truncated metrics.jsonl row), naming it and what was skipped; the output goes on."""
    for record in records:
        for problem in record.problems:
            print(f"{prog}: warning: {problem}", file=sys.stderr)


def runs_main(argv: list[str]) -> int:
    parser = OneLineParser(
        prog="rl-harness runs",
        description="Table of the runs (results/<run-id>/run_manifest.json) under PATH, oldest "
        "first. budget: the recipe budget it ran (smoke for --smoke; - when unrecorded). "
        "exp/lib: short commits of the experiment repo and the library, '*' when the run "
        "had uncommitted code changes; return: the last env_runners/episode_return_mean. "
        "status: crashed for a run recorded as running whose process is gone (killed), "
        "running? when it runs on another host and cannot be checked from here.",
    )
    parser.add_argument("path", nargs="?", default=".", metavar="PATH", help="default: .")
    parser.add_argument(
        "--mark-crashed",
        action="store_true",
        help="record `crashed` in the manifests of the crashed runs (readers only report it)",
    )
    add_run_filters(parser)
    try:
        args = parser.parse_args(argv)
        chosen = run_filter(args)
        root = Path(args.path).expanduser()
        if not root.is_dir():
            raise RunToolError(f"no such folder: {args.path}")
        scan = find_runs(root, lenient=True)
    except (UsageError, RunToolError) as error:
        return fail(str(error))
    warn_unreadable(scan.unreadable, "rl-harness runs")
    records = scan.records
    if not records:
        print(f"no runs under {root}")
        return EXIT_OK
    if args.mark_crashed:
        marked = [r.run_id for r in records if r.status == "crashed" and mark_crashed(r.path)]
        print(f"marked {len(marked)} crashed run(s)" + (f": {', '.join(marked)}" if marked else ""))
        records = find_runs(root, lenient=True).records
    kept = select_runs(records, chosen)
    if not kept:
        print(f"no runs under {root} match the filters ({len(records)} run(s) in all)")
        return EXIT_OK
    table = runs_table(kept)
    warn_problems(kept, "rl-harness runs")
    print(table)
    return EXIT_OK


def show_main(argv: list[str]) -> int:
    parser = OneLineParser(prog="rl-harness show", description="One run's provenance and metrics.")
    parser.add_argument("run", metavar="RUN", help=RUN_HELP)
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    try:
        args = parser.parse_args(argv)
        record = resolve_run(args.run, lenient=True)
        text = (
            json.dumps(show_json(record), indent=2, sort_keys=True, default=str)
            if args.json
            else show_text(record)
        )
    except (UsageError, RunToolError) as error:
        return fail(str(error))
    warn_problems([record], "rl-harness show")
    print(text)
    return EXIT_OK


def diff_main(argv: list[str]) -> int:
    parser = OneLineParser(
        prog="rl-harness diff",
        description="What differs between two runs: first the trained config (config.json: "
        "lr, batch sizes, module and model config, env config, ...), then provenance (commits, "
        "patches, lockfile, versions, seed, hardware, options) and final metrics. Equal fields "
        "are only counted. "
        "Exit code 0 when nothing differs, 1 otherwise.",
    )
    parser.add_argument("run_a", metavar="RUN_A", help=RUN_HELP)
    parser.add_argument("run_b", metavar="RUN_B", help=RUN_HELP)
    try:
        args = parser.parse_args(argv)
        run_a = resolve_run(args.run_a, lenient=True)
        run_b = resolve_run(args.run_b, lenient=True)
        result = diff_runs(run_a, run_b)
        text = diff_text(run_a, run_b, result)
    except (UsageError, RunToolError) as error:
        return fail(str(error))
    warn_problems([run_a, run_b], "rl-harness diff")  # after every record was read
    print(text)
    return EXIT_OK if result.identical else EXIT_DIFFERENT


def reproduce_main(argv: list[str]) -> int:
    parser = OneLineParser(
        prog="rl-harness reproduce",
        description="Re-run RUN's experiment with its seed, budget (--smoke, --budget, --set), "
        "hardware profile "
        "(fresh run id, results beside RUN), then compare metrics.jsonl without timing keys. "
        "Refuses when the experiment source or the uncommitted changes differ from the record "
        "(unless --force); warns when commits, lockfile or versions differ. Exit code 0 when "
        "identical or within tolerance, 1 when different or the run failed, 2 when refused.",
    )
    parser.add_argument("run", metavar="RUN", help=RUN_HELP)
    parser.add_argument("--force", action="store_true", help="run even though the code differs")
    parser.add_argument(
        "--rtol", type=positive_float, default=1e-6, help="relative tolerance (default 1e-6)"
    )
    parser.add_argument(
        "--atol", type=positive_float, default=0.0, help="absolute tolerance (default 0)"
    )
    parser.add_argument(
        "--results-dir", type=Path, metavar="DIR", help="parent of the new results/<run-id>/"
    )
    parser.add_argument(
        "--artifacts-dir", type=Path, metavar="DIR", help="parent of the new artifacts/<run-id>/"
    )
    try:
        args = parser.parse_args(argv)
        record = resolve_run(args.run)
        if not record.has_metrics:
            raise RunToolError(f"run {record.run_id} has no metrics.jsonl to compare against")
        check = check_code(record)
        plan = plan_reproduction(
            record,
            check.source_file,
            results_parent=args.results_dir,
            artifacts_parent=args.artifacts_dir,
        )
    except (UsageError, RunToolError) as error:
        return fail(str(error))
    if record.status != "completed":
        print(f"warning: the recorded run ended as {record.status!r}", file=sys.stderr)
    for line in check.warnings:
        print(f"warning: {line}", file=sys.stderr)
    for line in check.blockers:
        print(f"{'warning' if args.force else 'refused'}: {line}", file=sys.stderr)
    if check.machine is not None:
        print(f"note: {check.machine}", file=sys.stderr)
    if check.blockers and not args.force:
        return fail("the code differs from the record; commit or revert it, or pass --force")

    print(f"reproducing {record.run_id} as {plan.results_dir.name}", flush=True)
    code = run_reproduction(plan)
    new = load_run(plan.results_dir) if manifest_path(plan.results_dir).is_file() else None
    if code != EXIT_OK or new is None:
        print(f"reproduction run failed (exit code {code}): {plan.results_dir}")
        return EXIT_DIFFERENT
    comparison = compare_metrics(
        record.metrics_rows, new.metrics_rows, rtol=args.rtol, atol=args.atol
    )
    print(
        f"metrics: {comparison.verdict} ({comparison.rows_a} recorded rows, "
        f"{comparison.rows_b} new; max abs diff {comparison.max_abs_diff:.3g}, "
        f"max rel diff {comparison.max_rel_diff:.3g}; rtol {args.rtol:g}, atol {args.atol:g})"
    )
    for line in comparison.differences:
        print(f"  {line}")
    if comparison.verdict == "different" and check.machine is not None:
        print("  the machine differs from the record (the note above): expected at float rounding")
    print(f"new run: {plan.results_dir}")
    return EXIT_OK if comparison.verdict != "different" else EXIT_DIFFERENT
